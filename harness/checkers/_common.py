"""Shared, pure helpers of the checkers: journal bytes as lines, legs, disruptions.

Nothing here does IO.  Journal snapshots are decoded in memory, line by line,
with :func:`fiskj.codec.decode_record` (a ``jsonl`` journal's lines with
:func:`decode_json_line`: one JSON value each); a line is the bytes up to and
including a ``\\n`` (the final piece may lack it).

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
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from fiskj.codec import decode_record
from fiskj.records import AssistantRecord, TerminalRecord, ToolResultRecord, tool_use_ids

from harness.history.jsonl import JsonLine, decode_json_line
from harness.history.model import History, Leg
from harness.names import FISK_AI_V2

__all__ = [
    "Line", "Snapshot", "JsonLine", "decode_json_line", "split_journal", "excerpt", "legs_in_order", "leg_by_index",
    "attribute", "Unattributable", "crash_kind", "is_tail", "is_refusal", "pending_ids", "previous_snapshot",
    "nemesis_prefix_holds", "group_by_leg", "blame_repeat", "Journaled",
]

#: Longest excerpt of journal bytes put in evidence.
EXCERPT = 160


@dataclass
class Line:
    """One physical line of a journal snapshot (1-based ``number``, byte ``offset``)."""

    number: int
    offset: int
    raw: bytes
    complete: bool
    seq: int | None = None
    record: Any = None
    error: str | None = None

    @property
    def end(self) -> int:
        return self.offset + len(self.raw)

    def brief(self) -> dict[str, Any]:
        """The line as evidence: number, offset, length, seq, decode error and an excerpt."""
        out: dict[str, Any] = {"line": self.number, "offset": self.offset, "length": len(self.raw)}
        if self.seq is not None:
            out["seq"] = self.seq
        if self.error is not None:
            out["error"] = self.error
        out["excerpt"] = excerpt(self.raw)
        return out


@dataclass
class Snapshot:
    """A journal snapshot split into lines, each decoded independently."""

    data: bytes
    lines: list[Line] = field(default_factory=list)

    def records(self) -> list[Any]:
        """Decoded records in file order (lines that do not decode are skipped)."""
        return [ln.record for ln in self.lines if ln.record is not None]

    def by_seq(self, seq: int) -> list[Line]:
        return [ln for ln in self.lines if ln.seq == seq]

    def tool_result_ids(self) -> set[str]:
        return {r.tool_use_id for r in self.records() if isinstance(r, ToolResultRecord)}

    def assistant_count(self) -> int:
        return sum(1 for r in self.records() if isinstance(r, AssistantRecord))

    def last_record(self) -> Any:
        recs = self.records()
        return recs[-1] if recs else None

    def ends_suspended(self) -> bool:
        last = self.last_record()
        return isinstance(last, TerminalRecord) and last.reason == "suspended"


def split_journal(data: bytes | None, fmt: str = FISK_AI_V2) -> Snapshot:
    """Split ``data`` on the byte ``\\n`` only and decode each complete line on its own.

    ``fmt`` (:data:`harness.names.JOURNAL_FORMATS`): a ``fisk-ai-v2`` line decodes as a record
    (:func:`fiskj.codec.decode_record`); a ``jsonl`` line as one JSON value (:class:`JsonLine`, no seq).
    A line that does not decode keeps ``record`` ``None`` and says why in ``error``.
    """
    decode = decode_record if fmt == FISK_AI_V2 else decode_json_line
    data = data or b""
    snap = Snapshot(data)
    off, number = 0, 0
    while off < len(data):
        nl = data.find(b"\n", off)
        end = len(data) if nl == -1 else nl + 1
        number += 1
        line = Line(number, off, data[off:end], complete=nl != -1)
        if not line.complete:  # as fiskj's reader: a final piece with no newline is torn
            line.error = "incomplete final line (no newline): a torn tail"
            snap.lines.append(line)
            break
        try:
            rec = decode(line.raw)
        except Exception as exc:  # noqa: BLE001 - any decode failure is evidence, not a crash
            line.error = f"{type(exc).__name__}: {exc}"
        else:
            line.record, line.seq = rec, rec.seq
        snap.lines.append(line)
        off = end
    return snap


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


class Journaled:
    """Whether a leg's journal holds the record that completed a piece of work, for a journal the
    checkers do not decode (``jsonl``; docs/subject.md "Journal formats"): judged by the bytes.

    The work (a tool execution, a model call) was done by leg ``leg`` at time ``t`` (monotonic ns); its
    record is a line that leg acknowledged after ``t`` (:func:`harness.checkers._trace.acknowledged`)
    holding one of ``markers`` (the tool_use id, or the reply's ids or text): a run journals what it
    learned after learning it.  :meth:`lost` says whether leg ``i``'s snapshot lacks every such line.
    """

    def __init__(self, history: History, acks: dict[int, list[Any]]) -> None:
        self._acks = acks
        self._lines = {lg.index: {ln.raw for ln in split_journal(lg.journal, history.journal_format).lines}
                       for lg in history.legs}

    def lines(self, leg: int, t: int, markers: Iterable[bytes]) -> list[bytes]:
        """The lines leg ``leg`` acknowledged after ``t`` holding one of ``markers``."""
        marks = [m for m in markers if m]
        return [a.line for a in self._acks.get(leg, []) if a.t is not None and a.t > t
                and any(m in a.line for m in marks)]

    def lost(self, i: int, lines: list[bytes]) -> bool:
        """True when leg ``i``'s snapshot holds none of ``lines``."""
        return not any(line in self._lines.get(i, set()) for line in lines)


def crash_kind(leg: Leg | None) -> str | None:
    """``"power_loss"`` or ``"kill"`` when ``leg`` crashed (one in-flight record may be lost), else ``None``.

    A leg can be both killed and followed by a tail fault; the kill still counts.  A leg ended by an
    injected IO error on its journal counts as a crash of the step in flight (``"kill"``): the record
    whose write or fsync failed was not acknowledged, so its tool or model call may run again once.
    """
    if leg is None:
        return None
    if leg.fault.kind == "power_loss":
        return "power_loss"
    if leg.fault.kind == "io_error" and leg.fault.injected:
        return "kill"
    return "kill" if leg.crashed else None


def is_tail(leg: Leg | None) -> bool:
    """True when a tail fault changed the journal after ``leg`` (its snapshot is the nemesis's)."""
    return leg is not None and leg.fault.kind == "tail"


def blame_repeat(legs: dict[int, Leg], used: dict[int, str], item: str, prev_leg: int, leg: int,
                 lost: Callable[[int], bool], *, held: str, used_by: str, not_killed: Callable[[Leg | None], str],
                 intact: str) -> tuple[int | None, str | None, list[dict[str, Any]]]:
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
    ``intact`` (a tail fault left the record).
    """
    refused: list[dict[str, Any]] = []
    crash = legs.get(prev_leg)
    kind = crash_kind(crash)
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
    if leg.fault.injected and leg.fault.kind in ("kill", "suspend", "io_error"):
        return False
    detail = " ".join(f"{k}={v}" for k, v in leg.fault.detail.items())
    said = _MODEL_REFUSAL.sub("", leg.stderr or "")  # the model refusing to answer is no refused resume
    return bool(_REFUSAL.search(detail) or _REFUSAL.search(said))


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
