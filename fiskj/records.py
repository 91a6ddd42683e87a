"""Typed journal records: the five record kinds of the fisk-ai v2 format.

A journal line is an envelope ``{"seq": N, "protocol": ID, KEY: {payload}}``
(docs/spec.md, "Envelope").  Each record class below is one payload kind.
Fields are named exactly as on the wire.  Optional fields are ``None`` when
absent; the encoder also leaves out an optional field at its zero value
(``False``, ``0``, ``""``), as fisk-ai's Go ``omitempty`` does, so a line
fisk-ai or fiskj wrote decodes and encodes back to the same bytes.
Payload keys fiskj does not know are kept in ``extra`` (in order) and
written back unchanged.  Messages and content blocks are plain dicts kept
verbatim: the journal never interprets a block beyond ``type``, ``id`` and
``tool_use_id``.

``seq`` is 0 on a record built in code and not yet appended; the journal
assigns it (:meth:`fiskj.journal.Journal.append`).

The blocks fiskj builds itself (:func:`text_block`, :func:`tool_result_block`,
:func:`go_block` for a model reply's blocks) have the shape and key order
fisk-ai writes (docs/spec.md section 3); :func:`tool_result_text` reads a
result's text whether its ``content`` is a string or a list of blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from .fingerprint import Fingerprint

__all__ = [
    "VERSION",
    "PROTOCOL_META",
    "PROTOCOL_ASSISTANT",
    "PROTOCOL_USER",
    "PROTOCOL_TOOL_RESULT",
    "PROTOCOL_TERMINAL",
    "PAYLOAD_KEYS",
    "TERMINAL_REASONS",
    "MetaRecord",
    "AssistantRecord",
    "UserRecord",
    "ToolResultRecord",
    "TerminalRecord",
    "Record",
    "tool_use_ids",
    "text_block",
    "tool_result_block",
    "tool_result_text",
    "go_block",
]

#: The record format version this code writes and the newest it reads.
VERSION = 2

PROTOCOL_META = "io.choria.fisk-ai.v1.session.meta"
PROTOCOL_ASSISTANT = "io.choria.fisk-ai.v1.session.assistant"
PROTOCOL_USER = "io.choria.fisk-ai.v1.session.user"
PROTOCOL_TOOL_RESULT = "io.choria.fisk-ai.v1.session.tool_result"
PROTOCOL_TERMINAL = "io.choria.fisk-ai.v1.session.terminal"

#: protocol id -> payload key (spec: Envelope).
PAYLOAD_KEYS = {
    PROTOCOL_META: "meta",
    PROTOCOL_ASSISTANT: "assistant",
    PROTOCOL_USER: "user",
    PROTOCOL_TOOL_RESULT: "tool_result",
    PROTOCOL_TERMINAL: "terminal",
}

#: Terminal reasons (spec: terminal payload).
TERMINAL_REASONS = ("completed", "suspended", "error", "budget", "max_iterations")


@dataclass(frozen=True, slots=True)
class MetaRecord:
    """First record of every journal (seq 1): identity and resume fingerprint.

    ``created`` is the RFC 3339 string exactly as stored (Go writes
    nanoseconds and a numeric offset); it is not reparsed, so it
    round-trips byte for byte.
    """

    version: int
    run_id: str
    created: str
    fingerprint: Fingerprint
    prompt: str | None = None
    interactive: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    seq: int = 0

    protocol = PROTOCOL_META
    key = "meta"


@dataclass(frozen=True, slots=True)
class AssistantRecord:
    """One model turn, journaled before any of its tools runs.

    ``message`` is the Messages API object ``{"role": "assistant",
    "content": [blocks]}`` stored verbatim; ``iteration`` is the 0-based
    loop index; token counts are integers (absent cache counts mean 0).
    """

    iteration: int
    message: dict[str, Any]
    in_tokens: int
    out_tokens: int
    stop_reason: str | None = None
    cache_read_tokens: int | None = None
    cache_create_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    seq: int = 0

    protocol = PROTOCOL_ASSISTANT
    key = "assistant"


@dataclass(frozen=True, slots=True)
class UserRecord:
    """A chat follow-up (v2): ``message`` holds only the newly typed blocks."""

    message: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    seq: int = 0

    protocol = PROTOCOL_USER
    key = "user"


@dataclass(frozen=True, slots=True)
class ToolResultRecord:
    """One tool's result, journaled the moment the tool returns.

    ``result`` is the ``tool_result`` content block stored verbatim:
    ``{"type": "tool_result", "tool_use_id": ..., "content": ..., "is_error": ...}``.
    """

    tool_use_id: str
    result: dict[str, Any]
    remote: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    seq: int = 0

    protocol = PROTOCOL_TOOL_RESULT
    key = "tool_result"


@dataclass(frozen=True, slots=True)
class TerminalRecord:
    """How the run (or this leg of it) ended; ``reason`` is one of :data:`TERMINAL_REASONS`."""

    reason: str
    message: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    seq: int = 0

    protocol = PROTOCOL_TERMINAL
    key = "terminal"


Record = Union[MetaRecord, AssistantRecord, UserRecord, ToolResultRecord, TerminalRecord]


def tool_use_ids(message: dict[str, Any]) -> list[str]:
    """Return the ids of the ``tool_use`` blocks of an assistant message, in order.

    Only blocks of type ``tool_use`` count: server tool blocks
    (``server_tool_use``) are answered by the provider, not by us.
    """
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b["id"] for b in content if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("id"), str)]


# --- blocks as fisk-ai builds them (docs/spec.md section 3, "What fiskj writes") -----------------
#
# fisk-ai marshals Messages API objects through its Go SDK, whose params write their keys sorted:
# a message is {"content", "role"}, a text block {"text", "type"}, a tool_result block
# {"content", "is_error", "tool_use_id", "type"} (tests/data/fisk-ai/format-example.json).  fiskj builds its own
# objects in that order, so its journal lines are byte for byte fisk-ai's.


def text_block(text: str) -> dict[str, Any]:
    """A text content block, keys in the order fisk-ai's Go SDK writes them: ``{"text": ..., "type": "text"}``."""
    return {"text": text, "type": "text"}


def tool_result_block(tool_use_id: str, text: str, is_error: bool) -> dict[str, Any]:
    """The ``tool_result`` block of one tool's output, as fisk-ai builds it (the Go SDK's ``NewToolResultBlock``).

    ``content`` is a list of one text block, never a bare string, and the keys are in the order the Go
    SDK marshals them: ``{"content": [{"text": ..., "type": "text"}], "is_error": ..., "tool_use_id": ...,
    "type": "tool_result"}`` (docs/spec.md section 4, tool_result).
    """
    return {"content": [text_block(text)], "is_error": is_error, "tool_use_id": tool_use_id, "type": "tool_result"}


def tool_result_text(block: dict[str, Any]) -> str:
    """The text of a ``tool_result`` block's ``content``, in either form a journal holds (docs/spec.md section 4).

    A string is its own text; a list (fisk-ai's form) gives the ``text`` of its text blocks, joined;
    other blocks (an image) and a missing or malformed ``content`` give nothing.  Never raises.
    """
    content = block.get("content") if isinstance(block, dict) else None
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(b["text"] for b in content
                   if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))


def go_block(block: Any) -> Any:
    """``block`` (a content block of a model reply) with its top-level keys sorted, as fisk-ai's Go SDK
    re-marshals a reply's blocks; values (a tool_use ``input`` included) are the same objects, unchanged.
    Anything but a dict is returned as it is."""
    if type(block) is dict:
        return {key: block[key] for key in sorted(block)}
    return block
