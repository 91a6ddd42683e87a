"""I4 no acknowledged record lost: acks come from the IO-seam trace, presence from the snapshots;
or, for a power-loss crash state, acknowledged writes from the crash model, presence from the state."""

import base64
import json

from synth import Engine
from test_crashstates import D, Trace, rec

from harness.checkers import i4_acknowledged
from harness.checkers.journal_view import split_journal
from harness.checkers._trace import acknowledged
from harness.families.power_loss.crashstates import crash_states
from harness.history.model import CrashStateFacts, Fault, History, Leg, history_from_json, history_to_json


def test_every_record_written_then_fsynced_is_acknowledged_with_its_seq_and_offset():
    eng = Engine([["a"], []])
    eng.leg()
    acks = acknowledged(eng.h, eng.h.legs[0])
    assert [a.seq for a in acks] == [1, 2, 3, 4, 5]         # M, A(a), R(a), A(text), T
    assert acks[1].offset == len(split_journal(eng.file).lines[0].raw)
    assert b"".join(a.line for a in acks) == eng.file


def test_a_write_with_no_fsync_after_it_is_not_acknowledged():
    eng = Engine([["a"], []])
    eng.leg(fsync=False)
    assert acknowledged(eng.h, eng.h.legs[0]) == []


def test_crashes_torn_tails_and_resumes_of_a_correct_engine_lose_nothing():
    eng = Engine()
    eng.leg(kill_after=4, torn=True)
    eng.leg(suspend_at=0)
    eng.leg(kill_after=3)
    h = eng.finish()
    v = i4_acknowledged.check(h)
    assert v.status == "valid", v.evidence
    assert v.evidence["acknowledged_seqs"] == list(range(1, len(split_journal(h.legs[-1].journal).lines) + 1))


def test_a_record_glued_to_a_torn_tail_by_a_resume_that_did_not_cut_it_is_caught():
    eng = Engine([["a", "b"], []])
    eng.leg(kill_after=5, torn=True)        # M, call, A, a, then killed half-way through R(a)
    eng.leg(cut_torn_tail=False)            # defect 1: appends R(a) right after the torn bytes
    v = i4_acknowledged.check(eng.h)
    assert v.status == "invalid"
    first = v.evidence["violations"][0]
    assert first["kind"] == "lost" and first["seq"] == 3 and first["leg"] == 1
    assert first["ack"]["leg"] == 1 and first["ack"]["fsync_n"] > first["ack"]["write_n"]
    glued = first["glued_into"]
    assert glued["line"] == 3 and glued["error"]


def test_a_later_leg_that_truncates_the_journal_is_named():
    eng = Engine([["a"], []])
    eng.leg(kill_after=3)                       # M, call, A acknowledged
    meta = split_journal(eng.file).lines[0].raw
    eng.file = None
    leg = eng.leg(kill_after=1)                 # defect 3: a second creator starts the file over
    leg.trace[2]["flags"] = ["O_WRONLY", "O_CREAT", "O_TRUNC", "O_APPEND"]
    assert leg.journal == meta
    v = i4_acknowledged.check(eng.h)
    cut, row = v.evidence["violations"]
    assert cut["kind"] == "truncated_acknowledged" and cut["leg"] == 1 and cut["n"] == 3 and cut["length"] == 0
    assert row["kind"] == "lost" and row["seq"] == 2 and row["leg"] == 1
    assert row["truncated_by"] == [{"leg": 1, "pid": leg.pid, "n": 3, "op": "open O_TRUNC"}]


def test_a_resume_that_cuts_acknowledged_records_is_caught_even_if_it_writes_them_back():
    eng = Engine([["a"], []])
    eng.leg(kill_after=4)                        # M, call, A(a) acknowledged, a ran: killed
    size = len(split_journal(eng.file).lines[0].raw)
    leg = eng.leg()                              # a correct resume, then: make it cut below A(a) first
    leg.trace.insert(3, {"n": 0, "pid": leg.pid, "op": "ftruncate", "path": leg.trace[2]["path"], "fd": 4,
                         "length": size, "t": leg.trace[2].get("t", 0) + 1})
    for n, ev in enumerate(leg.trace, 1):
        ev["n"] = n
    v = i4_acknowledged.check(eng.h)
    assert v.status == "invalid"
    (row,) = v.evidence["violations"]
    assert row["kind"] == "truncated_acknowledged" and row["length"] == size and row["first"]["seq"] == 2


