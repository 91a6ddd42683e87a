"""The outside observer's faults (docs/observer.md "Faults"): kills before and after the K-th op, a suspend signal
after it, EIO/ENOSPC/short writes, and pause and release (the target: tests/data/observer_target.py)."""

from __future__ import annotations

import json
import signal
import sys

import psutil
import pytest

from harness.runner.process import kill_tree
from harness.observer import ControlError, spawn_observed
from observer_helpers import TARGET, records, observe, ops_only, root, tracer_works  # noqa: F401


# --- kill faults ----------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3, 6])
def test_kill_before_the_kth_write_leaves_exactly_the_k_minus_1_writes_before_it(root, k):
    proc, log = observe("alternate", root, "10", faults=[f"kill-before@{k}:write"])
    assert proc.returncode == -signal.SIGKILL
    assert (root / "log").read_bytes() == records(k - 1)
    writes = [o for o in ops_only(log) if o.op == "write"]
    assert len(writes) == k and [o.ret for o in writes[:-1]] == [3] * (k - 1)
    assert (writes[-1].ret, writes[-1].fault) == (None, "kill-before")
    assert len({o.tid for o in writes}) == min(k, 2)  # the writes alternate between the two threads


@pytest.mark.parametrize("k", [1, 2, 3, 6])
def test_kill_after_the_kth_write_leaves_exactly_k_writes(root, k):
    proc, log = observe("alternate", root, "10", faults=[f"kill-after@{k}:write"])
    assert proc.returncode == -signal.SIGKILL
    assert (root / "log").read_bytes() == records(k)
    writes = [o for o in ops_only(log) if o.op == "write"]
    assert len(writes) == k and (writes[-1].ret, writes[-1].fault) == (3, "kill-after")
    assert not [o for o in ops_only(log) if o.seq > writes[-1].seq and o.op in ("write", "fsync")]


@pytest.mark.parametrize("k", [7, 40])
def test_a_kill_before_waits_for_the_writes_that_entered_before_it_and_runs_none_after(root, k):
    # two threads write at the same time: whatever got a seq below K completed, K and later never ran
    proc, log = observe("concurrent", root, "60", faults=[f"kill-before@{k}:write"])
    assert proc.returncode == -signal.SIGKILL
    writes = [o for o in ops_only(log) if o.op == "write"]
    assert [o.seq for o in writes] == list(range(2, k + 2))  # seq 1 is the open
    assert all(o.ret == 5 for o in writes[:-1]) and (writes[-1].ret, writes[-1].fault) == (None, "kill-before")
    data = (root / "log").read_bytes()
    assert data == b"".join(o.data for o in sorted(writes[:-1], key=lambda o: o.off))
    assert len(data) == 5 * (k - 1)


@pytest.mark.parametrize(("spec", "out"), [
    ("sigint-after@2:write", "SIGINT 1 0"),    # write 1 is the tool's, 2 the first record: it stops after it
    ("sigterm-after@4:write", "SIGTERM 3 0"),
    ("sigterm-after@1:write", "SIGTERM 0 0"),  # at the tool's write: the program gets it, never the tool
    ("sigint-after@99:write", "none 5 0"),     # no 99th write: nothing sent
])
def test_a_signal_after_fault_sends_the_program_its_suspend_signal_right_after_the_kth_op(root, spec, out):
    proc, log = observe("suspendable", root, "5", faults=[spec])
    assert proc.stdout.read().decode().split() == out.split()
    assert proc.returncode == (0 if out.startswith("none") else 3)
    faulted = [o for o in ops_only(log) if o.fault]
    k = int(spec.split("@")[1].split(":")[0])
    assert [(o.op, o.fault, o.ret) for o in faulted] == ([] if k == 99 else [("write", spec.split("@")[0], 3 if k > 1 else 5)])


@pytest.mark.parametrize(("spec", "content"), [
    ("kill-before@1", b""),          # the open: the file never exists
    ("kill-after@1", b""),           # the open happened
    ("kill-before@3", b"A0\n"),      # before A0's fsync: in the page cache, never acknowledged
    ("kill-after@4", b"A0\nB1\n"),   # open, write, fsync, write
])
def test_kill_faults_count_every_durability_op_by_default(root, spec, content):
    proc, log = observe("alternate", root, "10", faults=[spec])
    assert proc.returncode == -signal.SIGKILL
    path = root / "log"
    assert (path.read_bytes() if path.exists() else None) == (None if spec == "kill-before@1" else content)
    faulted = [o for o in ops_only(log) if o.fault]
    assert len(faulted) == 1 and faulted[0].seq == int(spec.split("@")[1])


# --- error faults -----------------------------------------------------------------------------------


def _errors_run(root, faults):
    proc, log = observe("errors", root, faults=faults)
    assert proc.returncode == 0
    return json.loads(proc.stdout.read()), (root / "e").read_bytes(), ops_only(log)


def test_eio_skips_the_call_and_the_program_sees_EIO(root):
    seen, data, ops = _errors_run(root, ["eio@2"])
    assert seen == [5, 100, None] and data == b"b" * 60 + b"c" * 40
    assert (ops[1].op, ops[1].ret, ops[1].errno, ops[1].fault, ops[1].len) == ("write", -1, 5, "eio", 0)


