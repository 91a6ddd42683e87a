"""Mutant ``fsync-before-write``: the journal is fsynced, then the line written (so never synced in time)."""

from __future__ import annotations

NAME = "fsync-before-write"
DEFECT = "the fsync comes before the write: each append returns with its record unsynced"
FAMILY = "power_loss"


def apply() -> None:
    from fiskj.journal import Journal

    from harness.selftest.mutants._patch import unsynced_write_line

    Journal._write_line = unsynced_write_line(fsync_first=True)  # the bug: fsync, then write


apply()  # a preload: importing this module applies the patch (in a child process only)
