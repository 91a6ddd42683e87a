"""The power-loss family: crash states of a traced run, each judged cheaply, a sample recovered in full.

For a scenario (docs/persistence-model.md has the model):

1. the reference run (:meth:`harness.runner.trial.Runner.reference`: the workload
   once, uninterrupted, ``FISKJ_IOSEAM_TRACE`` set) gives the trace;
2. :mod:`harness.families.power_loss.crashstates` enumerates its crash states
   (:func:`state_space`: the distinct ones, round-robin over crash points);
3. **cheap tier**, every distinct state (:mod:`harness.families.power_loss.tiers`):
   the crash model's I4 on the state, and the subject's own recovery and
   reading of its journal, asked the journal-state engine's one way
   (:mod:`harness.families.journal_state.ask`), judged as I5;
4. **full tier**, a sample (the first state of every distinct recovery
   outcome, then a seeded draw; :func:`~harness.families.power_loss.tiers.full_sample`):
   per state, its files are laid in a fresh state home and the engine
   resumes it (:func:`harness.families.journal_state.executor.resume`: one
   leg, ``run --resume``, or a start when no complete record survived),
   with the effects ledger holding the reference run's effects before the
   crash point (the tool in flight counts as run) (:func:`explore_state`);
5. each full resume becomes a :class:`~harness.history.model.History`: leg 0 is the
   reference leg cut at the crash point (fault ``power_loss``, journal = the
   state's), leg 1 the recovery, and the state's facts (its files and the
   writes the trace model counts as acknowledged) are recorded as
   ``History.crash_state`` (:meth:`~harness.history.model.CrashStateFacts.of`),
   judged by :func:`harness.checkers.check_all`: I4 on the state
   (:mod:`harness.checkers.i4_acknowledged`, by the model's
   :func:`~harness.checkers.i4_acknowledged.lost_acknowledged`: an append is
   acknowledged when the trace shows it returned, so a correct writer's
   window between its fsync and its directory fsync is no violation), the
   other invariants (I2, I3, I5, I6, I7, I10) on the recovery.  This module
   builds no verdict.

The report counts crash states built, judged cheaply and recovered in full,
each with its rate (what ``fiskj-harness`` and ``bench/`` report).
Parameters come from the scenario's ``[faults]`` table (:class:`Params`).
"""

from __future__ import annotations

import base64
import concurrent.futures
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fiskj.codec import decode_record
from fiskj.records import AssistantRecord, ToolResultRecord

from harness.checkers import INVALID, VALID, Verdict, check_all
from harness.families.journal_state.ask import cheap_mode
from harness.families.journal_state.executor import Context, context, lay, resume, workspace
from harness.families.power_loss.crashstates import CrashState, crash_points
from harness.families.power_loss.params import Params
from harness.families.power_loss.tiers import CHEAP_CHECKED, full_sample, judge_cheap, outcome_key
from harness.history.journal_location import JournalLocation
from harness.history.model import CrashStateFacts, Fault, History, Leg
from harness.runner.trial import ReferenceRun, Runner
from harness.scenario.model import Scenario, family_params
from harness.subject.contract import Subject

__all__ = ["Params", "StateResult", "Report", "Space", "params_from", "select_states", "run_power_loss",
           "journal_index", "state_space", "explore_state"]

#: Invariants judged by the shared checkers on a power-loss history (I4 is judged on the state).
CHECKED = ("I2", "I3", "I5", "I6", "I7", "I10")


def params_from(scenario: Scenario, **overrides: Any) -> Params:
    """:class:`Params` of ``scenario``: ``[faults]`` keys named as the fields, else ``max_states`` =
    ``trials.count`` and ``seed`` = ``trials.seed``; non-None ``overrides`` win."""
    return family_params(Params, scenario, {"max_states": scenario.trials.count, "seed": scenario.trials.seed},
                         overrides)


@dataclass
class StateResult:
    """One explored crash state: its summary, the verdicts, the history when a verdict is not valid."""

    state: dict[str, Any]
    verdicts: list[Verdict]
    seconds: float
    history: History | None = None

    @property
    def violated(self) -> list[str]:
        return [v.invariant for v in self.verdicts if v.status == INVALID]


