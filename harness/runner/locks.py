"""Who keeps a lock on a file, as the kernel lists it (``/proc/locks``): how a race's rival is seen to wait on the
held leg, which keeps the lock until the rival ends (docs/scenarios.md, family ``race``).  :func:`kept_by_others`
is read the moment the observer announces a lock call that waits (``flock`` without ``LOCK_NB``, ``F_SETLKW``);
the keeper is paused, so the answer cannot change before the call blocks.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import psutil

from harness.observer.errors import ControlError

__all__ = ["kept_by_others", "process_tree", "waits_on_kept_lock"]

#: The lock classes of ``/proc/locks`` a call of each observed kind (``harness.observer.ops``) contends with.
_CLASSES = {"flock": ("FLOCK",), "lock": ("POSIX", "OFDLCK")}


def kept_by_others(path: str, op: str, own: set[int], locks: str | None = None) -> list[int]:
    """The pids (``-1`` for an open file description lock) that keep an exclusive (``WRITE``) lock of the class
    op ``op`` (``"flock"`` or ``"lock"``) contends with on the file ``path``, leaving out the pids in ``own``
    (the waiter's process tree) and waiters (``->`` lines).  ``locks``: the text of ``/proc/locks`` (``None``:
    read it).  Empty when ``path`` is gone or the kernel lists no such lock; raises nothing."""
    try:
        st = os.stat(path)
        text = Path("/proc/locks").read_text() if locks is None else locks
    except OSError:
        return []
    ident = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    classes = _CLASSES.get(op, ())
    out = []
    for line in text.splitlines():
        words = line.split()
        # "N: CLASS MODE TYPE PID MAJ:MIN:INODE START END", a waiter with "->" after "N:"
        if len(words) < 8 or words[1] == "->" or words[1] not in classes or words[3] != "WRITE":
            continue
        try:
            pid = int(words[4])
        except ValueError:
            continue
        if words[5] == ident and pid not in own:
            out.append(pid)
    return out


def process_tree(root: int) -> set[int]:
    """``root`` and every live process descended from it (:mod:`psutil`, from ``/proc``); raises nothing."""
    try:
        return {root} | {p.pid for p in psutil.Process(root).children(recursive=True)}
    except psutil.Error:  # root is gone: its children were reparented, none is its any more
        return {root}


def waits_on_kept_lock(proc: Any, timeout: float) -> dict[str, Any] | None:
    """Follow the observed ``proc`` (spawned with ``announce_waits``) until it ends, ``timeout`` seconds pass, or
    it enters a lock call that waits on a file another process keeps an exclusive lock on
    (:func:`harness.runner.locks.kept_by_others`, its own process tree left out); in that last case return
    ``{"seq", "pid", "op", "path", "keepers"}`` (it is still in the call), else ``None``.  A race's rival runs
    while the held leg is paused, and the held leg is released only when the rival ends: such a call never
    returns, so the rival is hung the moment it is seen to wait, not at the trial's deadline."""
    deadline = time.monotonic() + timeout
    root = getattr(proc, "attached", None) or proc.pid
    while True:
        try:
            waits = proc.wait_waits(max(0.0, deadline - time.monotonic()))
        except ControlError:  # its deadline (drive() then finds it hung) or a closed channel
            return None
        if waits is None:  # the tracer ended: the leg is over
            return None
        keepers = kept_by_others(waits.path, waits.op, process_tree(root))
        if keepers:
            return {"seq": waits.seq, "pid": waits.pid, "op": waits.op, "path": waits.path, "keepers": keepers}
