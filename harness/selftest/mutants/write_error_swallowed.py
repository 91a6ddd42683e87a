"""Mutant ``write-error-swallowed``: a failed write of the journal (ENOSPC, EIO) is ignored.

The record whose write failed is treated as appended: the run goes on and
completes over a hole in its journal (a record that never reached the
file), as an engine that does not check write's result would (I4: after a
failed write of the journal, a later write succeeded and the run
completed; docs/spec.md section 9).
"""

from __future__ import annotations

NAME = "write-error-swallowed"
DEFECT = "a failed journal write is ignored: the run goes on and completes over a hole"
FAMILY = "io_error"


def apply() -> None:
    from fiskj import ioseam  # the journal calls ioseam.write through the module: the patch reaches it

    from harness.selftest.mutants._patch import wrap

    @wrap(ioseam, "write")
    def write(original, fd, data):
        try:
            return original(fd, data)
        except OSError:
            return len(data)  # the bug: as if all of it was written


apply()  # a preload: importing this module applies the patch (in a child process only)
