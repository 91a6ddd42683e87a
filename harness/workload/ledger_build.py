"""Which ledger tool the agents run: the compiled fast path (``ledger_tool.c``) or the Python script.

The script (harness/workload/ledger_tool.py) is the contract and its one full implementation; the
compiled tool, run as ``[BINARY, PYTHON, SCRIPT, NAME]``, is a fast path for the inputs the harness's own
workload sends (about 1 ms of CPU against about 20 ms for the script) and hands any other input to the script
before any effect: docs/subject.md "The tools", which also gives ``$FISKJ_LEDGER_TOOL`` (``auto``, the
default, ``c`` or ``python``; ``c`` raises :class:`LedgerBuildError` when it cannot be built).  The choice is
:func:`ledger_tool_choice` (its ``reason`` says why).

The binary is built as the observer's tracer is (harness/observer/build.py):
once per source version, into ``$XDG_CACHE_HOME/fiskj`` (``~/.cache/fiskj``)
as ``fiskj-ledger-tool-<sha256 prefix of the source and flags>``, compiled
with ``gcc -std=c99 -O2 -Wall -Werror`` into a temporary file in that
directory and renamed into place, so no reader ever sees a partial file
(the shared mechanism: :mod:`harness.cbuild`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from harness.cbuild import CBuildError, CProgram, cache_dir, cached_build
from harness.cbuild import compile_to as _compile_to

__all__ = ["SOURCE", "SCRIPT", "ENV", "LedgerBuildError", "CompilerMissing", "CompileFailed", "BadChoice",
           "ToolChoice", "binary_name", "ledger_binary", "compile_to", "ledger_tool_choice"]

#: The compiled tool's source and the Python script it falls back to.
SOURCE = Path(__file__).resolve().with_name("ledger_tool.c")
SCRIPT = Path(__file__).resolve().with_name("ledger_tool.py")
#: The environment variable that picks the tool: ``auto`` (default), ``c`` or ``python``.
ENV = "FISKJ_LEDGER_TOOL"
CFLAGS = ("-std=c99", "-O2", "-Wall", "-Werror")


class LedgerBuildError(CBuildError):
    """The compiled ledger tool could not be built (a :class:`RuntimeError`).

    ``cmd`` is the command run (a list), ``stderr`` what it printed (may be empty)."""


class CompilerMissing(LedgerBuildError):
    """No C compiler (gcc) was found on PATH."""


class CompileFailed(LedgerBuildError):
    """gcc ran and failed; ``stderr`` holds its diagnostics."""


_LEDGER_TOOL = CProgram("the ledger tool", CFLAGS, f"set {ENV}=python", CompilerMissing, CompileFailed)


class BadChoice(ValueError):
    """``$FISKJ_LEDGER_TOOL`` is not ``auto``, ``c`` or ``python``."""


@dataclass(frozen=True)
class ToolChoice:
    """The ledger tool in use: ``kind`` is ``"c"`` or ``"python"``; ``prefix`` the
    command before the tool name (``[BINARY, python, SCRIPT]``: the compiled tool and the
    script it falls back to, or ``[python, "-I", "-S", SCRIPT]``);
    ``reason`` one line saying why this one."""

    kind: str
    prefix: tuple[str, ...]
    reason: str

    def command(self, name: str) -> list[str]:
        """The command that runs tool ``name``."""
        return [*self.prefix, name]


def binary_name(source: Path = SOURCE) -> str:
    """``fiskj-ledger-tool-<first 16 hex digits of sha256(source + flags)>``."""
    digest = hashlib.sha256(source.read_bytes() + "\0".join(CFLAGS).encode())
    return "fiskj-ledger-tool-" + digest.hexdigest()[:16]


def ledger_binary(source: Path = SOURCE) -> Path:
    """The cached build of ``source`` (built if missing); raises a :class:`LedgerBuildError`."""
    return cached_build(_LEDGER_TOOL, cache_dir() / binary_name(source), source)


def compile_to(target: Path, source: Path = SOURCE) -> Path:
    """Compile ``source`` to ``target`` atomically (temporary file + rename); raise a :class:`LedgerBuildError`."""
    return _compile_to(_LEDGER_TOOL, target, source)


def _python_choice(interpreter: str, reason: str) -> ToolChoice:
    return ToolChoice("python", (interpreter, "-I", "-S", str(SCRIPT)), reason)


def ledger_tool_choice(interpreter: str) -> ToolChoice:
    """The ledger tool to give agents, per ``$FISKJ_LEDGER_TOOL`` (module docstring).

    ``interpreter`` runs the script: when that is the choice, and in the compiled tool's
    fallback (its command is ``[BINARY, interpreter, SCRIPT, NAME]``).  Raises
    :class:`BadChoice` for an unknown setting and, for ``c``, a
    :class:`LedgerBuildError` when the tool cannot be built.
    """
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
                                           f"each tool run starts an interpreter (about 10 ms more)")
    return ToolChoice("c", (str(binary), interpreter, str(SCRIPT)),
                      f"compiled from {SOURCE.name}, {SCRIPT.name} for inputs off its fast path ({ENV}={setting})")
