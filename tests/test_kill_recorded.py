"""Kill crash points from one recording are the same test as a real SIGKILL (issue 27, docs/persistence-model.md
"Kills from the recording").

Every crash point of kill-every-event is judged both ways: leg 0 materialized from the uninterrupted run
(the signals family's executor) and a real kill at that point (the one leg runner under the same schedule);
the legs' journal bytes, the final state and every invariant's verdict must agree.  For the reference through
its IO seam, observed from outside (black-box), and the Node.js agent.

The default suite judges every point for the reference through its IO seam and a seeded sample of
:data:`SAMPLE` points (``random.Random(SAMPLE_SEED)``, kept in plan order) for the reference observed from outside
and the Node.js agent, whose points cost a traced leg each; ``--long`` judges every point of those two as well
(tests/README.md "What the suite costs (issue 27)").
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

import pytest

from harness.checkers import check_all
from harness.families.base import Planned
from harness.families.signals.family import SIGNALS
from harness.families.signals.recorded import crash_prefix, in_flight, prelude, slug_for
from harness.runner.trial import Runner
from harness.scenario.parse import bundled_scenario_dir, load_scenario
from harness.selftest.targets import FOREIGN_SUBJECT
from harness.subject.profile import resolve_subject

ROOT = Path(__file__).resolve().parent.parent


def _verdicts(history, invariants):
    """Each invariant's status and the kinds of violation its evidence names."""
    def kinds(ev):
        rows = ev.get("violations") if isinstance(ev, dict) else None
        return sorted(str(r.get("kind")) for r in rows if isinstance(r, dict)) if isinstance(rows, list) else []
    return {v.invariant: (v.status, kinds(v.evidence)) for v in check_all(history, invariants)}


_TIME = re.compile(rb'"\d{4}-\d\d-\d\dT[\d:.]+(Z|[+-]\d\d:\d\d)?"')


def _journals(history):
    """The legs' journal bytes and the final journal's fold, the wall-clock times records carry masked (two
    runs of the same schedule differ only there)."""
    final = json.loads(_TIME.sub(b'"T"', json.dumps(history.final_state).encode()))
    return [None if j is None else _TIME.sub(b'"T"', j) for j in (leg.journal for leg in history.legs)], final


#: How many crash points the default suite compares for the subjects whose every point runs under --long only.
SAMPLE = 8
SAMPLE_SEED = 27


def _sample(plan, k):
    """``k`` points of ``plan`` drawn with ``random.Random(SAMPLE_SEED)``, in plan order (``None``: every point)."""
    if k is None or k >= len(plan):
        return plan
    keep = set(random.Random(SAMPLE_SEED).sample(range(len(plan)), k))
    return [p for i, p in enumerate(plan) if i in keep]


def _both_ways(runner, trials, sample=None):
    scenario = load_scenario(bundled_scenario_dir() / "kill-every-event.toml")
    ref = runner.reference(scenario)
    plan = _sample(SIGNALS.plan(scenario, ref, trials, 1, None), sample)
    inv = list(scenario.check.invariants)
    executor = SIGNALS.open(scenario, runner, ref)
    recorded = 0
    for planned in plan:
        ran = executor.run(planned)
        real = runner.run_trial(scenario, planned.seed, planned.schedule)
        recorded += bool(ran.history.legs[0].fault.detail.get("recorded"))
        where = planned.schedule
        assert real.legs[0].fault.injected and ran.history.legs[0].fault.injected, where
        assert _journals(ran.history) == _journals(real), where
        assert len(ran.history.legs) == len(real.legs), where
        assert [c.key for c in ran.history.model_calls] == [c.key for c in real.model_calls], where
        assert [(e.tool_use_id, e.attempt) for e in ran.history.effects] == \
            [(e.tool_use_id, e.attempt) for e in real.effects], where
        assert _verdicts(ran.history, inv) == _verdicts(real, inv), where
    executor.close()
    return plan, recorded, executor.recorder.resumes


