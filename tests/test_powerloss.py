"""harness.families.power_loss: crash states of a real traced run, judged cheaply and recovered by real resumes in a
campaign, and the mutants it catches."""

from __future__ import annotations

from contextlib import closing

import pytest

from harness.campaign.campaign import Campaign
from harness.checkers import check_all
from harness.families.power_loss.crashstates import crash_points
from harness.selftest.mutants import mutants, subject_for
from harness.families.journal_state.executor import StateExecutor
from harness.families.power_loss.executor import journal_index, select_states, state_space
from harness.families.power_loss.family import POWER_LOSS
from harness.families.power_loss.params import Params
from harness.history.journal_location import JournalLocation
from harness.runner.trial import Runner, run_id_for
from harness.scenario.parse import parse_scenario

TOML = '''
name = "power-loss-test"
purpose = "a small run for the power-loss tests"
[workload]
turns = 1
tools_per_turn = 2
[faults]
family = "power_loss"
resumes = 2
[trials]
count = 40
seed = 3
timeout_s = 60
'''
SCENARIO = parse_scenario(TOML)


def campaign(runner, scenario):
    """``scenario``'s power-loss campaign by ``runner``'s subject: (its cheap trials, its full resumes, its
    crash-state space), every history kept."""
    result = Campaign([scenario], runner=runner, shrink_budget=0, keep_histories=True).run()
    assert not result.errors, result.errors
    (run,) = result.scenarios
    cheap = [t for t in result.trials if "cheap" in t.history.options]
    full = [t for t in result.trials if "cheap" not in t.history.options]
    return cheap, full, state_space(run.reference, run_id_for(scenario), POWER_LOSS.params(scenario),
                                   runner.subject)


def test_every_crash_state_of_the_reference_is_judged_cheaply_and_a_sample_recovers_to_the_reference_result(server):
    from harness.families.power_loss.tiers import full_sample

    with Runner(server=server) as runner:
        cheap, full, space = campaign(runner, SCENARIO)
    assert not [(t.schedule, t.failed, t.unknown) for t in cheap + full if t.failed or t.unknown]
    counts = [t.history.options["cheap"] for t in cheap]
    judged, asked = sum(c["states"] for c in counts), sum(c["asked"] for c in counts)
    assert judged == len(space.distinct) >= 15 and {c["mode"] for c in counts} == {"recovery"}
    assert 0 < asked <= judged and sum(c["seconds"] for c in counts) > 0
    # the full sample: the first state of every distinct recovery outcome, and 2 more
    _, outcomes = full_sample(space.distinct, run_id_for(SCENARIO), resumes=2, cap=40, seed=3,
                              journal=runner.subject.caps.journal)
    assert len(full) == min(outcomes + 2, len(space.distinct)) < len(space.distinct)
    assert sum(t.faults["crash_states"] for t in cheap) == judged and all(t.faults["power_loss"] == 1 for t in cheap)
    built = sum(len(p.states) for p in space.points)
    assert built >= len(space.distinct) and built / space.build_seconds > 1000
    assert all(t.elapsed_s > 0 for t in full) and len(space.points) == space.trace_events + 1
    assert {v.invariant for t in full for v in t.verdicts} == {"I2", "I3", "I4", "I5", "I6", "I7", "I10"}


def _cheap(runner, scenario, **params):
    """The cheap tier alone on every distinct crash state of ``scenario``'s run by ``runner``'s subject."""
    from harness.families.journal_state.ask import cheap_mode
    from harness.families.power_loss.tiers import judge_cheap

    with closing(StateExecutor(scenario, runner)) as ex:
        ctx = ex.ctx
        space = state_space(ctx.ref, ctx.run_id, Params(**params), ctx.subject)
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


#: The mutant runs: one cheap batch and one full resume.
ONE_RESUME = parse_scenario(TOML.replace("resumes = 2", "resumes = 0\nmax_states = 1"))


@pytest.mark.parametrize("name", POWER_LOSS_MUTANTS)
def test_a_store_that_acknowledges_before_durability_is_caught_by_i4(server, name):
    with Runner(subject_for(name), server=server) as runner:
        cheap, full, _ = campaign(runner, ONE_RESUME)
    assert len(full) <= 1
    lost = [t for t in cheap + full if "I4" in t.failed]
    assert lost, [(t.schedule, t.failed) for t in cheap + full]
    i4 = next(v for v in lost[0].verdicts if v.invariant == "I4")
    evidence = i4.evidence
    assert "acknowledged" in evidence["summary"] and evidence["state"]["prefix_n"] >= 1
    # one I4: the shared checker judged the crash state's facts, recorded in the history; the cheap tier
    # catches it by itself (no full resume needed)
    assert i4.checker == "harness.checkers.i4_acknowledged"
    assert any("I4" in t.failed for t in cheap)
    explored = [t for t in lost if t in full]
    if explored:
        facts = explored[0].history.crash_state
        assert facts is not None and facts.id == explored[0].schedule[0]["state"] and facts.acks
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
    # A record written in two writes is found at the write that ends its line; two records in one write both
    # at that write (the old index decoded each write alone: a split tool_result was never found, and the
    # power-loss trials of an engine that splits its writes judged its tool "never ran": I6 effect_missing).
    m, a, r = recs
    cut = len(r) // 2
    split = [(0, m + a[:10]), (len(m) + 10, a[10:]), (None, r[:cut]), (None, r[cut:])]
    trace = [{"op": "write", "path": "/x/fisk-ai/runs/r1.json", "data": base64.b64encode(b).decode(),
              **({} if at is None else {"offset": at})} for at, b in split]
    assert journal_index(trace, "r1", JournalLocation()) == ({"a": 3}, [1])
    assert journal_index([{"op": "write", "path": "/x/fisk-ai/runs/r1.json",
                           "data": base64.b64encode(m + a + r).decode()}], "r1", JournalLocation()) == ({"a": 0}, [0])
    # a resume leg appends to the journal the legs before left: its lines end at its own writes
    resumed = [{"op": "write", "path": "/x/fisk-ai/runs/r1.json", "data": base64.b64encode(r).decode(),
                "offset": len(m + a)}]
    assert journal_index(resumed, "r1", JournalLocation(), {"/x/fisk-ai/runs/r1.json": m + a}) == ({"a": 0}, [])


def test_parameters_come_from_the_faults_table_else_from_the_trials():
    assert POWER_LOSS.params(SCENARIO) == Params(max_states=40, resumes=2, seed=3)
    assert Params().resumes == 8 and Params().batch_states == 1024
    raw = parse_scenario('name = "p"\npurpose = "p"\n[trials]\ncount = 5\n[faults]\nfamily = "power_loss"\n'
                         'sector_bytes = 4096\nmax_states = 9\n')
    assert POWER_LOSS.params(raw) == Params(max_states=9, seed=1, sector_bytes=4096)
    assert POWER_LOSS.params(raw, count=7, seed=4) == Params(max_states=9, seed=4, sector_bytes=4096)
