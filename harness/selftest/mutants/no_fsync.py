"""Mutant ``no-fsync``: each append is one write and no fsync (the directory fsync stays)."""

from __future__ import annotations

NAME = "no-fsync"
DEFECT = "appends are written but never fsynced: an acknowledged record can be lost to a power loss"
FAMILY = "power_loss"


def apply() -> None:
    from fiskj.journal import Journal

    from harness.selftest.mutants._patch import unsynced_write_line

    Journal._write_line = unsynced_write_line()  # the bug: no fsync after the write


apply()  # a preload: importing this module applies the patch (in a child process only)
