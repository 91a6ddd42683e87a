"""Mutant ``store-dir-not-durable``: new store directories are created without fsyncing their parents.

fisk-ai's defect 4 (docs/spec.md section 16; section 9, rule 3).
"""

from __future__ import annotations

NAME = "store-dir-not-durable"
DEFECT = "the store directory is created (mkdir -p) but its entry is never fsynced in its parent (defect 4)"
FAMILY = "power_loss"


def apply() -> None:
    import os

    from fiskj import ioseam
    from fiskj.store import FileStore

    def _ensure_dir(self, run_id: str) -> None:
        missing, d = [], self.directory
        while not os.path.lexists(d):
            missing.append(d)
            d = os.path.dirname(d)
        for d in reversed(missing):
            try:
                ioseam.mkdir(d, 0o700)
            except FileExistsError:
                pass
        self._check_dir(run_id)

    FileStore._ensure_dir = _ensure_dir


apply()  # a preload: importing this module applies the patch (in a child process only)
