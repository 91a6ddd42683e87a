"""Process control for legs, the one place the harness signals and reaps agent processes: wait without polling
(a pidfd), kill a whole tree (:func:`kill_tree`, with :mod:`psutil`), reap everything (the harness is a child
subreaper, :func:`enable_subreaper`, so orphaned tools are reparented to it and never left as zombies).
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
from contextlib import suppress

import psutil

__all__ = ["enable_subreaper", "wait_for_exit", "kill_tree", "reap_group", "close_pidfd", "signal_name", "sigkill"]

_subreaper = False


def enable_subreaper() -> bool:
    """Make this process a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``), so that orphans of killed agents
    are reaped by :func:`kill_tree` / :func:`reap_group`; idempotent.  False where unsupported (orphans go to
    init)."""
    global _subreaper
    if _subreaper:
        return True
    with suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(36, 1, 0, 0, 0) == 0:  # PR_SET_CHILD_SUBREAPER
            _subreaper = True
    return _subreaper


def wait_for_exit(proc: subprocess.Popen, timeout: float | None) -> bool:
    """Block until ``proc`` exits or ``timeout`` seconds pass (``None``: forever; <= 0: only check); True when it
    exited (and was reaped).  ``proc`` is a :class:`subprocess.Popen` or has its own ``wait_for_exit(timeout)``
    (:class:`harness.subject.forkserver.ForkedProcess`).  Waits on a pidfd (no sleep-polling), closed once the
    process is reaped (a campaign starts thousands of legs); falls back to :meth:`Popen.wait`."""
    if proc.returncode is not None:
        close_pidfd(proc)
        return True
    own = getattr(proc, "wait_for_exit", None)
    if own is not None:  # a forked leg (harness.subject.forkserver.ForkedProcess)
        return bool(own(None if timeout is None else max(timeout, 0.0)))
    if timeout is None:
        proc.wait()
        close_pidfd(proc)
        return True
    pidfd = getattr(proc, "_fiskj_pidfd", None)
    if pidfd is None and hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(proc.pid)
            proc._fiskj_pidfd = pidfd  # type: ignore[attr-defined]
        except OSError:
            pidfd = None
    if pidfd is None:
        try:
            proc.wait(timeout=max(timeout, 0))
            return True
        except subprocess.TimeoutExpired:
            return False
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    if not poller.poll(max(timeout, 0) * 1000.0):  # (an interrupted poll is retried for the time left: PEP 475)
        return False
    proc.wait()
    close_pidfd(proc)
    return True


def close_pidfd(proc: subprocess.Popen) -> None:
    """Close ``proc``'s pidfd, when :func:`wait_for_exit` opened one."""
    pidfd = getattr(proc, "_fiskj_pidfd", None)
    if pidfd is not None:
        proc._fiskj_pidfd = None  # type: ignore[attr-defined]
        os.close(pidfd)


def _reap(pids: list[int], timeout: float = 5.0) -> None:
    """Reap ``pids`` that are our children (subreaper orphans); wait for the others to vanish."""
    others = []
    for pid in pids:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            with suppress(psutil.NoSuchProcess):
                others.append(psutil.Process(pid))
    if others:
        psutil.wait_procs(others, timeout=timeout)


def reap_group(pgid: int) -> list[int]:
    """SIGKILL whatever is left in process group ``pgid`` and reap it; returns the pids found (cheap when the
    group is empty: one ``killpg`` returning ESRCH)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return []
    found = []
    for child in psutil.Process().children(recursive=True):
        with suppress(ProcessLookupError, psutil.NoSuchProcess):
            if os.getpgid(child.pid) == pgid:
                found.append(child.pid)
    _reap(found)
    return found


def _descendants(pid: int, itself: bool = False) -> list[psutil.Process]:
    """``pid``'s descendants (``itself``: and it first), parents before children (none when it is gone)."""
    try:
        p = psutil.Process(pid)
        return [p] * itself + p.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _sigkill_all(procs: list[psutil.Process]) -> list[int]:
    """SIGKILL each of ``procs`` in order; returns the pids signalled (the ones gone already are skipped)."""
    killed = []
    for p in procs:
        with suppress(psutil.NoSuchProcess):
            p.send_signal(signal.SIGKILL)
            killed.append(p.pid)
    return killed


def kill_tree(proc: subprocess.Popen, pgid: int | None = None) -> list[int]:
    """SIGKILL ``proc`` and all its descendants, children first; reap them all.

    Order: SIGSTOP the agent (so it cannot see a tool die and journal an
    error result), SIGKILL descendants deepest first, SIGKILL the agent,
    SIGKILL the process group ``pgid`` (default: the agent's pid, as legs
    start in a new session), then wait for and reap everything.  An observed
    leg's ``proc`` is the tracer, which must outlive the program to log the
    calls the kill cut short: the program (``proc.attached``: a process the
    tracer attached to, not its child) and its tools die first and the
    tracer exits by itself.  Returns the pids signalled.  Never raises for
    processes that are already gone.
    """
    pid = proc.pid
    killed: list[int] = []
    descendants: list[psutil.Process] = []
    if proc.returncode is None and hasattr(proc, "ops"):  # an observed leg (harness.observer.run.ObservedProcess)
        attached = getattr(proc, "attached", None)
        descendants = _descendants(pid) + (_descendants(attached, itself=True) if attached else [])
        killed += _sigkill_all(descendants)
        if not wait_for_exit(proc, 10.0):
            sigkill(pid)
    if proc.returncode is None:
        sigkill(pid, signal.SIGSTOP)
        descendants = _descendants(pid)
        killed += _sigkill_all(descendants[::-1])
        if sigkill(pid):
            killed.append(pid)
    proc.wait()
    close_pidfd(proc)
    _reap([c.pid for c in descendants])
    killed += reap_group(pid if pgid is None else pgid)
    return killed


def signal_name(num: int) -> str:
    """``SIGKILL`` for 9; ``SIG<n>`` for a number with no name."""
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"SIG{num}"


def sigkill(pid: int, sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` (SIGKILL) to ``pid``; False when the process is gone already (no error)."""
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False
