"""The script: what the fake model answers, and to which request (pure; docs/subject.md "The model").

A conversation's state, never its length, picks the turn; a state's ``key`` identifies a model call for I3."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from harness.names import CUT_STOPS
from harness.workload.tools import PLAIN, shown_name

__all__ = ["ToolCall", "Turn", "Script", "Position", "request_key", "opaque", "opaque_fields", "opaque_valid",
           "EXHAUSTED", "STOP_SEQUENCE"]

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
    """One scripted model reply: ``tools`` empty means a final text answer, unless ``pause`` (a paused web
    search, stop reason ``pause_turn``).  ``thinking``, ``redacted``, ``web_search``: the reasoning and server-tool
    blocks it carries; ``stop``: a final answer's stop reason (``end_turn`` when empty, ``stop_sequence``), or one
    of :data:`CUT_STOPS` (a reply cut short, whose tool calls never run)."""

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
    return any(str(b.get("text") or "").strip() if b.get("type") == "text" else b.get("type") != "tool_result"
               for b in _blocks(message))


@dataclass(frozen=True)
class Script:
    """What the fake model answers (docs/subject.md "The model"; the scenario keys of the same names).

    ``turns`` in order, a turn without tools (and not a pause) ending a chat
    segment; ``delay_ms``: the server's wait before a reply; ``cache_tokens``
    (0: none); ``thinks_when_asked``: a request with thinking on gets a thinking
    block on every turn (False: only where scripted); ``tool_name``: the
    template naming tool_use blocks (:func:`harness.workload.tools.check_template`).
    """

    seed: int
    turns: tuple[Turn, ...]
    model: str = "fiskj-fake"
    delay_ms: float = 0.0
    vary_on_repeat: bool = False
    cache_tokens: int = 0
    thinks_when_asked: bool = True
    tool_name: str = PLAIN

    def _text(self, turn: int) -> str:
        spec = self.turns[turn] if turn < len(self.turns) else Turn(text=EXHAUSTED)
        if spec.text:
            return spec.text
        if spec.pause and not spec.tools:
            return f"Turn {turn}: searching the web (paused)."
        return f"Turn {turn}: calling {len(spec.tools)} tools." if spec.tools else f"Answer {turn}: done."

    def thinking_text(self, turn: int, repeat: int = 0) -> str:
        """The text of ``turn``'s thinking block at its ``repeat`` (ignored unless ``vary_on_repeat``): the
        turn's ``thinking``, else ``"Turn N: thinking it over first."``.  Pure."""
        rep = repeat if self.vary_on_repeat else 0
        spec = self.turns[turn] if 0 <= turn < len(self.turns) else Turn()
        text = spec.thinking or f"Turn {turn}: thinking it over first."
        return text + (f" (asked again: {rep})" if rep else "")

    def reply(self, turn: int, repeat: int = 0, *, thinking: bool = False, omit_thinking: bool = False,
              tools: bool = True) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
        """Return ``(content blocks, stop_reason, usage)`` for ``turn`` and its ``repeat`` (pure; docs/subject.md
        "The model").  ``thinking``: the request turned thinking on; ``omit_thinking``: its thinking text is ``""``;
        ``tools`` False (``tool_choice`` ``none``): no tool_use blocks.  ``turn >= len(turns)`` gives the
        ``"(script exhausted)"`` answer."""
        rep = repeat if self.vary_on_repeat else 0
        suffix = f"_r{rep}" if rep else ""
        spec = self.turns[turn] if turn < len(self.turns) else Turn(text=EXHAUSTED)
        if not tools:
            spec = replace(spec, tools=())
        text = self._text(turn) + (f" (asked again: {rep})" if rep else "")
        blocks: list[dict[str, Any]] = []
        if spec.thinking or (thinking and self.thinks_when_asked):
            thought = "" if omit_thinking else self.thinking_text(turn, rep)
            blocks.append({"type": "thinking", "thinking": thought,
                           "signature": opaque(self.seed, "thinking", turn, rep, thought)})
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
            blocks.append({"type": "tool_use", "id": tid, "name": shown_name(self.tool_name, call.name), "input": inp})
        stop = spec.stop if spec.stop in CUT_STOPS else \
            "tool_use" if spec.tools else "pause_turn" if spec.pause else (spec.stop or "end_turn")
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
        """Return the :class:`Position` of a conversation (docs/subject.md "The model"); pure."""
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
                if not closed:
                    final = segments[segment].final if segment < len(segments) else None
                    closing = EXHAUSTED if final is None else self._text(final)
                    blocks = _blocks(m)
                    text = "".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
                    if closing in text and not any(b.get("type") == "tool_use" for b in blocks):
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
            return nothing  # past the script: each follow-up is another segment, so another key
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
