"""Checkers on an opaque store (docs/subject.md "Journal formats", docs/spec.md section 15 "Opaque stores").

The synthetic engine's histories, marked ``journal_format = "opaque"``: the store's bytes are a snapshot the
checkers never decode, and each leg carries the agent's own reading of it (status, tool_results, answer), as a
correct agent whose store is its journal would give it.  Each opaque rule has a broken agent that it catches.
"""

from fiskj.records import AssistantRecord, TerminalRecord, ToolResultRecord
from synth import ANSWER, Engine, reference

from harness.checkers import check_all, i1_suspend, i2_tool_reruns, i3_model_repeats, i4_acknowledged, i5_readable
from harness.checkers import i8_one_writer
from harness.history.journal_location import JournalLocation, store_files
from harness.history.model import Fault, history_from_json, history_to_json
from harness.history.promises import Promises
from harness.runner.leg import start_or_resume


def snapshot(data: bytes | None) -> bytes | None:
    """The store (one file, ``journal``) as :func:`harness.subject.contract.journal_bytes` gives it."""
    return None if data is None else b"%d journal\n" % len(data) + data


def reading(eng: Engine, data: bytes | None) -> dict:
    eng.file, keep = data, eng.file
    recs = eng.records()
    eng.file = keep
    end = [r for r in recs if isinstance(r, TerminalRecord)]
    status = None if not recs else end[-1].reason if end and end[-1].reason in ("completed", "suspended") \
        else "running"
    last = [r for r in recs if isinstance(r, AssistantRecord)]
    answer = "".join(b.get("text", "") for b in last[-1].message["content"] if b.get("type") == "text") \
        if status == "completed" else None
    return {"exit_code": 0, "status": status, "tool_results": [r.tool_use_id for r in recs
            if isinstance(r, ToolResultRecord)], "answer": answer, "given": ["status", "tool_results", "answer"],
            "error": None}


def opaque(eng: Engine, durable: str = "power-loss"):
    """The engine's history as an opaque store's: a reading after every leg, the journal as the store's one file."""
    h = eng.h
    h.journal_format, h.journal_template = "opaque", "{state_home}/store"
    h.promises = Promises(durable=durable)
    for leg in h.legs:
        if leg.reading is None:
            leg.reading = reading(eng, leg.journal)
            leg.journal = snapshot(leg.journal)
        if leg.exit_code == 0:
            leg.stdout = f"turn 0\n{ANSWER}\n"
    if h.reference is not None:
        h.reference.printed_answer = ANSWER
    return h


def killed_then_finished(**kw) -> Engine:
    eng = Engine()
    eng.leg(kill_after=6)
    eng.leg(**kw)
    eng.finish()
    return eng


def test_the_store_snapshot_the_location_and_the_start_or_resume_rule():
    assert store_files(b"3 a.db\nabc0 a.db-wal\n2 sub/x\nhi") == {"a.db": b"abc", "a.db-wal": b"", "sub/x": b"hi"}
    loc = JournalLocation("{state_home}/langgraph", "opaque")
    assert loc.is_store and not loc.decoded
    assert loc.is_journal("/t/state/langgraph/checkpoints.sqlite-wal", "r1")
    assert not loc.is_journal("/t/state/langgraph", "r1") and not loc.is_journal("/t/state/langgraphx/a", "r1")
    assert start_or_resume(b"0 a.db\n", "opaque") == "start" and start_or_resume(b"1 a.db\nx", "opaque") == "resume"
    assert start_or_resume(None, "opaque") == "start"
    h = opaque(killed_then_finished())
    back = history_from_json(history_to_json(h))
    assert back.journal.is_store and back.promises.durable == "power-loss" and back.legs[0].reading == h.legs[0].reading


def test_a_correct_agent_killed_suspended_and_resumed_is_valid_on_every_rule_judged_for_an_opaque_store():
    eng = Engine()
    eng.leg(kill_after=6)
    eng.leg(suspend_at=0)
    eng.leg(kill_after=4)
    eng.finish()
    h = opaque(eng)
    verdicts = {v.invariant: v for v in check_all(h)}
    for inv in ("I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8", "I9"):
        assert verdicts[inv].status == "valid", (inv, verdicts[inv].evidence)
    assert verdicts["I4"].evidence["checked"] == 2                      # the legs that sent results
    assert verdicts["I5"].evidence["checked"] == 1                      # after the kill of leg 2 (leg 1: suspended)
    assert verdicts["I10"].status == "unknown"                           # no fold to compare a reading with


