"""Declared promises (harness/history/promises.py, docs/spec.md section 15 "Declared promises"): for each
value, a history where the agent keeps it (valid) and one where it breaks it (a violation), and the same
history judged by fisk-ai's rules (the default) as before."""

import dataclasses

from synth import Engine, conversation, key_of

from fiskj.codec import encode_record
from fiskj.records import AssistantRecord, TerminalRecord
from harness.checkers import i1_suspend, i2_tool_reruns, i3_model_repeats, i4_acknowledged, i6_reference, i9_refusal
from harness.history.model import Fault, History, Leg, ModelCall, history_from_json, history_to_json
from harness.history.promises import COMPLETED_PROBE, FISK_AI, Promises

NEW_TURN, NO_OP = Promises(resume_completed="new-turn"), Promises(resume_completed="no-op")
ABORT_TERM = Promises(suspend_signals=("SIGINT",))
REPORTED = Promises(interrupted_tool="reported")
STEP = Promises(interrupted_tool="rerun-step")


def _judge(h: History, promises: Promises, *checkers):
    h = dataclasses.replace(h, promises=promises)
    return [c.check(h) for c in checkers]


def _completed_then(what: str, promises: Promises = FISK_AI) -> History:
    """A run that completed in one leg, then the resume of the completed run (``[check]
    resume_after_completed``): ``refused``, ``new-turn`` (one more model call, its answer appended) or
    ``no-op`` (exit 0, nothing done)."""
    eng = Engine()
    h = eng.finish()
    last = h.model_calls[-1]
    leg = Leg(index=1, kind="resume", argv=["agent", "--resume"], pid=2000, t_start=eng.tick(), exit_code=0,
              fault=Fault(detail={"expect": promises.expect_after_completed, "probe": COMPLETED_PROBE}))
    journal = eng.file
    if what == "refused":
        leg.exit_code, leg.stderr = 2, "resume refused: the run is completed"
    elif what == "new-turn":  # the old fake server gives a request past the script the last call's key
        msgs = conversation(eng.turns, len(eng.turns) - 1) + [
            {"role": "assistant", "content": last.reply}, {"role": "user", "content": "and now?"}]
        h.model_calls.append(ModelCall(index=len(h.model_calls), t=eng.tick(), key=last.key, turn=last.turn,
                                       messages=msgs, reply=[{"type": "text", "text": "more"}], leg=1))
        journal += encode_record(AssistantRecord(seq=99, iteration=9, message={"role": "assistant", "content": [
            {"type": "text", "text": "more"}]}, in_tokens=1, out_tokens=1, stop_reason="end_turn"))
        journal += encode_record(TerminalRecord(seq=100, reason="completed"))
    leg.journal, leg.t_end = journal, eng.tick()
    h.legs.append(leg)
    return h


def test_a_completed_run_that_refuses_one_more_resume_keeps_fisk_ais_promise_and_one_that_continues_breaks_it():
    assert _judge(_completed_then("refused"), FISK_AI, i9_refusal)[0].status == "valid"
    i9, i3 = _judge(_completed_then("new-turn"), FISK_AI, i9_refusal, i3_model_repeats)
    assert i9.status == "invalid" and i9.evidence["violations"][0]["kind"] == "not_refused"
    assert i3.status == "invalid"   # by fisk-ai's rules a request past the end is a repeat, as before


def test_an_agent_that_promises_a_new_turn_continues_a_completed_run_and_breaks_it_by_refusing():
    i9, i3, i6 = _judge(_completed_then("new-turn", NEW_TURN), NEW_TURN, i9_refusal, i3_model_repeats, i6_reference)
    assert i9.status == "valid" and "kept its promise (new-turn)" in i9.evidence["summary"], i9.evidence
    assert i3.status == "valid" and i3.evidence["new_turns"] == [{"key": i3.evidence["new_turns"][0]["key"],
                                                                  "leg": 1, "index": 3}]
    assert i6.status == "valid", i6.evidence   # the run's result is the one before the new turn
    (v,) = _judge(_completed_then("refused", NEW_TURN), NEW_TURN, i9_refusal)[0].evidence["violations"]
    assert v["kind"] == "new_turn_not_taken" and v["exit_code"] == 2


def test_a_resume_after_a_kill_that_followed_the_journaled_end_is_a_new_turn_when_promised():
    # a JSON-lines journal (as Claude Code's): leg 0 journaled the final answer, then was killed; leg 1 is a new turn
    h = _completed_then("new-turn", NEW_TURN)
    h.journal_format = "jsonl"
    h.legs[0].exit_code, h.legs[0].exit_signal = None, "SIGKILL"
    h.legs[0].fault = Fault(kind="kill", signal="SIGKILL", injected=True)
    h.legs[1].fault = Fault()                   # an ordinary resume, not the probe
    i6, i3 = _judge(h, NEW_TURN, i6_reference, i3_model_repeats)
    assert i6.status == "valid" and i3.status == "valid", (i6.evidence, i3.evidence)
    assert _judge(h, FISK_AI, i6_reference)[0].status == "invalid"
    # so is one after a SIGTERM it promises to abort on (exit 143): its exit is a kill's, not compared
    h.legs[0].exit_code, h.legs[0].exit_signal = 143, None
    h.legs[0].fault = Fault(kind="suspend", signal="SIGTERM", injected=True)
    both = dataclasses.replace(NEW_TURN, suspend_signals=())
    assert _judge(h, both, i6_reference)[0].status == "valid", _judge(h, both, i6_reference)[0].evidence
    assert _judge(h, NEW_TURN, i6_reference)[0].status == "invalid"   # a clean suspend would exit as promised


