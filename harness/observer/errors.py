"""The observer's errors: one base class, each also a builtin so callers may catch either."""

from __future__ import annotations

from harness.cbuild import CBuildError


class ObserverError(Exception):
    """Base of every error of :mod:`harness.observer`."""


class UnsupportedPlatform(ObserverError, OSError):
    """The tracer needs x86_64 Linux (its syscall numbers and registers are x86_64's)."""


class BuildError(ObserverError, CBuildError):
    """The tracer could not be built: gcc is missing or the compile failed (a :class:`RuntimeError`).

    ``cmd`` is the command run (a list), ``stderr`` what it printed (may be empty)."""


class CompilerMissing(BuildError):
    """No C compiler (gcc) was found on PATH."""


class CompileFailed(BuildError):
    """gcc ran and failed; ``stderr`` holds its diagnostics."""


class FaultSpecError(ObserverError, ValueError):
    """A fault spec is not ``ACTION@K[:KINDS]``."""


class LogFormatError(ObserverError, ValueError):
    """A line of the observer's log is malformed; names the 1-based line and the field."""

    def __init__(self, lineno: int, field: str, why: str) -> None:
        super().__init__(f"observer log line {lineno}: field {field!r}: {why}")
        self.lineno = lineno
        self.field = field


class ControlError(ObserverError, RuntimeError):
    """The control channel failed: no control requested, or the tracer ended first."""


class ControlTimeout(ControlError, TimeoutError):
    """No ``paused`` line arrived within the timeout."""
