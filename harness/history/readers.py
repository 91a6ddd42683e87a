"""Reading what a leg left behind into history facts: IO-seam traces, the effects ledger, the journal's fold.

Each reader takes a path the leg wrote and never raises for bad content:
a bad line ends a trace, is named in the ledger's notes, or becomes the
fold's error object (docs/spec.md section 15, "History").
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from fiskj.errors import FiskjError
from fiskj.reader import read_state

from harness.history.model import Effect

__all__ = ["read_trace", "read_ledger", "write_ledger", "fold_journal", "tail_text", "KEEP_OUTPUT"]

#: Characters of a leg's stdout/stderr kept as evidence.
KEEP_OUTPUT = 4000


def read_trace(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Parse an IO-seam trace (JSON lines, docs/ioseam.md); a torn or bad line ends it.  Missing file: ``[]``."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    events = []
    for line in data.split(b"\n"):
        if not line:
            continue
        try:
            events.append(json.loads(line))
        except ValueError:
            break
    return events


def read_ledger(path: str | os.PathLike[str]) -> tuple[list[Effect], list[str]]:
    """Parse the effects ledger into :class:`Effect` objects, in file order.

    Returns ``(effects, notes)``; a line that does not parse (none should:
    each is one fsynced ``O_APPEND`` write) is skipped and named in notes.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return [], []
    effects, notes = [], []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line:
            continue
        try:
            raw = json.loads(line)
            effects.append(Effect(tool_use_id=str(raw["tool_use_id"]), attempt=int(raw["attempt"]),
                                  pid=int(raw["pid"]), t=int(raw["t"]), leg=int(raw.get("leg", -1)),
                                  tool=str(raw.get("tool", ""))))
        except (ValueError, KeyError, TypeError) as exc:
            notes.append(f"ledger line {number} unparsable ({exc}): {line[:80]!r}")
    return effects, notes


def write_ledger(path: str | os.PathLike[str], effects: list[Effect]) -> None:
    """Write ``effects`` as a ledger file (one JSON line each), the form :func:`read_ledger` reads."""
    with open(path, "w", encoding="utf-8") as f:
        for e in effects:
            f.write(json.dumps({"tool_use_id": e.tool_use_id, "attempt": e.attempt, "pid": e.pid, "t": e.t,
                                "leg": e.leg, "tool": e.tool}) + "\n")


def fold_journal(path: str | os.PathLike[str]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Fold the journal at ``path`` with fiskj; returns ``(state_json, None)`` or ``(None, error_json)``.

    ``error_json`` is ``{"kind", "message", ...}`` (``FiskjError.to_json()``
    for fiskj errors; kind ``RunNotFound`` when the file does not exist).
    Never raises for a bad journal.
    """
    p = Path(path)
    if not p.exists():
        return None, {"kind": "RunNotFound", "message": f"no journal at {p}", "path": str(p)}
    try:
        return read_state(p).to_json(), None
    except FiskjError as exc:
        return None, exc.to_json()
    except Exception as exc:  # a fold that crashes is evidence, never a pass
        return None, {"kind": type(exc).__name__, "message": str(exc), "path": str(p), "crash": True}


def tail_text(path: Path, keep: int = KEEP_OUTPUT) -> str:
    """The last ``keep`` characters of a leg's output file (``...`` marks a cut); missing file: ``""``."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ""
    text = data.decode("utf-8", "replace")
    return text if len(text) <= keep else "..." + text[-keep:]
