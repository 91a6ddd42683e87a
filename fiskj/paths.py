"""Where runs live: the store directory and the names of a run's files (no IO).

Source: docs/spec.md sections 1 and 2 (fisk-ai's format notes, "Files", and
its sessions documentation, "Storage and locking"; docs/spec.md "Sources").  The store
directory is ``$XDG_STATE_HOME/fisk-ai/runs``, or ``~/.local/state/fisk-ai/runs``
when ``XDG_STATE_HOME`` is unset or empty; never the working directory.  A
run ``<id>`` is ``<id>.json`` (the journal) and ``<id>.lock`` (its lock).
Run ids are validated before any path is built from them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from .errors import InvalidRunID, UsageError

__all__ = ["JOURNAL_SUFFIX", "LOCK_SUFFIX", "MAX_RUN_ID", "default_store_dir",
           "validate_run_id", "is_valid_run_id", "journal_path", "lock_path"]

JOURNAL_SUFFIX = ".json"
LOCK_SUFFIX = ".lock"
#: Longest run id, in characters.
MAX_RUN_ID = 128

_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def default_store_dir(environ: Mapping[str, str] | None = None) -> str:
    """Return the absolute default store directory.

    ``environ`` defaults to ``os.environ``.  ``$XDG_STATE_HOME/fisk-ai/runs``
    when ``XDG_STATE_HOME`` is set to an absolute path; an unset, empty or
    relative value (the XDG spec says relative ones are invalid) falls back
    to ``$HOME/.local/state/fisk-ai/runs``.  Never relative to the working
    directory: raises :class:`UsageError` when no absolute home directory
    can be found either.
    """
    env = os.environ if environ is None else environ
    state = env.get("XDG_STATE_HOME") or ""
    if os.path.isabs(state):
        return os.path.join(os.path.normpath(state), "fisk-ai", "runs")
    home = env.get("HOME") or ""
    if not os.path.isabs(home) and environ is None:
        home = os.path.expanduser("~")
    if not os.path.isabs(home):
        raise UsageError("cannot find the store directory: XDG_STATE_HOME is unset and HOME is not an "
                         "absolute path; set XDG_STATE_HOME or pass a store directory", field="HOME")
    return os.path.join(os.path.normpath(home), ".local", "state", "fisk-ai", "runs")


def is_valid_run_id(run_id: object) -> bool:
    """Return True when ``run_id`` is a str of 1-128 ``[A-Za-z0-9_-]``, first a letter or digit."""
    return isinstance(run_id, str) and _RUN_ID.fullmatch(run_id) is not None


def validate_run_id(run_id: object) -> str:
    """Return ``run_id`` unchanged if valid, else raise :class:`InvalidRunID`.

    Valid: a ``str`` of 1 to 128 characters of ASCII ``[A-Za-z0-9_-]`` whose
    first character is a letter or digit (docs/spec.md section 2).  This refuses
    path separators, ``..``, NUL, whitespace, non-ASCII and a leading ``-``
    or ``_`` (which would read as an option or hide the file) before any path
    is built.  The message shows the offending id (repr, cut at 60 chars).
    """
    if is_valid_run_id(run_id):
        return run_id  # type: ignore[return-value]
    shown = repr(run_id)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    if not isinstance(run_id, str):
        why = f"is a {type(run_id).__name__}, not a string"
    elif not run_id:
        why = "is empty"
    elif len(run_id) > MAX_RUN_ID:
        why = f"is {len(run_id)} characters long, over the limit of {MAX_RUN_ID}"
    elif not _RUN_ID.fullmatch(run_id[0]):
        why = "must start with a letter or digit"
    else:
        bad = next(c for c in run_id if not re.fullmatch(r"[A-Za-z0-9_-]", c))
        why = f"holds {bad!r}, which is not a letter, digit, '_' or '-'"
    raise InvalidRunID(f"run id {shown} {why}; use 1 to {MAX_RUN_ID} of [A-Za-z0-9_-], "
                       f"starting with a letter or digit, e.g. 'run-2026-05-30'", field="run_id")


def journal_path(directory: str, run_id: str) -> str:
    """Return ``<directory>/<run_id>.json`` after :func:`validate_run_id` (raises InvalidRunID)."""
    return os.path.join(directory, validate_run_id(run_id) + JOURNAL_SUFFIX)


def lock_path(directory: str, run_id: str) -> str:
    """Return ``<directory>/<run_id>.lock`` after :func:`validate_run_id` (raises InvalidRunID)."""
    return os.path.join(directory, validate_run_id(run_id) + LOCK_SUFFIX)
