"""Record builders in the field cases' notation: M, A(a, b), A("text"), R(a), U, T(reason).

``journal(M(), A("a"), R("a"))`` returns the journal bytes with seqs assigned
in order.  Used by many test modules; pure.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fiskj.codec import encode_record
from fiskj.fingerprint import make_fingerprint
from fiskj.records import AssistantRecord, MetaRecord, Record, TerminalRecord, ToolResultRecord, UserRecord

FP = make_fingerprint(model="m1", system="be brief", tools=[{"name": "t"}], thinking_mode="off",
                      max_tokens=100_000, max_iterations=10)


def M(run_id: str = "r1", prompt: str | None = "do it", version: int = 2, **kw: Any) -> MetaRecord:
    return MetaRecord(version=version, run_id=run_id, created="2026-11-30T01:02:03.123456789+00:00",
                      fingerprint=kw.pop("fingerprint", FP), prompt=prompt, **kw)


def A(*ids: str, text: str | None = None, iteration: int = 0, stop: str | None = None,
      in_tokens: int = 10, out_tokens: int = 5, **kw: Any) -> AssistantRecord:
    """An assistant record with tool_use ids ``ids`` (or only ``text`` when no ids)."""
    content: list[dict[str, Any]] = []
    if text is not None or not ids:
        content.append({"type": "text", "text": text if text is not None else "done"})
    content += [{"type": "tool_use", "id": i, "name": "t", "input": {"id": i}} for i in ids]
    return AssistantRecord(iteration=iteration, message={"role": "assistant", "content": content},
                           stop_reason=stop or ("tool_use" if ids else "end_turn"),
                           in_tokens=in_tokens, out_tokens=out_tokens, **kw)


def R(tool_use_id: str, content: Any = None, is_error: bool = False, **kw: Any) -> ToolResultRecord:
    return ToolResultRecord(tool_use_id=tool_use_id, result={
        "type": "tool_result", "tool_use_id": tool_use_id,
        "content": f"result of {tool_use_id}" if content is None else content, "is_error": is_error}, **kw)


def U(text: str = "more") -> UserRecord:
    return UserRecord(message={"role": "user", "content": [{"type": "text", "text": text}]})


def T(reason: str = "completed", message: str | None = None) -> TerminalRecord:
    return TerminalRecord(reason=reason, message=message)


def numbered(*records: Record, start: int = 1) -> list[Record]:
    """Assign seqs ``start, start+1, ...`` in order."""
    return [dataclasses.replace(r, seq=start + i) for i, r in enumerate(records)]


def lines(*records: Record, start: int = 1) -> list[bytes]:
    return [encode_record(r) for r in numbered(*records, start=start)]


def journal(*records: Record, start: int = 1) -> bytes:
    return b"".join(lines(*records, start=start))
