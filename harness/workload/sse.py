"""Server-sent events of the Messages API: a complete message as the stream that delivers it (pure).

The event order and chunking: docs/workload.md "Streaming".
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["TEXT_CHUNK", "JSON_CHUNK", "WHOLE_BLOCKS", "message_events", "encode", "chunk", "LAST_CHUNK"]

#: Characters per ``text_delta`` / ``thinking_delta`` (the last one may be shorter).
TEXT_CHUNK = 24
#: Characters per ``partial_json`` chunk of a tool input.
JSON_CHUNK = 16
#: The chunk that ends a chunked HTTP/1.1 body.
LAST_CHUNK = b"0\r\n\r\n"


#: Blocks the API sends whole in their ``content_block_start``, with no delta.
WHOLE_BLOCKS = ("redacted_thinking", "web_search_tool_result")


def _utf8_safe(text: str) -> str:
    """``text`` (JSON) with each lone surrogate written as its JSON escape ``\\udXXX`` (no UTF-8 holds one)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _block_events(index: int, block: dict[str, Any]) -> list[dict[str, Any]]:
    kind = block.get("type")
    if kind == "text":
        start: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"], TEXT_CHUNK)]
    elif kind in ("tool_use", "server_tool_use"):
        start = {"type": kind, "id": block["id"], "name": block["name"], "input": {}}
        data = _utf8_safe(json.dumps(block["input"], separators=(",", ":"), ensure_ascii=False))
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in ["", *_pieces(data, JSON_CHUNK)]]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"], TEXT_CHUNK)]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind in WHOLE_BLOCKS:
        start, deltas = dict(block), []
    else:
        raise ValueError(f"content block {index} has type {kind!r}; only text, tool_use, server_tool_use, "
                         f"thinking, {', '.join(WHOLE_BLOCKS)} stream")
    return ([{"type": "content_block_start", "index": index, "content_block": start}]
            + [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
            + [{"type": "content_block_stop", "index": index}])


def message_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the stream events (dicts, each with ``type``) that deliver ``message``, a complete Messages
    API response body.  Raises ``ValueError`` for a content block that does not stream, ``KeyError`` for a
    missing field."""
    usage = dict(message["usage"])
    start_usage = {**usage, "output_tokens": 1}
    head = {**message, "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": head}]
    for index, block in enumerate(message["content"]):
        blocks = _block_events(index, block)
        events.extend(blocks[:1] + ([{"type": "ping"}] if index == 0 else []) + blocks[1:])
    if not message["content"]:
        events.append({"type": "ping"})
    events.append({"type": "message_delta",
                   "delta": {"stop_reason": message["stop_reason"], "stop_sequence": message.get("stop_sequence")},
                   "usage": usage})
    events.append({"type": "message_stop"})
    return events


def encode(event: dict[str, Any]) -> bytes:
    """One event as SSE bytes: ``event: <type>\\ndata: <compact JSON>\\n\\n`` (UTF-8; a lone surrogate in a
    string as its JSON escape)."""
    data = _utf8_safe(json.dumps(event, separators=(",", ":"), ensure_ascii=False))
    return f"event: {event['type']}\ndata: {data}\n\n".encode("utf-8")


def chunk(data: bytes) -> bytes:
    """``data`` framed as one HTTP/1.1 chunk; empty data gives ``b""`` (:data:`LAST_CHUNK` ends a body)."""
    return f"{len(data):x}\r\n".encode("ascii") + data + b"\r\n" if data else b""
