"""Mutant ``no-dir-fsync``: the first append of a new journal does not fsync the store directory (F09)."""

from __future__ import annotations

NAME = "no-dir-fsync"
DEFECT = "no directory fsync on the first append: a power loss can drop the new journal's name (F09)"
FAMILY = "power_loss"


def apply() -> None:
    from fiskj.journal import Journal

    from harness.selftest.mutants import wrap

    @wrap(Journal, "__init__")
    def __init__(original, self, *args, **kwargs) -> None:
        original(self, *args, **kwargs)
        self._sync_dir = False
