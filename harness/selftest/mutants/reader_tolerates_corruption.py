"""Mutant ``reader-tolerates-corruption``: the reader skips an unparsable interior line instead of raising."""

from __future__ import annotations

NAME = "reader-tolerates-corruption"
DEFECT = "the reader silently skips an unparsable line in the middle of the journal"
FAMILY = "tail"


def apply() -> None:
    from fiskj import reader as rd
    from fiskj.errors import JournalError

    def _scan(self, f):
        offset = 0
        for number, line in enumerate(iter(lambda: f.readline(rd.MAX_RECORD_BYTES + 1), b""), 1):
            if not line.endswith(b"\n"):
                self.torn_tail = rd.TornTail(offset, len(line))
                return
            try:
                record = rd.decode_record(line)
            except JournalError:
                if rd._at_eof(f):
                    self.torn_tail = rd.TornTail(offset, len(line))
                    return
                offset += len(line)  # the mutant's bug: skip it and carry on
                continue
            offset += len(line)
            self.good_size, self.lines = offset, number
            yield record

    rd.JournalReader._scan = _scan


apply()  # a preload: importing this module applies the patch (in a child process only)
