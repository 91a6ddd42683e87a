import errno
import fcntl
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from fiskj import ioseam
from fiskj.errors import RunLocked, StoreIOError, UnsafeFile
from fiskj.lock import acquire
from harness.selftest.mutants import mutant_env
from harness.selftest.mutants import UNIT, mutants


pytestmark = pytest.mark.usefixtures("plain_seam")


# A holder process: takes the lock, then does what argv[2] says, prints "ready", waits for stdin EOF.
# Its preload ($FISKJ_PRELOAD: a mutant of harness/selftest/mutants) is applied first, if it has one.
HOLDER = r"""
import os, subprocess, sys
from harness.subject.preload import load_preload
load_preload()
from fiskj.lock import acquire
path, mode = sys.argv[1], sys.argv[2]
lock = acquire(path, "r1")
if mode == "touch":   # F18: read the files through other descriptors and run a tool child
    for p in (path, os.path.join(os.path.dirname(path), "r1.json")):
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o600); os.read(fd, 10); os.close(fd)
        with open(p, "rb") as f: f.read()
    subprocess.run([sys.executable, "-c", "pass"], close_fds=False, check=True)
child = None
if mode == "child":   # a long-lived tool child that inherits every inheritable fd
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE, close_fds=False)
    print(child.pid, flush=True)
print("ready", flush=True)
sys.stdin.read()
"""


def start_holder(path, mode="hold", env=None):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), mode], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    child_pid = None
    if mode == "child":
        child_pid = int(first)
        first = proc.stdout.readline()
    assert first == b"ready\n", proc.stderr.read().decode()
    return proc, child_pid


def kill(proc):
    proc.kill()
    proc.wait(timeout=10)


def tries_lock(path):
    """Return True when this process can take the lock at once (and drops it again)."""
    try:
        acquire(str(path), "r1").release()
    except RunLocked:
        return False
    return True