def test_a_power_loss_crash_state_missing_an_acknowledged_record_is_caught():
    eng = Engine([["a"], []])
    eng.leg(kill_after=4)
    eng.synced = 0
    eng.power_loss()                            # the state lost the whole file: no dir fsync, say
    v = i4_acknowledged.check(eng.h)
    assert v.status == "invalid"
    assert {r["seq"] for r in v.evidence["violations"]} == {1, 2}     # M, A(a); a ran, no result yet
    assert v.evidence["violations"][0]["journal_bytes"] == 0


def test_a_changed_record_at_an_acknowledged_seq_is_caught_with_both_lines():
    eng = Engine([["a"], []])
    eng.leg()
    h = eng.h
    h.legs[0].journal = h.legs[0].journal.replace(b"ran a", b"ran b")
    row = i4_acknowledged.check(h).evidence["violations"][0]
    assert row["kind"] == "changed" and row["seq"] == 3 and row["found"][0]["excerpt"].startswith('{"seq":3,')
    assert row["found"][0]["length"] == row["ack"]["length"]


def test_records_the_nemesis_cut_away_are_exempt_not_lost():
    eng = Engine([["a", "b"], []])
    eng.leg(kill_after=6)                                       # M, call, A, a, R(a), b
    eng.cut_tail(split_journal(eng.file).lines[2].offset + 3)   # cut inside R(a), the last record
    v = i4_acknowledged.check(eng.finish())
    assert v.status == "valid", v.evidence
    assert [d["seq"] for d in v.evidence["destroyed_by_fault"]] == [3]


def test_two_different_records_acknowledged_at_one_seq_are_caught():
    eng = Engine([["a"], []])
    eng.leg()
    trace = eng.h.legs[0].trace
    last = [e for e in trace if e["op"] == "write"][-1]
    line = base64.b64decode(last["data"]).replace(b"completed", b"suspended")
    trace += [dict(last, n=90, data=base64.b64encode(line).decode()), dict(last, n=91, op="fsync")]
    kinds = [r["kind"] for r in i4_acknowledged.check(eng.h).evidence["violations"]]
    assert "seq_reacknowledged" in kinds


def test_without_any_trace_the_verdict_is_unknown():
    eng = Engine()
    h = eng.finish()
    for leg in h.legs:
        leg.trace = []
    v = i4_acknowledged.check(h)
    assert v.status == "unknown" and v.evidence["reason"] == "no trace"


def test_an_engine_that_never_fsyncs_breaks_the_append_rule_even_though_it_acknowledged_nothing():
    eng = Engine([["a"], []])
    eng.leg(fsync=False)
    v = i4_acknowledged.check(eng.h)
    assert v.status == "invalid"
    rows = v.evidence["violations"]
    assert {r["kind"] for r in rows} == {"append_not_synced"}
    assert rows[0]["n"] == 4 and rows[0]["before"] == "write n=5"
    assert rows[-1]["before"].startswith("close")


def test_a_leg_killed_between_its_write_and_its_fsync_is_not_blamed_for_the_missing_fsync():
    eng = Engine([["a"], []])
    eng.leg(kill_after=3)
    trace = eng.h.legs[0].trace
    assert trace[-1]["op"] == "fsync"
    trace.pop()                                  # died right after the write of A(a)
    v = i4_acknowledged.check(eng.finish())
    assert v.status == "valid", v.evidence


def test_a_journal_the_run_itself_unlinked_retires_its_acknowledged_records():
    eng = Engine([["a"], []])
    leg = eng.leg(kill_after=1)                  # meta written and fsynced
    leg.trace.append({"n": 99, "pid": leg.pid, "op": "unlink", "path": eng.jpath})   # create gave up and removed it
    leg.journal = None
    v = i4_acknowledged.check(eng.h)
    assert v.status == "valid", v.evidence
    assert v.evidence["retired_by_unlink"] == [{"seq": 1, "unlink_leg": 0, "unlink_n": 99}]


# --- a power-loss crash state (History.crash_state, recorded by the power-loss family) ----------------------

def _crash_history(state) -> History:
    """The history of a crash state as the power-loss family records it: the state's facts, no legs."""
    return History(scenario="s", seed=0, schedule=[{"kind": "power_loss", "state": state.id}], run_id="r",
                   crash_state=CrashStateFacts.of(state), journal_template="{state_home}/runs/{run_id}.json")


def test_a_crash_state_judges_the_journal_s_lines_not_the_agent_s_other_files():
    settings = f"{D}/settings.json"
    t = Trace().create().write(rec(1, 300)).create(path=settings, fd=4).write(b"{}\n", fd=4, path=settings)
    t.close(fd=4, path=settings).close()
    found = list(crash_states(t.events, {}, {"/s", D}))
    verdicts = [i4_acknowledged.check(_crash_history(s)) for s in found]
    assert any(v.status == "invalid" for v in verdicts)  # the journal's unsynced line lost: a loss
    assert all(v.evidence["checked"] <= 1 for v in verdicts)  # settings.json's write is no record
    assert all("settings.json" not in json.dumps(v.evidence.get("violations", [])) for v in verdicts)


