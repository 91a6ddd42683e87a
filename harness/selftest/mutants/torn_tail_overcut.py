"""Mutant ``torn-tail-overcut``: the torn-tail repair cuts one complete, acknowledged line too many.

On resume, a journal ending in a torn line is cut back to its last
complete line (docs/spec.md section 9).  This repair cuts back to the start
of that line instead, destroying a record acknowledged before the crash;
the fold it already made still holds the record, so the next append leaves
a gap in the sequence.  I4 (``truncated_acknowledged`` after a kill or a
torn tail; ``lost_by_recovery`` after a power loss) names the loss itself,
before its consequences (an unreadable journal, I5; a different result, I6).
"""

from __future__ import annotations

NAME = "torn-tail-overcut"
DEFECT = "the torn-tail repair cuts back one complete, acknowledged line too many"
FAMILY = "tail"


def apply() -> None:
    import os

    from fiskj import store

    from harness.selftest.mutants._patch import wrap

    @wrap(store, "fold_open_file")
    def fold_open_file(original, fd, path):
        folder, reader = original(fd, path)
        if reader.torn_tail is not None:  # the bug: back to the start of the last complete line as well
            good = os.pread(fd, reader.good_size, 0)
            reader.good_size = good[:-1].rfind(b"\n") + 1
        return folder, reader


apply()  # a preload: importing this module applies the patch (in a child process only)
