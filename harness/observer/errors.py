"""The observer's errors: one base class, each also a builtin so callers may catch either."""

from __future__ import annotations


class ObserverError(Exception):
    """Base of every error of :mod:`harness.observer`."""


class UnsupportedPlatform(ObserverError, OSError):
    """The tracer needs x86_64 Linux (its syscall numbers and registers are x86_64's)."""


class BuildError(ObserverError, RuntimeError):
    """The tracer could not be built: gcc is missing or the compile failed.

    ``cmd`` is the command run (a list), ``stderr`` what it printed (may be empty)."""

    def __init__(self, message: str, cmd: list[str], stderr: str = "") -> None:
        super().__init__(f"{message}: {' '.join(cmd)}" + (f"\n{stderr.rstrip()}" if stderr else ""))
        self.cmd = cmd
        self.stderr = stderr


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