def test_every_crash_state_of_a_correct_writer_holds_every_acknowledged_write():
    t = Trace().create().append(rec(1, 700), sync_dir=True)
    for i in range(2, 5):
        t.append(rec(i, 300))
    t.close()
    found = list(crash_states(t.events, {}, {"/s", D}))
    verdicts = [i4_acknowledged.check(_crash_history(s)) for s in found]
    assert [v.evidence["summary"] for v in verdicts if v.status != "valid"] == []
    last = verdicts[-1]
    assert last.evidence["checked"] == 4 and last.evidence["state"]["id"] == found[-1].id
    assert last.checker == "harness.checkers.i4_acknowledged"


def test_a_journal_lost_with_an_unsynced_parent_folder_blames_the_folder_s_entry_not_the_journal_s():
    # defect 4: the store folder is made (mkdir -p) but its entry never fsynced in its parent; the journal's own
    # entry is fsynced in the new folder, so what a power loss drops is the folder, and the summary says so
    t = Trace().mkdir(D).create().append(rec(1), sync_dir=True).append(rec(2))
    found = crash_states(t.events, {}, {"/s"})
    bad = [v for v in (i4_acknowledged.check(_crash_history(s)) for s in found) if v.status == "invalid"]
    assert bad
    detail = bad[0].evidence["violations"][0]["detail"]
    assert f"lost mkdir {D}" in detail and "a folder above it" in detail, detail
    own = [v for v in (i4_acknowledged.check(_crash_history(s))          # the journal's own entry unsynced
                       for s in crash_states(Trace().create().append(rec(1)).events, {}, {"/s", D}))
           if v.status == "invalid"]
    assert own and "its directory entry was not made durable: lost create" in own[0].evidence["violations"][0]["detail"]


def test_a_crash_state_of_a_writer_with_no_directory_fsync_loses_an_acknowledged_write():
    t = Trace().create().append(rec(1)).append(rec(2))        # F09: the new journal's name never made durable
    bad = [v for v in (i4_acknowledged.check(_crash_history(s)) for s in crash_states(t.events, {}, {"/s", D}))
           if v.status == "invalid"]
    assert bad
    row = bad[0].evidence["violations"][0]
    assert row["kind"] == "lost" and "the file is gone" in row["detail"]
    assert "acknowledged write(s) missing from crash state" in bad[0].summary
    assert bad[0].evidence["state"]["prefix_n"] >= 1


def test_a_crash_state_round_trips_through_json_to_the_same_verdict():
    t = Trace().create().append(rec(1), sync_dir=True).write(rec(2)).close()
    for state in crash_states(t.events, {}, {"/s", D}):
        h = _crash_history(state)
        again = history_from_json(json.loads(json.dumps(history_to_json(h))))
        assert again.crash_state == h.crash_state
        assert i4_acknowledged.check(again).to_json() == i4_acknowledged.check(h).to_json()


def test_with_a_crash_state_the_legs_are_not_judged_by_the_fsync_rule():
    # The power-loss leg's trace is cut at the crash point, here between a write and its fsync; the
    # crash model, not the fsync rule, says what it had acknowledged.
    t = Trace().create().append(rec(1), sync_dir=True).write(rec(2))
    state = list(crash_states(t.events, {}, {"/s", D}, complete=False))[-1]
    h = _crash_history(state)
    h.legs.append(Leg(index=0, kind="start", argv=[], pid=7, t_start=1, t_end=2, exit_code=0, trace=t.events,
                      journal=state.files.get(D + "/r.json"),
                      fault=Fault(kind="power_loss", at={"event": len(t.events)}, injected=True)))
    v = i4_acknowledged.check(h)
    assert v.status == "valid", v.evidence
    assert "violations" not in v.evidence and v.evidence["state"]["prefix_n"] == len(t.events)


def _io_error_history(after: list[dict], exit_code: int) -> History:
    """One leg whose journal fsync failed with an injected EIO, then ``after`` more trace events."""
    line = b'{"seq":1}\n'
    path = "/s/fisk-ai/runs/r.json"
    trace = [{"n": 1, "pid": 7, "op": "write", "path": path, "fd": 3, "offset": 0, "len": len(line),
              "data": base64.b64encode(line).decode()},
             {"n": 2, "pid": 7, "op": "fsync", "path": path, "fd": 3, "error": "EIO", "fault": "eio"}]
    for n, ev in enumerate(after, start=3):
        trace.append({"n": n, "pid": 7, "path": path, "fd": 3, **ev})
    leg = Leg(index=0, kind="start", argv=["agent"], exit_code=exit_code, trace=trace, journal=line,
              fault=Fault(kind="io_error", at={"event": 1, "op": "fsync", "action": "eio"}, injected=True))
    return History(scenario="s", seed=1, schedule=[], run_id="r", legs=[leg])


