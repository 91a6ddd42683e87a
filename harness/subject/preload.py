"""A leg's preload: the module named in ``$FISKJ_PRELOAD``, imported by name and its hook called before the agent starts.

The one mechanism by which a child process of the harness is changed
before it runs: the mutant subject (``python -m harness.selftest.subject``),
a leg forked by the fork server (:mod:`harness.subject.forkserver`) and a
family's reader or recovery child each call :func:`load_preload` first.
It imports the module and calls its ``preload(environ)`` with the child's
environment: the mutants' table (:mod:`harness.selftest.mutants`) applies
there the mutant named in ``$FISKJ_MUTANT``, explicitly, in that child
only, never in the harness.  Importing a preload module does nothing of
itself; its hook does the work.
Nothing here knows which modules exist: the name comes from the leg's
environment (:meth:`harness.subject.contract.Subject.env`, from the
subject's ``FISKJ_PRELOAD=module`` variable).
"""

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
    """Import the module named in ``$FISKJ_PRELOAD`` (if any), call its ``preload(environ)`` and return its name.

    ``environ`` defaults to ``os.environ``.  Raises ``ImportError`` when
    there is no such module or it has no ``preload`` function (a leg must
    not run without the preload it was given), and whatever the hook raises
    (the mutants' table: ``KeyError`` for a mutant name it does not know).
    """
    env = os.environ if environ is None else environ
    name = preload_name(env)
    if name is not None:
        hook = getattr(importlib.import_module(name), "preload", None)
        if not callable(hook):
            raise ImportError(f"{PRELOAD_ENV}={name}: the module has no preload(environ) function", name=name)
        hook(env)
    return name
