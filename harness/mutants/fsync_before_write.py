"""Mutant ``fsync-before-write``: the journal is fsynced, then the line written (so never synced in time)."""

from __future__ import annotations

NAME = "fsync-before-write"
DEFECT = "the fsync comes before the write: each append returns with its record unsynced"
FAMILY = "power_loss"


def apply() -> None:
    from fiskj import ioseam
    from fiskj.journal import Journal

    def _write_line(self, line: bytes, seq: int) -> None:
        try:
            ioseam.fsync(self._fd)
            written = ioseam.write(self._fd, line)
        except OSError as exc:
            raise self._fail("write", seq, exc) from None
        if written != len(line):
            raise self._fail("write", seq, OSError(0, "short write"))
        if self._sync_dir:
            ioseam.fsync_dir(self.directory)
            self._sync_dir = False

    Journal._write_line = _write_line
