"""Mutant ``nul-block-ends-journal``: the reader takes a line of NUL bytes for the end of the journal.

A block of zeros is what a power loss leaves at the end of a file, so the
reader stops at the first line that starts with a NUL byte and reports
the rest as a torn tail, even when good records follow it.  Open then cuts
the "torn tail": every acknowledged record after a NUL block inside the
journal is cut away (I4; the tail family's interior damage, which a reader
must refuse, never take for the end).
"""

from __future__ import annotations

NAME = "nul-block-ends-journal"
DEFECT = "the reader takes a NUL block inside the journal for its end and the resume cuts what follows"
FAMILY = "tail"


def apply() -> None:
    import io

    from fiskj import reader as rd

    from harness.selftest.mutants._patch import wrap

    @wrap(rd.JournalReader, "_scan")
    def _scan(original, self, f):
        data = f.read()
        end = data.find(b"\n\x00") + 1  # the bug: a line that starts with NUL is where the journal ends
        if end == 0:
            yield from original(self, io.BytesIO(data))
            return
        yield from original(self, io.BytesIO(data[:end]))
        self.torn_tail = rd.TornTail(end, len(data) - end)


apply()  # a preload: importing this module applies the patch (in a child process only)
