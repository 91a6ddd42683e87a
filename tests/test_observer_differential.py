"""The outside observer against two other witnesses of the same run: strace, and the reference agent's own IO
seam trace (the same ops, bytes and per-thread order)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.runner.process import kill_tree
from harness.observer import Op, spawn_observed
from observer_helpers import TARGET, observe, ops_only, root, tracer_works  # noqa: F401


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