def test_the_lock_file_is_created_0600_and_held_on_a_close_on_exec_descriptor(tmp_path):
    old = os.umask(0)
    try:
        lock = acquire(str(tmp_path / "r1.lock"), "r1")
    finally:
        os.umask(old)
    with lock:
        assert stat.S_IMODE(os.stat(tmp_path / "r1.lock").st_mode) == 0o600
        assert fcntl.fcntl(lock.fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        assert lock.held
    assert not lock.held


def test_a_second_acquire_fails_at_once_with_run_locked_naming_the_run(tmp_path):
    path = str(tmp_path / "r1.lock")
    with acquire(path, "r1"):
        start = time.monotonic()
        with pytest.raises(RunLocked) as info:
            acquire(path, "r1")
        assert time.monotonic() - start < 1
    assert "run r1 is held by another writer" in str(info.value)
    assert info.value.run_id == "r1" and isinstance(info.value, BlockingIOError)
    acquire(path, "r1").release()  # free again after release


def test_release_is_idempotent(tmp_path):
    lock = acquire(str(tmp_path / "r1.lock"), "r1")
    lock.release()
    lock.release()


def test_field_case_f14_a_second_process_is_refused_and_gets_the_lock_after_the_holder_is_sigkilled(tmp_path):
    path = tmp_path / "r1.lock"
    holder, _ = start_holder(path)
    try:
        assert not tries_lock(path)
    finally:
        kill(holder)
    assert holder.returncode == -signal.SIGKILL
    assert tries_lock(path)


def survives_other_fds(path, env=None):
    """F18: whether the lock stays held while its holder reads the journal and the lock file through other
    descriptors, closes them and runs a child that exits (and is free once the holder is SIGKILLed)."""
    holder, _ = start_holder(path, "touch", env)
    try:
        held = not tries_lock(path)
    finally:
        kill(holder)
    assert tries_lock(path)
    return held


def free_despite_a_live_child(path, env=None):
    """F18: whether a SIGKILLed holder's lock is free at once although a long-lived child it started (which
    inherits every inheritable descriptor) still runs."""
    holder, child_pid = start_holder(path, "child", env)
    try:
        kill(holder)
        os.kill(child_pid, 0)  # the child still runs
        return tries_lock(path)
    finally:
        try:
            os.kill(child_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_field_case_f18_the_lock_survives_other_descriptors_closing_and_a_child_exiting(tmp_path):
    assert survives_other_fds(tmp_path / "r1.lock")


def test_field_case_f18_a_tool_child_does_not_inherit_the_lock(tmp_path):
    assert free_despite_a_live_child(tmp_path / "r1.lock")


#: The lock's mutants no campaign can catch (rows of family ``unit`` in harness/selftest/mutants.py), each with the F18
#: property above that it breaks.
LOCK_MUTANTS = {"lockf": survives_other_fds, "no-cloexec": free_despite_a_live_child}


def test_every_mutant_left_to_unit_tests_is_one_of_the_lock_s_and_is_tested_here():
    unit = mutants(UNIT)
    assert {m.name for m in unit} == set(LOCK_MUTANTS) and {m.scenario for m in unit} == {"tests/test_lock.py"}


@pytest.mark.parametrize("name", sorted(LOCK_MUTANTS))
def test_each_lock_mutant_is_caught_by_the_f18_test_of_the_property_it_breaks(tmp_path, name):
    env = {**os.environ, **dict(mutant_env(name))}  # the mutant applies in the holder process only
    assert not LOCK_MUTANTS[name](tmp_path / "r1.lock", env), f"{name} was not caught"
    assert all(prop(tmp_path / f"{prop.__name__}.lock") for prop in LOCK_MUTANTS.values())  # fiskj's own lock


def test_a_lock_file_deleted_and_recreated_before_the_flock_is_detected_and_the_new_file_locked(tmp_path, monkeypatch):
    path = str(tmp_path / "r1.lock")
    real_flock = ioseam.flock
    calls = []

    def deleter_wins_first(fd, op):
        if not calls:  # a deleter unlinks the file we opened, and a new one appears
            os.unlink(path)
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        calls.append(fd)
        return real_flock(fd, op)

    monkeypatch.setattr(ioseam, "flock", deleter_wins_first)
    with acquire(path, "r1") as lock:
        assert len(calls) == 2
        assert os.fstat(lock.fd).st_ino == os.stat(path).st_ino


@pytest.mark.parametrize("kind", ["symlink", "directory", "fifo"])
def test_a_lock_path_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    path = tmp_path / "r1.lock"
    outside = tmp_path / "outside"
    if kind == "symlink":
        path.symlink_to(outside)
    elif kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)
    with pytest.raises(UnsafeFile):
        acquire(str(path), "r1")
    assert not outside.exists()


def test_other_lock_failures_are_store_io_errors_and_are_not_retried(tmp_path):
    with pytest.raises(StoreIOError) as info:
        acquire(str(tmp_path / "missing-dir" / "r1.lock"), "r1")
    assert info.value.errno == errno.ENOENT and not isinstance(info.value, RunLocked)
    trace = tmp_path / "t"
    ioseam.configure(trace=str(trace), fault="eio@1:flock")
    with pytest.raises(StoreIOError) as info:
        acquire(str(tmp_path / "r1.lock"), "r1")
    assert info.value.errno == errno.EIO
    assert trace.read_text().count('"op":"flock"') == 1
    assert trace.read_text().count('"op":"close"') == 1  # the descriptor is not leaked


def test_a_lock_file_owned_by_another_user_is_refused(tmp_path):
    path = tmp_path / "r1.lock"
    path.write_bytes(b"")
    os.chmod(path, 0o644)
    try:
        os.chown(path, 65534, 65534)
    except PermissionError:
        pytest.skip("needs root to give a file away")
    with pytest.raises(UnsafeFile, match="owned by uid 65534"):
        acquire(str(path), "r1")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644 and os.stat(path).st_uid == 65534