def test_a_failed_fsync_retried_into_success_or_a_completed_exit_after_it_is_invalid():
    retried = i4_acknowledged.check(_io_error_history([{"op": "fsync"}], exit_code=1))
    swallowed = [v for v in retried.evidence["violations"] if v["kind"] == "io_error_swallowed"]
    assert retried.status == "invalid" and len(swallowed) == 1 and "EIO" in swallowed[0]["detail"]
    completed = i4_acknowledged.check(_io_error_history([], exit_code=0))
    assert completed.status == "invalid" and "exit 0" in completed.evidence["violations"][0]["detail"]


def test_an_engine_that_stops_at_a_failed_fsync_is_valid():
    v = i4_acknowledged.check(_io_error_history([{"op": "close"}], exit_code=1))
    assert v.status == "valid", v.evidence


_OBSERVED_PATH = "/s/fisk-ai/runs/r.json"


def _observed_append(rec: bytes, *more: dict, **leg_fields) -> Leg:
    """A leg observed from outside that creates the journal, appends ``rec`` and fsyncs it, then makes the
    calls ``more`` (``n`` and ``seq`` given in order); ``leg_fields`` set the Leg's (``journal``, exits)."""
    path = _OBSERVED_PATH
    trace = [{"op": "open", "path": path, "fd": 3, "flags": ["O_WRONLY", "O_CREAT"], "created": True},
             {"op": "write", "path": path, "fd": 3, "offset": 0, "len": len(rec),
              "data": base64.b64encode(rec).decode()},
             {"op": "fsync", "path": path, "fd": 3}, *more]
    trace = [{"n": i, "seq": i, "pid": 7, **ev} for i, ev in enumerate(trace, 1)]
    return Leg(index=0, kind="start", argv=["agent"], trace=trace, **leg_fields)


def test_a_journal_that_changed_in_ways_the_observer_did_not_see_makes_i4_unknown_never_valid():
    from builders import M, lines

    rec = b"".join(lines(M(run_id="r")))

    def observed(data_on_disk: bytes) -> History:
        leg = _observed_append(rec, exit_code=0, journal=data_on_disk)
        return History(scenario="s", seed=1, schedule=[], run_id="r", legs=[leg])

    assert i4_acknowledged.check(observed(rec)).status == "valid"
    hidden = i4_acknowledged.check(observed(rec + b'{"seq":2,"written":"through mmap"}\n'))
    assert hidden.status == "unknown" and hidden.evidence["unobserved"][0]["first_difference"] == len(rec)


def test_a_write_killed_inside_the_kernel_is_decided_from_the_bytes_on_disk_one_verdict_either_way():
    from builders import M, lines

    rec = b"".join(lines(M(run_id="r")))
    nxt = b'{"seq":2,"protocol":"x"}\n'

    def killed_in_write(data_on_disk: bytes) -> History:
        cut = {"op": "write", "path": _OBSERVED_PATH, "fd": 3, "offset": len(rec), "len": 0, "data": "",
               "error": "KILLED", "count": len(nxt)}  # SIGKILL inside: its bytes never logged
        leg = _observed_append(rec, cut, exit_signal="SIGKILL", journal=data_on_disk,
                               fault=Fault(kind="kill", injected=True))
        return History(scenario="s", seed=1, schedule=[], run_id="r", legs=[leg])

    for on_disk in (rec, rec + nxt[:7], rec + nxt):   # the kernel wrote none, some or all of it
        v = i4_acknowledged.check(killed_in_write(on_disk))
        assert v.status == "valid", (len(on_disk), v.evidence)
    beyond = i4_acknowledged.check(killed_in_write(rec + nxt + b"more"))  # more than the call could write
    assert beyond.status == "unknown" and beyond.evidence["unobserved"][0]["first_difference"] == len(rec + nxt)

    def appending(data_on_disk: bytes) -> History:  # an O_APPEND write: the observer logs offset -1 at entry
        cut = {"op": "write", "path": _OBSERVED_PATH, "fd": 3, "offset": -1, "len": 0, "data": "",
               "error": "KILLED", "count": len(nxt)}
        leg = _observed_append(rec, cut, exit_signal="SIGKILL", journal=data_on_disk,
                               fault=Fault(kind="kill", injected=True))
        return History(scenario="s", seed=1, schedule=[], run_id="r", legs=[leg])

    for on_disk in (rec, rec + nxt[:5], rec + nxt):   # (seen in a full Node.js campaign: all 229 bytes written)
        v = i4_acknowledged.check(appending(on_disk))
        assert v.status == "valid", (len(on_disk), v.evidence)


