"""What a violation's evidence names (a leg, a trace event, a journal seq, a tool execution, a model call), as
marks the HTML report's timeline draws (:mod:`harness.report.timeline`).  Pure."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["evidence_marks"]

_SEQ_IN_TEXT = re.compile(r"\bseq (\d+)\b")
_N_IN_TEXT = re.compile(r"\bn=(\d+)\b")
#: Evidence keys naming a trace event ``n`` of the leg in context.
_N_KEYS = ("n", "write_n", "fsync_n", "unlink_n", "first_n", "last_n")


def evidence_marks(evidence: Any) -> set[tuple[Any, ...]]:
    """What one violation's evidence names (docs/results.md "The HTML report"), as marks to draw: ``("leg", i)``,
    ``("ev", leg, n)`` (trace event ``n`` of a leg), ``("seq", s)``, ``("effect", tool_use_id, attempt)``,
    ``("tool", tool_use_id)`` (every execution of it), ``("call", index)`` (a model call), ``("n", n)`` (``n=N``
    in a sentence: a traced call of no named leg).  Pure; never raises for evidence of any shape.
    """
    out: set[tuple[Any, ...]] = set()
    _walk(evidence, None, None, out, 0)
    return out


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _walk(obj: Any, leg: Any, tid: Any, out: set[tuple[Any, ...]], depth: int) -> None:
    if depth > 12:
        return
    if isinstance(obj, str):
        for m in _SEQ_IN_TEXT.finditer(obj):
            out.add(("seq", int(m.group(1))))
        for m in _N_IN_TEXT.finditer(obj):  # of no leg: used where only one trace is meant (a crash state)
            out.add(("n", int(m.group(1))))
        return
    if isinstance(obj, list):
        for item in obj[:200]:
            _walk(item, leg, tid, out, depth + 1)
        return
    if not isinstance(obj, dict):
        return
    if _int(obj.get("leg")):
        leg = obj["leg"]
    if isinstance(obj.get("tool_use_id"), str):
        tid = obj["tool_use_id"]
    for key, value in obj.items():
        if not isinstance(key, str):
            continue
        if (key == "leg" or key.endswith("_leg")) and _int(value):
            out.add(("leg", value))
        elif key == "legs" and isinstance(value, list):
            out.update(("leg", v) for v in value if _int(v))
        elif key in _N_KEYS and _int(value) and leg is not None:
            out.add(("ev", leg, value))
        elif (key == "seq" or key.endswith("_seq")) and _int(value):
            out.add(("seq", value))
        elif key == "tool_use_ids" and isinstance(value, list):
            out.update(("tool", v) for v in value if isinstance(v, str))
    if tid is not None and _int(obj.get("attempt")):
        out.add(("effect", tid, obj["attempt"]))
    if _int(obj.get("index")) and _int(obj.get("turn")):
        out.add(("call", obj["index"]))
    for key, value in obj.items():
        if isinstance(value, (dict, list)) or (isinstance(value, str) and key in ("detail", "why", "summary")):
            _walk(value, leg, tid, out, depth + 1)
    if isinstance(obj.get("tool_use_id"), str) and not any(m[0] == "effect" and m[1] == tid for m in out):
        out.add(("tool", tid))  # named without an attempt: every execution of it
