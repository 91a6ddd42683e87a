"""Building a C helper of the harness (the tracer, the ledger tool) once per source version, atomically.

Into ``$XDG_CACHE_HOME/fiskj``, by gcc into a temporary file there renamed into place: no reader ever sees a
partial file."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CBuildError", "CProgram", "cache_dir", "compile_to", "cached_build"]


class CBuildError(RuntimeError):
    """A C helper of the harness could not be built: gcc is missing or the compile failed.  The base of each
    package's own build error; ``cmd`` is the command run (a list), ``stderr`` what it printed (may be empty)."""

    def __init__(self, message: str, cmd: list[str], stderr: str = "") -> None:
        super().__init__(f"{message}: {' '.join(cmd)}" + (f"\n{stderr.rstrip()}" if stderr else ""))
        self.cmd = cmd
        self.stderr = stderr


@dataclass(frozen=True)
class CProgram:
    """A C program the harness builds: ``what`` names it in messages, ``cflags`` are gcc's flags,
    ``missing_hint`` ends the missing-gcc message, ``compiler_missing``/``compile_failed`` are the errors
    raised; ``lock`` serialises its builds within the process."""

    what: str
    cflags: tuple[str, ...]
    missing_hint: str
    compiler_missing: type[CBuildError]
    compile_failed: type[CBuildError]
    lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/fiskj`` (an absolute XDG_CACHE_HOME only), else ``~/.cache/fiskj``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "fiskj"


def cached_build(program: CProgram, target: Path, source: Path) -> Path:
    """``target`` if it is executable, else ``source`` compiled to it (:func:`compile_to`, once per process)."""
    if os.access(target, os.X_OK):
        return target
    with program.lock:
        if not os.access(target, os.X_OK):
            compile_to(program, target, source)
    return target


def compile_to(program: CProgram, target: Path, source: Path) -> Path:
    """Compile ``source`` to ``target`` atomically (temporary file + rename).

    Raises ``program.compiler_missing`` when gcc is not on PATH and
    ``program.compile_failed`` (with gcc's diagnostics) when it fails."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise program.compiler_missing(f"gcc is not on PATH; install gcc or {program.missing_hint}",
                                       ["gcc", *program.cflags, "-o", str(target), str(source)])
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    cmd = [gcc, *program.cflags, "-o", tmp, str(source)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise program.compile_failed(f"compiling {program.what} failed (exit {proc.returncode})", cmd,
                                         proc.stderr)
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target
