"""Points of interest in a reference run's trace, shared by the families' plans (pure: no IO)."""

from __future__ import annotations

import base64
from typing import Any

__all__ = ["pending_point", "write_count"]


def pending_point(trace: list[dict[str, Any]], run_id: str) -> int | None:
    """The trace event ``n`` after which a kill leaves the run with a pending tool batch (pure): the fsync
    that acknowledged the first assistant record with tool calls, else (an engine that never fsyncs it)
    that record's write; ``None`` when no such record was written."""
    write_n = None
    for ev in trace:
        path = ev.get("path") or ""
        if not path.endswith(f"/{run_id}.json") or ev.get("error"):
            continue
        if ev.get("op") == "write" and write_n is None:
            data = base64.b64decode(ev.get("data") or "")
            if b'"tool_use"' in data and b"session.assistant" in data:
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