def test_i4_catches_what_the_agent_acted_on_lost_at_a_power_loss():
    """(A store that promises to survive a process crash only is never power-lost: the power-loss family does
    not run for it, tests/test_families.py; I4 excuses no power loss of its own.)"""
    for durable in ("power-loss", "process-crash"):
        eng = Engine()
        eng.leg(kill_after=9, fsync=False)                           # a, b sent to the model, never fsynced
        eng.power_loss()
        eng.finish()
        v = i4_acknowledged.check(opaque(eng, durable))
        assert v.status == "invalid", v.evidence
        row = v.evidence["violations"][0]
        assert row["kind"] == "run_lost" and row["crash"] == "power_loss" and set(row["acted_on"]) == {"a", "b"}


def test_i4_catches_a_tool_result_sent_to_the_model_and_missing_from_the_reading_after_a_kill():
    eng = killed_then_finished()
    h = opaque(eng)
    assert i4_acknowledged.check(h).status == "valid"
    h.legs[0].reading["tool_results"] = ["a"]                            # a store that saved b after the call
    h.model_calls[1].leg = 0
    v = i4_acknowledged.check(h)
    assert v.status == "invalid", v.evidence
    row = v.evidence["violations"][0]
    assert row["kind"] == "acted_on_lost" and row["tool_use_ids"] == ["b"] and row["leg"] == 0


def test_i4_catches_a_printed_answer_missing_from_the_reading_and_a_store_the_agent_cannot_read():
    eng = Engine([["a"], []])
    eng.leg()
    eng.h.reference = reference(eng.turns)
    h = opaque(eng)
    assert i4_acknowledged.check(h).status == "valid"
    h.legs[0].reading["answer"] = None
    v = i4_acknowledged.check(h)
    assert v.status == "invalid" and v.evidence["violations"][0]["kind"] == "answer_lost", v.evidence
    h.legs[0].reading = {"error": "the status command hung (killed)", "given": [], "timed_out": True}
    v = i4_acknowledged.check(h)
    assert v.status == "unknown" and "hung" in v.summary
    h.legs[0].reading = {"error": "the status command exited 1", "given": [], "exit_code": 1}
    v = i4_acknowledged.check(h)                                         # the agent cannot read its own store
    assert v.status == "invalid" and v.evidence["violations"][0]["kind"] == "unreadable", v.evidence


def test_i5_a_recovery_refuses_cleanly_or_resumes_else_it_is_caught():
    def refused(stderr: str, store: bytes | None = None, exit_code: int | None = 2, signal: str | None = None):
        eng = Engine()
        eng.leg(kill_after=6)
        h = opaque(eng)
        leg = type(h.legs[0])(index=1, kind="resume", argv=["agent", "resume"], exit_code=exit_code,
                              exit_signal=signal, stderr=stderr, journal=store or h.legs[0].journal)
        h.legs.append(leg)
        return i5_readable.check(h)
    assert refused("error: the store is damaged, not resuming").status == "valid"
    for v, kind in ((refused(""), "refused_silently"), (refused("no", b"1 journal\nx"), "refused_changed_store"),
                    (refused("", exit_code=None, signal="SIGSEGV"), "not_resumed")):
        assert v.status == "invalid" and v.evidence["violations"][0]["kind"] == kind, v.evidence
    h = opaque(killed_then_finished())
    h.legs[1].journal += b"4 checkpoints.sqlite-shm\nxxxx"               # scratch files are not the store's data
    assert i5_readable.check(h).status == "valid"
    eng = Engine()
    eng.leg(kill_after=6)
    h = opaque(eng)
    for index, store in ((1, b"1 journal\nx"), (2, h.legs[0].journal)):  # a refusal while leg 2 ran beside it
        h.legs.append(type(h.legs[0])(index=index, kind="resume", argv=["agent"], exit_code=2, stderr="locked",
                                      journal=store, t_start=5000, t_end=6000 + index))
    assert i5_readable.check(h).status == "valid"                        # (what changed may be leg 2's doing)
    h.legs[2].t_start = 6001
    assert i5_readable.check(h).evidence["violations"][0]["kind"] == "refused_changed_store"


