"""harness.families.power_loss.executor: crash states of a real traced run, recovered by real resumes, and the mutants it catches."""

from __future__ import annotations

import pytest

from harness.checkers import check_all
from harness.families.power_loss.crashstates import crash_points
from harness.selftest.mutants import mutants, subject_for
from harness.families.power_loss.executor import Params, journal_index, params_from, run_power_loss, select_states
from harness.history.journal_location import JournalLocation
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


def test_every_crash_state_of_the_reference_is_judged_cheaply_and_a_sample_recovers_to_the_reference_result(server):
    with Runner(server=server) as runner:
        report = run_power_loss(SCENARIO, runner=runner, params=Params(max_states=40, resumes=2, seed=3))
    data = report.to_json()
    assert report.ok, data["violations"][:2]
    counts = data["crash_states"]
    assert report.states_judged == report.states_distinct >= 15 and counts["cheap_mode"] == "recovery"
    assert 0 < counts["journals_asked"] <= counts["judged"] and counts["judged_per_s"] > 0
    # the full sample: the first state of every distinct recovery outcome, and 2 more
    assert report.states_explored == min(report.outcomes + 2, report.states_distinct) < report.states_distinct
    assert data["faults"] == {"power_loss": report.states_judged}
    assert counts["built"] >= counts["distinct"] and counts["built_per_s"] > 1000
    assert counts["explored_per_s"] > 0 and counts["crash_points"] == counts["trace_events"] + 1
    assert {v.invariant for r in report.results for v in r.verdicts} == {"I2", "I3", "I4", "I5", "I6", "I7", "I10"}


def _cheap(runner, scenario, **params):
    """The cheap tier alone on every distinct crash state of ``scenario``'s run by ``runner``'s subject."""
    from harness.families.journal_state.ask import cheap_mode
    from harness.families.journal_state.executor import context, workspace
    from harness.families.power_loss.executor import state_space
    from harness.families.power_loss.tiers import judge_cheap

    with workspace(runner, None, "fiskj-test-") as (runner, shared):
        ctx = context(runner, scenario, shared)
        space = state_space(ctx.ref, ctx.run_id, Params(**params))
        return judge_cheap(ctx, space.distinct, ("I4", "I5"), mode=cheap_mode(runner.subject),
                           tmp_root=runner.tmp_root)


def test_the_cheap_tier_judges_the_subject_s_own_recovery_of_each_crash_state_as_i5(server):
    # a recovery that leaves the torn tail in place: the journal it reads back still ends in it
    with Runner(subject_for("torn-tail-not-cut"), server=server) as runner:
        cheap = _cheap(runner, SCENARIO, seed=3)
    assert cheap.mode == "recovery" and 0 < cheap.asked <= cheap.states
    bad = [(s, v) for s, vs in cheap.violating for v in vs if v.invariant == "I5" and v.status == "invalid"]
    assert bad, "the cheap tier did not see the torn tail the recovery left"
    assert "expected torn tail None" in bad[0][1].evidence["violations"][0]["reason"]
    check = cheap.first.reader_checks[0]
    assert check.kind == "power_loss" and check.answer["recovery"] == "opened" and check.expected["kind"] == "clean"
    assert not [v for _, vs in cheap.violating for v in vs if v.invariant == "I4" and v.status == "invalid"]


def test_the_full_sample_is_one_state_per_recovery_outcome_then_a_seeded_draw_and_is_capped():
    from builders import A, M, R, lines
    from test_crashstates import Trace

    from harness.families.power_loss.tiers import full_sample, outcome_key

    meta, assistant, result = lines(M(), A("a"), R("a"))
    t = Trace().create().append(meta, sync_dir=True).append(assistant).append(result).close()
    states = [s for p in crash_points(t.events, {}, {"/s", "/s/runs"}) for s in p.states]
    run_id, journal = "r", JournalLocation("{state_home}/runs/{run_id}.json")  # the trace's store: /s/runs
    keys = {outcome_key(s, run_id, journal) for s in states}
    full, outcomes = full_sample(states, run_id, resumes=3, cap=0, seed=1, journal=journal)
    assert outcomes == len(keys) and len(full) == min(len(states), outcomes + 3)
    assert {outcome_key(s, run_id, journal) for s in full} == keys  # every distinct outcome is resumed
    assert len(keys) > 4 and ("journal", meta + assistant, True) in keys  # kept bytes, and a torn tail cut
    assert full == full_sample(states, run_id, resumes=3, cap=0, seed=1, journal=journal)[0]  # deterministic for the seed
    capped, _ = full_sample(states, run_id, resumes=3, cap=2, seed=1, journal=journal)
    assert len(capped) == 2


POWER_LOSS_MUTANTS = [m.name for m in mutants() if m.family == "power_loss"]


@pytest.mark.parametrize("name", POWER_LOSS_MUTANTS)
def test_a_store_that_acknowledges_before_durability_is_caught_by_i4(server, name):
    with Runner(subject_for(name), server=server) as runner:
        report = run_power_loss(SCENARIO, runner=runner, params=Params(max_states=1, resumes=0, jobs=2))
    assert not report.ok
    lost = [r for r in report.violations if "I4" in r.violated]
    assert lost, report.to_json()["verdicts"]
    i4 = next(v for v in lost[0].verdicts if v.invariant == "I4")
    evidence = i4.evidence
    assert "acknowledged" in evidence["summary"] and evidence["state"]["prefix_n"] >= 1
    # one I4: the shared checker judged the crash state's facts, recorded in the history; the cheap tier
    # catches it by itself (no full resume needed)
    assert i4.checker == "harness.checkers.i4_acknowledged"
    assert any("I4" in r.violated for r in report.cheap)
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
    trace = [{"op": "write", "path": "/x/fisk-ai/runs/r1.json", "data": base64.b64encode(b).decode()} for b in recs]
    trace.insert(1, {"op": "fsync", "path": "/x/fisk-ai/runs/r1.json"})
    results, assistants = journal_index(trace, "r1", JournalLocation())
    assert results == {"a": 3} and assistants == [2]


def test_parameters_come_from_the_faults_table_else_from_the_trials():
    assert params_from(SCENARIO) == Params(max_states=40, seed=3)
    assert Params().resumes == 8 and Params().batch_states == 1024
    raw = parse_scenario('name = "p"\npurpose = "p"\n[trials]\ncount = 5\n[faults]\nfamily = "power_loss"\n'
                         'sector_bytes = 4096\nmax_states = 9\n')
    assert params_from(raw, jobs=1) == Params(max_states=9, seed=1, sector_bytes=4096, jobs=1)
