"""The deterministic scripted model: ``--model scripted:SEED[:TURNS]``.

For demos and tests (issue 4, item 5).  Its reply is a pure function of the
request: with ``n`` assistant messages already in the conversation, turn
``n < TURNS`` calls one to three of the request's tools with inputs drawn
from ``random.Random(SEED + n)`` and tool_use ids ``toolu_<SEED>_<n>_<k>``;
any later turn is a final text answer that summarises the conversation.
So a resumed run gets exactly the reply an uninterrupted run got for the
same state (invariant I6), and no clock or global randomness is involved.

Inputs follow each tool's ``input_schema``: every property is filled;
integers are drawn from ``[minimum, minimum + 20]`` (so ``sleep`` waits at
most 20 ms); a string property named ``path`` is the relative file
``fiskj-scripted-SEED.log`` (so ``append_line`` writes in the working
directory); other strings are short words.  Usage is an estimate from the
JSON length (about four bytes a token), also deterministic.
"""

from __future__ import annotations

import json
import random
from typing import Any

from .errors import UsageError

__all__ = ["ScriptedModel", "DEFAULT_TURNS"]

#: Tool-calling turns when the spec gives none.
DEFAULT_TURNS = 3


def _sample(schema: Any, rng: random.Random, seed: int, name: str = "") -> Any:
    if not isinstance(schema, dict):
        return None
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        return {key: _sample(sub, rng, seed, key) for key, sub in props.items()}
    if kind == "string":
        if name == "path":
            return f"fiskj-scripted-{seed}.log"
        return f"{name or 'word'}-{rng.randrange(1000)}"
    if kind in ("integer", "number"):
        low = schema.get("minimum", 0)
        high = min(schema.get("maximum", low + 20), low + 20)
        return rng.randint(int(low), int(high)) if kind == "integer" else round(rng.uniform(low, high), 3)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return [_sample(schema.get("items", {}), rng, seed, name) for _ in range(rng.randint(1, 2))]
    return None


def _tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, sort_keys=True, ensure_ascii=False)) // 4)


class ScriptedModel:
    """A model whose replies depend only on the conversation it is sent.

    ``seed`` and ``turns`` are non-negative integers.  :meth:`complete`
    takes a Messages API request and returns a response body with
    ``content``, ``stop_reason`` (``tool_use`` or ``end_turn``) and
    ``usage``; it never raises for a well-formed request.
    """

    def __init__(self, seed: int = 0, turns: int = DEFAULT_TURNS) -> None:
        if seed < 0 or turns < 0:
            raise UsageError(f"scripted model needs SEED >= 0 and TURNS >= 0, got {seed}:{turns}", field="model")
        self.seed, self.turns = seed, turns

    @classmethod
    def from_spec(cls, spec: str) -> "ScriptedModel":
        """Parse ``scripted:SEED[:TURNS]``; raises :class:`UsageError` when malformed."""
        parts = spec.split(":")
        if parts[0] != "scripted" or len(parts) not in (2, 3) or not all(p.isdigit() for p in parts[1:]):
            raise UsageError(f"scripted model spec must be scripted:SEED[:TURNS] with integers, got {spec!r}",
                             field="model")
        return cls(int(parts[1]), int(parts[2]) if len(parts) == 3 else DEFAULT_TURNS)

    def __repr__(self) -> str:
        return f"ScriptedModel(seed={self.seed}, turns={self.turns})"

    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        """Return the reply for the state of ``request['messages']`` (see the module docstring)."""
        messages = request.get("messages") or []
        turn = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        tools = [t for t in request.get("tools") or [] if isinstance(t, dict) and isinstance(t.get("name"), str)]
        if turn < self.turns and tools:
            content, stop = self._tool_turn(turn, tools), "tool_use"
        else:
            content, stop = [{"type": "text", "text": self._answer(turn, messages)}], "end_turn"
        usage = {"input_tokens": _tokens([request.get("system"), messages, tools]), "output_tokens": _tokens(content),
                 "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
        return {"id": f"msg_scripted_{self.seed}_{turn}", "type": "message", "role": "assistant",
                "model": request.get("model"), "content": content, "stop_reason": stop, "stop_sequence": None,
                "usage": usage}

    def _tool_turn(self, turn: int, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rng = random.Random(self.seed + turn)
        chosen = [rng.choice(tools) for _ in range(rng.randint(1, 3))]
        names = ", ".join(t["name"] for t in chosen)
        blocks: list[dict[str, Any]] = [{"type": "text", "text": f"Turn {turn}: calling {names}."}]
        for k, tool in enumerate(chosen):
            blocks.append({"type": "tool_use", "id": f"toolu_{self.seed}_{turn}_{k}", "name": tool["name"],
                           "input": _sample(tool.get("input_schema", {}), rng, self.seed) or {}})
        return blocks

    def _answer(self, turn: int, messages: list[Any]) -> str:
        results = errors = 0
        said = None
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                said = content
                continue
            for block in content or []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    results += 1
                    errors += bool(block.get("is_error"))
                elif isinstance(block, dict) and block.get("type") == "text" and message.get("role") == "user":
                    said = block.get("text")
        return (f"Answer at turn {turn}: {results} tool results ({errors} errors) seen; "
                f"last said: {said!r}.")
