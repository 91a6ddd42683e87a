"""Mutant ``torn-tail-not-cut``: open keeps a torn final line, so the next append is glued to it.

fisk-ai's defect 1 (docs/spec.md section 16; section 9, rule 4).
"""

from __future__ import annotations

NAME = "torn-tail-not-cut"
DEFECT = "open does not cut a torn tail before appending: the next record is glued to the torn bytes (defect 1)"
FAMILY = "tail"


def apply() -> None:
    from fiskj import store

    from harness.selftest.mutants._patch import wrap

    @wrap(store, "fold_open_file")
    def fold_open_file(original, fd, path):
        folder, reader = original(fd, path)
        reader.torn_tail = None  # "nothing to cut": appends go (O_APPEND) after the torn bytes
        return folder, reader


apply()  # a preload: importing this module applies the patch (in a child process only)
