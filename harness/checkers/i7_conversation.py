"""I7 the conversation is well-formed at every model call: docs/spec.md section 15, I7 (the rules, the violation
kinds), judged on each :class:`~harness.history.model.ModelCall`'s ``messages`` as the fake server received them."""

from __future__ import annotations

from collections import Counter
from typing import Any

from harness.history.model import History
from harness.checkers.verdict import INVALID, VALID, make


def _blocks(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def _continues_pause(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """True when assistant message ``after`` continues ``before``, a paused turn (a ``server_tool_use``, no
    ``tool_use``): the one pair of messages that may repeat a role (docs/spec.md section 15, I7)."""
    return (before["role"] == after["role"] == "assistant" and bool(_blocks(before, "server_tool_use"))
            and not _blocks(before, "tool_use"))


def problems(messages: list[Any]) -> list[dict[str, Any]]:
    """Every rule ``messages`` breaks (empty list: well-formed), message by message."""
    if not messages:
        return [{"kind": "empty", "detail": "the request has no messages"}]
    out = [{"kind": "bad_message", "message": i, "detail": f"not a user/assistant message: {str(m)[:80]}"}
           for i, m in enumerate(messages) if not isinstance(m, dict) or m.get("role") not in ("user", "assistant")]
    if out:
        return out
    if messages[0]["role"] != "user":
        out.append({"kind": "first_not_user", "message": 0, "role": messages[0]["role"]})
    for i, m in enumerate(messages):
        prev = messages[i - 1] if i > 0 else None
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        if prev is not None and m["role"] == prev["role"] and not _continues_pause(prev, m):
            out.append({"kind": "roles_not_alternating", "message": i, "role": m["role"]})
        if m["role"] == "user":
            asked = [b.get("id") for b in _blocks(prev, "tool_use")] if prev and prev["role"] == "assistant" else []
            results = [b.get("tool_use_id") for b in _blocks(m, "tool_result")]
            out += [{"kind": "orphan_tool_result", "message": i, "tool_use_id": tid,
                     "detail": f"message {i} answers {tid!r}, which message {i - 1} did not ask"}
                    for tid in results if tid not in asked]
            out += [{"kind": "duplicate_tool_result", "message": i, "tool_use_id": tid, "count": count}
                    for tid, count in Counter(results).items() if count > 1 and tid in asked]
            continue
        answered = {b.get("tool_use_id") for b in _blocks(nxt, "tool_result")} if nxt and nxt["role"] == "user" else set()
        missing = [b.get("id") for b in _blocks(m, "tool_use") if b.get("id") not in answered]
        if missing:
            out.append({"kind": "unanswered_tool_use", "message": i, "tool_use_ids": missing,
                        "detail": f"message {i} asked {missing} and " + (
                            "the model was called right after it" if nxt is None else f"message {i + 1} does not answer")})
    return out


def check(history: History) -> Any:
    """Judge I7 on ``history``: a :class:`harness.checkers.verdict.Verdict` (valid, invalid)."""
    violations: list[dict[str, Any]] = []
    for call in history.model_calls:
        for p in problems(call.messages):
            violations.append({**p, "call": call.index, "leg": call.leg, "turn": call.turn, "key": call.key,
                               "messages": len(call.messages or [])})
    evidence: dict[str, Any] = {"checked": len(history.model_calls)}
    if violations:
        calls = sorted({v["call"] for v in violations})
        evidence["summary"] = (f"{len(calls)} of {len(history.model_calls)} model call(s) ill-formed: "
                               + ", ".join(sorted({v['kind'] for v in violations})) + f" (first: call {calls[0]})")
        evidence["violations"] = violations[:50]
        evidence["violations_total"] = len(violations)
        return make(__name__, INVALID, evidence)
    evidence["summary"] = f"{len(history.model_calls)} model call(s), every conversation well-formed"
    return make(__name__, VALID, evidence)
