"""Mutant ``lockf``: the run lock is a ``lockf`` (POSIX record) lock, not ``flock``.

A record lock belongs to the process and vanishes when any descriptor of
the file closes (docs/spec.md section 10, rule 1).  The seam's own call
tables are patched, so traces still show the calls as ``flock``.  fiskj's
commands never close another descriptor of the lock file while they hold
it, so no campaign sees it: the unit tests of tests/test_lock.py catch it
(field case F18: the holder opens and closes the lock file, and the other
writer is not refused).
"""

from __future__ import annotations

NAME = "lockf"
DEFECT = "the run lock is fcntl.lockf, dropped when any descriptor of the lock file closes"
FAMILY = "unit"


def _lockf_call(fd: int, operation: int) -> None:
    import fcntl

    fcntl.lockf(fd, operation)


def apply() -> None:
    from harness.selftest.mutants._patch import replace_flock

    replace_flock(_lockf_call)


apply()  # a preload: importing this module applies the patch (in a child process only)
