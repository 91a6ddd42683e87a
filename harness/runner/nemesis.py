"""The nemesis role: fault schedules as data, and applying them to running agents.

A *schedule* is a list with one fault per leg (leg 0 is the start, later
legs are resumes); legs past its end get no fault.  A fault is a dict:

=========================================================  =====================================
``{"kind": "none"}``                                        no fault (the no-op nemesis: ``[]``)
``{"kind": "kill", "after_ms": 37.2}``                      SIGKILL the process tree 37.2 ms
                                                            after the leg started
``{"kind": "kill", "event": 12}``                           SIGKILL at the 12th IO-seam call,
                                                            after it completed (``FISKJ_IOSEAM_FAULT=
                                                            kill-after@12``); add ``"when":
                                                            "before"`` for ``kill-before``, and
                                                            ``"op": "fsync"`` to count one op only
``{"kind": "suspend", "signal": "SIGINT", "after_ms": 5}``  send SIGINT (or SIGTERM) to the agent
                                                            process (not its tools) after 5 ms
=========================================================  =====================================

Chains (a crash during the resume itself, during the completion of a
pending batch, right after a suspend) are schedules of several legs, e.g.
``[{"kind": "suspend", ...}, {"kind": "kill", "event": 3}]``.

The nemesis checks nothing.  It waits on processes without polling loops
(a pidfd on Linux), kills whole process trees with :mod:`psutil` (the agent
is stopped first so it cannot observe its tools dying, then descendants
children-first, then the agent, then its process group) and reaps every
process it killed: the harness makes itself a child subreaper
(:func:`enable_subreaper`) so orphaned tools are reparented to it and
never left as zombies.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any

import psutil

from harness.history.model import Fault

__all__ = [
    "NOOP",
    "FAULT_KINDS",
    "validate_fault",
    "validate_schedule",
    "fault_for_leg",
    "seam_fault",
    "history_fault",
    "fault_family",
    "LegOutcome",
    "enable_subreaper",
    "wait_for_exit",
    "kill_tree",
    "reap_group",
    "drive",
]

#: The no-op nemesis: a schedule with no faults (every leg runs undisturbed).
NOOP: list[dict[str, Any]] = []

FAULT_KINDS = ("none", "kill", "suspend")
_SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}


def validate_fault(spec: dict[str, Any]) -> dict[str, Any]:
    """Return a normalized copy of one leg's fault; raise ``ValueError`` naming the problem.

    Normal form: ``none`` has no other key; a timed fault has a float
    ``after_ms`` >= 0; an event kill has an int ``event`` >= 1, ``when`` in
    ``after``/``before`` (default ``after``) and optionally ``op``; a suspend
    has ``signal`` (default ``SIGINT``) and ``after_ms``.
    """
    if not isinstance(spec, dict):
        raise ValueError(f"a fault must be a dict, got {type(spec).__name__}")
    kind = spec.get("kind", "none")
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {kind!r} (known: {', '.join(FAULT_KINDS)})")
    out: dict[str, Any] = {"kind": kind}
    if kind == "none":
        return out
    if kind == "kill" and "event" in spec:
        ev = spec["event"]
        if isinstance(ev, bool) or not isinstance(ev, int) or ev < 1:
            raise ValueError(f"kill event must be an int >= 1, got {ev!r}")
        when = spec.get("when", "after")
        if when not in ("after", "before"):
            raise ValueError(f"kill 'when' must be 'after' or 'before', got {when!r}")
        out["event"] = ev
        out["when"] = when
        if spec.get("op"):
            out["op"] = str(spec["op"])
        return out
    after = spec.get("after_ms")
    if isinstance(after, bool) or not isinstance(after, (int, float)) or after < 0:
        raise ValueError(f"{kind} needs after_ms >= 0 (or, for kill, event), got {after!r}")
    if kind == "suspend":
        sig = spec.get("signal", "SIGINT")
        if sig not in _SIGNALS:
            raise ValueError(f"suspend signal must be SIGINT or SIGTERM, got {sig!r}")
        out["signal"] = sig
    out["after_ms"] = float(after)
    return out


def validate_schedule(schedule: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Validate every fault of ``schedule`` (see :func:`validate_fault`); returns the normalized list."""
    if not isinstance(schedule, list):
        raise ValueError(f"a schedule must be a list of faults, got {type(schedule).__name__}")
    return [validate_fault(f) for f in schedule]


