"""harness.families.tail: a real run's journal under the tail nemesis, read by the subject's reader and resumed; its plan, bounded by --trials, and the replay of one trial alone."""

from __future__ import annotations

from contextlib import closing
from types import SimpleNamespace

import pytest

from builders import A, M, R, T, journal
from harness.campaign.campaign import Campaign
from harness.families.tail.bound import FIRST, bounded, form, stratum
from harness.families.tail.family import TAIL
from harness.selftest.mutants import subject_for
from harness.runner.trial import Runner
from harness.scenario.parse import parse_scenario
from harness.subject.contract import default_subject
from harness.families.journal_state.executor import StateExecutor
from harness.families.journal_state.reader_child import answer_for
from harness.families.tail.executor import ask_mutations, mutations_for, resume_candidates
from harness.families.tail.params import Params
from harness.families.tail.mutations import mutations

TOML = '''
name = "tails-test"
purpose = "a small run for the tail tests"
[workload]
turns = 2
tools_per_turn = 2
[faults]
family = "tail"
[trials]
count = 4
seed = 2
timeout_s = 60
'''
SCENARIO = parse_scenario(TOML)


def campaign(runner, scenario):
    """``scenario``'s tail campaign by ``runner``'s subject, every history kept: (its reader trials, its resume
    trials of torn tails, its resume trials of interior damage, the mutations of its reference journal)."""
    result = Campaign([scenario], runner=runner, shrink_budget=0, keep_histories=True).run()
    assert not result.errors, result.errors
    journal = result.scenarios[0].reference.history.legs[-1].journal
    muts = mutations_for(journal, TAIL.params(scenario), "fisk-ai-v2")
    interior = {m.id for m in muts if m.kind == "interior"}
    reader = [t for t in result.trials if t.schedule[0]["check"] == "reader"]
    resumes = [t for t in result.trials if t.schedule[0]["check"] == "resume"]
    return (reader, [t for t in resumes if t.schedule[0]["mutation"] not in interior],
            [t for t in resumes if t.schedule[0]["mutation"] in interior], muts)


def reasons(trials):
    """The I5 reader-answer violations' reasons of ``trials``."""
    return [v["reason"] for t in trials for verdict in t.verdicts if verdict.invariant == "I5"
            for v in verdict.evidence.get("violations", []) if v.get("kind") == "reader_answer"]


def test_the_reference_reads_every_mutation_right_and_repairs_every_torn_tail(server):
    with Runner(server=server) as runner:
        reader, torn, interior, muts = campaign(runner, SCENARIO)
    assert not [(t.schedule, t.failed, t.unknown) for t in reader + torn + interior if t.failed or t.unknown]
    assert len(reader) == len(muts) > 100 and len(torn) == 4
    assert len(interior) == sum(m.kind == "interior" for m in muts)
    assert all(t.faults == {"tail": 1} for t in reader + torn + interior)


def test_a_torn_tail_not_cut_before_the_append_is_caught_when_the_resume_glues_to_it(server):
    with Runner(subject_for("torn-tail-not-cut"), server=server) as runner:
        reader, torn, _, _ = campaign(runner, parse_scenario(TOML.replace("count = 4", "count = 2")))
    assert not [t for t in reader if t.failed] and len(torn) == 2 and all(t.failed for t in torn)
    problems = " ".join(f"{v.invariant}: {v.summary}" for t in torn for v in t.verdicts if v.status == "invalid")
    assert "I4" in problems and "torn tail" in problems


@pytest.mark.parametrize("name, expected", [("reader-tolerates-corruption", "is corrupt"),
                                            ("reader-drops-final-record", "expected records seq")])
def test_a_reader_mutant_is_caught_by_the_answers_of_its_own_child(server, name, expected):
    no_resumes = parse_scenario(TOML.replace('family = "tail"', 'family = "tail"\nresume_checks = 0'))
    with Runner(subject_for(name), server=server) as runner:
        reader, torn, _, _ = campaign(runner, no_resumes)
    assert [t for t in reader if t.failed] and torn == []
    assert any(expected in r for r in reasons(reader))


