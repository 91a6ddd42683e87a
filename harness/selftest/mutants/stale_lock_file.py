"""Mutant ``stale-lock-file``: the run lock is an ``O_EXCL`` marker file instead of a kernel lock.

The kernel drops a lock when its holder dies; a marker file stays behind
(docs/spec.md section 10, rule 3), so a SIGKILLed holder leaves the run
locked.  Caught by the race ``holder-killed`` (the next writer cannot take
the run over: the run stays unfinished, I6, I8).
"""

from __future__ import annotations

NAME = "stale-lock-file"
DEFECT = "the lock is an O_EXCL marker file that a SIGKILLed holder leaves behind"
FAMILY = "race"
RACE = "holder-killed"


def apply() -> None:
    import os

    from fiskj import ioseam, lock, store
    from fiskj.errors import RunLocked

    class MarkerLock(lock.RunLock):
        __slots__ = ()

        def release(self) -> None:
            if self.fd is not None:
                try:
                    os.unlink(self.path + ".held")
                except OSError:
                    pass
            lock.RunLock.release(self)

    def acquire(path, run_id):  # a marker file instead of a kernel lock: a crash leaves it behind
        try:
            mfd = os.open(path + ".held", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            raise RunLocked(f"run {run_id} is held by another writer", path=path, run_id=run_id) from None
        os.close(mfd)
        fd = ioseam.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        return MarkerLock(fd, path, run_id)

    lock.acquire = acquire
    store.acquire = acquire  # store imported the name: patch its copy too


apply()  # a preload: importing this module applies the patch (in a child process only)
