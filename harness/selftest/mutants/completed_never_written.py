"""Mutant ``completed-never-written``: no run ever journals its ``completed`` terminal record.

The run prints its answer and exits 0, but its journal ends on the final
answer: the uninterrupted run itself is wrong, so there is nothing sound to
compare faulted trials with.  The harness judges that run as a trial (I6:
the uninterrupted run did not end as its workload says) instead of giving
up with a setup error.
"""

from __future__ import annotations

NAME = "completed-never-written"
DEFECT = "the run never journals its completed terminal record (the uninterrupted run itself ends wrong)"
FAMILY = "kill"


def apply() -> None:
    from fiskj import loop
    from fiskj.records import TerminalRecord

    from harness.selftest.mutants._patch import wrap

    @wrap(loop._Run, "__init__")
    def __init__(original, self, journal, state, *args, **kwargs):
        original(self, journal, state, *args, **kwargs)
        real = journal.append

        def append(record, *a, **kw):
            if isinstance(record, TerminalRecord) and record.reason == "completed":
                return None  # the bug: the leg still ends as completed (exit 0)
            return real(record, *a, **kw)

        journal.append = append


apply()  # a preload: importing this module applies the patch (in a child process only)