def test_i2_a_rerun_of_a_tool_the_reading_held_after_the_crash_is_caught():
    v = i2_tool_reruns.check(opaque(killed_then_finished(rerun_answered=True)))
    assert v.status == "invalid", v.evidence
    assert {r["tool_use_id"] for r in v.evidence["violations"]} == {"a"}
    assert any("its own reading after the crash holds a" in c["why"]
               for c in v.evidence["violations"][0]["refused_candidates"])
    eng = Engine([["a", "b"], []])
    eng.leg(kill_after=4)                                                # a ran, not saved: it may run again
    eng.leg()
    assert i2_tool_reruns.check(opaque(eng)).status == "valid"


def test_i3_a_model_call_repeated_after_its_reply_was_saved_is_caught_by_the_reading():
    eng = Engine([["a"], []])
    eng.leg(kill_after=5)                                                # M, call, A, a ran, R(a) saved: killed
    eng.leg()
    h = opaque(eng)
    first = h.model_calls[0]
    h.model_calls.append(type(first)(index=len(h.model_calls), t=h.legs[1].t_start + 1, key=first.key,
                                     turn=first.turn, messages=first.messages, reply=first.reply, leg=1))
    v = i3_model_repeats.check(h)
    assert v.status == "invalid" and v.evidence["violations"][0]["kind"] == "unattributed_repeat", v.evidence


def test_i1_a_tool_the_suspended_reading_holds_that_runs_again_is_caught():
    eng = Engine()
    eng.leg(kill_after=6)                                                # a and R(a) saved, b ran: killed
    eng.leg(suspend_at=0)                                                # b again, then a clean suspend
    eng.leg(rerun_answered=True)                                         # a runs a third time
    eng.finish()
    v = i1_suspend.check(opaque(eng))
    assert v.status == "invalid", v.evidence
    assert any(r["kind"] == "tool_rerun" and r["tool_use_id"] == "a" and r["result_journaled"]
               for r in v.evidence["violations"])


def test_i8_two_resumers_that_coexisted_must_not_both_do_the_work():
    eng = Engine()
    eng.leg(kill_after=6)
    eng.leg()
    h = opaque(eng)
    assert i8_one_writer.check(h).status == "valid"
    h.legs[0].fault, h.legs[0].exit_code, h.legs[0].exit_signal = Fault(kind="hold", injected=True), 0, None
    h.legs[0].t_end = h.legs[1].t_end + 1                                # they ran at once ...
    h.effects.append(type(h.effects[0])(tool_use_id="c", attempt=9, pid=1, t=h.legs[1].t_end, leg=0))
    v = i8_one_writer.check(h)                                           # ... and both ran tool c
    assert v.status == "invalid", v.evidence
    assert v.evidence["violations"][0]["kind"] == "both_did_the_work" and "c" in v.evidence["violations"][0]["tool_use_ids"]
    h.legs[0].fault, h.legs[0].exit_signal = Fault(kind="kill", injected=True), "SIGKILL"   # a holder killed:
    assert i8_one_writer.check(h).status == "valid"                      # its work may be done again (I2's)


def test_an_opaque_reading_takes_ids_and_an_answer_and_a_null_status_is_no_such_run():
    from harness.history.readers import parse_reading
    fields = (("status", "s"), ("tool_results", "t"), ("answer", "a"))
    ok = parse_reading({"exit_code": 0, "stdout": '{"s": null, "t": ["x"], "a": null}'}, fields)
    assert ok["error"] is None and ok["status"] is None and ok["tool_results"] == ["x"] and "status" in ok["given"]
    bad = parse_reading({"exit_code": 0, "stdout": '{"s": "running", "t": "x", "a": null}'}, fields)
    assert "'t' (tool_results)" in bad["error"]
    assert parse_reading({"exit_code": 0, "stdout": '{"s": null}'}, (("status", "s"),))["error"]  # fisk-ai v2: a string


def test_journal_bytes_snapshots_a_store_directory_and_reads_a_file_as_before(tmp_path):
    from harness.subject.contract import journal_bytes
    store = tmp_path / "graph"
    assert journal_bytes(store) is None
    (store / "sub").mkdir(parents=True)
    (store / "c.db").write_bytes(b"pages")
    (store / "sub" / "c.db-wal").write_bytes(b"")
    assert store_files(journal_bytes(store)) == {"c.db": b"pages", "sub/c.db-wal": b""}
    assert journal_bytes(store / "c.db") == b"pages"