def test_the_answer_child_reports_torn_and_corrupt_files(server, tmp_path):
    data = journal(M(), A("a"), R("a"), T())
    muts = [m for m in mutations(data, random_cuts=2, flips=4) if m.kind in ("intact", "zeros", "flip")]
    with Runner(default_subject(), server=server) as runner, closing(StateExecutor(SCENARIO, runner)) as ex:
        asked = ask_mutations(ex.ctx, muts, "recovery", tmp_path)
    answers = {m.id: asked[m.data] for m in muts}
    assert answers["intact"].kind == "read" and answers["intact"].seqs == (1, 2, 3, 4)
    assert answers["zeros4096+nl"].torn == (len(data), 4097)
    assert {answers[m.id].kind for m in muts if m.expect == "corrupt"} <= {"corrupt"}


def test_answer_for_never_raises(tmp_path):
    path = tmp_path / "j.json"
    path.write_bytes(b"\xff\n{}\n")
    assert answer_for(str(path)).kind == "corrupt"
    assert answer_for(str(tmp_path / "missing.json")).kind == "error"


def test_resume_candidates_are_resumable_torn_mutations_spread_over_kinds():
    data = journal(M(), A("a"), R("a"), A(text="done"), T())
    muts = list(mutations(data))
    chosen = resume_candidates(muts, 5, 4)
    assert len(chosen) == 4 and len({m.kind for m in chosen}) >= 3
    assert all(m.expect == "torn" and 0 < len(m.seqs) < 5 for m in chosen)


def test_parameters_come_from_the_faults_table_else_from_the_trials():
    assert TAIL.params(SCENARIO) == Params(resume_checks=4, seed=2)
    assert TAIL.params(SCENARIO, count=9, seed=5) == Params(resume_checks=9, seed=5)
    flips = parse_scenario(TOML.replace('family = "tail"', 'family = "tail"\nflips = 3\nresume_checks = 1'))
    assert TAIL.params(flips, count=9) == Params(flips=3, resume_checks=1, seed=2)  # the file's keys win


# --- the plan: bounded by --trials, replayed one trial alone (pure: a journal stands for the reference run) ---

#: A journal of two turns: the reference run the pure plan tests stand on.
J = journal(M(), A("a", "b"), R("a"), R("b", content="x" * 300), A("c", iteration=1), R("c"), A(text="done"), T())


def reference_of(data: bytes) -> SimpleNamespace:
    """What the tail plan reads of a reference run: its last leg's journal and the journal's format."""
    return SimpleNamespace(history=SimpleNamespace(legs=[SimpleNamespace(journal=data)], journal_format="fisk-ai-v2"))


def keys(plan):
    return [(p.schedule[0]["check"], p.schedule[0]["mutation"]) for p in plan]


def test_a_mutation_id_s_form_drops_its_offsets_and_counts():
    assert [form(i) for i in ("cut@120", "zeros4096+nl", "garbage0-2lines", "flip3@77:0a", "mid-run@310+garbage",
                              "nul-block@88", "zeroed-last+nl", "intact")] == [
        "cut", "zeros+nl", "garbage-2lines", "flip", "mid-run+garbage", "nul-block", "zeroed-last+nl", "intact"]


def test_without_trials_the_plan_is_every_reader_check_the_resume_checks_and_every_interior_resume():
    muts = list(mutations(J, seed=2))
    plan = TAIL.plan(SCENARIO, reference_of(J), 4, 2, None)
    resumes = [k for k in keys(plan) if k[0] == "resume"]
    assert [k for k in keys(plan) if k[0] == "reader"] == [("reader", m.id) for m in muts]
    assert len(resumes) == 4 + sum(m.kind == "interior" for m in muts)
    assert all(p.item.batch == tuple(muts) for p in plan)           # one reader child answers the plan's mutations


