"""Code probes: the reference's recovery branches, reported when a run reaches them.

In the manner of FoundationDB's code probes: each branch of fiskj that
recovers from a crash, refuses a resume or poisons a journal calls
:func:`hit` with its name.  When the environment variable
:data:`ENV` (``FISKJ_PROBES``) names a file, one line ``LEG NAME`` is
appended to it (one ``O_APPEND`` write; ``LEG`` is ``FISKJ_HARNESS_LEG``,
``-1`` when unset); otherwise nothing happens.  The verification suite
sets the variable for every leg it runs and reports which probes its
campaigns reached (``fiskj-harness`` reports "code probes"; the gate names
the probes no scenario reached).

A probe says only that a branch ran: it judges nothing (the checkers
judge from outside; docs/results.md "Code probes").  A failed probe
write is ignored: a probe must never change what the engine does.

:data:`PROBES` is the catalogue: name -> what the branch does.  Calling
:func:`hit` with a name not in it raises ``KeyError`` (a typo in fiskj is
a bug, caught by the tests).
"""

from __future__ import annotations

import os

__all__ = ["ENV", "PROBES", "hit"]

#: The environment variable naming the probe file.
ENV = "FISKJ_PROBES"

#: Every probe: name -> the recovery branch it marks (the rules: docs/spec.md sections 7, 9, 11 and 12).
PROBES: dict[str, str] = {
    "open.torn_tail_cut": "resume found a torn final line and cut it (ftruncate to the last complete line, fsync)",
    "create.never_created_reclaimed": "create found a journal left by a crashed create (no complete record) "
                                      "and replaced it under the lock",
    "open.refused.never_created": "resume refused a journal holding no complete record (its create crashed)",
    "open.refused.locked": "resume or create refused: another process holds the run's lock",
    "open.refused.not_found": "resume refused: no journal for the run",
    "open.refused.corrupt": "resume refused a journal with a damaged record before its last line",
    "open.refused.unsupported_version": "resume refused a journal of an unknown version",
    "open.refused.consistency": "resume refused a journal whose records contradict each other",
    "open.refused.unsafe_file": "resume refused a journal that is a symlink, not ours, or writable by others",
    "resume.refused.completed": "resume refused a completed run, appending nothing",
    "resume.refused.fingerprint": "resume refused a changed configuration (fingerprint drift), appending nothing",
    "resume.forced": "resume went on despite a changed configuration (--force)",
    "resume.after_crash": "resume of a run with no terminal record (its last leg crashed)",
    "resume.after_suspend": "resume of a suspended run",
    "resume.after_error": "resume of a run that ended in error, budget or max_iterations",
    "resume.pending_batch": "resume completed a pending tool batch none of whose results were journaled",
    "resume.pending_batch_partial": "resume completed a pending tool batch, running only its unanswered tools",
    "resume.unsettled_turn": "resume settled a journaled assistant turn with no tool results yet "
                             "(an answer, or a turn whose tools had not started)",
    "journal.poisoned.write": "a journal write failed (or was short): the journal refuses later appends",
    "journal.poisoned.fsync": "a journal fsync failed: the journal refuses later appends",
    "journal.poisoned.dir_fsync": "the store directory's fsync after a create failed: the journal refuses appends",
    "journal.append_refused_poisoned": "an append to a poisoned journal was refused",
    "run.error_terminal": "an unexpected error or MemoryError ended the leg with an error terminal (resumable)",
}


def hit(name: str) -> None:
    """Record that probe ``name`` was reached (see the module docstring).

    Raises ``KeyError`` when ``name`` is not in :data:`PROBES`; never
    raises for IO (a probe that cannot be written is dropped).
    """
    if name not in PROBES:
        raise KeyError(f"unknown code probe {name!r}")
    path = os.environ.get(ENV)
    if not path:
        return
    line = f"{os.environ.get('FISKJ_HARNESS_LEG', '-1')} {name}\n".encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return
    try:
        os.write(fd, line)
    except OSError:
        pass
    finally:
        os.close(fd)
