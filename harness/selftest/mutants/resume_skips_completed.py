"""Mutant ``resume-skips-completed``: a resumed leg that finishes the run exits 0 without its terminal record.

A fresh run writes ``completed`` as it should; a resumed one (its journal
held more than the meta record) prints the answer and exits 0 but never
appends the terminal record, so the journal ends on the final answer and
the run stays resumable (I6: the final status and terminal record differ
from the uninterrupted run's).
"""

from __future__ import annotations

NAME = "resume-skips-completed"
DEFECT = "a resumed leg that completes the run does not journal the completed terminal record"
FAMILY = "kill"


def apply() -> None:
    from fiskj import loop
    from fiskj.records import TerminalRecord

    from harness.selftest.mutants._patch import wrap

    @wrap(loop._Run, "__init__")
    def __init__(original, self, journal, state, *args, **kwargs):
        original(self, journal, state, *args, **kwargs)
        if state.records <= 1:
            return  # a fresh run (only its meta record): journals as it should
        real = journal.append

        def append(record, *a, **kw):
            if isinstance(record, TerminalRecord) and record.reason == "completed":
                return None  # the bug: nothing written, and the leg still ends as completed (exit 0)
            return real(record, *a, **kw)

        journal.append = append


apply()  # a preload: importing this module applies the patch (in a child process only)