def test_an_error_fault_with_a_path_glob_counts_only_the_calls_on_the_files_it_matches(root):
    seen, data, ops = _errors_run(root, ["eio@2=*/e"])           # the 2nd durability call on .../e: as eio@2
    assert seen == [5, 100, None] and (ops[1].op, ops[1].fault) == ("write", "eio")
    (root / "again").mkdir()
    clean = _errors_run(root / "again", ["eio@1:write=*/not-e"])  # no call on such a file: nothing injected
    assert clean[0] == [100, 100, None] and not any(o.fault for o in clean[2])
    (root / "store").mkdir()                                      # a store: every file below its folder
    below = _errors_run(root / "store", [f"enospc@1:fsync,fdatasync={root / 'store'}/*"])
    assert below[0] == [100, 100, 28] and [o.fault for o in below[2] if o.fault] == ["enospc"]
    (root / "again" / "other").mkdir()                             # (its own log: again/log)
    assert not any(o.fault for o in _errors_run(root / "again" / "other", [f"eio@1={root / 'store'}/*"])[2])


def test_enospc_on_an_fsync(root):
    seen, data, ops = _errors_run(root, ["enospc@1:fsync"])
    assert seen == [100, 100, 28] and len(data) == 200
    assert (ops[3].op, ops[3].errno, ops[3].fault) == ("fsync", 28, "enospc")


def test_a_short_write_puts_half_the_bytes_and_the_next_write_to_the_file_fails_with_ENOSPC(root):
    seen, data, ops = _errors_run(root, ["short-write@1:write"])
    assert seen == [50, 28, None] and data == b"a" * 50
    assert (ops[1].ret, ops[1].len, ops[1].data, ops[1].fault) == (50, 50, b"a" * 50, "short-write")
    assert (ops[2].ret, ops[2].errno, ops[2].fault) == (-1, 28, "short-write")


def test_a_short_writev_writes_the_first_half_across_its_buffers(root):
    seen, data, ops = _errors_run(root, ["short-write@2:write"])
    assert seen == [100, 50, None] and data == b"a" * 100 + b"b" * 50
    assert (ops[2].off, ops[2].data) == (100, b"b" * 50)


# --- pause and release ---------------------------------------------------------------------------------


@pytest.mark.parametrize("first", ["parent", "child"])
def test_pause_and_release_order_two_processes_deterministically(root, first):
    # both writes pause at their entry; the first write or fsync after them (K=3) pauses too, which says
    # the released write completed
    proc = spawn_observed([sys.executable, TARGET, "race", str(root)], env=None, log=root.parent / "log",
                          roots=[root], faults=["pause@1:write", "pause@2:write", "pause@3:write,fsync"],
                          control=True)
    try:
        paused = [proc.wait_paused(10), proc.wait_paused(10)]
        assert sorted(p.k for p in paused) == [1, 2] and all(p.op == "write" for p in paused)
        main = psutil.Process(proc.pid).children()[0].pid
        chosen = next(p for p in paused if (p.pid == main) == (first == "parent"))
        other = next(p for p in paused if p is not chosen)
        proc.release(chosen.k)
        third = proc.wait_paused(10)
        assert (third.k, third.op, third.pid) == (3, "fsync", chosen.pid)
        proc.release(other.k)
        proc.release(3)
        assert proc.wait(10) == 0
    finally:
        kill_tree(proc)
    second = "child" if first == "parent" else "parent"
    assert (root / "shared").read_bytes() == f"{first}\n{second}\n".encode()
    faults = [o.fault for o in ops_only(proc.ops()) if o.fault]
    assert faults == ["pause", "pause", "pause"]


def test_wait_paused_without_a_control_channel_is_an_error(root):
    proc, _ = observe("exit7", root)
    with pytest.raises(ControlError):
        proc.wait_paused(1)




# --- announced waits (a race's rival: harness.runner.leg.waits_on_kept_lock) ------------------------------------

_LOCKER = """import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    print("busy", flush=True)
fcntl.flock(fd, fcntl.LOCK_EX)
"""


def test_a_lock_call_that_may_wait_is_announced_and_one_that_cannot_is_not(root):
    import fcntl
    import os

    from harness.runner.locks import kept_by_others, process_tree

    path = root / "run.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # this process keeps it: the program's LOCK_NB fails, its plain flock waits
    proc = spawn_observed([sys.executable, "-c", _LOCKER, str(path)], env=None, log=root.parent / "log",
                          roots=[root], control=True, announce_waits=True, lookups=False)
    try:
        waits = proc.wait_waits(30)  # (a guard: the line comes at the call's entry)
        assert waits is not None and (waits.op, waits.path) == ("flock", str(path))
        assert kept_by_others(waits.path, waits.op, process_tree(proc.pid)) == [os.getpid()]
        os.close(fd)  # let go: the waiting call returns and the program ends
        assert proc.wait_waits(30) is None and proc.wait(30) == 0
    finally:
        kill_tree(proc)
    flocks = [o for o in ops_only(proc.ops()) if o.op == "flock"]
    assert [o.seq < waits.seq for o in flocks] == [True, False] and flocks[0].errno == 11  # EWOULDBLOCK


def test_announcing_waits_needs_the_control_channel_and_no_pause(root):
    from harness.observer import FaultSpecError

    for kw in ({}, {"control": True, "faults": ["pause@1:write"]}):
        with pytest.raises(FaultSpecError):
            spawn_observed(["true"], log=root.parent / "log", roots=[root], announce_waits=True, **kw)