def test_a_recovery_resume_that_finds_the_run_completed_keeps_the_new_turn_promise_too():
    # leg 0 journaled the run's end, then was killed; leg 1, an ordinary resume (not the probe), refuses it
    h = _completed_then("refused", NEW_TURN)
    h.legs[0].exit_code, h.legs[0].exit_signal = None, "SIGKILL"
    h.legs[0].fault = Fault(kind="kill", signal="SIGKILL", injected=True)
    h.legs[1].fault = Fault()
    (v,) = _judge(h, NEW_TURN, i9_refusal)[0].evidence["violations"]
    assert v["kind"] == "new_turn_not_taken" and v["leg"] == 1
    assert _judge(h, FISK_AI, i9_refusal)[0].status == "valid"      # fisk-ai's rule: refusing it is right
    h.legs[1].fault = Fault(kind="kill", signal="SIGKILL", injected=True)   # cut short by its own fault
    assert _judge(h, NEW_TURN, i9_refusal)[0].status == "valid"


def test_an_agent_that_promises_a_no_op_does_nothing_and_breaks_it_by_calling_the_model():
    i9, i6 = _judge(_completed_then("no-op", NO_OP), NO_OP, i9_refusal, i6_reference)
    assert i9.status == "valid" and i6.status == "valid", (i9.evidence, i6.evidence)
    (v,) = _judge(_completed_then("new-turn", NO_OP), NO_OP, i9_refusal)[0].evidence["violations"]
    assert v["kind"] == "no_op_did_something" and v["journal_changed"] and v["work"][0]["model_call"] == 3


def _sigterm_mid_call() -> History:
    """Leg 0 gets SIGTERM while its model call is in flight and exits 143 (the reply never journaled); the
    resume asks that call again."""
    eng = Engine()
    eng.leg(kill_after=2)
    h = eng.finish()
    h.legs[0].exit_code, h.legs[0].exit_signal = 143, None
    h.legs[0].fault = Fault(kind="suspend", signal="SIGTERM", injected=True)
    return h


def test_a_signal_the_agent_promises_to_abort_on_allows_one_repeat_like_a_kill():
    (default,) = _judge(_sigterm_mid_call(), FISK_AI, i3_model_repeats)
    assert default.status == "invalid"      # a clean suspend by fisk-ai's rules: the repeat is a violation
    (kept,) = _judge(_sigterm_mid_call(), ABORT_TERM, i3_model_repeats)
    assert kept.status == "valid" and kept.evidence["attributed"][0]["fault"] == "kill", kept.evidence
    h = _sigterm_mid_call()
    call = h.model_calls[0]
    h.model_calls.append(dataclasses.replace(call, index=9, t=h.legs[1].t_start + 1, leg=1))  # a second repeat
    (broken,) = _judge(h, ABORT_TERM, i3_model_repeats)
    assert broken.status == "invalid" and broken.evidence["violations"][0]["kind"] == "repeat_within_leg"


def test_a_leg_that_exits_suspended_after_a_signal_promised_to_abort_is_not_judged_a_clean_suspend():
    eng = Engine()
    eng.leg(suspend_at=1)
    h = eng.finish()
    h.legs[0].fault = Fault(kind="suspend", signal="SIGTERM", injected=True)
    call = h.model_calls[0]
    h.model_calls.append(dataclasses.replace(call, index=9, t=h.legs[1].t_start + 1, leg=1))
    assert _judge(h, FISK_AI, i1_suspend)[0].status == "invalid"
    (v,) = _judge(h, ABORT_TERM, i1_suspend)
    assert v.status == "valid" and v.evidence["checked"] == 0


def test_the_last_write_of_a_leg_that_aborts_on_a_promised_signal_may_be_unsynced_like_a_kill_s():
    h = _sigterm_mid_call()
    eng = Engine()
    eng.leg(kill_after=3)                        # meta, call, A(0) written and fsynced -> killed
    leg0 = h.legs[0]
    leg0.trace = eng.h.legs[0].trace[:-1]       # SIGTERM between A(0)'s write and its fsync: exit 143
    leg0.journal = eng.file
    (v,) = _judge(h, FISK_AI, i4_acknowledged)
    assert v.status == "invalid" and v.evidence["violations"][0]["before"] == "exit 143"
    assert _judge(h, ABORT_TERM, i4_acknowledged)[0].status == "valid"