def _observed_leg(index, pid, t_start, t_end, writes, journal, *, fault=None):
    """An observed leg (events carry the observer's ``seq``) writing ``writes`` [(t, offset, bytes)] with an fsync
    after each, and leaving ``journal`` on disk."""
    import base64 as _b64

    from synth import DIR as _DIR

    from harness.history.model import Fault, Leg

    path = f"{_DIR}/r1.json"
    trace = []
    for t, off, data in writes:
        trace.append({"n": len(trace) + 1, "seq": len(trace) + 1, "pid": pid, "op": "write", "t": t, "t0": t,
                      "path": path, "fd": 4, "offset": off, "len": len(data), "data": _b64.b64encode(data).decode()})
        trace.append({"n": len(trace) + 1, "seq": len(trace) + 1, "pid": pid, "op": "fsync", "t": t + 1, "t0": t + 1,
                      "path": path, "fd": 4})
    if not trace:
        trace.append({"n": 1, "seq": 1, "pid": pid, "op": "open", "t": t_start + 1, "t0": t_start + 1,
                      "path": f"{_DIR}/r1.lock", "fd": 3, "flags": ["O_RDWR"]})
    return Leg(index=index, kind="start", argv=[], pid=pid, t_start=t_start, t_end=t_end, exit_code=0,
               trace=trace, journal=journal, fault=fault or Fault())


def test_legs_that_ran_at_once_are_replayed_together_not_one_after_the_other():
    # a race: leg 1 (held) wrote the journal, then leg 0 (its rival) ran to its end and was refused;
    # the snapshot after leg 0 holds leg 1's bytes, which leg 0's own calls do not explain
    from builders import A, M, lines

    m, a = lines(M(), A("a"))
    rival = _observed_leg(0, 11, 200, 300, [], m)
    held = _observed_leg(1, 10, 100, 400, [(150, 0, m), (350, len(m), a)], m + a)
    h = History(scenario="race", seed=1, schedule=[], run_id="r1", legs=[rival, held])
    v = i4_acknowledged.check(h)
    assert v.status == "valid", v.evidence
    held.journal = m + a + b"{}\n"  # a change neither leg's observed calls make: still not judged valid
    v = i4_acknowledged.check(h)
    assert v.status == "unknown" and v.evidence["unobserved"][0]["leg"] == 1


def test_a_recovery_that_destroys_a_line_acknowledged_before_the_power_loss_is_caught():
    from harness.checkers import i4_acknowledged
    from harness.history.model import CrashAck, CrashStateFacts, History, Leg

    line1, line2 = b'{"seq":1}\n', b'{"seq":2}\n'
    path = "/s/fisk-ai/runs/r1.json"
    facts = CrashStateFacts(id="p3.0", prefix_n=3, files={path: line1 + line2 + b'{"se'}, dirs=["/s"],
                            inodes={path: 1}, acks=[CrashAck(path, 0, len(line1), line1, 1, 1),
                                                    CrashAck(path, len(line1), len(line1 + line2), line2, 1, 2)])

    def history(recovered: bytes) -> History:
        legs = [Leg(index=0, kind="start", argv=["a"]), Leg(index=1, kind="resume", argv=["a"], journal=recovered)]
        return History(scenario="s", seed=0, schedule=[], run_id="r1", legs=legs, crash_state=facts)

    assert i4_acknowledged.check(history(line1 + line2 + b'{"seq":3}\n')).status == "valid"   # torn tail cut only
    v = i4_acknowledged.check(history(line1))                       # the repair cut one whole line too many
    assert v.status == "invalid" and [r["kind"] for r in v.evidence["violations"]] == ["lost_by_recovery"]
    assert "destroyed by its recovery" in v.evidence["summary"] and v.evidence["violations"][0]["offset"] == 10


def test_a_write_left_unsynced_is_named_by_its_record():
    from harness.checkers._trace import written_what
    line = b'{"seq":14,"protocol":"io.choria.fisk-ai.v1.session.terminal","terminal":{"reason":"completed"}}\n'
    assert written_what(line) == "record terminal seq 14"
    assert written_what(b'{"n":1,"type":"x"}\n') == "19 bytes" and written_what(b"\x00\x00") == "2 bytes"
