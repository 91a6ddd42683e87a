"""Mutant ``torn-tail-is-corrupt``: ``load`` and ``list`` raise on a partial last line.

A writer's partial last line is a torn tail to a reader that does not
lock, never an error (docs/spec.md section 10, rule 5).  fiskj writes a
record in one write, so a race's reader never sees half a line; the tail
family (``tails-basic``) gives the reader torn journals: it answers
corruption where the journal holds a torn tail (I5).
"""

from __future__ import annotations

NAME = "torn-tail-is-corrupt"
DEFECT = "load and list raise on a partial last line instead of reporting a torn tail"
FAMILY = "tail"


def apply() -> None:
    from fiskj import store as st
    from fiskj.errors import CorruptJournal

    original = st.FileStore._read

    def read(self, run_id):
        state, info = original(self, run_id)
        if state.torn_tail is not None:
            raise CorruptJournal("unparsable final line", path=st.journal_path(self.directory, run_id),
                                 line=state.records + 1, offset=state.torn_tail.offset)
        return state, info

    st.FileStore._read = read


apply()  # a preload: importing this module applies the patch (in a child process only)
