"""Mutant ``newline-first``: records are framed with the newline first, so the last record never ends in one.

Each record after the first is written as ``"\\n" + record`` instead of
``record + "\\n"``: the journal holds the same records, but its last line
never has its newline, so every reader takes the last record for a torn
tail, the terminal record included.  The uninterrupted run already ends
wrong (its own journal reads as open, and I5: a clean exit that left a
torn tail); the harness judges it as a trial.
"""

from __future__ import annotations

NAME = "newline-first"
DEFECT = "records are framed newline-first: the final record never ends in its newline and reads as torn"
FAMILY = "kill"


def apply() -> None:
    from fiskj.journal import Journal

    from harness.selftest.mutants._patch import wrap

    @wrap(Journal, "_write_line")
    def _write_line(original, self, line, seq):
        framed = (b"\n" if self._size else b"") + line[:-1]  # the bug: the separator goes first
        return original(self, framed, seq)


apply()  # a preload: importing this module applies the patch (in a child process only)
