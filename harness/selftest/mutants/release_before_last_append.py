"""Mutant ``release-before-last-append``: the run lock is released before the terminal record is appended.

The lock must be held from before a writer's first change of the journal
until after its last (docs/spec.md section 10, rule 1).  Caught by the race
``two-writers``: the held writer appends its terminal record after its
unlock (I8).
"""

from __future__ import annotations

NAME = "release-before-last-append"
DEFECT = "the run lock is released before the last (terminal) append"
FAMILY = "race"
RACE = "two-writers"


def apply() -> None:
    from fiskj.journal import Journal
    from fiskj.records import TerminalRecord

    from harness.selftest.mutants._patch import wrap

    @wrap(Journal, "append")
    def append(original, self, record):  # the lock goes before the terminal record is written
        if isinstance(record, TerminalRecord):
            self._lock.release()
        return original(self, record)


apply()  # a preload: importing this module applies the patch (in a child process only)
