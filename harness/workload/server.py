"""The fake Anthropic Messages API server: the model, outside every killed process.

A :class:`ModelServer` is a :class:`http.server.ThreadingHTTPServer` on
``127.0.0.1`` at an ephemeral port, run by a daemon thread of the harness
process, so it survives every kill of an agent.  It answers
``POST /v1/messages`` (any query string, e.g. ``?beta=true``; any
``anthropic-beta`` / ``anthropic-version`` headers) from a :class:`Script`
and records every request as a :class:`harness.history.model.ModelCall`.

Sessions partition the calls of concurrent trials: :meth:`ModelServer.open_session`
registers a script and returns a token; an agent authenticates with the API
key ``fiskj-<token>-leg<L>`` (header ``x-api-key`` or
``Authorization: Bearer``), so the server knows the trial and the leg of
every call, even one that arrives after its sender was killed.  A request
with an unknown key gets HTTP 401 in the Anthropic error shape; a malformed
body gets HTTP 400 (``invalid_request_error``, the message starts with the
offending field: ``messages.2.role: ...``).

The request.  ``messages`` is required (a list of ``{"role", "content"}``,
content a string or a list of blocks).  ``system`` (a string or a list of
blocks), ``model``, ``max_tokens``, ``tools``, ``thinking`` and the rest
are accepted and ignored; so are ``role: "system"`` messages inside
``messages`` (some clients put the system prompt there): they are dropped
before anything else looks at the conversation, and the recorded
``ModelCall.messages`` hold the conversation without them.

Which turn answers a request: the conversation's *state*, never the number
of its messages.  The script's turns fall into segments, each ending with
a final answer (a turn without tools); a chat run's follow-up opens the
next segment.  Walking the request's messages in order:

* an assistant message with no tool_use block whose text contains the
  scripted final answer of the current segment closes that segment;
* the first user message after that which asks something (non-blank text,
  or any block other than a tool_result) is the follow-up that opens the
  next segment; user text anywhere else (an agent's "continue" or
  "interrupted" note) changes nothing;
* every tool_result, in any user message, answers the scripted tool id it
  names (``toolu_<seed>_<turn>_<k>``, any ``_r<n>`` suffix).

The request is then answered by the current segment's first tool turn
whose tool ids are not all answered, else by its final answer.  A request
with nothing left to answer (the segment is closed and no follow-up came,
the follow-ups outnumber the segments, or a segment without a final answer
is done) gets ``"(script exhausted)"``, turn index ``len(turns)``.  So a
resumed agent gets the same reply for the same progress, however it
rebuilt the conversation (a synthetic assistant message, a replayed or
annotated history): see :meth:`Script.position`.

A *pause turn* (``Turn.pause``: a server tool the provider paused,
stop reason ``pause_turn``) counts like a tool turn of its segment; it is
answered once an assistant message of the request holds its
``server_tool_use`` block (``srvtoolu_<seed>_<turn>_0``): the agent sent
the paused turn back to be continued.

The state's ``key`` (:func:`request_key`, the hash of segment and turn)
identifies a model call for checker I3: two calls with one key asked the
model the same thing.  With ``vary_on_repeat`` the n-th repeat of a key
gets other text and fresh ids.  Tool ids are deterministic:
``toolu_<seed>_<turn>_<k>`` (with ``_r<n>`` appended for the n-th repeat
under ``vary_on_repeat``), and every tool input carries its own
``tool_use_id`` (a command tool sees only its input) and the call's
output spec, if any, under ``out`` (:mod:`harness.workload.payloads`).
Usage is deterministic per turn: ``100 + 10 x turn`` input tokens, ``20 +
7 x tools`` output tokens, and the script's ``cache_tokens`` (0 by
default) as cache counts: ``cache_read_input_tokens = cache_tokens + 10 x
turn``, ``cache_creation_input_tokens = cache_tokens // 10 + turn``.

A reply's blocks, in order: a signed ``thinking`` block (``Turn.thinking``),
a ``redacted_thinking`` block (``Turn.redacted``), the text, a
``server_tool_use`` with its ``web_search_tool_result`` (``Turn.web_search``,
and every pause turn), then the ``tool_use`` blocks.  The stop reason is
``tool_use`` with tools, ``pause_turn`` for a pause turn, else the turn's
``stop`` (``end_turn``, or ``stop_sequence`` with :data:`STOP_SEQUENCE`).
A thinking block's ``signature`` and a redacted block's ``data`` are
opaque strings that name their turn and repeat and hold a MAC of the seed
(and the thinking text) (:func:`opaque`): a request that sends one back
altered, or a thinking block without its signature, is refused as the
Messages API refuses it, HTTP 400 ``invalid_request_error`` naming the
block, and is no model call (:func:`check_reasoning`).  Checked from the
script alone, not from what a session gave out, so a journal laid out
from another trial's run (power loss, tails) is accepted.

``"stream": true`` gets the same message as server-sent events
(:mod:`harness.workload.sse`, chunked transfer encoding): the events up to
the first ``content_block_start`` and a ``ping`` at once, the rest after
the script's ``delay_ms``.  Without streaming the whole reply waits
``delay_ms``.  A client that disconnects (a killed agent) ends its
connection quietly: no traceback reaches the campaign's output.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from harness.history.model import ModelCall
from harness.workload import sse

__all__ = ["ToolCall", "Turn", "Script", "Position", "Session", "ModelServer", "RequestError", "Request",
           "parse_request", "request_key", "api_key", "check_reasoning", "check_thinking_loop", "opaque", "opaque_fields", "opaque_valid",
           "STOP_SEQUENCE"]

#: The text of the reply to a request with nothing left to answer.
EXHAUSTED = "(script exhausted)"

#: The ``stop_sequence`` of a final answer whose stop reason is ``stop_sequence``.
STOP_SEQUENCE = "\n\nEND"


def opaque(seed: int, kind: str, turn: int, rep: int, text: str = "") -> str:
    """A thinking signature (``kind`` ``"thinking"``, over ``text``) or redacted data (``"redacted"``) of
    ``turn`` and repeat ``rep``: base64 of ``fiskj1:KIND:TURN:REP:`` and a SHA-256 MAC of the seed, those
    fields and ``text``.  Pure."""
    head = f"fiskj1:{kind}:{turn}:{rep}:".encode("ascii")
    mac = hashlib.sha256(f"{seed}\x00{kind}\x00{turn}\x00{rep}\x00".encode("ascii")
                         + text.encode("utf-8", "surrogatepass")).digest()
    return base64.b64encode(head + mac).decode("ascii")


def opaque_fields(value: Any) -> tuple[str, int, int] | None:
    """``(kind, turn, rep)`` named by an :func:`opaque` string, or ``None`` when ``value`` is not one.  Never
    raises (the MAC is not checked: :func:`opaque_valid` does)."""
    if not isinstance(value, str):
        return None
    try:
        raw = base64.b64decode(value.encode("ascii"), validate=True)
        tag, kind, turn, rep, _ = raw[:-32].split(b":")
        return (kind.decode("ascii"), int(turn), int(rep)) if tag == b"fiskj1" and len(raw) > 32 else None
    except (ValueError, UnicodeError):
        return None


def opaque_valid(seed: int, kind: str, value: Any, text: Any = "") -> bool:
    """True when ``value`` is what :func:`opaque` gives for ``seed``, ``kind`` and ``text`` (and the turn and
    repeat it names).  Never raises."""
    fields = opaque_fields(value)
    if fields is None or fields[0] != kind or not isinstance(text, str):
        return False
    return opaque(seed, kind, fields[1], fields[2], text) == value


def api_key(token: str, leg: int) -> str:
    """Return the API key an agent uses for session ``token`` during leg ``leg``."""
    return f"fiskj-{token}-leg{leg}"


def _parse_key(key: str) -> tuple[str, int]:
    # "fiskj-<token>-leg<L>" -> (token, L); tolerant of a key without a leg.
    if not key.startswith("fiskj-"):
        return "", -1
    rest = key[len("fiskj-"):]
    token, sep, leg = rest.rpartition("-leg")
    if not sep:
        return rest, -1
    try:
        return token, int(leg)
    except ValueError:
        return rest, -1


@dataclass(frozen=True)
class ToolCall:
    """One scripted tool_use block: tool ``name`` and extra input (``sleep_ms``, ``n``; ``out``: the JSON text
    of an output spec of :mod:`harness.workload.payloads`, given to the tool as input ``out``; ``""``: none)."""

    name: str
    sleep_ms: float = 0.0
    n: int = 0
    out: str = ""


@dataclass(frozen=True)
class Turn:
    """One scripted model reply: ``tools`` empty means a final text answer (``stop``), unless ``pause``.

    ``text`` empty: a default text naming the turn.  ``thinking`` non-empty:
    the reply starts with a thinking block (with a signature, :func:`opaque`);
    ``redacted``: then a ``redacted_thinking`` block; ``web_search``: a
    ``server_tool_use`` block and its ``web_search_tool_result`` follow the
    text.  ``pause``: a turn without tools that is no answer: a web search
    the provider paused (stop reason ``pause_turn``), continued when the
    agent sends it back.  ``stop``: a final answer's stop reason,
    ``"end_turn"`` (also when empty) or ``"stop_sequence"``.
    """

    tools: tuple[ToolCall, ...] = ()
    text: str = ""
    thinking: str = ""
    redacted: bool = False
    web_search: bool = False
    pause: bool = False
    stop: str = ""

    @property
    def works(self) -> bool:
        """True for a turn the agent must act on before the segment's answer: tools, or a pause."""
        return bool(self.tools) or self.pause


