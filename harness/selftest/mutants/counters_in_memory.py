"""Mutant ``counters-in-memory``: the run's counters live in memory and restart at zero on a resume.

The tokens spent and the iteration number are not taken from the fold of
the journal when a run is resumed.  A resumed run then spends its token
budget (and its iteration cap) again from zero: a run that must end on its
budget or cap ends later than the uninterrupted run, with more turns (I6).
"""

from __future__ import annotations

NAME = "counters-in-memory"
DEFECT = "counters (tokens spent, iteration) are kept in memory and start from zero on resume instead of the fold"
FAMILY = "kill"


def apply() -> None:
    from fiskj import loop

    from harness.selftest.mutants._patch import wrap

    @wrap(loop._Run, "__init__")
    def __init__(original, self, journal, state, *args, **kwargs):
        original(self, journal, state, *args, **kwargs)
        self.tokens = 0  # the bug: not state.counters.total_tokens
        self.iteration = 0  # the bug: not state.next_iteration


apply()  # a preload: importing this module applies the patch (in a child process only)
