"""Which ledger tool the agents run, the compiled fast path or the script: docs/workload.md "Which tool"."""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.cbuild import CBuildError, CProgram, cache_dir, cached_build

__all__ = ["SOURCE", "SCRIPT", "ENV", "LedgerBuildError", "CompilerMissing", "CompileFailed", "BadChoice",
           "ToolChoice", "ledger_binary", "ledger_tool"]

#: The compiled tool's source and the Python script it falls back to.
SOURCE = Path(__file__).resolve().with_name("ledger_tool.c")
SCRIPT = Path(__file__).resolve().with_name("ledger_tool.py")
#: The environment variable that picks the tool: ``auto`` (default), ``c`` or ``python``.
ENV = "FISKJ_LEDGER_TOOL"
CFLAGS = ("-std=c99", "-O2", "-Wall", "-Werror")


class LedgerBuildError(CBuildError):
    """The compiled ledger tool could not be built (a :class:`harness.cbuild.CBuildError`: ``cmd``, ``stderr``)."""


class CompilerMissing(LedgerBuildError):
    """No C compiler (gcc) was found on PATH."""


class CompileFailed(LedgerBuildError):
    """gcc ran and failed; ``stderr`` holds its diagnostics."""


_LEDGER_TOOL = CProgram("the ledger tool", CFLAGS, f"set {ENV}=python", CompilerMissing, CompileFailed)


class BadChoice(ValueError):
    """``$FISKJ_LEDGER_TOOL`` is not ``auto``, ``c`` or ``python``."""


@dataclass(frozen=True)
class ToolChoice:
    """The ledger tool in use: ``kind`` ``"c"`` or ``"python"``; ``prefix`` the command before the tool name
    (``[BINARY, python, SCRIPT]`` or ``[python, "-I", "-S", SCRIPT]``); ``reason`` one line saying why."""

    kind: str
    prefix: tuple[str, ...]
    reason: str

    def command(self, name: str) -> list[str]:
        """The command that runs tool ``name``."""
        return [*self.prefix, name]


def ledger_binary(source: Path = SOURCE) -> Path:
    """The cached build of ``source`` (built if missing), named for a hash of it and the flags; raises a
    :class:`LedgerBuildError`."""
    digest = hashlib.sha256(source.read_bytes() + "\0".join(CFLAGS).encode()).hexdigest()[:16]
    return cached_build(_LEDGER_TOOL, cache_dir() / f"fiskj-ledger-tool-{digest}", source)


def _python_choice(interpreter: str, reason: str) -> ToolChoice:
    return ToolChoice("python", (interpreter, "-I", "-S", str(SCRIPT)), reason)


def ledger_tool(interpreter: str | None = None) -> ToolChoice:
    """The ledger tool to give agents, per ``$FISKJ_LEDGER_TOOL``; ``interpreter`` runs the script (chosen,
    or as the compiled tool's fallback; default: this interpreter's real binary, not a wrapper script, which
    costs ~60 ms a start).  Raises :class:`BadChoice` for an unknown setting and, for ``c``, a
    :class:`LedgerBuildError` when the tool cannot be built."""
    interpreter = interpreter or os.path.realpath(sys.executable)
    setting = os.environ.get(ENV, "").strip().lower() or "auto"
    if setting == "python":
        return _python_choice(interpreter, f"{ENV}=python")
    if setting not in ("auto", "c"):
        raise BadChoice(f"{ENV}={os.environ.get(ENV)!r}: expected auto, c or python")
    try:
        binary = ledger_binary()
    except LedgerBuildError as exc:
        if setting == "c":
            raise
        first = str(exc).splitlines()[0]
        return _python_choice(interpreter, f"the compiled ledger tool cannot be built ({first}); "
                                           "each tool run starts an interpreter (about 10 ms more)")
    return ToolChoice("c", (str(binary), interpreter, str(SCRIPT)),
                      f"compiled from {SOURCE.name}, {SCRIPT.name} for inputs off its fast path ({ENV}={setting})")
