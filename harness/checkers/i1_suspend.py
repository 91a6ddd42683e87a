"""I1 exactly-once after a clean suspend.

Normative text: docs/spec.md section 15, I1 (the suspend itself: section 13).

How it is judged.  A *suspended leg* S is one that exited with status 3,
unless it was sent a signal its subject promises to abort on (judged like a
kill: docs/spec.md section 15 "Declared promises").  For each S:

* ``suspend_not_journaled``: S's journal must end with a ``suspended``
  terminal record.
* ``suspended_mid_batch``: S's journal must not end inside a batch S itself
  started (an assistant record written by S, i.e. absent from the journal
  before S, with a tool_use left unanswered).
* ``tool_rerun``: no effect of a later leg may repeat a tool_use_id whose
  execution had completed before the suspend: its result is in S's journal,
  or it executed in S itself.
* ``model_call_repeated``: no model call of a later leg may repeat the
  request key of a call completed before the suspend: its assistant record
  is in S's journal (the request holding k assistant messages is answered
  by the (k+1)-th assistant record), or the call was made in S itself.

A ``jsonl`` journal (docs/subject.md "Journal formats") has no records to
read: the two journal rules are not judged, and only a repeat of work done
in S itself (which a clean suspend must have journaled) is a violation.

An earlier call or execution left unjournaled by a *crash* before S is not
I1's to judge (I2 and I3 allow one such repeat per crash); nor is a repeat
after a ``tail`` fault, between S and the repeat, that destroyed the
journaled result or assistant record (the nemesis took the evidence of
completion away).  Both are listed under ``exempt``.
"""

from __future__ import annotations

from typing import Any

from harness.history.model import History
from harness.checkers.verdict import INVALID, VALID, make
from harness.checkers._common import attribute, is_tail, legs_in_order, pending_ids
from harness.checkers.journal_view import JournalView


def _assistants_in(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


def _destroyed_by_tail(legs: list[Any], start: int, after: list[tuple[int, Any]], gone: Any,
                       view: JournalView) -> int | None:
    """The index of a tail-fault leg in ``[start, first repeat)`` whose snapshot lacks the evidence, else None."""
    first = min(li for li, _ in after)
    for leg in legs:
        if start <= leg.index < first and is_tail(leg) and gone(view.at(leg)):
            return leg.index
    return None


def check(history: History) -> Any:
    legs = legs_in_order(history)
    suspended = [lg for lg in legs if lg.suspended and not history.promises.aborts(lg)]
    calls = [(attribute(history, c.leg, c.t, f"model call {c.index}"), c) for c in history.model_calls]
    effects = [(attribute(history, e.leg, e.t, f"effect {e.tool_use_id}#{e.attempt}"), e) for e in history.effects]
    violations: list[dict[str, Any]] = []
    exempt: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    view = JournalView(history)
    for s in suspended:
        snap = view.at(s)
        if view.decoded and not snap.ends_suspended():
            last = snap.lines[-1].brief() if snap.lines else None
            violations.append({"kind": "suspend_not_journaled", "leg": s.index,
                               "detail": "exit 3 but the journal does not end with a suspended terminal record",
                               "last_line": last})
        unanswered, aseq = pending_ids(snap.records())
        if unanswered and aseq is not None:
            prev = view.before(s)
            mine = [ln.raw for ln in snap.by_seq(aseq)]
            if not any(ln.raw in mine for ln in prev.by_seq(aseq)):
                violations.append({"kind": "suspended_mid_batch", "leg": s.index, "assistant_seq": aseq,
                                   "unanswered": unanswered,
                                   "detail": "the suspend was honoured inside a batch this leg started"})
        results = view.tool_result_ids(s)
        n_asst = snap.assistant_count()
        for tid in sorted({e.tool_use_id for li, e in effects if li <= s.index}):
            before = [(li, e) for li, e in effects if li <= s.index and e.tool_use_id == tid]
            after = [(li, e) for li, e in effects if li > s.index and e.tool_use_id == tid]
            if not after:
                continue
            row = {"tool_use_id": tid, "suspend_leg": s.index,
                   "before": [{"leg": li, "attempt": e.attempt, "pid": e.pid, "t": e.t} for li, e in before],
                   "after": [{"leg": li, "attempt": e.attempt, "pid": e.pid, "t": e.t} for li, e in after]}
            destroyed = _destroyed_by_tail(legs, s.index, after, lambda snap: tid not in snap.tool_result_ids(), view)
            if destroyed is not None:
                exempt.append({"kind": "tool", **row, "why": f"a tail fault after leg {destroyed} removed its result"})
            elif tid in results or any(li == s.index for li, _ in before):
                if ("tool", tid) not in seen:
                    seen.add(("tool", tid))
                    row["result_journaled"] = tid in results
                    violations.append({"kind": "tool_rerun", **row})
            else:
                exempt.append({"kind": "tool", **row, "why": "not journaled before a crash earlier than the suspend"})
        for key in sorted({c.key for li, c in calls if li <= s.index}):
            before = [(li, c) for li, c in calls if li <= s.index and c.key == key]
            after = [(li, c) for li, c in calls if li > s.index and c.key == key]
            if not after:
                continue
            k = _assistants_in(before[0][1].messages)
            journaled = n_asst >= k + 1
            row = {"key": key, "suspend_leg": s.index, "turn": before[0][1].turn,
                   "before": [{"leg": li, "index": c.index, "t": c.t} for li, c in before],
                   "after": [{"leg": li, "index": c.index, "t": c.t} for li, c in after]}
            destroyed = _destroyed_by_tail(legs, s.index, after, lambda snap: snap.assistant_count() < k + 1, view)
            if destroyed is not None:
                exempt.append({"kind": "model_call", **row,
                               "why": f"a tail fault after leg {destroyed} removed its assistant record"})
            elif journaled or any(li == s.index for li, _ in before):
                if ("call", key) not in seen:
                    seen.add(("call", key))
                    row["assistant_journaled"] = journaled
                    violations.append({"kind": "model_call_repeated", **row})
            else:
                exempt.append({"kind": "model_call", **row, "why": "not journaled before a crash earlier than the suspend"})
    evidence: dict[str, Any] = {"checked": len(suspended), "suspended_legs": [s.index for s in suspended]}
    if not view.decoded and suspended:
        evidence["not_judged"] = (f"journal format {view.format}: whether a suspended journal ends with its suspend "
                                  "and "
                                  "what it journaled before it (only a repeat of work done in the suspended leg "
                                  "itself is judged)")
    if exempt:
        evidence["exempt"] = exempt
    if violations:
        kinds = sorted({v["kind"] for v in violations})
        evidence["summary"] = (f"{len(violations)} violation(s) after clean suspend(s) at leg(s) "
                               f"{evidence['suspended_legs']}: {', '.join(kinds)}")
        evidence["violations"] = violations
        return make(__name__, INVALID, evidence)
    evidence["summary"] = (f"{len(suspended)} clean suspend(s); nothing completed before them was repeated"
                           if suspended else "no leg exited suspended; nothing to judge")
    return make(__name__, VALID, evidence)