@dataclass
class Report:
    """What one power-loss campaign of a scenario did and found.

    ``states_judged``/``judge_seconds``: the cheap tier (every distinct
    state; ``cheap_mode``, ``journals_asked``: distinct journals the subject
    recovered or read); ``states_explored``/``explore_seconds``: the full
    resumes (``outcomes``: distinct recovery outcomes among the states);
    ``results``: the full resumes' results; ``cheap``: the cheap tier's
    states not judged valid."""

    scenario: str
    subject: list[str]
    trace_events: int = 0
    crash_points: int = 0
    states_built: int = 0
    build_seconds: float = 0.0
    states_distinct: int = 0
    states_judged: int = 0
    judge_seconds: float = 0.0
    journals_asked: int = 0
    cheap_mode: str = "model"
    outcomes: int = 0
    states_explored: int = 0
    explore_seconds: float = 0.0
    results: list[StateResult] = field(default_factory=list)
    cheap: list[StateResult] = field(default_factory=list)

    @property
    def violations(self) -> list[StateResult]:
        return [r for r in self.results + self.cheap if r.violated]

    @property
    def ok(self) -> bool:
        return not self.violations and all(v.status == VALID for r in self.results + self.cheap
                                           for v in r.verdicts)

    def to_json(self) -> dict[str, Any]:
        """The JSON report: counts, both tiers' rates, ``faults`` (``power_loss``: states judged) and violations."""
        rate = lambda n, s: round(n / s, 1) if s > 0 else None  # noqa: E731
        return {"scenario": self.scenario, "subject": self.subject, "family": "power_loss",
                "faults": {"power_loss": self.states_judged},
                "crash_states": {"trace_events": self.trace_events, "crash_points": self.crash_points,
                                 "built": self.states_built, "built_per_s": rate(self.states_built, self.build_seconds),
                                 "distinct": self.states_distinct, "outcomes": self.outcomes,
                                 "judged": self.states_judged, "judged_per_s": rate(self.states_judged, self.judge_seconds),
                                 "cheap_mode": self.cheap_mode, "journals_asked": self.journals_asked,
                                 "explored": self.states_explored,
                                 "explored_per_s": rate(self.states_explored, self.explore_seconds)},
                "verdicts": {inv: sum(1 for r in self.results + self.cheap for v in r.verdicts
                                      if v.invariant == inv and v.status == INVALID) for inv in ("I4",) + CHECKED},
                "violations": [{"state": r.state, "invariants": r.violated,
                                "evidence": [v.to_json() for v in r.verdicts if v.status == INVALID]}
                               for r in self.violations]}


def journal_index(trace: list[dict[str, Any]], run_id: str,
                  journal: JournalLocation) -> tuple[dict[str, int], list[int]]:
    """Trace positions (0-based) of the writes of ``run_id``'s ``journal``: tool_use_id -> its tool_result, and
    the assistants in order."""
    results: dict[str, int] = {}
    assistants: list[int] = []
    for i, ev in enumerate(trace):
        if ev.get("op") != "write" or not journal.is_journal(ev.get("path"), run_id):
            continue
        try:
            rec = decode_record(base64.b64decode(ev.get("data") or ""))
        except Exception:  # noqa: BLE001 - a partial line is no record
            continue
        if isinstance(rec, ToolResultRecord):
            results.setdefault(rec.tool_use_id, i)
        elif isinstance(rec, AssistantRecord):
            assistants.append(i)
    return results, assistants


def select_states(points: list[Any], max_states: int) -> list[CrashState]:
    """Distinct states (first crash point wins), round-robin over crash points, at most ``max_states`` (0: all)."""
    seen: set[tuple] = set()
    queues = []
    for point in points:
        queue = []
        for state in point.states:
            key = state.key()
            if key not in seen:
                seen.add(key)
                queue.append(state)
        if queue:
            queues.append(queue)
    out: list[CrashState] = []
    depth = 0
    while queues and (not max_states or len(out) < max_states):
        queues = [q for q in queues if depth < len(q)]
        for q in queues:
            if max_states and len(out) >= max_states:
                break
            out.append(q[depth])
        depth += 1
    return out


