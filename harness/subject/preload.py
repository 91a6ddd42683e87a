"""A leg's preload: the module named in ``$FISKJ_PRELOAD``, imported by name and its ``preload(environ)``
called first: the one way a child of the harness is changed before it runs (docs/selftest.md)."""

from __future__ import annotations

import importlib
import os
from typing import Mapping

from harness.names import PRELOAD_ENV

__all__ = ["PRELOAD_ENV", "preload_name", "load_preload"]


def preload_name(environ: Mapping[str, str] | None = None) -> str | None:
    """The module named in ``$FISKJ_PRELOAD`` of ``environ`` (default ``os.environ``), or ``None``."""
    return (os.environ if environ is None else environ).get(PRELOAD_ENV, "").strip() or None


def load_preload(environ: Mapping[str, str] | None = None) -> str | None:
    """Import the module named in ``$FISKJ_PRELOAD`` of ``environ`` (default ``os.environ``), if any, call its
    ``preload(environ)`` and return its name.  Raises ``ImportError`` when there is no such module or hook (a
    leg must not run without its preload), and whatever the hook raises."""
    env = os.environ if environ is None else environ
    name = preload_name(env)
    if name is not None:
        hook = getattr(importlib.import_module(name), "preload", None)
        if not callable(hook):
            raise ImportError(f"{PRELOAD_ENV}={name}: the module has no preload(environ) function", name=name)
        hook(env)
    return name
