"""Parsing and checking a Messages API request (``POST /v1/messages`` body), as the API does (pure).

A malformed body is refused with HTTP 400 (``invalid_request_error``, the
message starts with the offending field: ``messages.2.role: ...``):
:class:`RequestError` names the field.

The request.  ``messages`` is required (a list of ``{"role", "content"}``,
content a string or a list of blocks).  ``system`` (a string or a list of
blocks), ``model``, ``max_tokens``, ``tools``, ``thinking`` and the rest
are accepted and ignored; so are ``role: "system"`` messages inside
``messages`` (some clients put the system prompt there): they are dropped
before anything else looks at the conversation, and the recorded
``ModelCall.messages`` hold the conversation without them.

A thinking block's ``signature`` and a redacted block's ``data`` are
opaque strings that name their turn and repeat and hold a MAC of the seed
(and the thinking text) (:func:`harness.workload.script.opaque`): a request that sends one back
altered, or a thinking block without its signature, is refused as the
Messages API refuses it, HTTP 400 ``invalid_request_error`` naming the
block, and is no model call (:func:`check_reasoning`).  Checked from the
script alone, not from what a session gave out, so a journal laid out
from another trial's run (power loss, tails) is accepted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from harness.workload.script import Script, opaque_fields, opaque_valid

__all__ = ["RequestError", "Request", "parse_request", "check_reasoning", "check_thinking_loop"]


class RequestError(ValueError):
    """A request the server refuses with HTTP 400; ``field`` names what is wrong (``messages.1.role``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class Request:
    """A parsed ``POST /v1/messages`` body: the conversation (``role: "system"`` messages dropped), whether
    the reply streams, ``positions``: each kept message's index in the body's ``messages`` (for error
    messages; empty: the same indexes), and ``thinking``: the request turns thinking on (its ``thinking``
    object's ``type`` is ``enabled`` or ``adaptive``)."""

    messages: list[dict[str, Any]]
    stream: bool = False
    positions: tuple[int, ...] = ()
    thinking: bool = False


def check_reasoning(script: Script, messages: list[dict[str, Any]], positions: tuple[int, ...] = ()) -> None:
    """Refuse reasoning blocks sent back altered, as the Messages API does: raise :class:`RequestError`.

    In each assistant message of ``messages`` (a request's conversation),
    a ``thinking`` block must carry the ``signature`` ``script`` gave it
    (:func:`opaque` of the seed and its text, naming a turn of the script
    that has a thinking block, and a repeat the script makes): a block
    without one is ``Field required``, an altered text or signature
    ``Invalid `signature```.  A ``redacted_thinking`` block must carry
    the ``data`` it was given.  The field named is
    ``messages.I.content.J.thinking.signature`` (or
    ``.redacted_thinking.data``), ``I`` from ``positions`` when given.
    Leaving reasoning blocks out is allowed (the API drops earlier turns'
    reasoning anyway).  Pure.
    """
    def issued(kind: str, value: Any, text: Any = "") -> bool:
        fields = opaque_fields(value)
        if fields is None or not opaque_valid(script.seed, kind, value, text):
            return False
        turn, rep = fields[1], fields[2]
        spec = script.turns[turn] if 0 <= turn < len(script.turns) else None
        has = spec is not None and (bool(spec.thinking) if kind == "thinking" else spec.redacted)
        return has and (rep == 0 or script.vary_on_repeat)

    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") != "assistant" or not isinstance(m.get("content"), list):
            continue
        where = f"messages.{positions[i] if i < len(positions) else i}.content"
        for j, b in enumerate(m["content"]):
            kind = b.get("type") if isinstance(b, dict) else None
            if kind == "thinking":
                if "signature" not in b:
                    raise RequestError(f"{where}.{j}.thinking.signature", "Field required")
                if not issued("thinking", b.get("signature"), b.get("thinking")):
                    raise RequestError(f"{where}.{j}.thinking.signature",
                                       "Invalid `signature` in `thinking` block")
            elif kind == "redacted_thinking" and not issued("redacted", b.get("data")):
                raise RequestError(f"{where}.{j}.redacted_thinking.data",
                                   "Invalid `data` in `redacted_thinking` block")


def check_thinking_loop(messages: list[dict[str, Any]], positions: tuple[int, ...] = ()) -> None:
    """With thinking on, refuse a request that continues a tool loop without its thinking: raise :class:`RequestError`.

    As the Messages API does: when a request with thinking on ends with
    the results of the last assistant turn's tool calls (the loop goes on),
    that assistant turn must start with a ``thinking`` or
    ``redacted_thinking`` block, the one the model gave it.  An agent that
    strips reasoning from the turn in flight (on resume, say) is refused
    (HTTP 400) and cannot finish.  Earlier turns may go without it (the API
    drops their reasoning anyway).  Call it only for a request with thinking
    on (:attr:`Request.thinking`).  Pure.
    """
    if len(messages) < 2 or messages[-1].get("role") != "user":
        return
    last = messages[-1].get("content")
    if not (isinstance(last, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last)):
        return
    i = len(messages) - 2
    turn = messages[i]
    content = turn.get("content") if turn.get("role") == "assistant" else None
    if not isinstance(content, list) or not any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content):
        return
    first = content[0] if content and isinstance(content[0], dict) else {}
    if first.get("type") not in ("thinking", "redacted_thinking"):
        where = f"messages.{positions[i] if i < len(positions) else i}.content.0.type"
        raise RequestError(where, f"Expected `thinking` or `redacted_thinking`, but found `{first.get('type')}`. "
                                  "When `thinking` is enabled, a final `assistant` message must start with a "
                                  "thinking block (preceding the lastmost set of `tool_use` and `tool_result` "
                                  "blocks)")


