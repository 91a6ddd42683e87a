"""Parsing and checking a Messages API request body, as the API does (pure): docs/workload.md "Request checks".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from harness.workload.script import Script, opaque_fields, opaque_valid

__all__ = ["RequestError", "Request", "parse_request", "check_reasoning", "check_thinking_loop", "KNOWN_FIELDS",
           "TOOL_CHOICES"]

#: The request fields of the Messages API the fake knows (checked or knowingly ignored); any other is
#: tolerated and reported in :attr:`Request.unknown`.
KNOWN_FIELDS = frozenset({"model", "messages", "max_tokens", "system", "stream", "thinking", "tools", "tool_choice",
                          "metadata", "stop_sequences", "temperature", "top_k", "top_p", "service_tier",
                          "container", "mcp_servers"})

#: The ``tool_choice`` types the Messages API takes.
TOOL_CHOICES = ("auto", "any", "tool", "none")


class RequestError(ValueError):
    """A request the server refuses with HTTP 400; ``field`` names what is wrong (``messages.1.role``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class Request:
    """A parsed ``POST /v1/messages`` (or ``count_tokens``) body (docs/workload.md "Request checks").

    ``messages``: the conversation, ``role: "system"`` messages dropped;
    ``positions``: each kept message's index in the body (empty: the same);
    ``thinking``: thinking on (``enabled`` or ``adaptive``); ``omit_thinking``:
    ``display: "omitted"``; ``tool_choice``: one of :data:`TOOL_CHOICES`,
    ``tool_name`` the tool a ``tool`` choice names; ``unknown``: top-level
    fields not in :data:`KNOWN_FIELDS`, sorted; ``size``: characters of the
    compact JSON of its ``system``, ``messages`` and ``tools``.
    """

    messages: list[dict[str, Any]]
    stream: bool = False
    positions: tuple[int, ...] = ()
    thinking: bool = False
    omit_thinking: bool = False
    tool_choice: str = "auto"
    tool_name: str = ""
    unknown: tuple[str, ...] = ()
    size: int = 0

    @property
    def input_tokens(self) -> int:
        """A deterministic token count: one per 4 characters of :attr:`size`, at least 1."""
        return max(1, -(-self.size // 4))


def check_reasoning(script: Script, messages: list[dict[str, Any]], positions: tuple[int, ...] = ()) -> None:
    """Refuse reasoning blocks sent back altered or unsigned: raise :class:`RequestError` (pure).

    A ``thinking`` block in an assistant message of ``messages`` must carry the
    ``signature`` ``script`` gave it (``Field required`` without one,
    ``Invalid `signature``` when its text or signature was altered), a
    ``redacted_thinking`` block the ``data`` it was given; the field named is
    ``messages.I.content.J.thinking.signature``, ``I`` from ``positions``.
    Rules: docs/workload.md "Request checks".
    """
    def issued(kind: str, value: Any, text: Any = "") -> bool:
        fields = opaque_fields(value)
        if fields is None or not opaque_valid(script.seed, kind, value, text):
            return False
        turn, rep = fields[1], fields[2]
        if not (rep == 0 or script.vary_on_repeat):
            return False
        if kind == "thinking":  # a scripted thinking turn, or any reply to a request with thinking on
            scripted = 0 <= turn < len(script.turns) and bool(script.turns[turn].thinking)
            return scripted or (script.thinks_when_asked and 0 <= turn <= len(script.turns)
                                and text in (script.thinking_text(turn, rep), ""))
        return 0 <= turn < len(script.turns) and script.turns[turn].redacted

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


def check_thinking_loop(messages: list[dict[str, Any]], positions: tuple[int, ...] = (),
                        reasoned: Callable[[dict[str, Any]], bool | None] | None = None) -> None:
    """With thinking on, refuse a request that continues a tool loop without its thinking: raise :class:`RequestError`.

    The last assistant turn, whose tool results the request ends with, must
    start with a ``thinking`` or ``redacted_thinking`` block, unless
    ``reasoned(that message)`` is ``False`` (its reply had none when given;
    ``None`` or no ``reasoned``: not known, demanded).  Call it only for a
    request with thinking on.  Pure (``reasoned`` reads what the caller recorded).
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
    if first.get("type") not in ("thinking", "redacted_thinking") and (reasoned is None or reasoned(turn) is not False):
        where = f"messages.{positions[i] if i < len(positions) else i}.content.0.type"
        raise RequestError(where, f"Expected `thinking` or `redacted_thinking`, but found `{first.get('type')}`. "
                                  "When `thinking` is enabled, a final `assistant` message must start with a "
                                  "thinking block (preceding the lastmost set of `tool_use` and `tool_result` "
                                  "blocks)")


def parse_request(raw: bytes) -> Request:
    """Parse and check a request body; raise :class:`RequestError` naming the first bad field.

    The checks are docs/workload.md "Request checks"; other fields are not
    looked at (an unknown one is named in :attr:`Request.unknown`).
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
    on, omit = _thinking(body.get("thinking"))
    choice, name = _tool_choice(body.get("tool_choice"))
    if on and choice in ("any", "tool"):
        raise RequestError("tool_choice", "Thinking may not be enabled when tool_choice forces tool use.")
    size = len(json.dumps([system, messages, body.get("tools")], separators=(",", ":"), ensure_ascii=False))
    return Request(messages=conversation, stream=stream, positions=tuple(positions), thinking=on,
                   omit_thinking=omit, tool_choice=choice, tool_name=name,
                   unknown=tuple(sorted(k for k in body if k not in KNOWN_FIELDS)), size=size)


def _thinking(value: Any) -> tuple[bool, bool]:
    # (thinking on, text omitted) of a request's "thinking" field; RequestError for a malformed one.
    if value is None:
        return False, False
    kind = value.get("type") if isinstance(value, dict) else None
    if kind not in ("enabled", "adaptive", "disabled"):
        raise RequestError("thinking.type", f"must be 'enabled', 'adaptive' or 'disabled', got {kind!r}")
    if kind == "enabled":
        budget = value.get("budget_tokens")
        if type(budget) is not int or budget < 1024:
            raise RequestError("thinking.budget_tokens", "must be an integer >= 1024")
    display = value.get("display", "summarized")
    if display not in ("summarized", "omitted"):
        raise RequestError("thinking.display", f"must be 'summarized' or 'omitted', got {display!r}")
    return kind != "disabled", kind != "disabled" and display == "omitted"


def _tool_choice(value: Any) -> tuple[str, str]:
    # (type, tool name) of a request's "tool_choice" field; RequestError for a malformed one.
    if value is None:
        return "auto", ""
    kind = value.get("type") if isinstance(value, dict) else None
    if kind not in TOOL_CHOICES:
        raise RequestError("tool_choice.type", f"must be one of {', '.join(TOOL_CHOICES)}, got {kind!r}")
    name = value.get("name", "")
    if kind == "tool" and not (isinstance(name, str) and name):
        raise RequestError("tool_choice.name", "Field required (a tool_choice of type 'tool' names the tool)")
    if "disable_parallel_tool_use" in value and not isinstance(value["disable_parallel_tool_use"], bool):
        raise RequestError("tool_choice.disable_parallel_tool_use", "must be a boolean")
    return kind, name if kind == "tool" else ""