@dataclass
class Space:
    """The crash states of a reference run (pure, from its trace; docs/persistence-model.md).

    ``old_home``: the reference's state home (paths in the states are under
    it); ``points``: every crash point; ``distinct``: the distinct states,
    round-robin over crash points (:func:`select_states`); ``index``: where
    tool results and assistant records were written (:func:`journal_index`);
    ``build_seconds``: time to build them; ``leg``: the reference leg that
    loses power (0, or the resume leg of a two-leg reference).
    """

    old_home: str
    points: list[Any]
    distinct: list[CrashState]
    index: tuple[dict[str, int], list[int]]
    trace_events: int
    build_seconds: float = 0.0
    leg: int = 0


def state_space(ref: ReferenceRun, run_id: str, params: Params) -> Space:
    """Enumerate the crash states of the reference run's last leg (pure; raises ``ValueError``
    when its trace shows no journal: nothing was observed, so nothing can be judged).

    The first leg starts from an empty state home; a later leg (``crash_leg
    = "resume"``) starts from what the leg before it left, all of it durable
    (that leg was killed right after an fsync of the journal, its
    directories were made durable when they were created).
    """
    t0 = time.monotonic()
    leg = len(ref.history.legs) - 1 if params.crash_leg == "resume" else 0
    trace = ref.history.legs[leg].trace
    journal = ref.history.journal
    jpath = next((ev["path"] for ev in trace if journal.is_journal(ev.get("path"), run_id)), None)
    if jpath is None:
        raise ValueError(f"the reference run's trace ({len(trace)} events) shows no write of the journal "
                         f"{journal.template}: power loss has nothing to simulate (is the leg observed?)")
    old_home = str(Path(jpath).parents[2])
    files: dict[str, bytes] = {}
    dirs = {old_home, str(Path(old_home).parent)}
    if leg > 0:
        files = {jpath: ref.history.legs[leg - 1].journal or b"", str(Path(jpath).with_suffix(".lock")): b""}
        dirs |= {str(Path(jpath).parent), str(Path(jpath).parents[1])}
    points = list(crash_points(trace, files, dirs,
                               sector_bytes=params.sector_bytes, exhaustive_units=params.exhaustive_units,
                               samples=params.samples, seed=params.seed, zero_fill=params.zero_fill))
    distinct = select_states(points, 0)
    return Space(old_home, points, distinct, journal_index(trace, run_id, journal), len(trace),
                 time.monotonic() - t0, leg)


def explore_state(ctx: Context, state: CrashState, space: Space) -> History:
    """Lay ``state``'s files in a fresh state home (:func:`harness.families.journal_state.executor.lay`),
    resume it (:func:`~harness.families.journal_state.executor.resume`), and return the history with the
    state's facts (``History.crash_state``).  Judges nothing."""
    ref_leg = ctx.ref.history.legs[space.leg]
    prior = list(ctx.ref.history.legs[:space.leg])
    old_home = space.old_home

    def local(path: str) -> str | None:
        return path[len(old_home) + 1:] if path.startswith(old_home + "/") else None

    files = {local(p): data for p, data in state.files.items() if local(p) is not None}
    dirs = [d for d in (local(p) for p in state.dirs) if d is not None]
    with tempfile.TemporaryDirectory(prefix="fiskj-powerloss-", dir=ctx.runner.tmp_root,
                                     ignore_cleanup_errors=True) as name:
        tmp = Path(name)
        lay(ctx, tmp, files=files, dirs=dirs)  # type: ignore[arg-type]
        p, crashed = state.prefix_n, ctx.journal(tmp)
        results, assistants = space.index
        ran = {tid for tid, i in results.items() if i <= p}  # written before the crash, or in flight
        hist = ctx.ref.history
        calls = [c for c in hist.model_calls if c.leg == space.leg] if space.leg else hist.model_calls
        if hist.journal.decoded:  # what the journal had taken in by the crash point
            pre_effects = [e for e in hist.effects
                           if e.leg < space.leg or (e.leg == space.leg and e.tool_use_id in ran)]
            upto = [c for k, c in enumerate(calls) if k < len(assistants) and assistants[k] <= p]
        else:  # a journal the harness does not decode: what had happened by the crash point's time
            crash_t = _time_of(ref_leg.trace[:p], ref_leg.t_start)
            pre_effects = [e for e in hist.effects if e.leg < space.leg or (e.leg == space.leg and e.t <= crash_t)]
            upto = [c for c in calls if c.t <= crash_t]
        pre_calls = [c for c in hist.model_calls if space.leg and c.leg < space.leg] + upto
        leg0 = Leg(index=space.leg, kind=ref_leg.kind, argv=ref_leg.argv, pid=ref_leg.pid, t_start=ref_leg.t_start,
                   t_end=ref_leg.t_end, trace=ref_leg.trace[:p],
                   fault=Fault(kind="power_loss", at={"event": p}, injected=True,
                               detail={"state": state.id, "persisted": state.persisted,
                                       "lost_entries": state.lost_entries}),
                   journal=crashed.read_bytes() if crashed.exists() else None)
        history = resume(ctx, tmp, [*prior, leg0], pre_calls, pre_effects, {"kind": "power_loss", "state": state.id})
    history.crash_state = CrashStateFacts.of(state)
    return history


