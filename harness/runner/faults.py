"""The leg runner's faults as data: one fault per leg, as the families schedule them (pure: no IO).

A *schedule* is a list with one fault per leg (leg 0 is the start, later legs are resumes); legs past its end get
no fault.  The fault kinds (``none``, timed or event ``kill`` and ``suspend``, ``hold``, ``io_error``), their keys
and chains of them are docs/scenarios.md "[faults]" (``schedule``); the one leg runner
(:func:`harness.runner.leg.run_leg`) applies them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from harness.history.model import Fault

__all__ = ["NOOP", "FAULT_KINDS", "SIGNALS", "EVENT_OPS", "IO_ERRORS", "IO_ERROR_OPS", "validate_fault",
           "validate_schedule", "fault_for_leg", "seam_fault", "event_action", "history_fault"]

#: The no-op nemesis: a schedule with no faults (every leg runs undisturbed).
NOOP: list[dict[str, Any]] = []

FAULT_KINDS = ("none", "kill", "suspend", "io_error", "hold")
#: The errors an ``io_error`` fault injects (docs/ioseam.md, docs/observer.md): the call fails with EIO or
#: ENOSPC without being made, or a write puts half its bytes and the next write fails with ENOSPC.
IO_ERRORS = ("eio", "enospc", "short-write")
#: The calls an ``io_error`` fault hits.
IO_ERROR_OPS = ("write", "fsync")
#: The suspend signals a schedule may name.
SIGNALS = ("SIGINT", "SIGTERM")
#: The calls an event kill or suspend may count (``"op"``): the IO seam's ops (``fiskj.ioseam.OPS``; the
#: observer counts ``fsync_dir`` as ``fsync``).
EVENT_OPS = ("open", "write", "fsync", "fdatasync", "ftruncate", "rename", "mkdir", "fsync_dir", "flock", "close",
             "unlink")
#: The keys each fault kind may have.
_KEYS = {"none": {"kind"}, "hold": {"kind", "at", "ops", "reader"}, "io_error": {"kind", "action", "event", "op"},
         "kill": {"kind", "after_ms", "event", "when", "op"},
         "suspend": {"kind", "signal", "after_ms", "event", "when", "op"}}


def _json(value: Any) -> str:
    """``value`` as the JSON a user wrote (``true``, ``"5"``, ``null``), for messages."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _among(v: Any, options: tuple[str, ...], what: str) -> Any:
    """``v`` when it is one of ``options``, else ``ValueError`` saying ``what`` must be one."""
    if v not in options:
        raise ValueError(f"{what} must be one of {', '.join(options)}, got {_json(v)}")
    return v


def _count(v: Any, what: str) -> int:
    """``v`` when it is an int >= 1 (not a bool), else ``ValueError`` saying ``what`` must be one."""
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{what} must be an int >= 1, got {_json(v)}")
    return v


def validate_fault(spec: dict[str, Any]) -> dict[str, Any]:
    """Return a normalized copy of one leg's fault; raise ``ValueError`` naming the problem.

    Normal form: ``none`` has no other key; a timed fault has a float
    ``after_ms`` >= 0; an event kill has an int ``event`` >= 1, ``when`` in
    ``after``/``before`` (default ``after``) and optionally ``op``; a suspend
    has ``signal`` (default ``SIGINT``) and ``after_ms``.
    """
    if not isinstance(spec, dict):
        raise ValueError(f"a fault must be an object (a table), got {_json(spec)}")
    kind = spec.get("kind", "none")
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {_json(kind)} (known: {', '.join(FAULT_KINDS)})")
    unknown = sorted(set(spec) - _KEYS[kind])
    if unknown and kind != "none":  # (a no-fault entry drops whatever else it holds)
        raise ValueError(f"a {kind} fault has no key {', '.join(map(repr, unknown))} (its keys: "
                         f"{', '.join(sorted(_KEYS[kind]))})")
    if kind in ("kill", "suspend") and spec.get("op") is not None:
        _among(spec["op"], EVENT_OPS, f"{kind} op (the calls an event counts)")
    out: dict[str, Any] = {"kind": kind}
    if kind == "none":
        return out
    if kind == "hold":
        out["at"] = _count(spec.get("at"), "hold 'at' (the sequence point: the leg's K-th lookup, read, open or lock)")
        ops = spec.get("ops")
        if ops is not None:  # the observer names an unknown kind when the leg starts (docs/observer.md)
            if not isinstance(ops, str) or not re.fullmatch(r"[a-z_]+(,[a-z_]+)*", ops):
                raise ValueError(f"hold 'ops' must be observed op kinds, comma-separated (e.g. 'write' or "
                                 f"'open,read'), got {_json(ops)}")
            out["ops"] = ops
        if not isinstance(spec.get("reader", False), bool):
            raise ValueError(f"hold 'reader' must be true or false, got {_json(spec['reader'])}")
        if spec.get("reader"):
            out["reader"] = True
        return out
    if kind == "io_error":
        return {"kind": kind, "action": _among(spec.get("action"), IO_ERRORS, "io_error action"),
                "event": _count(spec.get("event"), "io_error event"),
                "op": _among(spec.get("op"), IO_ERROR_OPS, "io_error op")}
    if kind == "suspend":  # at a time or at an event, a suspend names its signal
        out["signal"] = _among(spec.get("signal", "SIGINT"), SIGNALS, "suspend signal")
    if "event" in spec:
        out["event"] = _count(spec["event"], f"{kind} event")
        whens = ("after",) if kind == "suspend" else ("after", "before")
        out["when"] = _among(spec.get("when", "after"), whens, f"{kind} 'when'")
        if "after_ms" in spec:
            raise ValueError(f"a {kind} has either 'event' or 'after_ms', not both")
        if spec.get("op"):
            out["op"] = str(spec["op"])
        return out
    after = spec.get("after_ms")
    if isinstance(after, bool) or not isinstance(after, (int, float)) or after < 0:
        raise ValueError(f"a {kind} needs after_ms >= 0 (a time) or event >= 1 (a call), got after_ms {_json(after)}")
    out["after_ms"] = float(after)
    return out


