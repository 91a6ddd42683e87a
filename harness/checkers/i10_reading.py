"""I10 the subject's own reading of its journal agrees with the journal: docs/spec.md section 15, I10 (the
occasions, the fields compared, the violation kinds; the status command: docs/subject.md "Subject profiles").

A history with no reading is valid with ``checked: 0``: the campaign reports I10 as not applicable to a subject
with no status command.
"""

from __future__ import annotations

from typing import Any

from fiskj.errors import FiskjError
from fiskj.fold import fold

from harness.checkers._common import legs_in_order
from harness.checkers.journal_view import JournalView
from harness.checkers.verdict import INVALID, UNKNOWN, VALID, make
from harness.history.model import History

def _fold(view: JournalView, journal: bytes | None) -> tuple[dict[str, Any] | None, str | None]:
    """fiskj's reading of ``journal`` (bytes of ``view``'s decoded journal): ``({"status", "pending",
    "records"}, None)`` or ``(None, why not)``."""
    if journal is None:
        return None, "no journal"
    snap = view.lines(journal)
    if any(ln.record is None for ln in snap.lines[:-1]) or (snap.lines and snap.lines[-1].complete and snap.lines[-1].record is None):
        return None, "a line does not decode (I5 judges it)"
    records = snap.records()
    if not records:
        return None, "no complete record"
    try:
        state = fold(records)
    except FiskjError as exc:
        return None, f"fiskj cannot fold it: {exc}"
    pending = list(state.pending.unanswered) if state.pending is not None else []
    return {"status": state.status, "pending": pending, "records": len(records)}, None


def check(history: History) -> Any:
    """Judge I10 on ``history``: a :class:`harness.checkers.verdict.Verdict` (valid, invalid, unknown)."""
    checked, not_judged, violations = 0, [], []
    occasions: list[tuple[dict[str, Any], bytes | None, dict[str, Any]]] = [
        ({"leg": leg.index}, leg.journal, leg.reading) for leg in legs_in_order(history) if leg.reading is not None]
    occasions += [({"leg": r["leg"], "while_held_at": r["at"]}, r["journal"].encode("latin-1")
                   if isinstance(r.get("journal"), str) else None, r["reading"]) for r in history.readings]
    view = JournalView(history)
    if occasions and not view.decoded:
        return make(__name__, UNKNOWN, {"summary": f"{len(occasions)} reading(s) of a {view.format} "
                                                   "journal, which fiskj does not fold", "reason": "journal format"})
    for where, journal, reading in occasions:
        ours, why = _fold(view, journal)
        if ours is None:
            not_judged.append({**where, "reason": why})
            continue
        checked += 1
        base = {**where, "argv": reading.get("argv"), "fiskj": ours}
        if reading.get("error"):
            violations.append({**base, "kind": "unreadable", "error": reading["error"],
                               "stdout": str(reading.get("stdout", ""))[-400:],
                               "stderr": str(reading.get("stderr", ""))[-400:]})
            continue
        theirs = {name: reading.get(name) for name in reading.get("given", [])}
        if "pending" in theirs:
            theirs["pending"] = list(theirs["pending"] or [])
        for name, value in theirs.items():
            if value != ours[name]:
                violations.append({**base, "kind": name, "subject": value, "expected": ours[name],
                                   "subject_reading": theirs})
    evidence: dict[str, Any] = {"checked": checked}
    if not_judged:
        evidence["not_judged"] = not_judged
    if violations:
        first = violations[0]
        when = (f"while leg {first['leg']} was held at its write {first['while_held_at']}"
                if "while_held_at" in first else f"after leg {first['leg']}")
        what = (f"the subject could not read the journal {when}: {first['error']}"
                if first["kind"] == "unreadable" else
                f"{when} the subject reads {first['kind']} {first['subject']!r}, "
                f"the journal folds to {first['expected']!r}")
        evidence.update(summary=f"{len(violations)} disagreement(s); {what}", violations=violations)
        return make(__name__, INVALID, evidence)
    evidence["summary"] = (f"{checked} reading(s) agree with the journal's fold" if checked
                           else "no reading of the subject to judge")
    return make(__name__, VALID, evidence)
