"""Mutant ``cache-counters-not-folded``: the fold does not sum the cache token counters.

Every assistant record's ``cache_read_tokens`` and ``cache_create_tokens``
count toward the run's token budget (docs/spec.md section 8, rule 8).  This
fold leaves them out, so a resumed run restores its token count without
the cache tokens it spent: a run that must end on its budget ends later
than the uninterrupted run, with more turns (I6).  The journal itself is
unchanged (the live leg counts every reply's usage in memory).
"""

from __future__ import annotations

NAME = "cache-counters-not-folded"
DEFECT = "the fold drops the cache token counters, so a resumed run restores its token count without them"
FAMILY = "kill"


def apply() -> None:
    from fiskj import fold

    from harness.selftest.mutants._patch import wrap

    @wrap(fold.Folder, "_open_turn")
    def _open_turn(original, self, record, ids):
        original(self, record, ids)
        # the bug: the cache counts are not summed (taken back out of what the original added)
        self._c["cache_read_tokens"] -= record.cache_read_tokens or 0
        self._c["cache_create_tokens"] -= record.cache_create_tokens or 0

    fold._RULES = fold._compile(fold.TRANSITIONS)  # the table holds the methods it was compiled with


apply()  # a preload: importing this module applies the patch (in a child process only)
