"""harness/runner/locks.py: who keeps a lock on a file, from /proc/locks (how a race's rival is seen to wait)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

from harness.runner.locks import kept_by_others, process_tree


def _ident(path):
    st = os.stat(path)
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"


def test_only_exclusive_locks_of_the_contended_class_kept_by_others_count_never_waiters_or_the_own_tree(tmp_path):
    path = tmp_path / "run.lock"
    path.write_bytes(b"")
    me = _ident(path)
    text = "\n".join([
        f"1: FLOCK  ADVISORY  WRITE 101 {me} 0 EOF",
        f"1: -> FLOCK  ADVISORY  WRITE 102 {me} 0 EOF",      # a waiter keeps nothing
        f"2: FLOCK  ADVISORY  READ  103 {me} 0 EOF",         # a shared lock: an exclusive request may wait, not judged
        f"3: POSIX  ADVISORY  WRITE 104 {me} 0 EOF",         # a record lock does not contend with flock
        f"4: OFDLCK ADVISORY  WRITE -1 {me} 0 EOF",
        "5: FLOCK  ADVISORY  WRITE 105 00:00:1 0 EOF",       # another file
        f"6: FLOCK  ADVISORY  WRITE 106 {me} 0 EOF",         # the waiter's own tree
    ])
    assert kept_by_others(str(path), "flock", {106}, text) == [101]
    assert kept_by_others(str(path), "lock", set(), text) == [104, -1]
    assert kept_by_others(str(tmp_path / "gone"), "flock", set(), text) == []


def test_a_lock_kept_by_a_live_process_is_read_from_the_kernel_and_its_own_tree_is_left_out(tmp_path):
    path = tmp_path / "run.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert kept_by_others(str(path), "flock", set()) == [os.getpid()]
        assert kept_by_others(str(path), "flock", process_tree(os.getpid())) == []
    finally:
        os.close(fd)
    assert kept_by_others(str(path), "flock", set()) == []


def test_the_process_tree_holds_the_root_and_its_descendants_only():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        tree = process_tree(os.getpid())
        assert {os.getpid(), child.pid} <= tree and os.getppid() not in tree
    finally:
        child.stdin.close()
        child.wait()