def _time_of(prefix: list[dict[str, Any]], start: int) -> int:
    """The monotonic time (ns) of the last traced call in ``prefix`` (its end when known), else ``start``."""
    for ev in reversed(prefix):
        t = ev.get("t1", ev.get("t"))
        if isinstance(t, int):
            return t
    return start


def _explore(ctx: Context, state: CrashState, space: Space, invariants: tuple[str, ...]) -> StateResult:
    t0 = time.monotonic()
    history = explore_state(ctx, state, space)
    verdicts = check_all(history, ["I4", *invariants])
    result = StateResult(state.describe(), verdicts, time.monotonic() - t0)
    if any(v.status != VALID for v in verdicts):
        result.history = history
    return result


def run_power_loss(scenario: Scenario, *, runner: Runner | None = None, subject: Subject | None = None,
                   params: Params | None = None) -> Report:
    """Run the whole power-loss family of ``scenario`` outside a campaign (tests, benchmarks), tiered: every
    distinct state judged cheaply, the full sample (``params.max_states`` = 0: every distinct state)
    recovered in full; returns a :class:`Report` judged by :func:`harness.checkers.check_all` (never raises
    for a bad agent)."""
    params = params or params_from(scenario)
    with workspace(runner, subject, "fiskj-powerloss-tools-") as (runner, shared):
        report = Report(scenario.name, list(runner.subject.argv))
        ctx = context(runner, scenario, shared)
        space = state_space(ctx.ref, ctx.run_id, params)
        distinct = space.distinct
        journal = runner.subject.caps.journal
        if params.max_states:
            chosen, report.outcomes = full_sample(distinct, ctx.run_id, resumes=params.resumes,
                                                  cap=params.max_states, seed=params.seed, journal=journal)
        else:
            chosen, report.outcomes = sorted(distinct, key=lambda s: (s.prefix_n, s.id)), \
                len({outcome_key(s, ctx.run_id, journal) for s in distinct})
        report.build_seconds = space.build_seconds
        report.trace_events, report.crash_points = space.trace_events, len(space.points)
        report.states_built = sum(len(p.states) for p in space.points)
        report.states_distinct = len(distinct)
        mode = cheap_mode(runner.subject, runner.readings)
        runner.legs.prepare()  # this thread's fork server, started before the clock
        cheap = judge_cheap(ctx, sorted(distinct, key=lambda s: (s.prefix_n, s.id)),
                            tuple(i for i in CHEAP_CHECKED if i == "I4" or i in scenario.check.invariants),
                            mode=mode, tmp_root=runner.tmp_root)
        report.states_judged, report.judge_seconds = cheap.states, cheap.seconds
        report.cheap_mode, report.journals_asked = cheap.mode, cheap.asked
        report.cheap = [StateResult(s.describe(), verdicts, 0.0) for s, verdicts in cheap.violating]
        invariants = tuple(i for i in CHECKED if i in scenario.check.invariants)
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(params.jobs or os.cpu_count() or 1) as pool:
            futures = [pool.submit(_explore, ctx, s, space, invariants) for s in chosen]
            for future in concurrent.futures.as_completed(futures):
                report.results.append(future.result())
                if params.stop_on_violation and report.results[-1].violated:
                    for f in futures:
                        f.cancel()
                    break
        report.explore_seconds = time.monotonic() - t0
        report.states_explored = len(report.results)
        report.results.sort(key=lambda r: (r.state["prefix_n"], r.state["id"]))
    return report