def parse_request(raw: bytes) -> Request:
    """Parse and check a request body; raise :class:`RequestError` naming the first bad field.

    Checked: the body is a JSON object; ``messages`` a list of objects with
    ``role`` ``user``, ``assistant`` or ``system`` and ``content`` a string
    or a list of objects each with a string ``type`` (a tool_result's
    ``tool_use_id`` a string); ``system`` (if present) a string or a list of
    objects; ``stream`` a boolean; ``model`` a string; ``max_tokens`` an
    integer >= 1.  Other fields are not looked at.
    """
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError("body", f"not valid JSON ({exc})") from None
    if not isinstance(body, dict):
        raise RequestError("body", "not a JSON object")
    if "messages" not in body:
        raise RequestError("messages", "field required")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise RequestError("messages", "must be a list of messages")
    conversation, positions = [], []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise RequestError(f"messages.{i}", "must be an object")
        if m.get("role") not in ("user", "assistant", "system"):
            raise RequestError(f"messages.{i}.role", f"must be 'user' or 'assistant', got {m.get('role')!r}")
        content = m.get("content")
        if isinstance(content, list):
            for j, b in enumerate(content):
                if not isinstance(b, dict) or not isinstance(b.get("type"), str):
                    raise RequestError(f"messages.{i}.content.{j}", "must be an object with a string 'type'")
                if b["type"] == "tool_result" and not isinstance(b.get("tool_use_id"), str):
                    raise RequestError(f"messages.{i}.content.{j}.tool_use_id", "must be a string")
        elif not isinstance(content, str):
            raise RequestError(f"messages.{i}.content", "must be a string or a list of content blocks")
        if m["role"] != "system":
            conversation.append(m)
            positions.append(i)
    system = body.get("system")
    if system is not None and not (isinstance(system, str)
                                   or (isinstance(system, list) and all(isinstance(b, dict) for b in system))):
        raise RequestError("system", "must be a string or a list of text blocks")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError("stream", "must be a boolean")
    if "model" in body and not isinstance(body["model"], str):
        raise RequestError("model", "must be a string")
    tokens = body.get("max_tokens", 1)
    if type(tokens) is not int or tokens < 1:
        raise RequestError("max_tokens", "must be an integer >= 1")
    thinking = body.get("thinking")
    on = isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
    return Request(messages=conversation, stream=stream, positions=tuple(positions), thinking=on)