@dataclass(frozen=True)
class Position:
    """Where a request stands in a script: chat ``segment`` (0 before any follow-up) and the ``turn`` that
    answers it (``len(script.turns)``: nothing left, the ``"(script exhausted)"`` answer)."""

    segment: int
    turn: int

    @property
    def key(self) -> str:
        """Hex SHA-256 of the canonical JSON of ``{"segment", "turn"}``: the model call's identity for I3."""
        data = json.dumps({"segment": self.segment, "turn": self.turn}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(data.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class _Segment:
    tools: tuple[int, ...]  # indexes of its tool turns
    final: int | None  # index of its final answer (None: the script ends inside it)


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _asks(message: dict[str, Any]) -> bool:
    # A user message that asks something: non-blank text or any block other than a tool_result.
    for b in _blocks(message):
        kind = b.get("type")
        if kind == "text":
            if str(b.get("text") or "").strip():
                return True
        elif kind != "tool_result":
            return True
    return False


@dataclass(frozen=True)
class Script:
    """What the fake model answers.

    ``turns`` in order; a turn without tools (and not a pause) is a final
    answer and ends a chat segment (the next one starts at a follow-up).
    Which turn answers a request is :meth:`position`'s rule (module
    docstring).  ``delay_ms`` is how long the server waits before it
    replies (a window for kills during a model call).  ``vary_on_repeat``:
    the n-th repeat of a request in the same state (n >= 1) gets other text
    and fresh ids.  ``cache_tokens``: the cache counts of every reply's
    usage (module docstring; 0: none).
    """

    seed: int
    turns: tuple[Turn, ...]
    model: str = "fiskj-fake"
    delay_ms: float = 0.0
    vary_on_repeat: bool = False
    cache_tokens: int = 0

    def _text(self, turn: int) -> str:
        spec = self.turns[turn] if turn < len(self.turns) else Turn(text=EXHAUSTED)
        if spec.text:
            return spec.text
        if spec.pause and not spec.tools:
            return f"Turn {turn}: searching the web (paused)."
        return f"Turn {turn}: calling {len(spec.tools)} tools." if spec.tools else f"Answer {turn}: done."

    def reply(self, turn: int, repeat: int = 0) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
        """Return ``(content blocks, stop_reason, usage)`` for ``turn`` and its ``repeat`` number.

        Pure: the same arguments always give the same reply.  ``repeat`` is
        ignored unless ``vary_on_repeat``.  ``turn >= len(turns)`` gives the
        final answer ``"(script exhausted)"``.  ``usage`` has
        ``input_tokens``, ``output_tokens``, ``cache_creation_input_tokens``
        and ``cache_read_input_tokens`` (tokens), and ``server_tool_use``
        (``{"web_search_requests": 1}``) for a reply with a web search.
        """
        rep = repeat if self.vary_on_repeat else 0
        suffix = f"_r{rep}" if rep else ""
        spec = self.turns[turn] if turn < len(self.turns) else Turn(text=EXHAUSTED)
        text = self._text(turn)
        if rep:
            text += f" (asked again: {rep})"
        blocks: list[dict[str, Any]] = []
        if spec.thinking:
            thinking = spec.thinking + (f" (asked again: {rep})" if rep else "")
            blocks.append({"type": "thinking", "thinking": thinking,
                           "signature": opaque(self.seed, "thinking", turn, rep, thinking)})
        if spec.redacted:
            blocks.append({"type": "redacted_thinking", "data": opaque(self.seed, "redacted", turn, rep)})
        blocks.append({"type": "text", "text": text})
        searched = spec.web_search or spec.pause
        if searched:
            sid = f"srvtoolu_{self.seed}_{turn}_0{suffix}"
            blocks.append({"type": "server_tool_use", "id": sid, "name": "web_search",
                           "input": {"query": f"ledger turn {turn} — «durability»"}})
            blocks.append({"type": "web_search_tool_result", "tool_use_id": sid, "content": [
                {"type": "web_search_result", "url": f"https://example.invalid/ledger/{turn}",
                 "title": f"Ledger {turn}: résumé ✓", "page_age": "April 30, 2025",
                 "encrypted_content": opaque(self.seed, "search", turn, rep)}]})
        for k, call in enumerate(spec.tools):
            tid = f"toolu_{self.seed}_{turn}_{k}{suffix}"
            inp: dict[str, Any] = {"tool_use_id": tid, "n": call.n}
            if call.sleep_ms:
                inp["sleep_ms"] = call.sleep_ms
            if call.out:
                inp["out"] = json.loads(call.out)
            blocks.append({"type": "tool_use", "id": tid, "name": call.name, "input": inp})
        stop = "tool_use" if spec.tools else "pause_turn" if spec.pause else (spec.stop or "end_turn")
        usage: dict[str, Any] = {"input_tokens": 100 + 10 * turn, "output_tokens": 20 + 7 * len(spec.tools),
                                 "cache_creation_input_tokens": self.cache_tokens // 10 + turn if self.cache_tokens else 0,
                                 "cache_read_input_tokens": self.cache_tokens + 10 * turn if self.cache_tokens else 0}
        if searched:
            usage["server_tool_use"] = {"web_search_requests": 1}
        return blocks, stop, usage

    def stop_sequence(self, turn: int) -> str | None:
        """The ``stop_sequence`` of ``turn``'s reply: :data:`STOP_SEQUENCE` when it stops on one, else ``None``."""
        spec = self.turns[turn] if turn < len(self.turns) else None
        return STOP_SEQUENCE if spec is not None and not spec.works and spec.stop == "stop_sequence" else None

    @cached_property
    def _segments(self) -> tuple[_Segment, ...]:
        out, tools = [], []
        for i, turn in enumerate(self.turns):
            if turn.works:
                tools.append(i)
            else:
                out.append(_Segment(tuple(tools), i))
                tools = []
        if tools:
            out.append(_Segment(tuple(tools), None))
        return tuple(out)

    @cached_property
    def _tool_id(self) -> re.Pattern[str]:
        return re.compile(rf"toolu_{re.escape(str(self.seed))}_(\d+)_(\d+)(?:_r\d+)?")

    @cached_property
    def _server_id(self) -> re.Pattern[str]:
        return re.compile(rf"srvtoolu_{re.escape(str(self.seed))}_(\d+)_0(?:_r\d+)?")

    def position(self, messages: list[dict[str, Any]]) -> Position:
        """Return the :class:`Position` of a conversation (the rule is the module docstring's).

        ``messages``: the request's conversation (user and assistant
        messages; anything else is skipped).  Pure.
        """
        segments = self._segments
        answered: set[tuple[int, int]] = set()
        resumed: set[int] = set()  # pause turns sent back to be continued
        segment, closed = 0, False
        for m in messages:
            if not isinstance(m, dict):
                continue
            role = m.get("role")
            if role == "assistant":
                for b in _blocks(m):
                    if b.get("type") == "server_tool_use" and isinstance(b.get("id"), str):
                        match = self._server_id.fullmatch(b["id"])
                        if match:
                            resumed.add(int(match[1]))
                final = segments[segment].final if segment < len(segments) else None
                if not closed and final is not None:
                    blocks = _blocks(m)
                    text = "".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
                    if self._text(final) in text and not any(b.get("type") == "tool_use" for b in blocks):
                        closed = True
            elif role == "user":
                for b in _blocks(m):
                    if b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str):
                        match = self._tool_id.fullmatch(b["tool_use_id"])
                        if match:
                            answered.add((int(match[1]), int(match[2])))
                if closed and _asks(m):
                    segment, closed = segment + 1, False
        nothing = Position(segment, len(self.turns))
        if segment >= len(segments) or closed:
            return nothing
        for t in segments[segment].tools:
            if self.turns[t].pause and not self.turns[t].tools:
                if t not in resumed:
                    return Position(segment, t)
            elif any((t, k) not in answered for k in range(len(self.turns[t].tools))):
                return Position(segment, t)
        final = segments[segment].final
        return nothing if final is None else Position(segment, final)

    @property
    def model_turns(self) -> int:
        """Number of scripted replies (tool turns and final answers)."""
        return len(self.turns)


def request_key(script: Script, messages: list[dict[str, Any]]) -> str:
    """Return the key of a request's state: ``script.position(messages).key`` (hex SHA-256)."""
    return script.position(messages).key


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


@dataclass
class Session:
    """The calls of one trial.  Thread-safe through its lock; ``calls`` grows in arrival order."""

    token: str
    script: Script
    calls: list[ModelCall] = field(default_factory=list)
    repeats: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, messages: list[dict[str, Any]], leg: int, stream: bool = False) -> tuple[ModelCall, dict[str, Any]]:
        """Record one request and return ``(call, response body)``.

        ``messages``: the request's conversation as :func:`parse_request`
        returns it (``role: "system"`` messages dropped); recorded as sent.
        The body is a complete Messages API message (``id``, ``type``,
        ``role``, ``model``, ``content``, ``stop_reason``, ``stop_sequence``,
        ``usage``).
        """
        t = time.monotonic_ns()
        pos = self.script.position(messages)
        key = pos.key
        with self.lock:
            repeat = self.repeats.get(key, 0)
            self.repeats[key] = repeat + 1
            index = len(self.calls)
            blocks, stop, usage = self.script.reply(pos.turn, repeat)
            call = ModelCall(index=index, t=t, key=key, turn=pos.turn, messages=messages, reply=blocks, leg=leg,
                             stream=stream)
            self.calls.append(call)
        rep = repeat if self.script.vary_on_repeat else 0
        body = {
            "id": f"msg_{self.script.seed}_{pos.turn}" + (f"_r{rep}" if rep else ""),
            "type": "message",
            "role": "assistant",
            "model": self.script.model,
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": self.script.stop_sequence(pos.turn),
            "usage": usage,
        }
        return call, body


