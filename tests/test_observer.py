"""The outside observer (harness/observer, docs/observer.md): a ptrace + seccomp tracer in C.

The program under the tracer is tests/data/observer_target.py (one mode per
scenario; threads and processes ordered by joins and semaphores, never sleeps).
Each test runs it once or a few times (a run costs 0.1-0.3 s).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from harness.runner.process import enable_subreaper, kill_tree
from harness.observer import (BuildError, CompileFailed, CompilerMissing, ControlError, FaultSpecError,
                              LogFormatError, ObservedProcess, ObserverError, Op, entry_order, observer_binary,
                              parse_fault, parse_ops, spawn_observed)
from harness.observer import build as build_mod

TARGET = str(Path(__file__).parent / "data" / "observer_target.py")
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module", autouse=True)
def tracer_works(tmp_path_factory):
    """Build the tracer once; skip the module where ptrace is not permitted (a container without the privilege)."""
    binary = observer_binary()
    d = tmp_path_factory.mktemp("probe")
    proc = subprocess.run([str(binary), "--log", str(d / "log"), "--root", str(d), "--", "/bin/true"],
                          capture_output=True, text=True, timeout=30)
    if proc.returncode != 0 and ("PTRACE_SEIZE" in proc.stderr or "seccomp" in proc.stderr):
        pytest.skip(f"ptrace or seccomp not permitted here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "root"
    r.mkdir()
    return r


def observe(mode: str, root: Path, *args: str, faults=(), control=False, stdout=subprocess.PIPE,
            timeout: float = 30) -> tuple[ObservedProcess, list[Op]]:
    """Run the target in ``mode`` under the tracer to its end; return the process and its log."""
    proc = spawn_observed([sys.executable, TARGET, mode, str(root), *args], env=None, log=root.parent / "log",
                          roots=[root], faults=faults, control=control, stdout=stdout, stderr=subprocess.PIPE)
    try:
        proc.wait(timeout)
    finally:
        kill_tree(proc)
    return proc, proc.ops()


def ops_only(log: list[Op]) -> list[Op]:
    return entry_order(log)


def rel(op: Op, root: Path) -> str:
    return os.path.relpath(op.path, root)


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
    assert len(content) == (len(_records(40)) if mode == "alternate" else 2 * 40 * 5)


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


# --- kill faults ----------------------------------------------------------------------------------


def _records(n: int) -> bytes:
    return b"".join(f"{'AB'[i % 2]}{i}\n".encode() for i in range(n))


@pytest.mark.parametrize("k", [1, 2, 3, 6])
def test_kill_before_the_kth_write_leaves_exactly_the_k_minus_1_writes_before_it(root, k):
    proc, log = observe("alternate", root, "10", faults=[f"kill-before@{k}:write"])
    assert proc.returncode == -signal.SIGKILL
    assert (root / "log").read_bytes() == _records(k - 1)
    writes = [o for o in ops_only(log) if o.op == "write"]
    assert len(writes) == k and [o.ret for o in writes[:-1]] == [3] * (k - 1)
    assert (writes[-1].ret, writes[-1].fault) == (None, "kill-before")
    assert len({o.tid for o in writes}) == min(k, 2)  # the writes alternate between the two threads


@pytest.mark.parametrize("k", [1, 2, 3, 6])
def test_kill_after_the_kth_write_leaves_exactly_k_writes(root, k):
    proc, log = observe("alternate", root, "10", faults=[f"kill-after@{k}:write"])
    assert proc.returncode == -signal.SIGKILL
    assert (root / "log").read_bytes() == _records(k)
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


# --- differential: strace ---------------------------------------------------------------------------------

_STRACE_CALLS = ("openat", "write", "pwrite64", "writev", "fsync", "fdatasync", "flock", "close", "mkdir", "rename",
                 "unlink", "rmdir", "newfstatat")
_KIND = {"openat": "open", "pwrite64": "write", "writev": "write", "newfstatat": "stat"}


def _unhex(text: str) -> bytes:
    return bytes(int(h, 16) for h in re.findall(r"\\x([0-9a-f]{2})", text))


def _strace_ops(path: Path, root: Path) -> dict[int, list[tuple[str, str, bytes]]]:
    """strace -f -xx -y output as per-thread lists of (kind, path, bytes written) under ``root``."""
    joined: list[tuple[int, str]] = []
    pending: dict[int, str] = {}
    for line in path.read_text().splitlines():
        m = re.match(r"(\d+)\s+(.*)$", line)  # strace pads a short pid with spaces
        if not m:
            continue
        tid, rest = int(m.group(1)), m.group(2)
        if rest.endswith("<unfinished ...>"):
            pending[tid] = rest[: -len("<unfinished ...>")]
            continue
        resumed = re.match(r"<\.\.\. \w+ resumed>(.*)$", rest)
        if resumed:
            rest = pending.pop(tid, "") + resumed.group(1)
        joined.append((tid, rest))
    out: dict[int, list[tuple[str, str, bytes]]] = {}
    for tid, rest in joined:
        m = re.match(r"(\w+)\((.*)\) += (-?\d+)", rest)
        if not m or m.group(1) not in _STRACE_CALLS:
            continue
        name, args = m.group(1), m.group(2)
        fd_path = re.match(r"\d+<((?:\\x[0-9a-f]{2})*)>", args)
        strings = re.findall(r'"((?:\\x[0-9a-f]{2})*)"', args)
        if fd_path and name not in ("openat", "newfstatat"):
            target, data = _unhex(fd_path.group(1)).decode(), b"".join(_unhex(s) for s in strings)
        else:
            target, data = _unhex(strings[0]).decode(), b""
        if name == "newfstatat" and not strings[0]:
            if fd_path is None:  # AT_FDCWD with an empty path (AT_EMPTY_PATH): the cwd, never under the root
                continue
            target = _unhex(fd_path.group(1)).decode()
        if target == str(root) or target.startswith(str(root) + "/"):
            out.setdefault(tid, []).append((_KIND.get(name, name), target, data))
    return out


def test_the_same_ops_bytes_and_per_thread_order_as_strace_sees(root, tmp_path):
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed (the differential needs it)")
    out = tmp_path / "strace.out"
    subprocess.run([strace, "-f", "-qq", "-xx", "-y", "-e", "trace=" + ",".join(_STRACE_CALLS), "-o", str(out),
                    sys.executable, TARGET, "basic", str(root)], check=True, capture_output=True, timeout=60)
    theirs = _strace_ops(out, root)
    shutil.rmtree(root)
    root.mkdir()
    _, log = observe("basic", root)
    ours: dict[int, list[tuple[str, str, bytes]]] = {}
    for o in ops_only(log):
        ours.setdefault(o.tid, []).append((o.op, o.path, o.data or b""))
    assert sorted(theirs.values()) == sorted(ours.values())
    assert sum(len(v) for v in ours.values()) == 24


# --- differential: the IO seam of the reference agent ---------------------------------------------------


def _seam_as_syscalls(seam: list[dict]) -> list[tuple]:
    """The IO-seam trace as the system calls it makes: fsync_dir is open(O_DIRECTORY) + fsync + close."""
    out = []
    for e in seam:
        if e["op"] == "fsync_dir":
            out += [("open", e["path"]), ("fsync", e["path"], True), ("close", e["path"])]
        elif e["op"] == "rename":
            out.append(("rename", e["src"], e["dst"]))
        elif e["op"] in ("fsync", "fdatasync"):
            out.append((e["op"], e["path"], False))
        else:
            out.append((e["op"], e["path"]))
    return out


def _observed_as_seam(ops: list[Op]) -> list[tuple]:
    out = []
    for o in ops:
        if o.op in ("stat", "access", "read"):  # the seam does not trace lookups and reads
            continue
        if o.op == "rename":
            out.append(("rename", o.path, o.path2))
        elif o.op in ("fsync", "fdatasync"):
            out.append((o.op, o.path, o.dir))
        else:
            out.append((o.op, o.path))
    return out


def test_the_reference_agent_observed_from_outside_matches_its_own_io_seam_trace(tmp_path):
    state, seam_path = tmp_path / "state", tmp_path / "seam.jsonl"
    state.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FISKJ_", "XDG_STATE_HOME"))}
    env.update(XDG_STATE_HOME=str(state), FISKJ_IOSEAM_TRACE=str(seam_path))
    proc = spawn_observed([sys.executable, "-m", "fiskj", "run", "--checkpoint", "--model", "scripted:3", "--name",
                           "r1", "count"], env=env, cwd=str(tmp_path), log=tmp_path / "log", roots=[state],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert proc.wait(60) == 0, proc.stderr.read()
    finally:
        kill_tree(proc)
    seam = [json.loads(line) for line in seam_path.read_text().splitlines()]
    ops = ops_only(proc.ops())
    assert _observed_as_seam(ops) == _seam_as_syscalls(seam)
    # write for write: same file, offset and bytes
    seam_writes = [(e["path"], e["offset"], __import__("base64").b64decode(e["data"])) for e in seam
                   if e["op"] == "write"]
    assert seam_writes == [(o.path, o.off, o.data) for o in ops if o.op == "write"] and len(seam_writes) >= 5
    # opens: same flags and the same created answer
    seam_opens = [(e["path"], set(e["flags"]), e["created"]) for e in seam if e["op"] == "open"]
    assert seam_opens == [(o.path, set(o.flag_names), o.created) for o in ops
                          if o.op == "open" and "O_DIRECTORY" not in o.flag_names]
    journal = state / "fisk-ai" / "runs" / "r1.json"
    assert b"".join(d for _, _, d in seam_writes) == journal.read_bytes()


# --- the log format ------------------------------------------------------------------------------------------


def _line(**fields) -> bytes:
    base = {"seq": 1, "pid": 10, "tid": 10, "op": "write", "path": "/r/f", "fd": 3, "off": 0, "len": 2,
            "data": "aGk=", "ret": 2, "errno": 0, "t0": 1, "t1": 2}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not ...}).encode() + b"\n"


def test_parse_ops_decodes_the_bytes_and_keeps_non_utf8_paths_exact():
    ops = parse_ops([_line(), _line(seq=2, path="/r/\udcff", data="", len=0, ret=0), b"\n",
                     b'{"op":"end","status":"exit","code":0,"t":5}\n'])
    assert ops[0].data == b"hi" and ops[1].path_bytes == b"/r/\xff" and ops[2].lifecycle and ops.torn is None


def test_a_torn_final_line_is_tolerated_and_reported():
    whole = _line()
    ops = parse_ops([whole, whole[:17]])
    assert len(ops) == 1 and ops.torn == whole[:17] and ops.torn_lineno == 2


@pytest.mark.parametrize(("line", "field"), [
    (_line(off="0"), "off"), (_line(data="!!"), "data"), (_line(op="frobnicate"), "op"),
    (_line(ret=...), "ret"), (_line(seq=...), "seq"), (b"[1]\n", "<line>"), (b"{nope\n", "<line>"),
    (_line(created=1), "created"),
])
def test_a_bad_line_is_an_error_naming_the_line_and_the_field(line, field):
    with pytest.raises(LogFormatError) as info:
        parse_ops([_line(), line, _line(seq=3)])
    assert (info.value.lineno, info.value.field) == (2, field) and isinstance(info.value, ValueError)


def test_fault_specs_are_validated_before_the_tracer_starts(root):
    assert str(parse_fault("kill-before@3:fsync")) == "kill-before@3:fsync" and parse_fault("eio@2").k == 2
    for bad in ("eio", "boom@1", "eio@0", "eio@x", "eio@2:sync", "pause@1:write,frob"):
        with pytest.raises(FaultSpecError):
            parse_fault(bad)
    for faults, control in ((["eio@0"], False), (["pause@1"], False), (["pause@1:write", "pause@1:fsync"], True)):
        with pytest.raises(FaultSpecError):
            spawn_observed(["/bin/true"], env=None, log=root.parent / "log", roots=[root], faults=faults,
                           control=control)


def test_the_bench_runs_on_tiny_sizes(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("fiskj_bench_observer", REPO / "bench" / "observer.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows, details = bench.bench_observer((str(tmp_path),), n=3, rounds=1, start_rounds=1)
    assert len(rows) == 5 and all(r["section"] == "observer" and r["subject"] > 0 for r in rows)
    assert set(details["observer_append"][str(tmp_path)]["median_us"]) == {"bare", "observed", "stopped", "seam"}


# --- building -------------------------------------------------------------------------------------------------


def test_the_build_is_cached_by_source_hash_and_concurrent_builds_agree(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("FISKJ_OBSERVER_BIN", raising=False)
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(observer_binary())) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = tmp_path / "cache" / "fiskj" / build_mod.binary_name()
    assert results == [expected] * 3 and os.access(expected, os.X_OK)
    assert sorted(p.name for p in expected.parent.iterdir()) == [expected.name]  # no temporary left
    mtime = expected.stat().st_mtime_ns
    assert observer_binary() == expected and expected.stat().st_mtime_ns == mtime


def test_a_compile_error_names_the_command_and_gccs_diagnostics(tmp_path):
    bad = tmp_path / "bad.c"
    bad.write_text("int main(void) { return nope; }\n")
    with pytest.raises(CompileFailed) as info:
        build_mod.compile_to(tmp_path / "out", bad)
    err = info.value
    assert isinstance(err, BuildError) and isinstance(err, RuntimeError) and isinstance(err, ObserverError)
    assert "gcc" in err.cmd[0] and "-Werror" in err.cmd and "nope" in err.stderr and "nope" in str(err)
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir()] == ["bad.c"]


def test_a_missing_gcc_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CompilerMissing, match="gcc"):
        build_mod.compile_to(tmp_path / "out")


def test_FISKJ_OBSERVER_BIN_names_the_binary(tmp_path, monkeypatch):
    monkeypatch.setenv("FISKJ_OBSERVER_BIN", str(tmp_path / "nothing"))
    with pytest.raises(BuildError):
        observer_binary()
    monkeypatch.setenv("FISKJ_OBSERVER_BIN", "/bin/true")
    assert observer_binary() == Path("/bin/true")


def test_python_dash_m_runs_the_tracer_with_its_arguments(tmp_path):
    done = subprocess.run([sys.executable, "-m", "harness.observer", "--log", str(tmp_path / "log"), "--root",
                           str(tmp_path), "--", "/bin/sh", "-c", f"echo x > {tmp_path}/f; exit 4"],
                          capture_output=True, timeout=30, cwd=tmp_path)
    assert done.returncode == 4
    with open(tmp_path / "log", "rb") as f:
        assert [(o.op, o.data) for o in entry_order(parse_ops(f)) if o.op == "write"] == [("write", b"x\n")]


def test_the_ops_module_is_pure():
    source = (REPO / "harness" / "observer" / "ops.py").read_text()
    assert not re.search(r"^\s*(import|from)\s+(os|subprocess|io|sys|time|socket|pathlib)\b", source, re.M)
