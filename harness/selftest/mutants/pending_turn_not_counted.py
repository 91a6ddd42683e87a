"""Mutant ``pending-turn-not-counted``: a resume numbers iterations as if the pending turn were not there.

When a run is resumed with a pending tool batch, the next iteration number
is taken one lower than the fold's: the pending assistant turn is not
counted.  The resumed run then numbers a turn twice and, with an iteration
cap, overruns it by one (I6: the iteration count differs from the
uninterrupted run's).
"""

from __future__ import annotations

NAME = "pending-turn-not-counted"
DEFECT = "resume ignores the pending assistant turn when numbering iterations (a capped run overruns its cap)"
FAMILY = "kill"


def apply() -> None:
    from fiskj import loop

    from harness.selftest.mutants._patch import wrap

    @wrap(loop._Run, "__init__")
    def __init__(original, self, journal, state, *args, **kwargs):
        original(self, journal, state, *args, **kwargs)
        if state.pending is not None:
            self.iteration = max(0, state.next_iteration - 1)  # the bug: the pending turn is not counted


apply()  # a preload: importing this module applies the patch (in a child process only)
