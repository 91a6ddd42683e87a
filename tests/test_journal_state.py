"""harness.families.journal_state: the one engine both journal-byte generators (crash states, tail mutations) feed.

One way to ask a subject about journal bytes (a fiskj-based subject's forked reader: read, recover, read
back), one way to lay them in a fresh store, one resume; the families keep only their generators.
"""

from __future__ import annotations

from contextlib import closing

from pathlib import Path

import pytest

from harness.families.journal_state.ask import ask, expected, expected_reading, reader_check
from harness.families.journal_state.executor import StateExecutor, lay, resume
from harness.history.model import Fault, Leg
from harness.runner.trial import Runner
from harness.scenario.parse import parse_scenario
from harness.selftest.mutants import subject_for
from harness.subject.contract import CONTRACT_JOURNAL

SCENARIO = parse_scenario('''
name = "journal-state-test"
purpose = "a small run for the journal-state engine's tests"
[workload]
turns = 1
tools_per_turn = 2
[faults]
family = "tail"
[trials]
count = 1
seed = 1
timeout_s = 60
''')


def test_the_forked_reader_answers_a_reading_or_the_journal_after_the_subject_s_recovery(server, tmp_path):
    with Runner(server=server) as runner, closing(StateExecutor(SCENARIO, runner)) as ex:
        ctx = ex.ctx
        clean = ctx.ref.history.legs[-1].journal
        torn = clean + b'{"seq": 99, "ty'
        corrupt = b"#garbage\n" + clean
        (tmp_path / "read").mkdir(), (tmp_path / "recovery").mkdir()
        intact, cut, bad = ask(ctx, [clean, torn, corrupt], "recovery", "read", tmp_path / "read")
        intact2, cut2, bad2 = ask(ctx, [clean, torn, corrupt], "recovery", "recovery", tmp_path / "recovery")
    assert intact.kind == "read" and intact.torn is None and intact.recovery is None and intact2.recovery == "opened"
    # the torn tail, as read and after the subject's own recovery cut it
    assert cut.torn == (len(clean), len(torn) - len(clean)) and cut2.recovery == "repaired"
    assert cut2.torn is None and cut2.seqs == cut.seqs == intact.seqs == intact2.seqs
    assert bad.kind == bad2.kind == "corrupt" and bad.line == 1 and bad2.recovery.startswith("refused")
    # each answer is judged against its question's label: the reading (tail), the journal after recovery (power loss)
    label = expected_reading(torn)
    read = reader_check("t", "cut", len(torn), label, cut, "recovery", "read")
    after = reader_check("t", "cut", len(torn), label, cut2, "recovery", "recovery")
    assert read.expected["torn"] == list(cut.torn) and read.answer["torn"] == list(cut.torn)
    assert after.expected["torn"] is None and after.answer["recovery"] == "repaired"


def test_a_recovery_that_leaves_the_torn_tail_is_seen_in_the_answer_after_it(server, tmp_path):
    with Runner(subject_for("torn-tail-not-cut"), server=server) as runner, \
            closing(StateExecutor(SCENARIO, runner)) as ex:
        ctx = ex.ctx
        clean = ctx.ref.history.legs[-1].journal
        (tmp_path / "read").mkdir(), (tmp_path / "recovery").mkdir()
        (read,) = ask(ctx, [clean + b'{"seq"'], "recovery", "read", tmp_path / "read")
        (after,) = ask(ctx, [clean + b'{"seq"'], "recovery", "recovery", tmp_path / "recovery")
    assert read.torn is not None and after.torn == read.torn and after.recovery == "opened"


def test_there_is_no_one_to_ask_in_model_mode_and_a_status_command_is_not_asked_about_an_empty_run():
    with pytest.raises(ValueError, match="asked in mode 'recovery' or 'status', not 'model'"):
        ask(None, [b"x"], "model", "read", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not 'fold'"):
        ask(None, [b"x"], "recovery", "fold", None)  # type: ignore[arg-type]
    empty = expected_reading(b'{"seq"')
    assert empty["kind"] == "torn" and not empty["seqs"]
    assert expected(empty, "status", "read") is None and expected(empty, "recovery", "recovery") == empty
    assert expected({**empty, "kind": "error"}, "recovery", "read") is None


def test_a_laid_crash_state_keeps_only_files_whose_folder_survived_and_a_resume_completes_the_run(server):
    with Runner(server=server) as runner, closing(StateExecutor(SCENARIO, runner)) as ex:
        ctx, shared = ex.ctx, ex.shared
        rel = Path(CONTRACT_JOURNAL.format(state_home="state", run_id=ctx.run_id))  # under the trial's folder
        data = ctx.ref.history.legs[-1].journal
        cut = data[:data.index(b"\n") + 1]  # the meta record alone
        where = lay(ctx, shared / "a", files={str(rel): cut, "state/lost/x": b"x"}, dirs=[str(rel.parent)])
        assert ctx.journal(shared / "a").read_bytes() == cut and not (shared / "a" / "state" / "lost").exists()
        assert where["state_home"] == str(shared / "a" / "state")
        ref_leg = ctx.ref.history.legs[-1]
        leg0 = Leg(index=0, kind="start", argv=ref_leg.argv, pid=ref_leg.pid, t_start=ref_leg.t_start,
                   t_end=ref_leg.t_end, journal=cut, fault=Fault(kind="tail", injected=True))
        history = resume(ctx, shared / "a", [leg0], [], [], {"kind": "tail", "mutation": "meta-only"})
    assert [leg.kind for leg in history.legs] == ["start", "resume"] and history.legs[1].exit_code == 0
    assert history.final_state is not None and history.final_state["status"] == "completed"
