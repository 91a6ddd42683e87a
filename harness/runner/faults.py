"""The leg runner's faults as data: one fault per leg, as the families schedule them (pure: no IO).

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
``{"kind": "suspend", "signal": "SIGTERM", "event": 7}``    send it right after the 7th IO-seam (or
                                                            observed) call completed (``sigterm-
                                                            after@7``; ``"op"`` counts one op only):
                                                            a suspend at a durability event, the
                                                            same on a fast or a loaded machine
``{"kind": "hold", "at": 3}``                               (observed legs) stop the leg at its 3rd
                                                            lookup, read, open or lock while a rival
                                                            runs; ``"ops": "write"`` counts writes
                                                            only, ``"reader": true`` makes the
                                                            rival the subject's reading
=========================================================  =====================================

Chains (a crash during the resume itself, during the completion of a
pending batch, right after a suspend) are schedules of several legs, e.g.
``[{"kind": "suspend", ...}, {"kind": "kill", "event": 3}]``.

A fault is applied to a running leg by the one leg runner
(:func:`harness.runner.leg.run_leg`); this module only says what the faults
are (docs/spec.md section 14, docs/scenarios.md "Schedules").
"""

from __future__ import annotations

import json
import re
from typing import Any

from harness.history.model import Fault

__all__ = ["NOOP", "FAULT_KINDS", "SIGNALS", "EVENT_OPS", "IO_ERRORS", "IO_ERROR_OPS", "validate_fault", "validate_schedule", "fault_for_leg", "seam_fault", "event_action",
           "history_fault", "fault_family"]

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
    if kind in ("kill", "suspend") and spec.get("op") is not None and spec["op"] not in EVENT_OPS:
        raise ValueError(f"{kind} op must be one of {', '.join(EVENT_OPS)} (the calls an event counts), "
                         f"got {_json(spec['op'])}")
    out: dict[str, Any] = {"kind": kind}
    if kind == "none":
        return out
    if kind == "hold":
        at = spec.get("at")
        if isinstance(at, bool) or not isinstance(at, int) or at < 1:
            raise ValueError(f"hold 'at' (the sequence point: the leg's K-th lookup, read, open or lock) must be "
                             f"an int >= 1, got {_json(at)}")
        out = {"kind": kind, "at": at}
        ops = spec.get("ops")
        if ops is not None:  # the observer names an unknown kind when the leg starts (docs/observer.md)
            if not isinstance(ops, str) or not re.fullmatch(r"[a-z_]+(,[a-z_]+)*", ops):
                raise ValueError(f"hold 'ops' must be observed op kinds, comma-separated (e.g. 'write' or "
                                 f"'open,read'), got {_json(ops)}")
            out["ops"] = ops
        if "reader" in spec:
            if not isinstance(spec["reader"], bool):
                raise ValueError(f"hold 'reader' must be true or false, got {_json(spec['reader'])}")
            if spec["reader"]:
                out["reader"] = True
        return out
    if kind == "io_error":
        action, ev, op = spec.get("action"), spec.get("event"), spec.get("op")
        if action not in IO_ERRORS:
            raise ValueError(f"io_error action must be one of {', '.join(IO_ERRORS)}, got {_json(action)}")
        if isinstance(ev, bool) or not isinstance(ev, int) or ev < 1:
            raise ValueError(f"io_error event must be an int >= 1, got {_json(ev)}")
        if op not in IO_ERROR_OPS:
            raise ValueError(f"io_error op must be one of {', '.join(IO_ERROR_OPS)}, got {_json(op)}")
        return {"kind": kind, "action": action, "event": ev, "op": op}
    if kind == "suspend":  # at a time or at an event, a suspend names its signal
        sig = spec.get("signal", "SIGINT")
        if sig not in SIGNALS:
            raise ValueError(f"suspend signal must be SIGINT or SIGTERM, got {_json(sig)}")
        out["signal"] = sig
    if kind in ("kill", "suspend") and "event" in spec:
        ev = spec["event"]
        if isinstance(ev, bool) or not isinstance(ev, int) or ev < 1:
            raise ValueError(f"{kind} event must be an int >= 1, got {_json(ev)}")
        when = spec.get("when", "after")
        if when not in ("after", "before") or (kind == "suspend" and when != "after"):
            raise ValueError(f"{kind} 'when' must be {'after' if kind == 'suspend' else 'after or before'}, "
                             f"got {_json(when)}")
        if "after_ms" in spec:
            raise ValueError(f"a {kind} has either 'event' or 'after_ms', not both")
        out["event"] = ev
        out["when"] = when
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
    if action is None:
        return None
    value = f"{action}@{spec['event']}"
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
    if spec.get("kind") == "hold":
        at.update({k: spec[k] for k in ("at", "ops", "reader") if k in spec})
    if "event" in spec and spec.get("kind") == "io_error":
        at.update(event=spec["event"], op=spec["op"], action=spec["action"])
    elif "event" in spec:
        at["event"] = spec["event"]
        at["when"] = spec.get("when", "after")
        if spec.get("op"):
            at["op"] = spec["op"]
    return Fault(kind=spec.get("kind", "none"), signal=spec.get("signal") if spec.get("kind") == "suspend" else (
        "SIGKILL" if spec.get("kind") == "kill" else None), at=at, detail={}, injected=injected)