@pytest.mark.parametrize("n", [1, 3, 5, 9, 30])
def test_trials_n_bound_the_plan_to_a_seeded_subset_that_takes_the_first_strata_first(n):
    whole = TAIL.plan(SCENARIO, reference_of(J), 4, 2, None)
    plan = TAIL.bound(SCENARIO, whole, n, 2)
    space = whole[0].item.space
    assert len(plan) == n and set(keys(plan)) <= set(keys(space))
    assert keys(plan) == keys(TAIL.bound(SCENARIO, whole, n, 2))       # deterministic for the seed
    taken = {stratum(p.item.check, p.item.mutation) for p in plan}
    assert set(FIRST[:n]) <= taken                                      # the first strata, in their order
    every = {stratum(p.item.check, p.item.mutation) for p in space}
    assert taken == every or len(taken) == n                            # one per stratum before a second of any
    readers = tuple(p.item.mutation for p in plan if p.item.check == "reader")
    assert all(p.item.batch == readers for p in plan)                   # the child is asked about these only


def test_a_bounded_plan_draws_within_a_stratum_by_the_seed_and_takes_resumes_beyond_resume_checks():
    whole = TAIL.plan(SCENARIO, reference_of(J), 1, 2, None)
    drawn = {tuple(keys(TAIL.bound(SCENARIO, whole, 40, seed))) for seed in range(6)}
    assert len(drawn) > 1
    resumes = {k for seed in range(6) for k in keys(TAIL.bound(SCENARIO, whole, 40, seed)) if k[0] == "resume"}
    assert len(resumes) > sum(k[0] == "resume" for k in keys(whole))   # resume_checks = 1 does not cap it
    assert bounded([], 3, 1, key=lambda t: t) == []
    with pytest.raises(ValueError, match="at least 1"):
        bounded(whole, 0, 1, key=lambda p: stratum(p.item.check, p.item.mutation))


def test_a_replay_plans_the_one_trial_its_schedule_names_and_asks_the_reader_about_that_mutation_only():
    whole = TAIL.plan(SCENARIO, reference_of(J), 1, 2, None)
    reader = TAIL.plan(SCENARIO, reference_of(J), 4, 2, [[{"kind": "tail", "check": "reader", "mutation": "intact"}]])
    assert keys(reader) == [("reader", "intact")] and [m.id for m in reader[0].item.batch] == ["intact"]
    beyond = next(k for k in keys(whole[0].item.space) if k[0] == "resume" and k not in keys(whole))
    again = TAIL.plan(SCENARIO, reference_of(J), 1, 2, [[{"kind": "tail", "check": beyond[0], "mutation": beyond[1]}]])
    assert keys(again) == [beyond] and again[0].item.batch == ()      # a bounded run's resume replays too
    with pytest.raises(ValueError, match="no tail mutation of this run matches"):
        TAIL.plan(SCENARIO, reference_of(J), 4, 2, [[{"kind": "tail", "check": "resume", "mutation": "intact"}]])


def test_a_failing_tail_trial_replays_alone_from_its_schedule(server):
    with Runner(subject_for("reader-drops-final-record"), server=server) as runner:
        trials = Campaign([SCENARIO], trials=1, seed=2, runner=runner, shrink_budget=0).run().trials
        failed = next(t for t in trials if t.failed)
        again = Campaign([SCENARIO], seed=2, runner=runner, shrink_budget=0, schedules=[failed.schedule],
                         origin="replay", keep_histories=True).run().trials
    assert len(trials) == 1 and failed.schedule == [{"kind": "tail", "check": "reader", "mutation": "intact"}]
    assert [t.schedule for t in again] == [failed.schedule] and again[0].failed == failed.failed
    assert [c.mutation for c in again[0].history.reader_checks] == ["intact"]  # that one mutation, read alone
