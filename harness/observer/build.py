"""Build the tracer (``fiskj_observe.c``) once per source version, into a cache (docs/observer.md "Building";
the shared mechanism: :mod:`harness.cbuild`).
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
from pathlib import Path

from harness.cbuild import CProgram, cache_dir, cached_build
from harness.cbuild import compile_to as _compile_to

from .errors import BuildError, CompileFailed, CompilerMissing, UnsupportedPlatform

SOURCE = Path(__file__).with_name("fiskj_observe.c")
CFLAGS = ("-O2", "-Wall", "-Werror")
_TRACER = CProgram("the tracer", CFLAGS, "set FISKJ_OBSERVER_BIN", CompilerMissing, CompileFailed)


def check_platform() -> None:
    """Raise :class:`UnsupportedPlatform` unless this is x86_64 Linux."""
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        raise UnsupportedPlatform(f"fiskj-observe needs x86_64 Linux (its syscall numbers and registers are "
                                  f"x86_64's); this is {sys.platform} {platform.machine()}")


def binary_name(source: Path = SOURCE) -> str:
    """``fiskj-observe-<first 16 hex digits of the source's sha256>``."""
    return "fiskj-observe-" + hashlib.sha256(source.read_bytes()).hexdigest()[:16]


def observer_binary(source: Path = SOURCE) -> Path:
    """The tracer to run: ``$FISKJ_OBSERVER_BIN``, or the cached build of ``source`` (built if missing)."""
    override = os.environ.get("FISKJ_OBSERVER_BIN", "")
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise BuildError("FISKJ_OBSERVER_BIN does not name an executable file", [override])
        return Path(override)
    check_platform()
    return cached_build(_TRACER, cache_dir() / binary_name(source), source)


def compile_to(target: Path, source: Path = SOURCE) -> Path:
    """Compile ``source`` to ``target`` atomically (temporary file + rename); raise a :class:`BuildError`."""
    return _compile_to(_TRACER, target, source)
