"""The one view of a history's journal the checkers read (pure: no IO).

A checker builds one :class:`JournalView` of the history it judges and asks it, instead of branching on
the subject's journal format or naming the journal's file:

* :meth:`JournalView.is_journal`: whether a path the trace shows is the run's journal (the subject's
  journal path template: :class:`harness.history.journal_location.JournalLocation`);
* :meth:`JournalView.at`, :meth:`JournalView.before`, :meth:`JournalView.lines`: a snapshot split into
  lines with their byte offsets, each decoded as a record when the format is known (fisk-ai v2,
  :func:`fiskj.codec.decode_record`), else as one JSON value (``jsonl``, :func:`decode_json_line`);
* :meth:`JournalView.acknowledged`: the lines a leg wrote and then fsynced (from its IO-seam trace);
* :meth:`JournalView.journaled`: for a journal whose records are not decoded, whether a leg's journal
  kept the line that completed a piece of work (:class:`Journaled`), or an opaque store's reading holds it
  (:class:`Read`; :meth:`JournalView.held`, :meth:`JournalView.tool_result_ids`);
* :attr:`JournalView.decoded`: whether records (seq, kind, fold) can be read at all.

A line is the bytes up to and including a ``\\n`` (the final piece may lack it: a torn tail).
"""

from __future__ import annotations

import json
from contextlib import contextmanager  # purity: the block of shared splits (shared_splits), no IO
from contextvars import ContextVar  # purity: an in-memory value per thread (the checks' shared splits), no IO
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from fiskj.codec import decode_record
from fiskj.records import AssistantRecord, TerminalRecord, ToolResultRecord

from harness.checkers._common import completed_probe, excerpt, legs_in_order, previous_snapshot
from harness.checkers._trace import Ack, acknowledged, journal_writes, record_type
from harness.history.journal_location import JournalLocation
from harness.names import VOLATILE
from harness.history.jsonl import decode_json_line
from harness.history.model import History, Leg
from harness.names import FISK_AI_V2

__all__ = ["Line", "Snapshot", "split_journal", "shared_splits", "Journaled", "Read", "JournalView", "reply_markers"]


def reply_markers(reply: list[dict[str, Any]]) -> list[bytes]:
    """Bytes by which a journal line holding model ``reply`` is known (a journal the checkers do not
    decode): its tool_use ids, else its text as JSON escapes it (ASCII-only and raw UTF-8)."""
    ids = [b["id"].encode() for b in reply if isinstance(b, dict) and b.get("type") == "tool_use"
           and isinstance(b.get("id"), str)]
    if ids:
        return ids
    text = "".join(b.get("text", "") for b in reply if isinstance(b, dict) and b.get("type") == "text")
    if not text:
        return []
    return [json.dumps(text)[1:-1].encode(), json.dumps(text, ensure_ascii=False)[1:-1].encode()]


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
        """The line as evidence: number, offset (bytes), length, seq, decode error, the agent's own record type
        and an excerpt."""
        out: dict[str, Any] = {"line": self.number, "offset": self.offset, "length": len(self.raw)}
        if self.seq is not None:
            out["seq"] = self.seq
        if self.error is not None:
            out["error"] = self.error
        if record_type(self.raw):
            out["record_type"] = record_type(self.raw)
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


#: Within :func:`shared_splits`: (journal bytes, format) -> its :class:`Snapshot`, for this thread's checks.
_SPLITS: ContextVar[dict[tuple[bytes, str], Snapshot] | None] = ContextVar("fiskj_journal_splits", default=None)


@contextmanager
def shared_splits() -> Iterator[None]:
    """While the block runs (on this thread), :func:`split_journal` splits each distinct (bytes, format) once
    and hands every caller that one :class:`Snapshot`: the checkers of one history ask for the same few
    snapshots a dozen times (:func:`harness.checkers.check_all` runs them in one block).  A snapshot so
    shared is read, never changed."""
    token = _SPLITS.set({})
    try:
        yield
    finally:
        _SPLITS.reset(token)


def split_journal(data: bytes | None, fmt: str = FISK_AI_V2) -> Snapshot:
    """Split ``data`` on the byte ``\\n`` only and decode each complete line on its own.

    ``fmt`` (:data:`harness.names.JOURNAL_FORMATS`): a ``fisk-ai-v2`` line decodes as a record
    (:func:`fiskj.codec.decode_record`); a ``jsonl`` line as one JSON value (:class:`JsonLine`, no seq).
    A line that does not decode keeps ``record`` ``None`` and says why in ``error``.  Within
    :func:`shared_splits` the same bytes in the same format give the same snapshot (a function of both only).
    """
    known = _SPLITS.get()
    if known is None:
        return _split(data, fmt)
    key = (data or b"", fmt)
    snap = known.get(key)
    if snap is None:
        snap = known[key] = _split(data, fmt)
    return snap


def _split(data: bytes | None, fmt: str) -> Snapshot:
    """:func:`split_journal`'s work."""
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


class Journaled:
    """Whether a leg's journal holds the record that completed a piece of work, for a journal the
    checkers do not decode (``jsonl``; docs/subject.md "Journal formats"): judged by the bytes.

    The work (a tool execution, a model call) was done by leg ``leg`` at time ``t`` (monotonic ns); its
    record is a line that leg acknowledged after ``t`` (:meth:`JournalView.acknowledged`)
    holding one of ``markers`` (the tool_use id, or the reply's ids or text): a run journals what it
    learned after learning it.  :meth:`lost` says whether leg ``i``'s snapshot lacks every such line.
    """

    def __init__(self, view: "JournalView") -> None:
        self._acks = {lg.index: view.acknowledged(lg) for lg in view.history.legs}
        self._lines = {lg.index: {ln.raw for ln in view.at(lg).lines} for lg in view.history.legs}

    def lines(self, leg: int, t: int, markers: Iterable[bytes]) -> list[bytes]:
        """The lines leg ``leg`` acknowledged after ``t`` holding one of ``markers``."""
        marks = [m for m in markers if m]
        return [a.line for a in self._acks.get(leg, []) if a.t is not None and a.t > t
                and any(m in a.line for m in marks)]

    #: Why a crashed leg does not account for a repeat (``{item}``: the work), in a checker's evidence.
    held = "it acknowledged a journal line holding {item} after the work was done (its result, or a line written late)"

    def lost(self, i: int, lines: list[bytes]) -> bool:
        """True when leg ``i``'s snapshot holds none of ``lines``."""
        return not any(line in self._lines.get(i, set()) for line in lines)


class Read(Journaled):
    """Whether a leg left work saved, for an opaque store (docs/subject.md "Journal formats"): by the agent's own
    reading taken after the leg (after a crash: before the next resume).  The work's ``markers`` (tool_use ids,
    or a reply's ids or text) are saved when the reading lists one of the ids in ``tool_results`` or holds the
    text as its ``answer``; a leg with no usable reading saved nothing that can be shown."""

    held = "its own reading after the crash holds {item} (a tool result, or the reply's results or answer)"

    def __init__(self, view: "JournalView") -> None:
        self._held = {lg.index: view.held(lg) or set() for lg in view.history.legs}

    def lines(self, leg: int, t: int, markers: Iterable[bytes]) -> list[bytes]:
        return [m for m in markers if m]

    def lost(self, i: int, lines: list[bytes]) -> bool:
        return not any(m in self._held.get(i, set()) for m in lines)


class JournalView:
    """How the checkers read ``history``'s journal: build one per check and ask it (module docstring).

    Snapshots and acknowledged lines are computed once per leg and kept.
    """

    def __init__(self, history: History) -> None:
        self.history = history
        self.location: JournalLocation = history.journal
        self._at: dict[int, Snapshot] = {}
        self._acks: dict[int, list[Ack]] = {}
        self._journaled: Journaled | None = None

    @property
    def format(self) -> str:
        """The journal's format (:data:`harness.names.JOURNAL_FORMATS`)."""
        return self.location.format

    @property
    def decoded(self) -> bool:
        """True when the journal's lines decode as records (fisk-ai v2): seqs, kinds and the fold are known."""
        return self.location.decoded

    def is_journal(self, path: str | None) -> bool:
        """True when ``path`` (a trace path) is the run's journal
        (:meth:`harness.history.journal_location.JournalLocation.is_journal`)."""
        return self.location.is_journal(path, self.history.run_id)

    def lines(self, data: bytes | None) -> Snapshot:
        """``data`` (journal bytes) split into lines, decoded in the journal's format (:func:`split_journal`)."""
        return split_journal(data, self.format)

    def at(self, leg: Leg) -> Snapshot:
        """The journal as the next leg found it after ``leg`` (``leg.journal``), split and decoded."""
        if leg.index not in self._at:
            self._at[leg.index] = self.lines(leg.journal)
        return self._at[leg.index]

    def before(self, leg: Leg) -> Snapshot:
        """The journal as ``leg`` found it (the snapshot of the leg before it; empty for the first leg)."""
        return self.lines(previous_snapshot(self.history, leg))

    def acknowledged(self, leg: Leg) -> list[Ack]:
        """The journal lines ``leg`` wrote and then fsynced (:func:`harness.checkers._trace.acknowledged`)."""
        if leg.index not in self._acks:
            self._acks[leg.index] = acknowledged(self.history, leg)
        return self._acks[leg.index]

    def writes(self, leg: Leg) -> list[dict[str, Any]]:
        """``leg``'s events that changed the journal's bytes or name
        (:func:`harness.checkers._trace.journal_writes`; an opaque store's scratch files left out)."""
        return [ev for ev in journal_writes(self.history, leg)
                if not (self.location.is_store and str(ev.get("path", "")).endswith(VOLATILE))]

    def after_end(self) -> set[int]:
        """The legs that resume a run already completed, for a subject that promises such a resume a new turn
        or nothing (docs/spec.md section 15 "Declared promises"; else empty): the resume after completed
        (``[check] resume_after_completed``) and every leg after one whose journal holds the run's end (a
        completed fold; undecoded, the reference run's final reply, written whether or not fsynced)."""
        if self.history.promises.resume_completed == "refuse":
            return set()
        final = reply_markers(self.history.reference.last_reply) if self.history.reference is not None else []
        out: set[int] = set()
        ended = False
        for leg in legs_in_order(self.history):
            if ended or completed_probe(self.history, leg):
                out.add(leg.index)
            last = self.at(leg).last_record()
            ended = ended or (isinstance(last, TerminalRecord) and last.reason == "completed" if self.decoded else
                              (leg.reading or {}).get("status") == "completed" if self.location.is_store else
                              any(m in (leg.journal or b"") for m in final))
        return out

    def journaled(self) -> Journaled | None:
        """For a journal whose records are not decoded: which work each leg's journal kept, by the lines the
        legs acknowledged (:class:`Journaled`) or an opaque store's reading (:class:`Read`); ``None`` when
        records are decoded (ask the snapshots)."""
        if self.decoded:
            return None
        if self._journaled is None:
            self._journaled = Read(self) if self.location.is_store else Journaled(self)
        return self._journaled

    def held(self, leg: Leg) -> set[bytes] | None:
        """An opaque store's saved work after ``leg`` by its reading: the ``tool_results`` ids and the ``answer``
        (as :func:`reply_markers` gives a text); ``None`` when the leg has no usable reading."""
        r = leg.reading
        if not r or r.get("error") or not r.get("given"):
            return None
        answer = r.get("answer")
        return ({str(i).encode() for i in r.get("tool_results") or []}
                | (set(reply_markers([{"type": "text", "text": answer}])) if isinstance(answer, str) else set()))

    def tool_result_ids(self, leg: Leg) -> set[str]:
        """The tool results ``leg``'s journal holds after it: decoded records, an opaque store's reading, else none."""
        if self.location.is_store:
            return {str(i) for i in (leg.reading or {}).get("tool_results") or []
                    if not (leg.reading or {}).get("error")}
        return self.at(leg).tool_result_ids()
