"""I8 one writer at a time: lock spans from traces, whole lines in every snapshot."""

import base64

from builders import A, M, R, T, lines
from synth import DIR, Engine

from harness.checkers import i8_one_writer
from harness.history.model import History, Leg

LOCK, JOURNAL = f"{DIR}/r1.lock", f"{DIR}/r1.json"


def _writer(index, pid, t_start, t_end, writes, *, lock_t=None, lock_error=None, timed=True, unlock_t=None):
    """A leg whose trace takes the lock at ``lock_t`` (None: never tries) and writes ``writes`` [(t, bytes)]."""
    trace = []

    def ev(op, t, **kw):
        e = {"n": len(trace) + 1, "pid": pid, "op": op, **kw}
        if timed:
            e["t"] = t
        trace.append(e)
    if lock_t is not None:
        ev("open", lock_t - 1, path=LOCK, fd=3, flags=["O_RDWR", "O_CREAT"])
        ev("flock", lock_t, path=LOCK, fd=3, operation=["LOCK_EX", "LOCK_NB"], **({"error": lock_error} if lock_error else {}))
    if writes:
        ev("open", writes[0][0] - 1, path=JOURNAL, fd=4, flags=["O_RDWR", "O_APPEND"])
    for t, data in writes:
        ev("write", t, fd=4, path=JOURNAL, offset=0, len=len(data), data=base64.b64encode(data).decode())
        ev("fsync", t + 1, fd=4, path=JOURNAL)
    if lock_t is not None and unlock_t is not None:
        ev("close", unlock_t, path=LOCK, fd=3)
    return Leg(index=index, kind="resume", argv=[], pid=pid, t_start=t_start, t_end=t_end, exit_code=0, trace=trace)


def _history(*legs, journal=b""):
    for leg in legs:
        leg.journal = journal
    return History(scenario="race", seed=3, schedule=[], run_id="r1", legs=list(legs))


def test_sequential_legs_of_a_correct_engine_have_one_writer():
    eng = Engine()
    eng.leg(kill_after=4, torn=True)
    eng.leg(suspend_at=1)
    v = i8_one_writer.check(eng.finish())
    assert v.status == "valid", v.evidence
    assert v.evidence["concurrent_writer_pairs"] == 0 and v.evidence["journal_changes"] > 0


def test_a_second_writer_refused_by_the_lock_while_the_first_appends_is_valid():
    m, a, r = lines(M(), A("a"), R("a"))
    first = _writer(0, 10, 100, 200, [(150, a), (170, r)], lock_t=110, unlock_t=190)
    second = _writer(1, 11, 120, 130, [], lock_t=125, lock_error="EWOULDBLOCK")
    v = i8_one_writer.check(_history(first, second, journal=m + a + r))
    assert v.status == "valid", v.evidence


def test_two_writers_holding_the_lock_at_once_with_interleaved_lines_are_caught():
    m, a, r, t = lines(M(), A("a"), R("a"), T())
    first = _writer(0, 10, 100, 200, [(150, a), (170, r)], lock_t=110, unlock_t=190)
    second = _writer(1, 11, 120, 210, [(160, t)], lock_t=125, unlock_t=205)   # the lock did not exclude it
    torn_a = a[:40] + t + a[40:]                                                # the second's line lands inside
    v = i8_one_writer.check(_history(first, second, journal=m + torn_a + r))
    assert v.status == "invalid"
    kinds = [x["kind"] for x in v.evidence["violations"]]
    assert kinds[0] == "broken_line" and "lock_overlap" in kinds and "write_under_foreign_lock" in kinds
    broken = v.evidence["violations"][0]
    assert broken["line"] == 2 and broken["offset"] == len(m) and broken["envelopes"] == 2
    overlap = next(x for x in v.evidence["violations"] if x["kind"] == "lock_overlap")
    assert overlap["legs"] == [0, 1]


def test_a_journal_write_without_the_lock_is_caught():
    m, a = lines(M(), A("a"))
    leg = _writer(0, 10, 100, 200, [(150, a)], lock_t=None)
    v = i8_one_writer.check(_history(leg, journal=m + a))
    (row,) = [x for x in v.evidence["violations"] if x["kind"] == "write_without_lock"]
    assert row["leg"] == 0 and row["op"] == "write" and row["n"] == 2
    assert {x["kind"] for x in v.evidence["violations"]} <= {"write_without_lock", "fsync_without_lock",
                                                             "close_without_lock"}


def test_a_write_after_the_lock_was_released_is_caught():
    m, a, r = lines(M(), A("a"), R("a"))
    leg = _writer(0, 10, 100, 200, [(150, a), (170, r)], lock_t=110, unlock_t=160)
    leg.trace.sort(key=lambda e: e["t"])
    for n, e in enumerate(leg.trace, 1):
        e["n"] = n
    v = i8_one_writer.check(_history(leg, journal=m + a + r))
    (row,) = [x for x in v.evidence["violations"] if x["kind"] == "write_without_lock"]
    assert row["t"] == 170


def test_concurrent_writers_without_event_times_are_unknown():
    m, a, r = lines(M(), A("a"), R("a"))
    first = _writer(0, 10, 100, 200, [(150, a)], lock_t=110, unlock_t=190, timed=False)
    second = _writer(1, 11, 120, 210, [(160, r)], lock_t=125, unlock_t=205, timed=False)
    v = i8_one_writer.check(_history(first, second, journal=m + a + r))
    assert v.status == "unknown" and v.evidence["undecided"][0]["legs"] == [0, 1]


