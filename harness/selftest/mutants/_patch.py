"""Helpers of the mutant modules: how a patch wraps an original, and the patches several mutants share.

Imported by mutant modules only (in the child process that preloads one);
importing this module patches nothing.
"""

from __future__ import annotations

import os
from typing import Any, Callable

__all__ = ["wrap", "unsynced_write_line", "replace_flock", "ignore_fingerprint_field"]


def wrap(owner: Any, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator of a mutant's patch: ``owner.name`` (a module's function or a class's method) becomes the
    decorated function, called with the original first (``def _scan(original, self, f): ...``)."""
    original = getattr(owner, name)

    def install(patch: Callable[..., Any]) -> Callable[..., Any]:
        def patched(*args: Any, **kwargs: Any) -> Any:
            return patch(original, *args, **kwargs)

        setattr(owner, name, patched)
        return patched

    return install


def unsynced_write_line(fsync_first: bool = False) -> Callable[..., None]:
    """A ``Journal._write_line`` that returns with the line unsynced: one write and no fsync after it.

    With ``fsync_first`` an fsync comes before the write (and syncs none of
    the line).  Failures are reported as the write's; the store directory's
    fsync on a new journal's first append stays.  Shared by ``no-fsync`` and
    ``fsync-before-write``.
    """
    from fiskj import ioseam

    def _write_line(self: Any, line: bytes, seq: int) -> None:
        try:
            if fsync_first:
                ioseam.fsync(self._fd)
            written = ioseam.write(self._fd, line)
        except OSError as exc:
            raise self._fail("write", seq, exc) from None
        if written != len(line):
            raise self._fail("write", seq, OSError(0, "short write"))
        if self._sync_dir:
            ioseam.fsync_dir(self.directory)
            self._sync_dir = False

    return _write_line


def replace_flock(call: Callable[[int, int], None]) -> None:
    """Make ``call`` the IO seam's ``flock``, traced or not, so that traces still show it as ``flock``.

    Patches the seam's own call tables and configures the seam again from
    the environment, so that a later :func:`fiskj.ioseam.configure` keeps it.  Shared by ``lockf`` and
    ``blocking-lock``.
    """
    from fiskj import ioseam

    ioseam._PLAIN["flock"] = call
    ioseam._TRACED["flock"] = ioseam._fd_call("flock", call)
    ioseam.configure(os.environ.get(ioseam.TRACE_ENV) or None, os.environ.get(ioseam.FAULT_ENV) or None)


def ignore_fingerprint_field(field: str) -> None:
    """Patch the resume guard (``fiskj.fingerprint.diff``, and ``loop``'s copy of it) to ignore one fingerprint
    ``field`` (``model``, ``system_hash``, ``tools_hash``, ``thinking_mode``, ``max_tokens``,
    ``max_iterations``): a resume with that field drifted is let through.  Shared by the
    ``fingerprint-ignores-*`` mutants."""
    import dataclasses

    from fiskj import fingerprint, loop

    @wrap(fingerprint, "diff")
    def diff(original: Any, stored: Any, current: Any) -> Any:
        return original(stored, dataclasses.replace(current, **{field: getattr(stored, field)}))  # the bug

    loop.diff = diff  # loop imported the name: patch its copy too
