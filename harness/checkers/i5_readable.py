"""I5 the journal is always readable, with at most one torn tail.

Normative text: reading a journal drops exactly one unparsable final line
(a torn tail, which only the last append can leave); an unparsable line
anywhere else is corruption.  Whatever the faults, a journal written by
the engine reads and folds: at most one torn tail, no corruption, no fold
(consistency) error.

How it is judged.  Every leg's journal snapshot is read in memory with
fiskj's own reader and fold (:func:`fiskj.reader.read_state` on the
bytes).  A leg with no journal, or one holding no complete record (empty,
or only a torn line: a create that died before its meta record was
acknowledged, which the next create reclaims), is noted, not judged.  A reader or fold error is a violation (``corrupt`` or
``fold_error``) naming the leg, line, byte offset and the line's bytes,
unless the damaged line lies in bytes a ``tail`` fault made and the engine
has not touched since (the nemesis's damage, listed under ``exempt``).
Torn tails are listed per leg.
"""

from __future__ import annotations

import io
from typing import Any

from fiskj.errors import FiskjError
from fiskj.reader import JournalReader, read_state

from harness.history.model import History
from harness.checkers import INVALID, VALID, make
from harness.checkers._common import legs_in_order, nemesis_prefix_holds, split_journal

INVARIANT = "I5"
NAME = "journal always readable, at most one torn tail"


def _holds_no_record(data: bytes) -> bool:
    """True when fiskj's reader finds no complete record in ``data`` (and no corruption before one)."""
    try:
        for _ in JournalReader(io.BufferedReader(io.BytesIO(data))):  # type: ignore[arg-type]
            return False
    except FiskjError:
        return False
    return True


def check(history: History) -> Any:
    violations: list[dict[str, Any]] = []
    exempt: list[dict[str, Any]] = []
    torn: list[dict[str, Any]] = []
    noted: list[dict[str, Any]] = []
    checked = 0
    for leg in legs_in_order(history):
        data = leg.journal
        if data is None or _holds_no_record(data):
            noted.append({"leg": leg.index, "journal": "absent" if data is None else f"no complete record ({len(data)} bytes)"})
            continue
        checked += 1
        try:
            state = read_state(data)
        except FiskjError as exc:
            snap = split_journal(data)
            line = _line_at(snap, exc)
            row: dict[str, Any] = {
                "kind": "fold_error" if "Consistency" in type(exc).__name__ else "corrupt",
                "leg": leg.index, "error": f"{type(exc).__name__}: {exc.message}",
                "line": exc.line if exc.line is not None else (line.number if line else None),
                "offset": exc.offset if exc.offset is not None else (line.offset if line else None),
                "journal_bytes": len(data), "fault": leg.fault.kind,
            }
            if line is not None:
                row["text"] = line.brief()["excerpt"]
                if nemesis_prefix_holds(history, leg, line.end):
                    exempt.append({**row, "why": "the damage is in bytes a tail fault made, untouched since"})
                    continue
            violations.append(row)
            continue
        if state.torn_tail is not None:
            torn.append({"leg": leg.index, **state.torn_tail.to_json(), "good_size": state.good_size})
    evidence: dict[str, Any] = {"checked": checked, "torn_tails": torn}
    if noted:
        evidence["not_judged"] = noted
    if exempt:
        evidence["exempt"] = exempt
    if violations:
        evidence["summary"] = f"{len(violations)} unreadable journal snapshot(s): " + "; ".join(
            f"leg {v['leg']} line {v['line']} offset {v['offset']}: {v['error'][:80]}" for v in violations[:3])
        evidence["violations"] = violations
        return make(__name__, INVALID, evidence)
    evidence["summary"] = f"{checked} journal snapshot(s) read and folded; {len(torn)} torn tail(s) dropped"
    return make(__name__, VALID, evidence)


def _line_at(snap: Any, exc: FiskjError) -> Any:
    """The snapshot line an error points at (by offset, else by line number)."""
    if exc.offset is not None:
        for ln in snap.lines:
            if ln.offset == exc.offset or ln.offset <= exc.offset < ln.end:
                return ln
    if exc.line is not None and 1 <= exc.line <= len(snap.lines):
        return snap.lines[exc.line - 1]
    return None
