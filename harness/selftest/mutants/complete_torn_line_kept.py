"""Mutant ``complete-torn-line-kept``: open cuts only a final line with no newline.

A final line that ends in its newline but is not a record (zeros, garbage:
what power loss or a bad write leaves) is read as a torn tail, but open
does not cut it, so the next append follows it and the damaged line is now
inside the journal (I5: an unreadable interior line, the engine's own once
it appended past it; field case of a torn tail kept).
"""

from __future__ import annotations

NAME = "complete-torn-line-kept"
DEFECT = "open cuts a torn final line only when it lacks its newline: appends follow a complete unparsable line"
FAMILY = "tail"


def apply() -> None:
    import os

    from fiskj import store

    from harness.selftest.mutants._patch import wrap

    @wrap(store, "fold_open_file")
    def fold_open_file(original, fd, path):
        folder, reader = original(fd, path)
        torn = reader.torn_tail
        if torn is not None and os.pread(fd, 1, torn.offset + torn.length - 1) == b"\n":
            reader.torn_tail = None  # the bug: a whole line is "not torn"; appends go after it
        return folder, reader


apply()  # a preload: importing this module applies the patch (in a child process only)
