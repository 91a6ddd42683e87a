"""Checkers on a journal in a format they do not decode (``jsonl``, docs/subject.md "Journal formats").

The synthetic engine's histories, marked ``journal_format = "jsonl"``: the
checkers may no longer read a record, so each judgement comes from the
bytes (I4 by offset, I5 line by line), from what each leg acknowledged
after doing the work (I2, I3) or from outside (I6).  Each rule has a broken
engine that it catches.
"""

import base64
import json

from synth import Engine

from harness.checkers import check_all, i1_suspend, i2_tool_reruns, i3_model_repeats, i4_acknowledged, i5_readable
from harness.checkers import i6_reference
from harness.checkers.journal_view import split_journal
from harness.history.jsonl import decode_json_line, holds_a_line
from harness.history.model import history_from_json, history_to_json
from harness.runner.leg import start_or_resume

import pytest


def jsonl(eng: Engine):
    eng.h.journal_format = "jsonl"
    return eng.h


def test_a_jsonl_line_is_one_strict_json_value():
    assert decode_json_line(b'{"n": 1}\n').value == {"n": 1}
    assert decode_json_line(b"[1, 2]").value == [1, 2]
    for bad in (b"NaN\n", b'{"a": Infinity}', b"\xff\xfe{}", b'{"a": 1} {"b": 2}', b"\n", b"\0\0\0"):
        with pytest.raises(ValueError):
            decode_json_line(bad)
    assert holds_a_line(b'{"n": 1}\n{"n"') and not holds_a_line(b'{"n": 1}') and not holds_a_line(b"#x\n")
    assert start_or_resume(b'{"n": 1}\n', "jsonl") == "resume"
    assert start_or_resume(b'{"n": 1}\n', "fisk-ai-v2") == "start"      # not a fisk-ai record


def test_the_format_travels_with_the_history():
    eng = Engine([["a"], []])
    eng.leg()
    h = history_from_json(json.loads(json.dumps(history_to_json(jsonl(eng)))))
    assert h.journal_format == "jsonl"
    assert history_from_json({"scenario": "s", "seed": 0, "run_id": "r"}).journal_format == "fisk-ai-v2"


def test_a_correct_engine_killed_torn_and_resumed_is_valid_on_every_invariant_judged_from_bytes():
    eng = Engine()
    eng.leg(kill_after=4, torn=True)
    eng.leg(suspend_at=0)
    eng.leg(kill_after=6)
    h = jsonl(eng)
    eng.finish()
    for v in check_all(h, ["I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8", "I9"]):
        assert v.status == "valid", (v.invariant, v.evidence)
    i4 = i4_acknowledged.check(h)
    assert i4.evidence["acknowledged_offsets"][:2] == [0, len(split_journal(h.legs[-1].journal).lines[0].raw)]
    assert "seq" not in i4.evidence["violations"][0] if "violations" in i4.evidence else True
    assert "line by line" in i5_readable.check(h).summary
    assert i6_reference.check(h).evidence["source"].startswith("observed")


def test_i4_finds_a_line_glued_to_a_torn_tail_by_its_offset():
    eng = Engine([["a", "b"], []])
    eng.leg(kill_after=5, torn=True)
    eng.leg(cut_torn_tail=False)                # defect 1: appends right after the torn bytes
    v = i4_acknowledged.check(jsonl(eng))
    assert v.status == "invalid", v.evidence
    row = v.evidence["violations"][0]
    assert row["kind"] in ("lost", "changed") and "offset" in row and "seq" not in row
    assert row["glued_into"]["line"] == 3


def test_i4_catches_a_resume_that_rewrites_acknowledged_bytes_in_place():
    eng = Engine([["a"], []])
    eng.leg(kill_after=3)                       # M, call, A acknowledged
    meta = split_journal(eng.file).lines[0].raw
    eng.file = meta.replace(b"count", b"COUNT") # a resume that rewrote line 1
    eng.h.legs[-1].journal = eng.file
    eng.leg()
    v = i4_acknowledged.check(jsonl(eng))
    assert v.status == "invalid"
    assert {r["kind"] for r in v.evidence["violations"]} & {"changed", "offset_reacknowledged"}


