"""Mutant ``unlock-before-close``: the run lock is released before the journal is closed.

``Journal.close`` releases the lock first, then closes the journal's
descriptor: between the two another writer can take the run while this
process still holds a writable descriptor of it (I8: the lock must be
held until the writer's last fsync and close).
"""

from __future__ import annotations

NAME = "unlock-before-close"
DEFECT = "the run lock is released before the journal's descriptor is closed"
FAMILY = "race"
RACE = "two-writers"


def apply() -> None:
    from fiskj import ioseam
    from fiskj.journal import Journal

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        self._lock.release()  # the bug: the lock goes first
        ioseam.close(fd)

    Journal.close = close


apply()  # a preload: importing this module applies the patch (in a child process only)