def test_i9_a_refusal_may_leave_sqlite_s_shared_memory_index_but_no_write_to_the_store_s_data():
    from harness.checkers import i9_refusal
    h = opaque(killed_then_finished())
    done = h.legs[-1]

    def refused(path: str):
        leg = type(done)(index=len(h.legs), kind="resume", argv=["agent"], pid=4242, exit_code=2,
                         stderr="agent: ResumeRefused: run r1 is completed", journal=done.journal,
                         t_start=done.t_end + 10, t_end=done.t_end + 20,
                         trace=[{"n": 1, "pid": 4242, "op": "write", "path": f"/t/state/store/{path}", "fd": 5,
                                 "offset": 0, "len": 4, "data": "eHh4eA==", "t": done.t_end + 15}])
        return i9_refusal.check(type(h)(**{**vars(h), "legs": [*h.legs, leg]}))
    assert refused("checkpoints.db-shm").status == "valid"
    v = refused("checkpoints.db")
    assert v.status == "invalid" and v.evidence["violations"][0]["kind"] == "changed_journal", v.evidence


def test_a_power_loss_state_of_an_opaque_store_recovers_by_all_of_the_store_s_files():
    from harness.families.power_loss.crashstates import CrashState
    from harness.families.power_loss.tiers import outcome_key
    loc = JournalLocation("{state_home}/graph", "opaque")

    def state(db: bytes, wal: bytes) -> CrashState:
        return CrashState(id="s", prefix_n=3, files={"/t/state/graph/c.db": db, "/t/state/graph/c.db-wal": wal,
                                                     "/t/state/other.txt": b"x"}, dirs=set(), lost_entries=[],
                          acknowledged=[])
    assert outcome_key(state(b"db", b"w1"), "r1", loc) != outcome_key(state(b"db", b"w2"), "r1", loc)
    assert outcome_key(state(b"db", b"w1"), "r1", loc) == outcome_key(state(b"db", b"w1"), "r1", loc)


def test_i6_a_clean_refusal_of_a_damaged_store_is_no_exit_difference_and_a_changed_store_is():
    from harness.checkers import i6_reference

    def after_damage(store_after: bytes | None):
        eng = Engine([["a"], []])
        eng.leg()
        eng.h.reference = reference(eng.turns)
        h = opaque(eng)
        h.legs[0].fault = Fault(kind="tail", injected=True)
        h.legs.append(type(h.legs[0])(index=1, kind="resume", argv=["agent", "resume"], exit_code=1,
                                      stderr="error: database disk image is malformed",
                                      journal=store_after or h.legs[0].journal))
        return i6_reference.check(h)
    clean = after_damage(None)
    assert not any(d["path"] == "exit" for v in clean.evidence.get("violations", []) for d in v["diff"]), clean.evidence
    changed = after_damage(b"1 journal\nx")                              # it wrote to the store and failed
    assert any(d["path"] == "exit" for v in changed.evidence["violations"] for d in v["diff"]), changed.evidence


def test_a_refusal_that_tidies_the_store_changing_nothing_its_reading_holds_is_no_change_and_one_that_loses_work_is():
    def refusal(after: dict):
        eng = Engine()
        eng.leg(kill_after=6)
        h = opaque(eng)
        h.legs.append(type(h.legs[0])(index=1, kind="resume", argv=["agent", "resume"], exit_code=2,
                                      stderr="error: not resuming", journal=b"4 journal\ntidy", reading=after))
        return i5_readable.check(h), h
    v, h = refusal(None)                                                 # no reading after: the bytes decide
    assert v.status == "invalid" and v.evidence["violations"][0]["kind"] == "refused_changed_store"
    same = dict(h.legs[0].reading)
    v, h = refusal(same)                                                 # a WAL copied in and removed: same reading
    assert v.status == "valid", v.evidence
    lost = {**same, "tool_results": []}
    v, _ = refusal(lost)                                                 # its reading lost a saved result
    assert v.status == "invalid" and v.evidence["violations"][0]["kind"] == "refused_changed_store"