def validate_schedule(schedule: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Validate every fault of ``schedule`` (see :func:`validate_fault`); returns the normalized list."""
    if not isinstance(schedule, list):
        raise ValueError(f"a schedule must be a list of faults, one per leg (e.g. "
                         f"[{{\"kind\": \"kill\", \"event\": 3}}]), got {_json(schedule)}")
    out = []
    for leg, fault in enumerate(schedule):
        try:
            out.append(validate_fault(fault))
        except ValueError as exc:
            raise ValueError(f"leg {leg}'s fault: {exc}" if len(schedule) > 1 else str(exc)) from None
    return out


def fault_for_leg(schedule: list[dict[str, Any]], leg: int) -> dict[str, Any]:
    """The fault of leg ``leg`` (0-based): ``schedule[leg]``, or ``{"kind": "none"}`` past its end."""
    return dict(schedule[leg]) if leg < len(schedule) else {"kind": "none"}


def event_action(spec: dict[str, Any]) -> str | None:
    """The IO seam's and the observer's action of an event fault: ``kill-after``/``kill-before`` for an
    event kill, ``sigint-after``/``sigterm-after`` for an event suspend; ``None`` for any other fault."""
    if "event" not in spec or spec.get("kind") not in ("kill", "suspend"):
        return None
    if spec["kind"] == "suspend":
        return f"{str(spec.get('signal', 'SIGINT')).lower()}-after"
    return f"kill-{spec.get('when', 'after')}"


def seam_fault(spec: dict[str, Any]) -> str | None:
    """The ``FISKJ_IOSEAM_FAULT`` value of an event kill (``kill-after@12``, ``kill-before@3:fsync``), an event
    suspend (``sigint-after@5``) or an IO error (``eio@2:fsync``: the 2nd fsync fails), else ``None``."""
    if spec.get("kind") == "io_error":
        return f"{spec['action']}@{spec['event']}:{spec['op']}"
    action = event_action(spec)
    return None if action is None else f"{action}@{spec['event']}" + (f":{spec['op']}" if spec.get("op") else "")


def history_fault(spec: dict[str, Any], injected: bool = False) -> Fault:
    """Convert a schedule entry to :class:`harness.history.model.Fault` (``at`` holds ``after_ms``, a hold's
    ``at``/``ops``/``reader``, or ``event``/``when``/``op`` and an IO error's ``action``)."""
    kind = spec.get("kind", "none")
    keys = ("after_ms", "at", "ops", "reader", "event", "op", "action")
    at = {k: spec[k] for k in keys if spec.get(k) not in (None, "")}
    if "event" in spec and kind != "io_error":
        at["when"] = spec.get("when", "after")
    signal = {"suspend": spec.get("signal"), "kill": "SIGKILL"}.get(kind)
    return Fault(kind=kind, signal=signal, at=at, detail={}, injected=injected)
