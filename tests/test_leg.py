"""The leg runner's faults as data (harness.runner.faults), and process-tree kills that leave nothing behind
(harness.runner.process, harness.runner.leg.drive)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.runner.faults import (NOOP, fault_for_leg, history_fault, seam_fault, validate_fault,
                                             validate_schedule)
from harness.runner.leg import drive
from harness.runner.process import enable_subreaper, kill_tree

# A process tree: the agent starts a child, which starts a grandchild; each prints its pid and sleeps.
TREE = r"""
import os, subprocess, sys, time
depth = int(sys.argv[1])
if depth > 0:
    subprocess.Popen([sys.executable, "-c", sys.argv[2], str(depth - 1), sys.argv[2]])
print(os.getpid(), flush=True)
time.sleep(60)
"""

# An agent that suspends cleanly: SIGINT or SIGTERM makes it exit 3.
SUSPENDER = r"""
import signal, sys, time
def done(*_): sys.exit(3)
signal.signal(signal.SIGINT, done)
signal.signal(signal.SIGTERM, done)
print("ready", flush=True)
time.sleep(60)
sys.exit(0)
"""

# An agent that starts a long child and then SIGKILLs itself (like an IO-seam kill with a tool running).
SELF_KILLER = r"""
import os, signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(child.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture(autouse=True)
def subreaper():
    enable_subreaper()


def start(code: str, *args: str, stdout=subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=stdout, start_new_session=True)


def read_pids(proc: subprocess.Popen, count: int) -> list[int]:
    return [int(proc.stdout.readline()) for _ in range(count)]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def leftovers(pids: list[int]) -> list[tuple[int, str]]:
    """Processes among ``pids`` that still exist at all (running or zombie)."""
    out = []
    for pid in pids:
        try:
            out.append((pid, psutil.Process(pid).status()))
        except psutil.NoSuchProcess:
            pass
    return out


def test_faults_are_normalized_and_bad_ones_refused():
    assert validate_fault({"kind": "kill", "after_ms": 3}) == {"kind": "kill", "after_ms": 3.0}
    assert validate_fault({"kind": "kill", "event": 4}) == {"kind": "kill", "event": 4, "when": "after"}
    assert validate_fault({"kind": "suspend", "after_ms": 1}) == {"kind": "suspend", "signal": "SIGINT",
                                                                   "after_ms": 1.0}
    assert validate_fault({"kind": "none", "after_ms": 5}) == {"kind": "none"}
    for bad in ({"kind": "flood"}, {"kind": "kill"}, {"kind": "kill", "event": 0}, {"kind": "kill", "after_ms": -1},
                {"kind": "suspend", "signal": "SIGHUP", "after_ms": 1}, {"kind": "kill", "event": 2, "when": "never"},
                "kill"):
        with pytest.raises(ValueError):
            validate_fault(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        validate_schedule({"kind": "kill"})  # type: ignore[arg-type]
    # a typo or an unknown call is named, never run as a fault that silently does something else
    for bad, says in (({"kind": "suspend", "evnt": 5}, "has no key 'evnt'"),
                      ({"kind": "kill", "event": 3, "op": "nonsense"}, 'got "nonsense"'),
                      ({"kind": "suspend", "event": 2, "after_ms": 1}, "either 'event' or 'after_ms'"),
                      ({"kind": "kill", "event": True}, "got true")):
        with pytest.raises(ValueError, match=says):
            validate_fault(bad)
    with pytest.raises(ValueError, match="leg 1's fault"):
        validate_schedule([{"kind": "none"}, {"kind": "kill", "event": 0}])
    assert validate_fault({"kind": "suspend", "signal": "SIGTERM", "event": 2, "op": "fsync_dir"}) == {
        "kind": "suspend", "signal": "SIGTERM", "event": 2, "when": "after", "op": "fsync_dir"}


def test_legs_past_the_schedule_get_no_fault_and_the_noop_nemesis_is_empty():
    assert NOOP == []
    schedule = [{"kind": "kill", "event": 3}]
    assert fault_for_leg(schedule, 0) == {"kind": "kill", "event": 3}
    assert fault_for_leg(schedule, 1) == {"kind": "none"}


def test_event_kills_become_io_seam_fault_strings():
    assert seam_fault({"kind": "kill", "event": 12}) == "kill-after@12"
    assert seam_fault({"kind": "kill", "event": 2, "when": "before", "op": "fsync"}) == "kill-before@2:fsync"
    assert seam_fault({"kind": "kill", "after_ms": 1.0}) is None
    assert seam_fault({"kind": "suspend", "after_ms": 1.0}) is None


def test_history_faults_record_what_and_when():
    f = history_fault({"kind": "suspend", "signal": "SIGTERM", "after_ms": 2.5}, injected=True)
    assert (f.kind, f.signal, f.at, f.injected) == ("suspend", "SIGTERM", {"after_ms": 2.5}, True)
    f = history_fault({"kind": "kill", "event": 7, "when": "after"})
    assert (f.kind, f.signal, f.at, f.injected) == ("kill", "SIGKILL", {"event": 7, "when": "after"}, False)


def test_killing_a_process_tree_leaves_no_process_and_no_zombie_behind():
    proc = start(TREE, "2", TREE)
    pids = read_pids(proc, 3)  # grandchild, child, agent: in whatever order they print
    assert all(alive(p) for p in pids)
    killed = kill_tree(proc)
    assert set(pids) <= set(killed)
    assert proc.returncode == -signal.SIGKILL
    assert leftovers(pids) == []
    assert [c for c in psutil.Process().children(recursive=True) if c.pid in pids] == []
    proc.stdout.close()


def test_a_timed_kill_is_delivered_to_the_whole_tree_and_reported():
    proc = start(TREE, "1", TREE)
    pids = read_pids(proc, 2)
    t0 = time.monotonic()
    outcome = drive(proc, {"kind": "kill", "after_ms": 50.0}, t0=t0, timeout=30)
    assert outcome.injected and outcome.exit_signal == "SIGKILL" and outcome.returncode is None
    assert not outcome.timed_out
    assert time.monotonic() - t0 < 10
    assert leftovers(pids) == []
    proc.stdout.close()


def test_a_fault_due_after_the_exit_is_not_injected():
    proc = start("import sys; sys.exit(0)", stdout=None)
    outcome = drive(proc, {"kind": "kill", "after_ms": 5000.0}, t0=time.monotonic(), timeout=30)
    assert outcome.returncode == 0 and outcome.exit_signal is None and not outcome.injected


def test_a_kill_sent_as_the_leg_was_ending_by_itself_is_not_injected(monkeypatch):
    import harness.runner.leg as leg_module

    proc = start("import sys; sys.exit(0)", stdout=None)
    proc.wait()                                                          # it has ended (not yet reaped by drive)
    monkeypatch.setattr(leg_module, "wait_for_exit", lambda p, t: p.returncode is not None and t > 0.5)
    outcome = drive(proc, {"kind": "kill", "after_ms": 1.0}, t0=time.monotonic(), timeout=30)
    assert outcome.returncode == 0 and outcome.exit_signal is None
    assert not outcome.injected and outcome.fault_t is None              # no live leg was killed: no reproducer


def test_a_suspend_signals_the_agent_and_waits_for_its_clean_exit():
    proc = start(SUSPENDER)
    assert proc.stdout.readline() == b"ready\n"
    outcome = drive(proc, {"kind": "suspend", "signal": "SIGTERM", "after_ms": 0.0}, t0=time.monotonic(),
                    timeout=30)
    assert outcome.injected and outcome.returncode == 3 and outcome.exit_signal is None
    proc.stdout.close()


def test_a_hung_leg_is_killed_at_its_deadline():
    proc = start(TREE, "1", TREE)
    pids = read_pids(proc, 2)
    t0 = time.monotonic()
    outcome = drive(proc, {"kind": "none"}, t0=t0, timeout=0.3)
    assert outcome.timed_out and outcome.exit_signal == "SIGKILL" and not outcome.injected
    assert 0.25 < time.monotonic() - t0 < 10
    assert leftovers(pids) == []
    proc.stdout.close()


def test_the_orphans_of_an_agent_that_killed_itself_are_killed_and_reaped():
    proc = start(SELF_KILLER)
    [orphan] = read_pids(proc, 1)
    outcome = drive(proc, {"kind": "kill", "event": 5}, t0=time.monotonic(), timeout=30)
    assert outcome.exit_signal == "SIGKILL" and outcome.injected  # an event kill is the agent's own SIGKILL
    assert leftovers([orphan]) == []
    proc.stdout.close()


def test_no_process_is_left_after_many_kills():
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    for delay in (0.0, 1.0, 5.0, 20.0):
        proc = start(TREE, "2", TREE, stdout=subprocess.DEVNULL)
        drive(proc, {"kind": "kill", "after_ms": delay}, t0=time.monotonic(), timeout=30)
    after = {c.pid for c in psutil.Process().children(recursive=True)}
    assert after - before == set()


def test_a_hold_and_an_io_error_are_leg_faults_the_observer_applies_from_outside():
    from harness.runner.leg import HOLD_KINDS, journal_glob, observer_faults

    assert validate_fault({"kind": "hold", "at": 3}) == {"kind": "hold", "at": 3}
    assert observer_faults({"kind": "hold", "at": 3}) == [f"pause@3:{HOLD_KINDS}"]
    io = validate_fault({"kind": "io_error", "action": "eio", "event": 2, "op": "fsync"})
    assert observer_faults(io) == ["eio@2:fsync,fdatasync"] and seam_fault(io) == "eio@2:fsync"
    assert observer_faults(io, "*/r.jsonl") == ["eio@2:fsync,fdatasync=*/r.jsonl"]  # the K-th fsync of the journal
    assert journal_glob(Path("/s/runs/r-*.jsonl"), False) == "*/r-*.jsonl"
    assert journal_glob(Path("/s/lg[1]"), True) == os.path.realpath("/s/lg") + "[[]1]/*"  # every file below a store
    for bad in ({"kind": "hold", "at": 0}, {"kind": "hold"}, {"kind": "io_error", "action": "boom", "event": 1,
                                                              "op": "fsync"},
                {"kind": "io_error", "action": "eio", "event": 1, "op": "rename"}):
        with pytest.raises(ValueError):
            validate_fault(bad)


def test_a_reading_command_s_whole_output_is_parsed_however_long_and_only_its_tail_is_kept(tmp_path):
    import json as _json
    import sys as _sys

    from harness.history.readers import READING_KEEP, parse_reading
    from harness.runner.starter import LegStarter
    from harness.subject.contract import parse_subject

    big = {"status": "open", "messages": ["x" * 100] * 1000, "records": 3}
    script = f"import json; print(json.dumps({big!r}, indent=2))"
    starter = LegStarter(parse_subject("agent"), fork_server=False)
    raw = starter.read([_sys.executable, "-c", script], {"PATH": "/usr/bin:/bin"}, tmp_path, "big")
    assert raw["exit_code"] == 0 and len(raw["stdout"]) > 100_000
    reading = parse_reading(raw, (("status", "status"), ("records", "records")))
    assert reading["error"] is None and reading["status"] == "open" and reading["records"] == 3
    assert len(reading["stdout"]) == READING_KEEP and _json.loads(_json.dumps(reading))


def test_a_timed_fault_records_where_it_landed_and_an_early_suspend_is_counted_as_the_kill_it_was():
    from harness.report.reproduce import exact_schedule
    from harness.history.model import Fault, Leg
    from harness.runner.leg import landed
    trace = [{"n": n, "pid": 7, "op": "write", "t": 100 * n} for n in range(1, 6)]
    leg = Leg(index=0, kind="start", argv=[], pid=7, trace=trace, exit_code=None, exit_signal="SIGKILL",
              fault=Fault(kind="kill", signal="SIGKILL", at={"after_ms": 3.0}, injected=True))
    landed(leg, 350)
    assert leg.fault.detail["landed_after_event"] == 3 and leg.fault.kind == "kill"
    # its replay: the same calls done, then the kill: op-counted, so it lands there every time
    assert exact_schedule([{"kind": "kill", "after_ms": 3.0}], [leg]) == [{"kind": "kill", "event": 4, "when": "before"}]
    early = Leg(index=0, kind="start", argv=[], pid=7, trace=[], exit_code=None, exit_signal="SIGINT",
                fault=Fault(kind="suspend", signal="SIGINT", at={"after_ms": 0.0}, injected=True))
    landed(early, 5)
    assert early.fault.kind == "kill" and early.fault.detail["scheduled"] == "suspend"
    assert early.fault.detail["landed_after_event"] == 0
    late = Leg(index=0, kind="start", argv=[], pid=7, trace=trace, exit_code=1,
               fault=Fault(kind="suspend", signal="SIGINT", at={"after_ms": 9.0}, injected=True))
    landed(late, 900)
    assert late.fault.kind == "suspend" and late.fault.detail["honoured"] is False
    # a suspend that stayed a suspend keeps its time in the replay
    assert exact_schedule([{"kind": "suspend", "after_ms": 9.0}], [late]) == [{"kind": "suspend", "after_ms": 9.0}]


def test_the_calls_an_event_fault_may_count_are_the_io_seam_s_ops():
    from fiskj.ioseam import OPS
    from harness.runner.faults import EVENT_OPS

    assert EVENT_OPS == OPS


def test_waiting_for_a_process_leaves_no_descriptor_behind():
    # a campaign waits for thousands of processes (legs, readings, reader children): a pidfd left open each
    # ran the harness past FD_SETSIZE, where select() failed and held race legs hung (issue 26 trial)
    from harness.runner.process import wait_for_exit

    def pidfds() -> int:
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                n += os.readlink(f"/proc/self/fd/{fd}").startswith("anon_inode:[pidfd]")
            except OSError:  # the descriptor listdir itself used, closed since
                pass
        return n

    before = pidfds()
    for _ in range(20):
        proc = subprocess.Popen(["true"])
        assert not wait_for_exit(proc, 0) or proc.returncode == 0   # a first look opens the pidfd
        assert wait_for_exit(proc, 10)
    assert pidfds() == before


def test_a_hold_the_tracer_cannot_report_is_the_harness_s_error_never_a_hang_charged_to_the_subject():
    from harness.observer.errors import ControlError, ControlTimeout
    from harness.runner.leg import _hold

    class Proc:
        def __init__(self, exc):
            self.exc = exc

        def wait_paused(self, timeout):
            if self.exc:
                raise self.exc

    assert _hold(Proc(None), 1.0) is True
    assert _hold(Proc(ControlError("the tracer closed its control channel")), 1.0) is False  # the leg ended
    assert _hold(Proc(ControlTimeout("no thread paused")), 1.0) is False                   # it hung first
    with pytest.raises(ValueError):                                                         # the harness failed
        _hold(Proc(ValueError("filedescriptor out of range in select()")), 1.0)


def test_a_leg_records_an_opaque_store_as_a_snapshot_of_its_files_and_resumes_a_store_that_holds_any(tmp_path):
    from harness.history.journal_location import store_files
    from harness.names import OPAQUE
    from harness.runner.leg import start_or_resume
    from harness.subject.contract import journal_bytes

    store = tmp_path / "lg"
    assert journal_bytes(store) is None and start_or_resume(journal_bytes(store), OPAQUE) == "start"
    (store / "sub").mkdir(parents=True)
    assert not journal_bytes(store) and start_or_resume(journal_bytes(store), OPAQUE) == "start"  # no file: nothing
    (store / "c.db").write_bytes(b"db")
    (store / "sub" / "c.db-wal").write_bytes(b"")
    (store / "c.db-shm").write_bytes(b"index")  # no durable state: left out
    assert store_files(journal_bytes(store)) == {"c.db": b"db", "sub/c.db-wal": b""}
    assert start_or_resume(journal_bytes(store), OPAQUE) == "resume"
    assert journal_bytes(store / "c.db") == b"db" and journal_bytes(tmp_path / "none.json") is None


def test_two_threads_reading_one_state_at_once_start_one_reading_and_get_its_result(tmp_path):
    # One reading per distinct state even when two trials of one state ask together: the second waits for the
    # first's process (held until the test lets it end) and takes its result, instead of starting its own.
    import sys as _sys
    import threading

    from harness.runner.starter import LegStarter
    from harness.subject.contract import parse_subject

    count, go = tmp_path / "count", tmp_path / "go"
    script = (f"import os, time\nopen({str(count)!r}, 'a').write('x')\n"
              f"while not os.path.exists({str(go)!r}): time.sleep(0.01)\nprint('{{\"status\": \"open\"}}')")
    starter = LegStarter(parse_subject("agent"), fork_server=False)
    got: dict[str, dict] = {}

    def ask(name: str) -> None:
        work = tmp_path / name
        work.mkdir()
        got[name] = starter.read([_sys.executable, "-c", script], {"PATH": "/usr/bin:/bin"}, work, "0",
                                 state=("files", b"journal"))

    a = threading.Thread(target=ask, args=("a",))
    a.start()
    deadline = time.monotonic() + 30
    while not count.exists() and time.monotonic() < deadline:   # a's reading runs and is held
        time.sleep(0.01)
    b = threading.Thread(target=ask, args=("b",))
    b.start()
    b.join(1.0)   # b is waiting on a's reading (a reading of its own would have counted a second start by now)
    started_while_held = count.read_text()
    go.touch()
    a.join(30)
    b.join(30)
    assert started_while_held == "x" and count.read_text() == "x"
    assert got["a"]["stdout"] == got["b"]["stdout"] == '{"status": "open"}\n' and got["b"]["exit_code"] == 0
