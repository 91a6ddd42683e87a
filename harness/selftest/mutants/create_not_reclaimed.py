"""Mutant ``create-not-reclaimed``: a journal left empty by a crashed create blocks the run for ever.

The bug the suite found (kill-every-event, a SIGKILL right after the
journal's ``O_EXCL`` create, IO-seam event 7): the crash leaves an empty
``<id>.json``; it holds no acknowledged record, yet create refuses it as an
existing run and resume cannot fold it, so the run can never be started
again.  fiskj now reclaims such a journal under the run lock
(``RunNeverCreated``); this mutant brings the refusal back.  Caught by the
regression scenario written from that bug's shrunk reproducer (I6: the
run never completes, its journal never reads).
"""

from __future__ import annotations

NAME = "create-not-reclaimed"
DEFECT = "a journal left empty by a crashed create is refused as an existing run instead of reclaimed"
FAMILY = "kill"


def apply() -> None:
    from fiskj import store

    store._never_created = lambda jpath, run_id: False  # the bug: never reclaimed


apply()  # a preload: importing this module applies the patch (in a child process only)