def _tool_interrupted(report: bool) -> History:
    eng = Engine()
    eng.leg(kill_after=4)                        # meta, call, A(0) journaled, tool a ran -> killed
    eng.leg(report_interrupted=report)
    return eng.finish()


def test_an_interrupted_tool_run_again_once_keeps_the_default_promise_and_breaks_reported():
    h = _tool_interrupted(report=False)
    assert _judge(h, FISK_AI, i2_tool_reruns)[0].status == "valid"
    (v,) = _judge(h, REPORTED, i2_tool_reruns)[0].evidence["violations"]
    assert v["kind"] == "reported_tool_rerun" and v["tool_use_id"] == "a"


def test_a_reported_tool_named_only_by_a_torn_final_line_may_run_again_once():
    # the tool_use line was cut mid-write by the kill: its bytes name the id, but no reader can read it
    h = _tool_interrupted(report=False)
    first = h.legs[0]
    assistant = first.journal.rstrip(b"\n").rsplit(b"\n", 1)[1]
    assert b'"a"' in assistant[:-2]
    first.journal = first.journal[: len(first.journal) - 3]   # torn: no newline, the id's bytes kept
    (i2,) = _judge(h, REPORTED, i2_tool_reruns)
    assert i2.status == "valid" and i2.evidence["attributed"][0]["tool_use_id"] == "a", i2.evidence


def test_a_reported_tool_run_again_after_a_journal_with_an_unreadable_line_is_not_judged_by_the_promise():
    # a power loss zero-filled the first line: what the agent could read of the rest is unknown from outside
    # (I5 judges the line), so the re-run is attributed to the crash as any other, and the evidence says why
    h = _tool_interrupted(report=False)
    first = h.legs[0]
    meta_len = first.journal.index(b"\n")
    first.journal = b"\0" * meta_len + first.journal[meta_len:]
    (i2,) = _judge(h, REPORTED, i2_tool_reruns)
    assert i2.status == "valid", i2.evidence
    (skip,) = i2.evidence["reported_not_judged"]
    assert skip["tool_use_id"] == "a" and skip["leg"] == 1 and skip["unreadable"]["line"] == 1, skip


def test_an_interrupted_tool_reported_and_never_run_again_is_no_difference_when_promised():
    h = _tool_interrupted(report=True)
    i2, i6 = _judge(h, REPORTED, i2_tool_reruns, i6_reference)
    assert i2.status == "valid" and i2.evidence["checked"] == 0
    assert i6.status == "valid" and i6.evidence["reported"] == ["a"], i6.evidence
    (default,) = _judge(h, FISK_AI, i6_reference)
    assert default.status == "invalid" and default.evidence["violations"][0]["kind"] == "differs"


def _batch_cut_short(saved_first: bool) -> History:
    """Leg 0 ran tools a and b of batch 0 and was killed before b's result; ``saved_first``: a's result was
    journaled (as fiskj does) and leg 1 still runs a again, else a's result was never written (an agent that
    saves a batch's results together, a LangGraph ToolNode) and leg 1 runs the whole batch again."""
    eng = Engine()
    eng.leg(kill_after=6)                        # meta, call, A(0), tool a ran, result a, tool b ran -> killed
    if not saved_first:
        eng.file = eng.file[:eng.file.rstrip(b"\n").rfind(b"\n") + 1]
        eng.h.legs[-1].journal = eng.file
    eng.leg(rerun_answered=saved_first)
    return eng.finish()


def test_a_step_rerun_whole_after_one_crash_breaks_the_default_promise_and_keeps_rerun_step():
    h = _batch_cut_short(saved_first=False)
    assert sorted(e.tool_use_id for e in h.effects if e.leg == 1)[:2] == ["a", "b"]
    (default,) = _judge(h, FISK_AI, i2_tool_reruns)
    assert default.status == "invalid" and default.evidence["violations"][0]["kind"] == "unattributed_rerun"
    (step,) = _judge(h, STEP, i2_tool_reruns)
    assert step.status == "valid" and step.evidence["checked"] == 2, step.evidence


def test_rerun_step_still_forbids_re_running_a_tool_whose_result_was_saved():
    (step,) = _judge(_batch_cut_short(saved_first=True), STEP, i2_tool_reruns)
    assert step.status == "invalid" and {v["tool_use_id"] for v in step.evidence["violations"]} == {"a"}


def test_promises_survive_the_history_json_round_trip():
    h = dataclasses.replace(Engine().finish(), promises=ABORT_TERM)
    assert history_from_json(history_to_json(h)).promises == ABORT_TERM
    assert history_from_json({k: v for k, v in history_to_json(h).items() if k != "promises"}).promises == FISK_AI
    assert FISK_AI.describe() == ("resume of a completed run: refuse; suspend on SIGINT, SIGTERM; "
                                  "interrupted tool: rerun-at-most-once")
    assert "abort like a kill on SIGTERM" in ABORT_TERM.describe()