def fault_for_leg(schedule: list[dict[str, Any]], leg: int) -> dict[str, Any]:
    """The fault of leg ``leg`` (0-based): ``schedule[leg]``, or ``{"kind": "none"}`` past its end."""
    return dict(schedule[leg]) if leg < len(schedule) else {"kind": "none"}


def seam_fault(spec: dict[str, Any]) -> str | None:
    """The ``FISKJ_IOSEAM_FAULT`` value of an event kill (``kill-after@12``, ``kill-before@3:fsync``), else ``None``."""
    if spec.get("kind") != "kill" or "event" not in spec:
        return None
    value = f"kill-{spec.get('when', 'after')}@{spec['event']}"
    if spec.get("op"):
        value += f":{spec['op']}"
    return value


def fault_family(spec: dict[str, Any]) -> str:
    """The report family of a fault: ``kill``, ``suspend`` or ``none``."""
    return spec.get("kind", "none")


def history_fault(spec: dict[str, Any], injected: bool = False) -> Fault:
    """Convert a schedule entry to :class:`harness.history.model.Fault` (``at`` holds ``after_ms`` or ``event``/``op``)."""
    at: dict[str, Any] = {}
    if "after_ms" in spec:
        at["after_ms"] = spec["after_ms"]
    if "event" in spec:
        at["event"] = spec["event"]
        at["when"] = spec.get("when", "after")
        if spec.get("op"):
            at["op"] = spec["op"]
    return Fault(kind=spec.get("kind", "none"), signal=spec.get("signal") if spec.get("kind") == "suspend" else (
        "SIGKILL" if spec.get("kind") == "kill" else None), at=at, detail={}, injected=injected)


# --- processes -----------------------------------------------------------------

_subreaper = False


def enable_subreaper() -> bool:
    """Make this process a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``); idempotent.

    Orphans of killed agents (their tool processes) are then reparented to
    the harness, which reaps them in :func:`kill_tree` / :func:`reap_group`.
    Returns False where unsupported (orphans then go to init).
    """
    global _subreaper
    if _subreaper:
        return True
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(36, 1, 0, 0, 0) == 0:  # PR_SET_CHILD_SUBREAPER
            _subreaper = True
    except (OSError, AttributeError):
        pass
    return _subreaper


def wait_for_exit(proc: subprocess.Popen, timeout: float | None) -> bool:
    """Block until ``proc`` exits or ``timeout`` seconds pass; True when it exited (and was reaped).

    ``proc`` is a :class:`subprocess.Popen` or anything with its own
    ``wait_for_exit(timeout)`` (:class:`harness.subject.contract.ForkedProcess`).
    Uses a pidfd (no sleep-polling); falls back to :meth:`Popen.wait`.
    ``timeout`` ``None`` waits forever; <= 0 only checks.
    """
    if proc.returncode is not None:
        return True
    own = getattr(proc, "wait_for_exit", None)
    if own is not None:  # a forked leg (harness.subject.contract.ForkedProcess)
        return bool(own(None if timeout is None else max(timeout, 0.0)))
    if timeout is None:
        proc.wait()
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
    deadline = time.monotonic() + max(timeout, 0)
    while True:
        remaining = deadline - time.monotonic()
        if poller.poll(max(remaining, 0) * 1000.0):
            proc.wait()
            return True
        if remaining <= 0:
            return False


def _close_pidfd(proc: subprocess.Popen) -> None:
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
            try:
                others.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                pass
    if others:
        psutil.wait_procs(others, timeout=timeout)


