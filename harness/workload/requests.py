"""Parsing and checking a Messages API request body, as the API does (pure): docs/workload.md "Request checks"."""

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

    ``messages``: the conversation without ``role: "system"`` messages;
    ``positions``: each kept message's index in the body (empty: the same);
    ``tool_choice``: one of :data:`TOOL_CHOICES`; ``unknown``: top-level fields
    not in :data:`KNOWN_FIELDS`, sorted; ``size``: characters of the compact
    JSON of its ``system``, ``messages`` and ``tools``.
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
    """Refuse reasoning blocks sent back altered or unsigned (docs/workload.md "Request checks"): raise
    :class:`RequestError` naming the block, ``messages.I.content.J.thinking.signature`` (``I`` from
    ``positions``).  Pure."""
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
                _require("signature" in b, f"{where}.{j}.thinking.signature", "Field required")
                _require(issued("thinking", b["signature"], b.get("thinking")), f"{where}.{j}.thinking.signature",
                         "Invalid `signature` in `thinking` block")
            elif kind == "redacted_thinking":
                _require(issued("redacted", b.get("data")), f"{where}.{j}.redacted_thinking.data",
                         "Invalid `data` in `redacted_thinking` block")


def check_thinking_loop(messages: list[dict[str, Any]], positions: tuple[int, ...] = (),
                        reasoned: Callable[[dict[str, Any]], bool | None] | None = None) -> None:
    """With thinking on, refuse a request that continues a tool loop without its thinking: raise :class:`RequestError`.

    The last assistant turn must start with its reasoning block unless
    ``reasoned(that message)`` is ``False`` (its reply had none when given;
    ``None``: not known, demanded).  Pure (docs/workload.md "Request checks").
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
    _require(isinstance(body, dict), "body", "not a JSON object")
    _require("messages" in body, "messages", "field required")
    messages = body["messages"]
    _require(isinstance(messages, list), "messages", "must be a list of messages")
    conversation, positions = [], []
    for i, m in enumerate(messages):
        _require(isinstance(m, dict), f"messages.{i}", "must be an object")
        role, content = m.get("role"), m.get("content")
        _require(role in ("user", "assistant", "system"), f"messages.{i}.role",
                 f"must be 'user' or 'assistant', got {role!r}")
        _require(isinstance(content, (str, list)), f"messages.{i}.content",
                 "must be a string or a list of content blocks")
        for j, b in enumerate(content if isinstance(content, list) else ()):
            _require(isinstance(b, dict) and isinstance(b.get("type"), str), f"messages.{i}.content.{j}",
                     "must be an object with a string 'type'")
            _require(b["type"] != "tool_result" or isinstance(b.get("tool_use_id"), str),
                     f"messages.{i}.content.{j}.tool_use_id", "must be a string")
        if role != "system":
            conversation.append(m)
            positions.append(i)
    system = body.get("system")
    _require(system is None or isinstance(system, str)
             or (isinstance(system, list) and all(isinstance(b, dict) for b in system)),
             "system", "must be a string or a list of text blocks")
    stream = body.get("stream", False)
    _require(isinstance(stream, bool), "stream", "must be a boolean")
    _require(isinstance(body.get("model", ""), str), "model", "must be a string")
    tokens = body.get("max_tokens", 1)
    _require(type(tokens) is int and tokens >= 1, "max_tokens", "must be an integer >= 1")
    on, omit = _thinking(body.get("thinking"))
    choice, name = _tool_choice(body.get("tool_choice"))
    _require(not (on and choice in ("any", "tool")), "tool_choice",
             "Thinking may not be enabled when tool_choice forces tool use.")
    size = len(json.dumps([system, messages, body.get("tools")], separators=(",", ":"), ensure_ascii=False))
    return Request(messages=conversation, stream=stream, positions=tuple(positions), thinking=on,
                   omit_thinking=omit, tool_choice=choice, tool_name=name,
                   unknown=tuple(sorted(k for k in body if k not in KNOWN_FIELDS)), size=size)


def _require(ok: bool, field: str, message: str) -> None:
    # The check of one field: RequestError naming it unless ``ok``.
    if not ok:
        raise RequestError(field, message)


def _thinking(value: Any) -> tuple[bool, bool]:
    # (thinking on, text omitted) of a request's "thinking" field; RequestError for a malformed one.
    if value is None:
        return False, False
    kind = value.get("type") if isinstance(value, dict) else None
    _require(kind in ("enabled", "adaptive", "disabled"), "thinking.type",
             f"must be 'enabled', 'adaptive' or 'disabled', got {kind!r}")
    budget = value.get("budget_tokens")
    _require(kind != "enabled" or (type(budget) is int and budget >= 1024), "thinking.budget_tokens",
             "must be an integer >= 1024")
    display = value.get("display", "summarized")
    _require(display in ("summarized", "omitted"), "thinking.display",
             f"must be 'summarized' or 'omitted', got {display!r}")
    return kind != "disabled", kind != "disabled" and display == "omitted"


def _tool_choice(value: Any) -> tuple[str, str]:
    # (type, tool name) of a request's "tool_choice" field; RequestError for a malformed one.
    if value is None:
        return "auto", ""
    kind = value.get("type") if isinstance(value, dict) else None
    _require(kind in TOOL_CHOICES, "tool_choice.type", f"must be one of {', '.join(TOOL_CHOICES)}, got {kind!r}")
    name = value.get("name", "")
    _require(kind != "tool" or (isinstance(name, str) and bool(name)), "tool_choice.name",
             "Field required (a tool_choice of type 'tool' names the tool)")
    _require(isinstance(value.get("disable_parallel_tool_use", False), bool),
             "tool_choice.disable_parallel_tool_use", "must be a boolean")
    return kind, name if kind == "tool" else ""