def test_concurrent_legs_with_no_trace_at_all_are_unknown():
    m, a = lines(M(), A("a"))
    first = Leg(index=0, kind="start", argv=[], pid=1, t_start=100, t_end=200, exit_code=0)
    second = Leg(index=1, kind="resume", argv=[], pid=2, t_start=150, t_end=250, exit_code=0)
    assert i8_one_writer.check(_history(first, second, journal=m + a)).status == "unknown"


def _record_locker(cmd, closes_other_fd):
    """A writer that takes the run lock with fcntl ``cmd`` on fd 3, maybe opens and closes the lock file again
    (fd 5) while it holds it, then appends two records."""
    m, a, r = lines(M(), A("a"), R("a"))
    trace = []

    def ev(op, t, **kw):
        trace.append({"n": len(trace) + 1, "pid": 10, "op": op, "t": t, **kw})
    ev("open", 100, path=LOCK, fd=3, flags=["O_RDWR", "O_CREAT"])
    ev("lock", 101, path=LOCK, fd=3, cmd=cmd, operation=["F_WRLCK"])
    if closes_other_fd:   # e.g. reading the holder's pid back from the lock file
        ev("open", 102, path=LOCK, fd=5, flags=["O_RDONLY"])
        ev("close", 103, path=LOCK, fd=5)
    ev("open", 104, path=JOURNAL, fd=4, flags=["O_RDWR", "O_APPEND"])
    for t, data in ((110, a), (120, r)):
        ev("write", t, fd=4, path=JOURNAL, offset=0, len=len(data), data=base64.b64encode(data).decode())
        ev("fsync", t + 1, fd=4, path=JOURNAL)
    leg = Leg(index=0, kind="resume", argv=[], pid=10, t_start=99, t_end=200, exit_code=0, trace=trace)
    return _history(leg, journal=m + a + r)


def test_a_posix_record_lock_is_dropped_by_closing_any_descriptor_of_the_lock_file():
    # the lockf bug class, seen from outside: the kernel dropped the lock at the close of fd 5
    v = i8_one_writer.check(_record_locker("F_SETLK", closes_other_fd=True))
    assert v.status == "invalid"
    assert {row["kind"] for row in v.evidence["violations"]} == {"write_without_lock", "fsync_without_lock"}
    assert [row["t"] for row in v.evidence["violations"] if row["kind"] == "write_without_lock"] == [110, 120]


def test_a_writer_that_releases_the_lock_before_its_last_fsync_or_close_is_caught():
    m, a, r = lines(M(), A("a"), R("a"))
    trace = []

    def ev(op, t, **kw):
        trace.append({"n": len(trace) + 1, "pid": 10, "op": op, "t": t, **kw})
    ev("open", 100, path=LOCK, fd=3, flags=["O_RDWR", "O_CREAT"])
    ev("flock", 101, path=LOCK, fd=3, operation=["LOCK_EX", "LOCK_NB"])
    ev("open", 102, path=JOURNAL, fd=4, flags=["O_RDWR", "O_APPEND"])
    ev("write", 110, fd=4, path=JOURNAL, offset=len(m), len=len(a), data=base64.b64encode(a).decode())
    ev("fsync", 111, fd=4, path=JOURNAL)
    ev("close", 112, fd=3, path=LOCK)       # the lock goes...
    ev("close", 113, fd=4, path=JOURNAL)    # ...before the journal's descriptor
    leg = Leg(index=0, kind="resume", argv=[], pid=10, t_start=99, t_end=200, exit_code=0, trace=trace)
    v = i8_one_writer.check(_history(leg, journal=m + a))
    assert v.status == "invalid"
    (row,) = v.evidence["violations"]
    assert row["kind"] == "close_without_lock" and row["n"] == 7
    trace[5], trace[6] = {**trace[6], "n": 6}, {**trace[5], "n": 7}   # journal closed first: as it must be
    assert i8_one_writer.check(_history(leg, journal=m + a)).status == "valid"


def test_record_locks_kept_whole_and_open_file_description_locks_are_held_like_flock():
    assert i8_one_writer.check(_record_locker("F_SETLKW", closes_other_fd=False)).status == "valid"
    assert i8_one_writer.check(_record_locker("F_OFD_SETLK", closes_other_fd=True)).status == "valid"


def test_a_second_writer_that_waits_in_flock_until_it_is_killed_is_caught_and_a_refused_one_is_not():
    # docs/spec.md section 10, rule 2: a busy lock is RunLocked at once (the blocking-lock mutant waits instead)
    m, a, r = lines(M(), A("a"), R("a"))
    first = _writer(0, 10, 100, 200, [(150, a), (170, r)], lock_t=110, unlock_t=190)
    waiting = _writer(1, 11, 120, 300, [], lock_t=125, lock_error="KILLED")
    waiting.timed_out, waiting.exit_code, waiting.exit_signal = True, None, "SIGKILL"
    v = i8_one_writer.check(_history(first, waiting, journal=m + a + r))
    assert v.status == "invalid", v.evidence
    (found,) = v.evidence["violations"]
    assert found["kind"] == "waited_for_lock" and found["leg"] == 1 and found["op"] == "flock"
    held = next(ev for ev in waiting.trace if ev.get("op") == "flock")
    held["fault"] = "pause"    # the harness held it there (a race's sequence point): the wait was the harness's
    assert i8_one_writer.check(_history(first, waiting, journal=m + a + r)).status == "valid"
    del held["fault"]
    waiting.timed_out = False  # killed inside the call by a fault, not left hanging: not a wait on the lock
    assert i8_one_writer.check(_history(first, waiting, journal=m + a + r)).status == "valid"
