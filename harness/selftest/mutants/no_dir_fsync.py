"""Mutant ``no-dir-fsync``: the first append of a new journal does not fsync the store directory.

The first append of a journal ``create`` just made must fsync the store
directory, so the new name survives a power loss (docs/spec.md section 9,
rule 2).
"""

from __future__ import annotations

NAME = "no-dir-fsync"
DEFECT = "no directory fsync on the first append: a power loss can drop the new journal's name"
FAMILY = "power_loss"


def apply() -> None:
    from fiskj.journal import Journal

    from harness.selftest.mutants._patch import wrap

    @wrap(Journal, "__init__")
    def __init__(original, self, *args, **kwargs) -> None:
        original(self, *args, **kwargs)
        self._sync_dir = False


apply()  # a preload: importing this module applies the patch (in a child process only)