def test_i5_reads_lines_an_interior_line_that_is_not_json_is_corrupt_a_final_one_is_torn():
    eng = Engine([["a", "b"], []])
    eng.leg(kill_after=5, torn=True)
    h = jsonl(eng)
    assert i5_readable.check(h).status == "valid"              # the torn final line is dropped
    assert i5_readable.check(h).evidence["torn_tails"][0]["leg"] == 0
    eng.leg(cut_torn_tail=False)
    v = i5_readable.check(h)
    assert v.status == "invalid"
    row = v.evidence["violations"][0]
    assert row["kind"] == "corrupt" and row["leg"] == 1 and row["line"] == 3 and "not one JSON value" in row["error"]


def test_i2_a_rerun_of_a_tool_whose_result_the_crashed_leg_acknowledged_is_caught_from_the_bytes():
    eng = Engine([["a", "b"], []])
    eng.leg(kill_after=6)                       # M, call, A, a ran, R(a) acknowledged, b ran: killed
    eng.leg(rerun_answered=True)                # runs a again although its result is in the journal
    v = i2_tool_reruns.check(jsonl(eng))
    assert v.status == "invalid", v.evidence
    assert {r["tool_use_id"] for r in v.evidence["violations"]} == {"a"}
    assert any("acknowledged a journal line holding a" in c["why"] for c in v.evidence["violations"][0]["refused_candidates"])


def test_i2_the_one_tool_in_flight_at_a_crash_may_run_again():
    eng = Engine([["a", "b"], []])
    eng.leg(kill_after=4)                       # a ran, killed before R(a) was written
    eng.leg()
    v = i2_tool_reruns.check(jsonl(eng))
    assert v.status == "valid" and v.evidence["attributed"][0]["tool_use_id"] == "a"


def test_i3_a_model_call_repeated_after_its_reply_was_acknowledged_is_caught_from_the_bytes():
    eng = Engine([["a"], []])
    eng.leg(kill_after=3)                       # M, call, A acknowledged: killed
    h = jsonl(eng)
    eng.leg()
    # a broken resume: asks the model again for the turn the journal already holds
    first = h.model_calls[0]
    h.model_calls.append(type(first)(index=len(h.model_calls), t=h.legs[1].t_start + 1, key=first.key,
                                     turn=first.turn, messages=first.messages, reply=first.reply, leg=1))
    v = i3_model_repeats.check(h)
    assert v.status == "invalid", v.evidence
    assert v.evidence["violations"][0]["kind"] == "unattributed_repeat"


def test_i6_from_outside_catches_a_different_final_answer_skipped_work_and_a_different_exit():
    eng = Engine([["a"], []])
    eng.leg()
    h = jsonl(eng)
    eng.finish()
    assert i6_reference.check(h).status == "valid"
    h.model_calls[-1].reply = [{"type": "text", "text": "something else"}]
    v = i6_reference.check(h)
    assert v.status == "invalid" and v.evidence["violations"][0]["diff"][0]["path"] == "final_answer"
    h.model_calls[-1].reply = h.reference.last_reply
    h.effects = [e for e in h.effects if e.tool_use_id != "a"]
    h.legs[-1].exit_code = 1
    paths = {d["path"] for d in i6_reference.check(h).evidence["violations"][0]["diff"]}
    assert paths == {"tools", "exit"}


def test_i1_does_not_read_a_jsonl_journal_for_its_suspend_record_and_says_so():
    eng = Engine([["a"], []])
    eng.leg(suspend_at=1)
    h = jsonl(eng)
    h.legs[0].journal = h.legs[0].journal.replace(b'"suspended"', b'"paused"')  # not a fisk-ai terminal
    v = i1_suspend.check(h)
    assert v.status == "valid" and "not_judged" in v.evidence