def reap_group(pgid: int) -> list[int]:
    """SIGKILL whatever is left in process group ``pgid`` and reap it; returns the pids found.

    Cheap when the group is empty (one ``killpg`` returning ESRCH).
    """
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return []
    except PermissionError:
        return []
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if os.getpgid(child.pid) == pgid:
                found.append(child.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    _reap(found)
    return found


def kill_tree(proc: subprocess.Popen, pgid: int | None = None) -> list[int]:
    """SIGKILL ``proc`` and all its descendants, children first; reap them all.

    Order: SIGSTOP the agent (so it cannot see a tool die and journal an
    error result), SIGKILL descendants deepest first, SIGKILL the agent,
    SIGKILL the process group ``pgid`` (default: the agent's pid, as legs
    start in a new session), then wait for and reap everything.  Returns
    the pids signalled.  Never raises for processes that are already gone.
    """
    pid = proc.pid
    killed: list[int] = []
    descendants: list[psutil.Process] = []
    if proc.returncode is None:
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            pass
        try:
            descendants = psutil.Process(pid).children(recursive=True)
        except psutil.NoSuchProcess:
            descendants = []
        for child in reversed(descendants):
            try:
                child.send_signal(signal.SIGKILL)
                killed.append(child.pid)
            except psutil.NoSuchProcess:
                pass
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except ProcessLookupError:
            pass
    proc.wait()
    _close_pidfd(proc)
    _reap([c.pid for c in descendants])
    killed += reap_group(pid if pgid is None else pgid)
    return killed


@dataclass
class LegOutcome:
    """How a driven leg ended.

    ``returncode``: the exit status, or ``None`` when killed by a signal;
    ``exit_signal``: the signal name (``"SIGKILL"``) or ``None``;
    ``injected``: the scheduled fault was delivered (a timed fault whose time
    came after the exit is not); ``timed_out``: the leg hit its deadline and
    was killed; ``t_end``: ``time.monotonic_ns()`` when the exit was seen.
    """

    returncode: int | None
    exit_signal: str | None
    injected: bool
    timed_out: bool
    t_end: int


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"SIG{num}"


def drive(proc: subprocess.Popen, spec: dict[str, Any], *, t0: float, timeout: float) -> LegOutcome:
    """Apply fault ``spec`` to the running leg ``proc`` and wait for its end.

    ``t0``: ``time.monotonic()`` at the leg's start (``after_ms`` counts from
    it); ``timeout``: seconds from now before the leg is declared hung, its
    tree killed and ``timed_out`` set.  An event kill is delivered by the
    agent's own IO seam (its environment carries ``FISKJ_IOSEAM_FAULT``);
    ``injected`` is then true when the agent died of SIGKILL.  On return the
    agent and every descendant are dead and reaped.
    """
    deadline = time.monotonic() + timeout
    kind = spec.get("kind", "none")
    injected = False
    timed_out = False
    if kind in ("kill", "suspend") and "after_ms" in spec:
        at = t0 + spec["after_ms"] / 1000.0
        if not wait_for_exit(proc, min(at, deadline) - time.monotonic()):
            if time.monotonic() >= deadline:
                timed_out = True
            elif kind == "kill":
                kill_tree(proc)
                injected = True
            else:
                try:
                    os.kill(proc.pid, _SIGNALS[spec.get("signal", "SIGINT")])
                    injected = True
                except ProcessLookupError:
                    pass
    if not timed_out and not wait_for_exit(proc, deadline - time.monotonic()):
        timed_out = True
    if timed_out:
        kill_tree(proc)
    else:
        proc.wait()
        _close_pidfd(proc)
        reap_group(proc.pid)  # tools orphaned by a self-kill (IO seam), if any
    t_end = time.monotonic_ns()
    rc = proc.returncode
    if rc is not None and rc < 0:
        sig = _signal_name(-rc)
        if kind == "kill" and "event" in spec and -rc == signal.SIGKILL:
            injected = True
        return LegOutcome(returncode=None, exit_signal=sig, injected=injected, timed_out=timed_out, t_end=t_end)
    return LegOutcome(returncode=rc, exit_signal=None, injected=injected, timed_out=timed_out, t_end=t_end)
