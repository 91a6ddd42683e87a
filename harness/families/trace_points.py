"""Points of interest in a reference run's trace, shared by the families' plans (pure: no IO)."""

from __future__ import annotations

import base64
from typing import Any, Callable, Iterable, Iterator

from harness.history.journal_location import JournalLocation
from harness.history.model import History

__all__ = ["lines_written", "pending_point", "pending_point_of", "write_count"]


def lines_written(trace: list[dict[str, Any]], is_journal: Callable[[Any], bool],
                  files: dict[str, bytes] | None = None) -> Iterator[tuple[int, bytes]]:
    """Each complete line the trace's writes of a journal file made, with the position (0-based) of the write
    that ended it (pure).  The file's bytes are followed write by write (at each write's ``offset``, else at its
    end), so a line written in several writes is the last one's and one write may end several; a failed write
    writes nothing.  ``is_journal(path)``: the files followed; ``files``: the bytes each held before the trace (a
    resume leg's journal as the legs before left it)."""
    content = {path: bytearray(data) for path, data in (files or {}).items()}
    for i, ev in enumerate(trace):
        if ev.get("op") != "write" or ev.get("error") or not is_journal(ev.get("path")):
            continue
        data = base64.b64decode(ev.get("data") or "")
        buf = content.setdefault(ev["path"], bytearray())
        at = ev.get("offset")
        at = at if isinstance(at, int) and at >= 0 else len(buf)
        buf.extend(bytes(max(0, at - len(buf))))
        buf[at:at + len(data)] = data
        start = buf.rfind(b"\n", 0, at) + 1  # where the line this write continues began
        for line in bytes(buf[start:at + len(data)]).split(b"\n")[:-1]:
            yield i, line


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
    mine = lambda path: journal.is_journal(path, run_id)  # noqa: E731
    marked = (lambda line: any(i in line for i in ids)) if ids else \
        (lambda line: b'"tool_use"' in line and b"session.assistant" in line)
    first = next((i for i, line in lines_written(trace, mine) if marked(line)), None)
    if first is None:
        return None
    write_n = int(trace[first]["n"])
    for ev in trace[first + 1:]:
        if not mine(ev.get("path")) or ev.get("error"):
            continue
        if ev.get("op") == "write":
            return write_n  # written on without an fsync of the batch
        if ev.get("op") == "fsync":
            return int(ev["n"])
    return write_n


def write_count(trace: list[dict[str, Any]]) -> int:
    """How many writes the trace holds (pure): the observer numbers a leg's writes the same way, so a hold
    or a fault at write K, for K in ``1..write_count``, lands on a write the run really makes."""
    return sum(1 for ev in trace if ev.get("op") == "write" and not ev.get("error"))
