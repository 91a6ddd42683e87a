"""Mutant ``no-fsync``: each append is one write and no fsync (the directory fsync stays)."""

from __future__ import annotations

NAME = "no-fsync"
DEFECT = "appends are written but never fsynced: an acknowledged record can be lost to a power loss"
FAMILY = "power_loss"


def apply() -> None:
    from fiskj import ioseam
    from fiskj.journal import Journal

    def _write_line(self, line: bytes, seq: int) -> None:
        try:
            written = ioseam.write(self._fd, line)
        except OSError as exc:
            raise self._fail("write", seq, exc) from None
        if written != len(line):
            raise self._fail("write", seq, OSError(0, "short write"))
        if self._sync_dir:
            ioseam.fsync_dir(self.directory)
            self._sync_dir = False

    Journal._write_line = _write_line
