"""Shared, pure helpers of the checkers: legs, disruptions, refusals, repeats.

Nothing here does IO.  How a checker reads the journal itself (its lines,
the lines each leg acknowledged, whether its records are decoded) is
:mod:`harness.checkers.journal_view`.

Conventions every checker shares (the runner's side of the contract):

* ``Leg.journal`` is the journal as the *next* leg found it: for a leg whose
  fault changed the files after it ended (``tail``, ``power_loss``) it is
  the file after that fault.
* A leg is *disrupted* when it was killed (:attr:`Leg.crashed`) or a file
  fault followed it (``tail``, ``power_loss``).  A kill or a power loss
  allows one in-flight record to be lost; a tail fault may destroy any
  record in the bytes it cut or changed (the nemesis did it, not the engine).
* Model calls and effects carry a leg index; when it is ``-1`` the leg whose
  ``[t_start, t_end]`` holds the event's time is used, if exactly one does.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable

from fiskj.records import AssistantRecord, ToolResultRecord, tool_use_ids

from harness.history.model import History, Leg
from harness.history.promises import COMPLETED_PROBE, FISK_AI, Promises

__all__ = [
    "excerpt", "legs_in_order", "leg_by_index", "attribute", "Unattributable", "crash_kind", "is_tail", "is_refusal",
    "pending_ids", "previous_snapshot", "nemesis_prefix_holds", "group_by_leg", "blame_repeat", "completed_probe",
]

#: Longest excerpt of journal bytes put in evidence.
EXCERPT = 160


def excerpt(raw: bytes, limit: int = EXCERPT) -> str:
    """A printable excerpt of journal bytes (``repr`` of the bytes, cut at ``limit``)."""
    text = raw[:limit].decode("utf-8", "backslashreplace")
    text = text.replace("\n", "\\n").replace("\x00", "\\0")
    return text + (f"...(+{len(raw) - limit} bytes)" if len(raw) > limit else "")


def legs_in_order(history: History) -> list[Leg]:
    """The legs sorted by index."""
    return sorted(history.legs, key=lambda leg: leg.index)


def leg_by_index(history: History) -> dict[int, Leg]:
    return {leg.index: leg for leg in history.legs}


class Unattributable(ValueError):
    """An event whose leg cannot be determined (the checker then answers unknown)."""


def attribute(history: History, leg: int, t: int, what: str) -> int:
    """Return the leg index of an event: its own ``leg``, else the one leg whose span holds ``t``."""
    if leg >= 0:
        return leg
    spans = [lg.index for lg in history.legs if lg.t_end and lg.t_start <= t <= lg.t_end]
    if len(spans) == 1:
        return spans[0]
    raise Unattributable(f"{what} at t={t} has no leg and {len(spans)} legs span that time")


def group_by_leg(history: History, events: Iterable[Any], key: Callable[[Any], Any],
                 what: Callable[[Any], str]) -> dict[Any, list[tuple[int, Any]]]:
    """``events`` (model calls, effects) grouped by ``key(event)``, each as ``(leg index, event)`` in history order.

    The leg is the event's own or the one whose span holds its time (:func:`attribute`, which raises
    :class:`Unattributable` naming ``what(event)`` when no single leg does).
    """
    groups: dict[Any, list[tuple[int, Any]]] = {}
    for ev in events:
        li = attribute(history, ev.leg, ev.t, what(ev))
        groups.setdefault(key(ev), []).append((li, ev))
    return groups


def crash_kind(leg: Leg | None, promises: Promises = FISK_AI) -> str | None:
    """``"power_loss"`` or ``"kill"`` when ``leg`` crashed (one in-flight record may be lost), else ``None``.

    A leg can be both killed and followed by a tail fault; the kill still counts.  A leg ended by an
    injected IO error on its journal counts as a crash of the step in flight (``"kill"``): the record
    whose write or fsync failed was not acknowledged, so its tool or model call may run again once.  So
    does a leg sent a signal the subject ``promises`` to abort on (:meth:`Promises.aborts`), and one that ended
    in error after a ``server_kill`` of its JetStream store (its append not acknowledged, its journal poisoned).
    """
    if leg is None:
        return None
    if leg.fault.kind == "power_loss":
        return "power_loss"
    if (leg.fault.kind == "io_error" and leg.fault.injected) or promises.aborts(leg) or \
            (leg.fault.kind == "server_kill" and leg.fault.injected and leg.exit_code == 1):
        return "kill"
    return "kill" if leg.crashed else None


def is_tail(leg: Leg | None) -> bool:
    """True when a tail fault changed the journal after ``leg`` (its snapshot is the nemesis's)."""
    return leg is not None and leg.fault.kind == "tail"


def blame_repeat(legs: dict[int, Leg], used: dict[int, str], item: str, prev_leg: int, leg: int,
                 lost: Callable[[int], bool], *, held: str, used_by: str, not_killed: Callable[[Leg | None], str],
                 intact: str, promises: Promises = FISK_AI) -> tuple[int | None, str | None, list[dict[str, Any]]]:
    """The disruption that accounts for a repeat of ``item`` in ``leg`` whose previous execution was in ``prev_leg``.

    The rule shared by I2 (tool re-runs) and I3 (repeated model calls):
    ``lost(i)`` says that leg ``i``'s journal lacks the record that completes
    ``item``.  The previous leg accounts for the repeat when it was killed or
    lost power, its journal lacks the record, and its one repeat (``used``:
    crash leg -> item) is not taken yet; then it is marked used.  Else the
    first leg from ``prev_leg`` up to (not including) ``leg`` with a ``tail``
    fault that lost the record accounts for it (no per-fault limit).

    Returns ``(leg, fault kind, refused)``: the accounting leg and its fault
    (``"kill"``, ``"power_loss"`` or ``"tail"``), or ``(None, None, refused)``;
    ``refused`` lists each candidate turned down, ``{"leg", "why"}``, with the
    checker's words: ``held`` (the crashed leg's journal holds the record),
    ``used_by`` + the item that took the crash, ``not_killed(leg)`` and
    ``intact`` (a tail fault left the record).  ``promises``: the subject's (a signal it aborts on is a kill).
    """
    refused: list[dict[str, Any]] = []
    crash = legs.get(prev_leg)
    kind = crash_kind(crash, promises)
    if kind in ("kill", "power_loss"):
        if not lost(prev_leg):
            refused.append({"leg": prev_leg, "why": held})
        elif prev_leg in used:
            refused.append({"leg": prev_leg, "why": f"{used_by}{used[prev_leg]}"})
        else:
            used[prev_leg] = item
            return prev_leg, kind, refused
    else:
        refused.append({"leg": prev_leg, "why": not_killed(crash)})
    for ci in sorted(i for i in legs if prev_leg <= i < leg and is_tail(legs[i])):
        if lost(ci):
            return ci, "tail", refused
        refused.append({"leg": ci, "why": intact})
    return None, None, refused


#: What a refusal says (fiskj prints ``fiskj run: <ErrorType>: <message>``): ResumeRefused,
#: FingerprintMismatch, RunLocked ("held by another writer"), RunExists (a refused create).
_REFUSAL = re.compile(r"refus|locked|held by another|in use by|fingerprint|already exists|RunExists|"
                      r"not resumable", re.I)


#: What an agent says of the model refusing (the stop reason ``refusal``, "the model refused"), not of its
#: resume: never a refused resume.
_MODEL_REFUSAL = re.compile(r"\bmodel refused\b|\brefusal\b", re.I)


def is_refusal(leg: Leg) -> bool:
    """A leg that exited 1 or 2 because its resume or create was refused.

    A leg the nemesis disturbed (an injected kill, suspend or IO error) is never a refusal: a SIGINT that
    lands outside the agent's suspend window (while it starts or ends) exits 1 by design, and
    its output is no evidence of a refused resume.
    """
    if leg.exit_signal is not None or leg.exit_code not in (1, 2):
        return False
    if leg.fault.injected and leg.fault.kind in ("kill", "suspend", "io_error", "server_kill"):
        return False
    detail = " ".join(f"{k}={v}" for k, v in leg.fault.detail.items())
    said = _MODEL_REFUSAL.sub("", leg.stderr or "")  # the model refusing to answer is no refused resume
    return bool(_REFUSAL.search(detail) or _REFUSAL.search(said))


def completed_probe(history: History, leg: Leg) -> str | None:
    """What ``leg``, the resume of a completed run (``[check] resume_after_completed``), must do by the
    subject's promise (``refused``, ``new-turn``, ``no-op``); ``None`` for any other leg."""
    return history.promises.expect_after_completed if leg.fault.detail.get("probe") == COMPLETED_PROBE else None


def pending_ids(records: list[Any]) -> tuple[list[str], int | None]:
    """Unanswered tool_use ids of the last assistant record, and that record's seq."""
    last_idx = None
    for i, rec in enumerate(records):
        if isinstance(rec, AssistantRecord):
            last_idx = i
    if last_idx is None:
        return [], None
    asked = tool_use_ids(records[last_idx].message)
    answered = {r.tool_use_id for r in records[last_idx + 1:] if isinstance(r, ToolResultRecord)}
    return [i for i in asked if i not in answered], records[last_idx].seq


def previous_snapshot(history: History, leg: Leg) -> bytes | None:
    """The journal before ``leg`` ran: the snapshot of the leg before it (by index), else ``None``."""
    before = [lg for lg in history.legs if lg.index < leg.index]
    if not before:
        return None
    return max(before, key=lambda lg: lg.index).journal


def same_saved_state(history: History, leg: Leg) -> bool:
    """An opaque store whose files ``leg`` changed without changing what the agent reads of them: its reading
    after ``leg`` equals the one before (status, tool_results, answer), both usable (a database tidies its
    files as it closes: SQLite copies its WAL into the database and removes it).  False for any journal."""
    before = [lg for lg in history.legs if lg.index < leg.index]
    if not history.journal.is_store or not before:
        return False

    def saved(r: dict[str, Any] | None) -> tuple | None:
        if not r or r.get("error") or not r.get("given"):
            return None
        return r.get("status"), tuple(sorted(r.get("tool_results") or ())), r.get("answer")
    was = saved(max(before, key=lambda lg: lg.index).reading)
    return was is not None and was == saved(leg.reading)


def nemesis_prefix_holds(history: History, leg: Leg, end: int) -> bool:
    """True when bytes ``[0, end)`` of ``leg``'s journal are exactly as the last tail fault left them.

    The latest leg at or before ``leg`` with a ``tail`` fault is the one whose
    snapshot the nemesis made; damage inside bytes the engine never touched
    since is the nemesis's, not the engine's.
    """
    faulted = [lg for lg in history.legs if lg.index <= leg.index and lg.fault.kind == "tail"]
    if not faulted or leg.journal is None:
        return False
    made = max(faulted, key=lambda lg: lg.index).journal or b""
    return end <= len(made) and leg.journal[:end] == made[:end]
