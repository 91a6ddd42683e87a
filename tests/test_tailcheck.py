"""harness.families.tail.executor: a real run's journal under the tail nemesis, read by the subject's reader and resumed."""

from __future__ import annotations

import pytest

from builders import A, M, R, T, journal
from harness.selftest.mutants import subject_for
from harness.runner.trial import Runner
from harness.scenario.parse import parse_scenario
from harness.subject.contract import default_subject
from harness.families.tail.executor import Params, answer_for, params_from, reader_answers, resume_candidates, run_tails
from harness.families.tail.mutations import mutations

SCENARIO = parse_scenario('''
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
''')


def test_the_reference_reads_every_mutation_right_and_repairs_every_torn_tail(server):
    with Runner(server=server) as runner:
        report = run_tails(SCENARIO, runner=runner, params=Params(resume_checks=4, seed=2))
    data = report.to_json()
    assert report.ok, (data["reader_violations"][:2], data["resume_violations"][:2])
    assert report.reader_checked == report.mutations > 100 and report.resumes == 4
    assert data["faults"] == {"tail": report.mutations + 4}


def test_a_torn_tail_not_cut_before_the_append_is_caught_when_the_resume_glues_to_it(server):
    with Runner(subject_for("torn-tail-not-cut"), server=server) as runner:
        report = run_tails(SCENARIO, runner=runner, params=Params(resume_checks=2, jobs=2))
    assert report.reader_violations == [] and len(report.resume_violations) == 2
    problems = " ".join(p for v in report.resume_violations for p in v["problems"])
    assert "I4" in problems and "torn tail" in problems


@pytest.mark.parametrize("name, expected", [("reader-tolerates-corruption", "is corrupt"),
                                            ("reader-drops-final-record", "expected records seq")])
def test_a_reader_mutant_is_caught_by_the_answers_of_its_own_child(server, name, expected):
    with Runner(subject_for(name), server=server) as runner:
        report = run_tails(SCENARIO, runner=runner, params=Params(resume_checks=0))
    assert report.reader_violations and report.resumes == 0
    assert any(expected in v["reason"] for v in report.reader_violations)


def test_the_answer_child_reports_torn_and_corrupt_files(tmp_path):
    data = journal(M(), A("a"), R("a"), T())
    muts = [m for m in mutations(data, random_cuts=2, flips=4) if m.kind in ("intact", "zeros", "flip")]
    answers = reader_answers(muts, default_subject(), tmp_path)
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
    assert params_from(SCENARIO) == Params(resume_checks=4, seed=2)
    assert params_from(SCENARIO, flips=3).flips == 3
