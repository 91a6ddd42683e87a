"""The per-run writer lock: ``flock(LOCK_EX | LOCK_NB)`` on ``<id>.lock``.

Source: docs/spec.md sections 1 and 10 (fisk-ai's "Storage and locking" and
"Files"; docs/spec.md "Sources"); field cases F14 and F18 (docs/field-cases.md).
Rules:

* The lock is an ``flock`` on its own open file description of the lock
  file, opened ``O_CLOEXEC``.  Never ``fcntl``/``lockf`` locks: those belong
  to the process and are dropped when *any* descriptor of the file is
  closed, and they do not conflict inside one process.  ``flock`` locks
  belong to the open file description: closing another descriptor of the
  same file does not release it, a second open in the same process
  conflicts, and the kernel releases it when the holder dies.
* Busy: :class:`RunLocked` at once, naming the run.  Every other failure is
  :class:`StoreIOError` (or :class:`UnsafeFile` for a symlink, directory,
  FIFO...), never retried blindly.
* The lock file is never deleted while it can be held.  Because a deleter
  (which holds the lock) unlinks it before releasing, a locker that wins
  the ``flock`` re-checks that its descriptor is still the file at the path
  and starts over when it is not; that re-check is the only retry.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat

from . import ioseam
from .errors import RunLocked, StoreIOError, UnsafeFile

__all__ = ["RunLock", "acquire"]

_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_MAX_STALE = 8   # lock files replaced under us before we give up


class RunLock:
    """A held run lock: ``fd`` (the flocked descriptor), ``path``, ``run_id``.

    Release it with :meth:`release` (idempotent) or use it as a context
    manager.  Build one with :func:`acquire`.
    """

    __slots__ = ("fd", "path", "run_id")

    def __init__(self, fd: int, path: str, run_id: str) -> None:
        self.fd: int | None = fd
        self.path = path
        self.run_id = run_id

    @property
    def held(self) -> bool:
        """True until :meth:`release` is called."""
        return self.fd is not None

    def release(self) -> None:
        """Release the lock by closing its descriptor (the kernel drops the flock).

        Idempotent.  Raises :class:`StoreIOError` if ``close`` fails; the
        descriptor is forgotten either way (it must not be closed twice).
        """
        fd, self.fd = self.fd, None
        if fd is None:
            return
        try:
            ioseam.close(fd)
        except OSError as exc:
            raise StoreIOError(f"closing the lock of run {self.run_id} failed: {exc.strerror}",
                               path=self.path, run_id=self.run_id, errno=exc.errno) from None

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"RunLock({self.run_id!r}, fd={self.fd}, path={self.path!r})"


def _io_error(what: str, path: str, run_id: str, exc: OSError) -> StoreIOError:
    return StoreIOError(f"{what} the lock file of run {run_id} failed: {exc.strerror}",
                        path=path, run_id=run_id, errno=exc.errno)


def _close_quietly(fd: int) -> None:
    try:
        ioseam.close(fd)
    except OSError:
        pass


def _open_lock_file(path: str, run_id: str) -> int:
    try:
        fd = ioseam.open(path, _OPEN_FLAGS, 0o600)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise UnsafeFile(f"the lock file of run {run_id} is a symlink or not a regular file; "
                             f"refusing to use it (remove it by hand if it is not yours)",
                             path=path, run_id=run_id) from None
        raise _io_error("opening", path, run_id, exc) from None
    try:
        st = os.fstat(fd)
    except OSError as exc:
        _close_quietly(fd)
        raise _io_error("checking", path, run_id, exc) from None
    if not stat.S_ISREG(st.st_mode):
        _close_quietly(fd)
        raise UnsafeFile(f"the lock file of run {run_id} is not a regular file; refusing to use it",
                         path=path, run_id=run_id)
    if st.st_uid != os.geteuid():
        _close_quietly(fd)
        raise UnsafeFile(f"the lock file of run {run_id} is owned by uid {st.st_uid}, not by this user "
                         f"(uid {os.geteuid()}); refusing to use it", path=path, run_id=run_id)
    if stat.S_IMODE(st.st_mode) != 0o600:
        try:
            os.fchmod(fd, 0o600)  # 0600 whatever the umask
        except OSError as exc:
            _close_quietly(fd)
            raise _io_error("setting the mode of", path, run_id, exc) from None
    return fd


def _still_linked(fd: int, path: str) -> bool:
    """True when ``path`` still names the file open on ``fd`` (no delete raced us)."""
    try:
        at_path = os.lstat(path)
        mine = os.fstat(fd)
    except FileNotFoundError:
        return False
    return (at_path.st_dev, at_path.st_ino) == (mine.st_dev, mine.st_ino) and mine.st_nlink > 0


def acquire(path: str, run_id: str) -> RunLock:
    """Take the run's lock at ``path`` (``<store>/<id>.lock``) without waiting.

    Creates the lock file (0600, ``O_NOFOLLOW``, ``O_CLOEXEC``) when missing
    and takes ``flock(LOCK_EX | LOCK_NB)`` on that new descriptor.

    Raises :class:`RunLocked` at once when another open file holds it (another
    process, or another :func:`acquire` in this process), :class:`UnsafeFile`
    when the path is a symlink, directory, FIFO or other non-regular file,
    :class:`StoreIOError` on any other OS failure (``errno`` attribute set).
    """
    for _ in range(_MAX_STALE):
        fd = _open_lock_file(path, run_id)
        try:
            ioseam.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            _close_quietly(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise RunLocked(
                    f"run {run_id} is held by another writer (pid unknown); wait for it to finish "
                    f"or stop that process, then retry (a crashed holder releases it at once)",
                    path=path, run_id=run_id) from None
            raise _io_error("locking", path, run_id, exc) from None
        try:
            linked = _still_linked(fd, path)
        except OSError as exc:
            _close_quietly(fd)
            raise _io_error("checking", path, run_id, exc) from None
        if linked:
            return RunLock(fd, path, run_id)
        _close_quietly(fd)   # a deleter unlinked it while we waited: lock the new file
    raise RunLocked(f"run {run_id}'s lock file keeps being replaced (deleted and recreated) by "
                    f"other processes; retry when they are done", path=path, run_id=run_id)
