"""Mutant ``blocking-lock``: ``flock`` without ``LOCK_NB``: a second writer waits instead of being refused.

A busy lock must be ``RunLocked`` at once (docs/spec.md section 10,
rule 2).  Caught by the race ``two-writers`` (the rival meets the lock while the held writer holds it,
and waits in ``flock`` until it is killed: I8 ``waited_for_lock``).
"""

from __future__ import annotations

NAME = "blocking-lock"
DEFECT = "flock without LOCK_NB: the second writer waits instead of failing at once"
FAMILY = "race"
RACE = "two-writers"


def apply() -> None:
    import fcntl

    from fiskj import ioseam

    from harness.selftest.mutants._patch import replace_flock

    real = ioseam._PLAIN["flock"]

    def blocking(fd: int, operation: int) -> None:
        real(fd, operation & ~fcntl.LOCK_NB)

    replace_flock(blocking)


apply()  # a preload: importing this module applies the patch (in a child process only)