def test_recorded_kills_match_real_kills_for_the_reference_through_its_io_seam():
    with Runner(observe=False) as runner:
        plan, recorded, resumes = _both_ways(runner, 200)
    assert recorded == len(plan) and 0 < resumes < len(plan)  # every point recorded; states shared


#: The default suite's sample of points, and every point under --long.
EVERY_OR_SAMPLE = [pytest.param(SAMPLE, id="sample"), pytest.param(None, id="every", marks=pytest.mark.long)]


@pytest.mark.parametrize("sample", EVERY_OR_SAMPLE)
def test_recorded_kills_match_real_kills_for_the_reference_observed_from_outside(sample):
    with Runner(observe=True) as runner:
        plan, recorded, resumes = _both_ways(runner, 200, sample)
    assert recorded > len(plan) // 2
    assert resumes < recorded if sample is None else resumes <= recorded  # states shared: seen over every point


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("sample", EVERY_OR_SAMPLE)
def test_recorded_kills_match_real_kills_for_the_node_agent(sample):
    subject = resolve_subject(FOREIGN_SUBJECT.replace("subjects/", f"{ROOT}/subjects/"))
    with Runner(subject) as runner:
        plan, recorded, resumes = _both_ways(runner, 200, sample)
    assert recorded > len(plan) // 2
    assert resumes < recorded if sample is None else resumes <= recorded  # states shared: seen over every point


def test_a_point_with_an_op_in_flight_or_past_the_run_is_killed_for_real():
    trace = [{"n": 1, "t0": 10, "t": 20, "op": "open", "path": "/t/j"},
             {"n": 2, "t0": 15, "t": 30, "op": "write", "path": "/t/j", "data": "eA=="},  # entered during op 1
             {"n": 3, "t0": 40, "t": 50, "op": "fsync", "path": "/t/j"}]
    assert in_flight(trace, 1, 20) and not in_flight(trace, 2, 30)
    assert crash_prefix([{"kind": "kill", "event": 3, "when": "before"}]) == 2
    assert crash_prefix([{"kind": "kill", "after_ms": 3.0}]) is None
    assert crash_prefix([{"kind": "kill", "event": 3, "op": "write"}]) is None
    from harness.history.model import History, Leg
    from harness.runner.trial import ReferenceRun
    hist = History(scenario="s", seed=0, schedule=[], run_id="r", legs=[Leg(index=0, kind="start", argv=[],
                                                                              trace=trace)],
                   options={"trial_dir": "/t", "run_uuid": "u"})
    ref = ReferenceRun(reference=None, history=hist, events=3, duration_ms=1.0)  # type: ignore[arg-type]
    no_slug = slug_for(type("NoCwd", (), {"cwd": ""})())
    assert prelude(ref, [{"kind": "kill", "event": 1}], no_slug) is None  # op 2 in flight
    assert prelude(ref, [{"kind": "kill", "event": 4}], no_slug) is None  # past the run's end
    pre = prelude(ref, [{"kind": "kill", "event": 3}], no_slug)
    assert pre is not None and pre.files == {"/t/j": b"x"} and pre.leg.exit_signal == "SIGKILL"


def test_points_of_one_state_share_a_resume_and_a_schedule_run_again_gets_its_own():
    scenario = load_scenario(bundled_scenario_dir() / "kill-every-event.toml")
    with Runner(observe=False) as runner:
        ref = runner.reference(scenario)
        executor = SIGNALS.open(scenario, runner, ref)
        fsync = next(ev["n"] for ev in ref.history.legs[0].trace if ev["op"] == "fsync")
        write = [{"kind": "kill", "event": fsync - 1, "when": "after"}]  # the write that fsync acknowledges
        runs = [executor.run(Planned(s, "explicit", 1)) for s in (write, [{"kind": "kill", "event": fsync}], write)]
        executor.close()
    assert [r.faults["crash_resumes"] for r in runs] == [1, 0, 1] and executor.recorder.resumes == 2
    shared = runs[1].history
    assert shared.legs[1:] == runs[0].history.legs[1:] and shared.legs[0].trace[-1]["n"] == fsync
    assert shared.schedule == [{"kind": "kill", "event": fsync}] and "judged on the resume" in shared.notes[-1]
