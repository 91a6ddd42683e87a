"""Mutant ``fsync-error-retried``: a failed fsync of the journal is retried, and the append goes on as acknowledged.

On Linux a retried fsync after EIO returns success although the dirty pages may be gone (the kernel
marks them clean): a record whose fsync failed must never be treated as durable (docs/spec.md section 9).
"""

from __future__ import annotations

NAME = "fsync-error-retried"
DEFECT = "a failed fsync is retried until it succeeds and the append is acknowledged"
FAMILY = "io_error"


def apply() -> None:
    from fiskj import ioseam
    from fiskj.journal import Journal

    def _write_line(self, line: bytes, seq: int) -> None:
        fd = self._fd
        assert fd is not None
        ioseam.write(fd, line)
        for _ in range(3):  # the bug: retry the fsync and carry on
            try:
                ioseam.fsync(fd)
                break
            except OSError:
                continue
        if self._sync_dir:
            ioseam.fsync_dir(self.directory)
            self._sync_dir = False

    Journal._write_line = _write_line


apply()  # a preload: importing this module applies the patch (in a child process only)
