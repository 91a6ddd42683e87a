"""A leg's preload: the module named in ``$FISKJ_PRELOAD``, imported by name before the agent starts.

The one mechanism by which a child process of the harness is changed
before it runs: the mutant subject (``python -m harness.selftest.subject``)
and a leg forked by the fork server (:mod:`harness.subject.forkserver`) each
call :func:`load_preload` first.  The module does its work on import (a mutant of
:mod:`harness.selftest.mutants` patches fiskj there), so it exists in that
child only, never in the harness.  Nothing here knows which modules exist:
the name comes from the leg's environment (:meth:`harness.subject.contract.Subject.env`,
from the subject's ``FISKJ_PRELOAD=module`` variable).
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
    """Import the module named in ``$FISKJ_PRELOAD`` (if any) and return its name.

    Raises ``ImportError`` when there is no such module (a leg must not run
    without the preload it was given).
    """
    name = preload_name(environ)
    if name is not None:
        importlib.import_module(name)
    return name