def test_the_harness_does_not_fold_what_it_does_not_decode():
    from harness.history.readers import fold_journal
    import tempfile, os
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(b'{"n": 1}\n')
    try:
        assert fold_journal(f.name, "jsonl") == (None, None)
        assert fold_journal(f.name)[1]["kind"] == "CorruptJournal"
    finally:
        os.unlink(f.name)


def _split_writes(eng: Engine) -> None:
    """Each journal write of the engine's legs as two writes (the line's halves), the first a tick earlier:
    an agent that writes a line's JSON and then its newline, or a buffered writer's two flushes."""
    for leg in eng.h.legs:
        out = []
        for ev in leg.trace:
            if ev["op"] == "write" and ev["path"] == eng.jpath:
                data = base64.b64decode(ev["data"])
                h = len(data) // 2
                out += [dict(ev, len=h, data=base64.b64encode(data[:h]).decode(), t=ev["t"] - 5),
                        dict(ev, offset=ev["offset"] + h, len=len(data) - h, data=base64.b64encode(data[h:]).decode())]
            else:
                out.append(ev)
        leg.trace = out


def test_a_line_in_two_writes_then_its_fsync_breaks_no_rule_of_an_agent_s_own_format_but_breaks_fisk_ai_s():
    """The fsync rule as durability needs it for an agent's own format: several writes of a line (or several
    lines) then one fsync before the agent goes on is durable; fisk-ai v2's framing (one write a record, docs/spec.md
    section 9 rule 1) is fisk-ai's, judged only on a fisk-ai v2 journal."""
    eng = Engine([["a"], []], timed=True)
    eng.leg()
    _split_writes(eng)
    h = eng.finish()
    strict = i4_acknowledged.check(h)  # fisk-ai v2: the split itself breaks rule 1 ...
    assert strict.status == "invalid" and {r["kind"] for r in strict.evidence["violations"]} == {"append_not_synced"}
    assert strict.evidence["violations"][0]["before"].startswith("write n=")
    h.journal_format = "jsonl"
    v = i4_acknowledged.check(h)
    assert v.status == "valid", v.evidence  # ... and is no violation of an agent's own jsonl


def test_a_jsonl_agent_that_goes_on_before_its_fsync_is_caught_by_what_it_did():
    eng = Engine([["a"], []], timed=True)
    eng.leg(fsync=False)
    h = jsonl(eng)
    eng.finish()
    rows = i4_acknowledged.check(h).evidence["violations"]
    assert {r["kind"] for r in rows} == {"append_not_synced"}
    assert rows[0]["before"].startswith(("model call", "tool ")), rows[0]


def test_an_agent_that_promises_to_survive_a_process_crash_only_is_not_held_to_the_fsync_rule():
    """``[promises] durable = "process-crash"``: a kill keeps what was written (the page cache survives it), so an
    agent that never fsyncs breaks no promise of its; the power-loss family does not run for it
    (tests/test_families.py).  Said in the evidence, never a silent pass."""
    from harness.history.promises import Promises

    eng = Engine([["a"], []], timed=True)
    eng.leg(fsync=False)
    h = jsonl(eng)
    eng.finish()
    assert i4_acknowledged.check(h).status == "invalid"
    h.promises = Promises(durable="process-crash")
    v = i4_acknowledged.check(h)
    assert v.status == "valid" and v.evidence["not_judged"].startswith("append_not_synced: the subject promises")
    assert v.evidence["checked"] > 0 and v.evidence["acknowledged_offsets"]  # its written lines are what it owes
    # ... so a resume that rewrites a line it wrote (with no fsync ever) is still caught
    eng = Engine([["a"], []], timed=True)
    eng.leg(kill_after=3, fsync=False)
    eng.file = split_journal(eng.file).lines[0].raw.replace(b"count", b"COUNT")
    eng.h.legs[-1].journal = eng.file
    eng.leg(fsync=False)
    h = jsonl(eng)
    eng.finish()
    h.promises = Promises(durable="process-crash")
    v = i4_acknowledged.check(h)
    assert v.status == "invalid" and {r["kind"] for r in v.evidence["violations"]} & {"changed", "lost"}, v.evidence
