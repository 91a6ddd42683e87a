"""harness.families.power_loss.executor: crash states of a real traced run, recovered by real resumes, and the mutants it catches."""

from __future__ import annotations

import pytest

from harness.checkers import check_all
from harness.families.power_loss.crashstates import crash_points
from harness.selftest.mutants import mutants, subject_for
from harness.families.power_loss.executor import Params, journal_index, params_from, run_power_loss, select_states
from harness.runner.trial import Runner
from harness.scenario.parse import parse_scenario

SCENARIO = parse_scenario('''
name = "power-loss-test"
purpose = "a small run for the power-loss tests"
[workload]
turns = 1
tools_per_turn = 2
[faults]
family = "power_loss"
[trials]
count = 40
seed = 3
timeout_s = 60
''')


def test_every_crash_state_of_the_reference_recovers_to_the_reference_result(server):
    with Runner(server=server) as runner:
        report = run_power_loss(SCENARIO, runner=runner, params=Params(max_states=0, seed=3))
    data = report.to_json()
    assert report.ok, data["violations"][:2]
    assert report.states_explored == report.states_distinct >= 15
    assert data["faults"] == {"power_loss": report.states_explored}
    counts = data["crash_states"]
    assert counts["built"] >= counts["distinct"] and counts["built_per_s"] > 1000
    assert counts["explored_per_s"] > 0 and counts["crash_points"] == counts["trace_events"] + 1
    assert {v.invariant for r in report.results for v in r.verdicts} == {"I2", "I3", "I4", "I5", "I6", "I7", "I10"}


POWER_LOSS_MUTANTS = [m.name for m in mutants() if m.family == "power_loss"]


@pytest.mark.parametrize("name", POWER_LOSS_MUTANTS)
def test_a_store_that_acknowledges_before_durability_is_caught_by_i4(server, name):
    with Runner(subject_for(name), server=server) as runner:
        report = run_power_loss(SCENARIO, runner=runner, params=Params(max_states=2, jobs=2))
    assert not report.ok
    lost = [r for r in report.violations if "I4" in r.violated]
    assert lost, report.to_json()["verdicts"]
    i4 = next(v for v in lost[0].verdicts if v.invariant == "I4")
    evidence = i4.evidence
    assert "acknowledged" in evidence["summary"] and evidence["state"]["prefix_n"] >= 1
    # one I4: the shared checker judged the crash state's facts, recorded in the history
    assert i4.checker == "harness.checkers.i4_acknowledged"
    explored = [r for r in lost if r.history is not None]
    if explored:
        facts = explored[0].history.crash_state
        assert facts is not None and facts.id == explored[0].state["id"] and facts.acks
        assert check_all(explored[0].history, ["I4"])[0] == next(v for v in explored[0].verdicts if v.invariant == "I4")


def test_power_loss_mutants_cover_the_issue_classes():
    assert set(POWER_LOSS_MUTANTS) == {"no-fsync", "fsync-before-write", "no-dir-fsync", "store-dir-not-durable"}


def test_states_are_taken_round_robin_over_crash_points_without_duplicates():
    from test_crashstates import Trace, rec

    t = Trace().create().append(rec(1), sync_dir=True).write(b"x" * 1500).fsync().close()
    points = list(crash_points(t.events, {}, {"/s", "/s/runs"}))
    every = select_states(points, 0)
    assert len({s.key() for s in every}) == len(every)
    first = select_states(points, 4)
    assert first == every[:4] and len({s.prefix_n for s in first}) == 4


def test_the_journal_index_finds_tool_results_and_assistant_records_in_the_trace():
    import base64

    from builders import A, M, R, lines

    recs = lines(M(), A("a"), R("a"))
    trace = [{"op": "write", "path": "/x/r1.json", "data": base64.b64encode(b).decode()} for b in recs]
    trace.insert(1, {"op": "fsync", "path": "/x/r1.json"})
    results, assistants = journal_index(trace, "r1")
    assert results == {"a": 3} and assistants == [2]


def test_parameters_come_from_the_faults_table_else_from_the_trials():
    assert params_from(SCENARIO) == Params(max_states=40, seed=3)
    raw = parse_scenario('name = "p"\npurpose = "p"\n[trials]\ncount = 5\n[faults]\nfamily = "power_loss"\n'
                         'sector_bytes = 4096\nmax_states = 9\n')
    assert params_from(raw, jobs=1) == Params(max_states=9, seed=1, sector_bytes=4096, jobs=1)
