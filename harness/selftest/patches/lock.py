"""Patches of the run lock: its kind, its descriptor, when it is taken and released (docs/spec.md section 10)."""

from __future__ import annotations

import fcntl
import os
from contextlib import suppress
from typing import Any, Callable

from fiskj import ioseam, lock, store
from fiskj.errors import RunLocked
from fiskj.journal import Journal
from fiskj.records import TerminalRecord

from harness.selftest.patches import swapped, wrap

__all__ = ["fold_before_lock", "release_before_last_append", "unlock_before_close", "lockf", "blocking_flock",
           "inheritable_lock", "marker_file_lock", "reader_locks"]


def fold_before_lock() -> None:
    """``FileStore.open`` reads and folds the journal through an unlocked descriptor, then takes the lock and
    continues from what it read (defect 2: section 12, rule 1)."""

    @wrap(store.FileStore, "_open")
    def _open(original: Any, self: Any, run_id: str) -> Journal:
        jpath = store.journal_path(self.directory, run_id)
        rfd = store._open_regular(jpath, os.O_RDONLY, run_id)
        try:
            read = store.fold_open_file(rfd, jpath)
        finally:
            store._close_quietly(rfd)
        with swapped(store, fold_open_file=lambda fd, path: read):  # under the lock: what was read before it
            return original(self, run_id)


def release_before_last_append() -> None:
    """``Journal.append`` releases the run lock before it writes a terminal record."""

    @wrap(Journal, "append")
    def append(original: Any, self: Any, record: Any) -> Any:
        if isinstance(record, TerminalRecord):
            self._lock.release()
        return original(self, record)


def unlock_before_close() -> None:
    """``Journal.close`` releases the lock first, then closes the journal's descriptor (I8: the lock is held
    until the writer's last fsync and close)."""

    def _release(self: Any) -> None:  # what Journal.close calls once
        fd, self._fd = self._fd, None
        self._lock.release()
        ioseam.close(fd)

    Journal._release = _release


def _replace_flock(call: Callable[[int, int], None]) -> None:
    """Make ``call`` the IO seam's ``flock``, traced or not, and configure the seam again from the environment
    (so that a later :func:`fiskj.ioseam.configure` keeps it)."""
    ioseam._PLAIN["flock"] = call
    ioseam._TRACED["flock"] = ioseam._fd_call("flock", call)
    ioseam.configure(os.environ.get(ioseam.TRACE_ENV) or None, os.environ.get(ioseam.FAULT_ENV) or None)


def lockf() -> None:
    """The run lock is ``fcntl.lockf``, a POSIX record lock: it belongs to the process and is dropped when any
    descriptor of the lock file closes (section 10, rule 1)."""
    _replace_flock(fcntl.lockf)


def blocking_flock() -> None:
    """The run lock is ``flock`` without ``LOCK_NB``: a busy lock is waited for, not refused at once (rule 2)."""
    real = ioseam._PLAIN["flock"]

    def blocking(fd: int, operation: int) -> None:
        real(fd, operation & ~fcntl.LOCK_NB)

    _replace_flock(blocking)


def _replace_acquire(acquire: Callable[[str, str], Any]) -> None:
    lock.acquire = acquire
    store.acquire = acquire  # store imported the name: patch its copy too


def inheritable_lock() -> None:
    """The lock's descriptor is made inheritable (Python opens descriptors close-on-exec, PEP 446): a tool child
    that outlives its holder keeps the run locked (rule 3)."""
    real = lock.acquire

    def acquire(path: str, run_id: str) -> Any:
        held = real(path, run_id)
        os.set_inheritable(held.fd, True)
        return held

    _replace_acquire(acquire)


def marker_file_lock() -> None:
    """The run lock is an ``O_EXCL`` marker file (``<lock>.held``) beside the lock file: the kernel drops a
    lock when its holder dies, a marker file stays behind (rule 3)."""

    class MarkerLock(lock.RunLock):
        __slots__ = ()

        def release(self) -> None:
            if self.fd is not None:
                with suppress(OSError):
                    os.unlink(self.path + ".held")
            lock.RunLock.release(self)

    def acquire(path: str, run_id: str) -> Any:
        try:
            mfd = os.open(path + ".held", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            raise RunLocked(f"run {run_id} is held by another writer", path=path, run_id=run_id) from None
        os.close(mfd)
        return MarkerLock(ioseam.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600), path, run_id)

    _replace_acquire(acquire)


def reader_locks() -> None:
    """``FileStore.load`` takes the run lock: a reader fails with ``RunLocked`` while a writer holds the run
    (section 10: load and list read without the lock)."""

    @wrap(store.FileStore, "load")
    def load(original: Any, self: Any, run_id: str) -> Any:
        with lock.acquire(store.lock_path(self.directory, run_id), run_id):
            return original(self, run_id)
