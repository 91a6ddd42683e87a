"""Mutant ``reader-drops-final-record``: a complete final record is dropped as if it were a torn tail."""

from __future__ import annotations

NAME = "reader-drops-final-record"
DEFECT = "the reader drops a complete, valid final record (reports it as a torn tail)"
FAMILY = "tail"


def apply() -> None:
    from fiskj import reader as rd

    from harness.selftest.mutants._patch import wrap

    @wrap(rd.JournalReader, "_scan")
    def _scan(original, self, f):
        sizes, records = [0], []
        for record in original(self, f):
            records.append(record)
            sizes.append(self.good_size)
        if records and self.torn_tail is None:  # the bug: the last good line is treated as torn
            records.pop()
            self.good_size = sizes[-2]
            self.torn_tail = rd.TornTail(sizes[-2], sizes[-1] - sizes[-2])
            self.lines -= 1
        yield from records


apply()  # a preload: importing this module applies the patch (in a child process only)
