"""The standard streams of a ``fiskj-harness`` command, guarded against a closed pipe (:class:`SafeStream`)."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["SafeStream"]


class SafeStream:
    """``sys.stdout`` / ``sys.stderr`` for the duration of a command: a write to a closed pipe (``fiskj-harness run
    | head``, a CI log reader gone) is dropped instead of raising ``BrokenPipeError`` halfway through the
    reports; everything else is the stream's own."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.broken = False

    def _guarded(self, call: Any, default: Any) -> Any:
        """``call()``, or ``default`` once the stream is broken (a closed pipe or file)."""
        if self.broken or self._stream is None:
            return default
        try:
            return call()
        except BrokenPipeError:
            self.broken = True
        except ValueError:  # "I/O operation on closed file"; any other ValueError (an encoding's) is raised
            if not getattr(self._stream, "closed", False):
                raise
            self.broken = True
        return default

    def write(self, text: str) -> int:
        """Write ``text``; nothing once the stream is broken."""
        return self._guarded(lambda: self._stream.write(text), len(text))

    def flush(self) -> None:
        """Flush; nothing once the stream is broken."""
        self._guarded(self._stream.flush if self._stream is not None else None, None)

    def isatty(self) -> bool:
        """The stream's own answer; False for a broken or missing one."""
        try:
            return not self.broken and self._stream is not None and bool(self._stream.isatty())
        except (OSError, ValueError):
            return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def silence(self) -> None:
        """After a broken pipe: point the stream's descriptor at /dev/null, so that the interpreter's last flush at
        exit does not print ``Exception ignored ... BrokenPipeError``."""
        if not self.broken or self._stream is None:
            return
        try:
            fd = self._stream.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass
