"""Points of interest in a reference run's trace, shared by the families' plans (pure: no IO)."""

from __future__ import annotations

import base64
from typing import Any, Iterable

from harness.history.journal_location import JournalLocation
from harness.history.model import History

__all__ = ["pending_point", "pending_point_of", "write_count"]


def pending_point_of(history: History, run_id: str) -> int | None:
    """:func:`pending_point` of ``history``'s first leg (a reference run), by the tool_use ids its model
    handed out when its journal is not fisk-ai v2; ``None`` with no leg."""
    if not history.legs:
        return None
    calls = sorted(history.model_calls, key=lambda c: c.index) if not history.journal.decoded else []
    ids = [b["id"] for c in calls for b in c.reply
           if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("id"), str)]
    return pending_point(history.legs[0].trace, run_id, history.journal, ids)


def pending_point(trace: list[dict[str, Any]], run_id: str, journal: JournalLocation,
                  tool_ids: Iterable[str] = ()) -> int | None:
    """The trace event ``n`` after which a kill leaves the run with a pending tool batch (pure): the fsync
    that acknowledged the first assistant record with tool calls, else (an engine that never fsyncs it)
    that record's write; ``None`` when no such record was written.  ``journal``: where the subject keeps
    ``run_id``'s journal.  With ``tool_ids`` (the model's tool_use ids, for a journal format the harness does
    not decode) that record is the first journal line holding one of them, not a fisk-ai v2 assistant record.  A
    record is written by the write that ends its line (an engine may write one in several writes)."""
    ids = [i.encode() for i in tool_ids]
    write_n, partial = None, b""
    for ev in trace:
        if not journal.is_journal(ev.get("path"), run_id) or ev.get("error"):
            continue
        if ev.get("op") == "write" and write_n is None:
            *lines, partial = (partial + base64.b64decode(ev.get("data") or "")).split(b"\n")
            if any((any(i in line for i in ids) if ids else b'"tool_use"' in line and b"session.assistant" in line)
                   for line in lines):
                write_n = int(ev["n"])
        elif ev.get("op") == "write" and write_n is not None:
            return write_n  # written on without an fsync of the batch
        elif ev.get("op") == "fsync" and write_n is not None:
            return int(ev["n"])
    return write_n


def write_count(trace: list[dict[str, Any]]) -> int:
    """How many writes the trace holds (pure): the observer numbers a leg's writes the same way, so a hold
    or a fault at write K, for K in ``1..write_count``, lands on a write the run really makes."""
    return sum(1 for ev in trace if ev.get("op") == "write" and not ev.get("error"))