#: What a killed client leaves behind on the server's side of its connection.
_GONE = (ConnectionError, TimeoutError)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # no 40 ms Nagle / delayed-ACK stalls on small replies
    server: "_HTTPServer"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def _write(self, status: int, headers: dict[str, str], data: bytes) -> bool:
        # Status line, headers and the first bytes of the body in one write; False: the client is gone.
        try:
            self.send_response_only(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self._headers_buffer.append(b"\r\n")
            self.wfile.write(b"".join(self._headers_buffer) + data)
            self._headers_buffer = []
            return True
        except _GONE:
            self.close_connection = True  # the agent was killed while waiting
            return False

    def _send(self, status: int, body: dict[str, Any], request_id: str = "req_fiskj") -> None:
        data = json.dumps(body).encode()
        self._write(status, {"content-type": "application/json", "content-length": str(len(data)),
                             "request-id": request_id}, data)

    def _error(self, status: int, kind: str, message: str) -> None:
        self._send(status, {"type": "error", "error": {"type": kind, "message": message}})

    def _stream(self, body: dict[str, Any], delay_s: float, request_id: str) -> None:
        events = sse.message_events(body)
        cut = next(i for i, e in enumerate(events) if e["type"] == "ping") + 1
        head = sse.chunk(b"".join(sse.encode(e) for e in events[:cut]))
        ok = self._write(200, {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache",
                               "transfer-encoding": "chunked", "request-id": request_id}, head)
        if not ok:
            return
        if delay_s:
            time.sleep(delay_s)
        try:
            self.wfile.write(sse.chunk(b"".join(sse.encode(e) for e in events[cut:])) + sse.LAST_CHUNK)
        except _GONE:
            self.close_connection = True

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def do_GET(self) -> None:  # noqa: N802
        self._error(404, "not_found_error", "only POST /v1/messages is served")

    def do_POST(self) -> None:  # noqa: N802
        try:
            raw = self._body()
        except ValueError:
            self.close_connection = True
            self._error(400, "invalid_request_error", "body: bad content-length or chunked framing")
            return
        if self.path.split("?", 1)[0].rstrip("/") != "/v1/messages":
            self._error(404, "not_found_error", f"no route {self.path}")
            return
        key = self.headers.get("x-api-key") or ""
        auth = self.headers.get("authorization") or ""
        if not key and auth.lower().startswith("bearer "):
            key = auth[7:].strip()
        token, leg = _parse_key(key)
        session = self.server.owner.session(token)
        if session is None:
            self._error(401, "authentication_error", "unknown API key (no open harness session)")
            return
        try:
            request = parse_request(raw)
            check_reasoning(session.script, request.messages, request.positions)
            if request.thinking:
                check_thinking_loop(request.messages, request.positions)
        except RequestError as exc:
            self._error(400, "invalid_request_error", str(exc))
            return
        call, body = session.answer(request.messages, leg, request.stream)
        request_id = f"req_{token}_{call.index}"
        delay_s = session.script.delay_ms / 1000.0
        if request.stream:
            self._stream(body, delay_s, request_id)
            return
        if delay_s:
            time.sleep(delay_s)
        self._send(200, body, request_id)


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    owner: "ModelServer"

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A killed agent's connection (reset, broken pipe, timeout) is routine: no traceback on stderr.
        if isinstance(sys.exc_info()[1], _GONE):
            return
        super().handle_error(request, client_address)


class ModelServer:
    """The fake Messages API server.  Use as a context manager or call :meth:`start` / :meth:`close`.

    ``base_url`` (``http://127.0.0.1:PORT``) is valid after :meth:`start`.
    Any number of sessions may be open at once (one per trial).
    """

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._next = 0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "ModelServer":
        """Bind 127.0.0.1:0 and serve in a daemon thread; returns ``self``.  Raises ``OSError`` on bind failure."""
        if self._httpd is not None:
            return self
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fiskj-model-server", daemon=True)
        self._thread.start()
        return self

    @property
    def port(self) -> int:
        """The bound TCP port.  Raises ``RuntimeError`` before :meth:`start`."""
        if self._httpd is None:
            raise RuntimeError("ModelServer.port read before start()")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    def open_session(self, script: Script, token: str | None = None) -> Session:
        """Register ``script`` and return its :class:`Session` (``session.token`` names it)."""
        with self._lock:
            if token is None:
                self._next += 1
                token = f"s{self._next}"
            if token in self._sessions:
                raise ValueError(f"session {token!r} is already open")
            session = Session(token=token, script=script)
            self._sessions[token] = session
            return session

    def session(self, token: str) -> Session | None:
        """Return the open session ``token`` or ``None``."""
        with self._lock:
            return self._sessions.get(token)

    def close_session(self, token: str) -> list[ModelCall]:
        """Unregister ``token`` and return its calls in arrival order (later requests get 401)."""
        with self._lock:
            session = self._sessions.pop(token, None)
        if session is None:
            return []
        with session.lock:
            return list(session.calls)

    def close(self) -> None:
        """Stop serving and close the socket; idempotent.  In-flight handler threads are daemons."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "ModelServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()
