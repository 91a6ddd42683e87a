"""The outside observer (harness/observer, docs/observer.md): a ptrace + seccomp tracer in C.

The program under the tracer is tests/data/observer_target.py (one mode per
scenario; threads and processes ordered by joins and semaphores, never sleeps).
Each test runs it once or a few times (a run costs 0.1-0.3 s).  This file: what the log holds, and exit status
and signals; faults are in test_observer_faults.py, the differential checks against strace and the IO seam in
test_observer_differential.py, the log format and the build in test_observer_format.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import psutil
import pytest

from harness.runner.process import enable_subreaper, kill_tree
from harness.observer import Op, spawn_observed
from observer_helpers import TARGET, records, observe, ops_only, rel, root, tracer_works  # noqa: F401


# --- the log holds exactly the program's ops -----------------------------------------------------


def test_the_log_holds_exactly_the_ops_under_the_root_in_entry_order_with_paths_offsets_bytes_and_flags(root):
    proc, log = observe("basic", root)
    assert proc.returncode == 0, proc.stderr.read()
    main = int(proc.stdout.read().split()[0])
    ops = ops_only(log)
    got = [(o.seq, o.op, rel(o, root)) for o in ops]
    assert got == [
        (1, "open", "f"), (2, "write", "f"), (3, "write", "f"), (4, "write", "f"), (5, "fsync", "f"),
        (6, "flock", "f"), (7, "open", "."), (8, "fsync", "."), (9, "close", "."),
        (10, "write", "f"), (11, "fdatasync", "f"), (12, "write", "f"), (13, "fdatasync", "f"),
        (14, "mkdir", "d"), (15, "open", "d/c"), (16, "write", "d/c"), (17, "close", "d/c"),
        (18, "stat", "d/c"), (19, "rename", "f"), (20, "open", "missing"), (21, "flock", "g"),
        (22, "close", "g"), (23, "unlink", "d/c"), (24, "rmdir", "d")]
    by = {o.seq: o for o in ops}
    # open: flags, mode, created, fd
    assert by[1].flag_names == ("O_WRONLY", "O_CREAT", "O_EXCL", "O_CLOEXEC") and by[1].mode == 0o600
    assert by[1].created is True and by[1].fd == 3 and by[1].ret == 3 and by[1].errno == 0
    assert by[1].flags == os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    assert by[7].flag_names == ("O_RDONLY", "O_DIRECTORY", "O_CLOEXEC") and by[7].created is False
    assert by[15].flag_names == ("O_WRONLY", "O_CREAT", "O_TRUNC", "O_CLOEXEC") and by[15].created is True
    assert (by[20].ret, by[20].errno, by[20].created) == (-1, 2, False)
    # writes: offset, bytes actually written (write, pwrite, writev)
    assert [(by[s].off, by[s].data, by[s].len) for s in (2, 3, 4, 10, 12, 16)] == [
        (0, b"hello ", 6), (0, b"HE", 2), (6, b"world\n", 6), (12, b"T1\n", 3), (15, b"T2\n", 3),
        (0, b"child\n", 6)]
    # fsync of a file and of a directory; rmdir is a directory op
    assert (by[5].dir, by[8].dir, by[24].dir) == (False, True, True)
    assert (by[6].how, by[21].how) == ("LOCK_EX|LOCK_NB", "LOCK_UN")
    assert os.path.relpath(by[19].path2, root) == "g" and by[14].mode == 0o700
    # who did what: two threads of the main process one after the other, and a forked child
    assert {o.pid for o in ops if o.seq not in (15, 16, 17)} == {main}
    threads = [by[10].tid, by[12].tid]
    assert main not in threads and threads[0] != threads[1] and by[11].tid == threads[0]
    assert by[15].pid == by[16].pid == by[15].tid != main
    assert all(o.tid == main for o in ops if o.seq not in (10, 11, 12, 13, 15, 16, 17))
    # times: CLOCK_MONOTONIC, entry before exit, entries increasing with seq
    assert all(o.t0 <= o.t1 for o in ops) and [o.t0 for o in ops] == sorted(o.t0 for o in ops)
    # nothing outside the root (the program also wrote ../outside and stdout)
    assert all(o.path.startswith(str(root)) for o in ops)
    lifecycle = [o for o in log if o.lifecycle]
    assert [o.op for o in lifecycle][:2] == ["spawn", "exec"] and lifecycle[-1].op == "end"
    assert lifecycle[-1].status == "exit" and lifecycle[-1].code == 0
    spawns = [o for o in lifecycle if o.op == "spawn"]
    assert sum(1 for o in spawns if o.thread) >= 2 and any(o.pid == by[15].pid and o.ppid == main for o in spawns)


def test_the_other_kinds_and_the_at_calls_are_recorded_with_their_arguments(root):
    proc, log = observe("kinds", root)
    assert proc.returncode == 0, proc.stderr.read()
    ops = [o for o in ops_only(log) if o.op != "stat"]
    assert [(o.op, rel(o, root)) for o in ops] == [
        ("open", "a"), ("close", "a"), ("link", "a"), ("symlink", "s"), ("ftruncate", "a"), ("open", "."),
        ("rename", "a"), ("unlink", "b"), ("mkdir", "d"), ("rmdir", "d"), ("open", "c"), ("fallocate", "c"),
        ("read", "c"), ("access", "c"), ("lock", "c"), ("lock", "c"), ("ftruncate", "c")]
    link, symlink, truncate, rename, mkdir = ops[2], ops[3], ops[4], ops[6], ops[8]
    assert rel(Op(op="x", path=link.path2), root) == "b" and symlink.target == "a"
    assert (truncate.fd, truncate.len) == (None, 5) and rel(Op(op="x", path=rename.path2), root) == "c"
    assert mkdir.mode == 0o755 and ops[9].dir is True
    assert (ops[11].off, ops[11].len, ops[12].off, ops[12].len, ops[12].ret) == (0, 10, 1, 3, 3)
    assert [(o.cmd, o.how, o.start, o.len) for o in ops[14:16]] == [("F_SETLKW", "F_WRLCK", 0, 0),
                                                                      ("F_SETLKW", "F_UNLCK", 0, 0)]
    assert (ops[16].fd, ops[16].len) == (ops[10].fd, 0)


def test_ops_durable_neither_stops_nor_logs_lookups_and_reads_unless_a_fault_counts_them(root):
    def kinds_seen(lookups: bool, faults=()) -> list[str]:
        (root.parent / "log").unlink(missing_ok=True)
        proc = spawn_observed([sys.executable, TARGET, "kinds", str(root)], env=None, log=root.parent / "log",
                              roots=[root], faults=faults, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              lookups=lookups)
        try:
            proc.wait(30)
        finally:
            kill_tree(proc)
        for p in root.iterdir():  # the target makes its files again
            p.unlink() if not p.is_dir() or p.is_symlink() else shutil.rmtree(p)
        return [o.op for o in ops_only(proc.ops())]

    every = kinds_seen(True)
    assert {"stat", "read", "access"} <= set(every)
    durable = kinds_seen(False)
    assert not {"stat", "read", "access"} & set(durable)
    assert [k for k in every if k not in ("stat", "read", "access")] == durable  # nothing else is lost
    assert "read" in kinds_seen(False, faults=["kill-after@99:read"])  # a fault's kinds are traced anyway


@pytest.mark.parametrize("mode", ["alternate", "concurrent"])
def test_the_recorded_writes_rebuild_the_file_byte_for_byte(root, mode):
    # concurrent: two threads append through one O_APPEND description at the same time
    _, log = observe(mode, root, "40")
    content = bytearray()
    for o in sorted((o for o in ops_only(log) if o.op == "write"), key=lambda o: o.off):
        assert o.off == len(content) and o.ret == o.len == len(o.data)
        content += o.data
    assert bytes(content) == (root / "log").read_bytes()
    assert len(content) == (len(records(40)) if mode == "alternate" else 2 * 40 * 5)


# --- exit status and signals -------------------------------------------------------------------


def test_the_exit_code_is_the_programs(root):
    proc, log = observe("exit7", root)
    assert proc.returncode == 7 and (log[-1].op, log[-1].status, log[-1].code) == ("end", "exit", 7)


def test_a_program_killed_by_a_signal_kills_the_tracer_with_the_same_signal(root):
    proc, log = observe("sigkill", root)
    assert proc.returncode == -signal.SIGKILL
    assert (log[-1].op, log[-1].status, log[-1].signal) == ("end", "signal", signal.SIGKILL)


def test_sigint_to_the_tracer_reaches_the_program_which_handles_it_and_exits_3(root):
    proc = spawn_observed([sys.executable, TARGET, "sigint", str(root)], env=None, log=root.parent / "log",
                          roots=[root], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().split()[0] == b"ready"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 3
    finally:
        kill_tree(proc)
    assert (root / "suspended").read_bytes() == b"2\n"
    assert [o.op for o in ops_only(proc.ops()) if o.op != "stat"] == ["open", "write", "close"]  # open() fstats


def test_sigkill_of_the_tracer_kills_the_program_too(root):
    enable_subreaper()  # as the harness runs: the orphaned program is reparented to us and reaped at once
    proc = spawn_observed([sys.executable, TARGET, "sigint", str(root)], env=None, log=root.parent / "log",
                          roots=[root], stdout=subprocess.PIPE)
    program = None
    try:
        program = psutil.Process(int(proc.stdout.readline().split()[1]))
        proc.kill()
        assert proc.wait(10) == -signal.SIGKILL
        program.wait(10)  # PTRACE_O_EXITKILL
        assert not program.is_running()
    finally:
        kill_tree(proc)


def test_when_the_main_program_exits_the_descendants_it_left_are_killed_and_the_tracer_ends(root):
    proc, log = observe("orphan", root)
    assert proc.returncode == 5
    child = int(proc.stdout.read().split()[0])
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
    exits = {o.pid: o for o in log if o.op == "exit"}
    assert exits[child].signal == signal.SIGKILL


def test_kill_tree_of_the_harness_works_on_an_observed_process(root):
    enable_subreaper()  # as the harness runs
    proc = spawn_observed([sys.executable, TARGET, "sigint", str(root)], env=None, log=root.parent / "log",
                          roots=[root], stdout=subprocess.PIPE)
    program = psutil.Process(int(proc.stdout.readline().split()[1]))
    assert program.pid in {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
    kill_tree(proc)
    assert proc.returncode is not None
    program.wait(10)
    assert not program.is_running()


