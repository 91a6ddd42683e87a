"""I3 at most one model call repeated per crash.

Normative text: docs/spec.md section 15, I3.

How it is judged, from the fake server's calls (request ``key``, ``leg``).
The key is the conversation's state (the scripted turn asked for, from the
tool ids answered and the follow-ups sent; docs/subject.md "The model"), so
an agent that rebuilt its conversation on resume (a synthetic assistant
message, an annotated history) and asked the same thing again made a
repeat.  Calls with one key are ordered by server index; every call after
the first is a *repeat* and must be attributed:

* to a killed or power-lost leg C that is the leg of the previous call with
  that key, whose journal after C does not hold that call's assistant
  record (a request holding k assistant messages is answered by the
  (k+1)-th assistant record), and that accounts for no other repeat; or
* to a ``tail`` fault on a leg between the two calls whose post-fault
  journal lacks that assistant record (no per-fault limit).

So repeats of a key never exceed the crashes between them, and the repeated call must have been in
flight at the crash: a crashed leg that had run a tool its reply asked for, or made a later model call,
had the reply delivered, and a journal that lost it then is a ``lost_delivered_reply``.  A subject that
promises to continue a completed run with a new turn (``resume_completed =
"new-turn"``) makes no repeat when a resume of the completed run
(:meth:`JournalView.after_end`) sends a longer conversation than the call it shares a key with (``new_turns``).  Evidence names
the key, the scripted turn, both calls and the refused candidate legs.
"""

from __future__ import annotations

from typing import Any

from harness.history.model import History
from harness.checkers.verdict import INVALID, VALID, make
from harness.checkers._common import blame_repeat, group_by_leg, is_tail, leg_by_index
from harness.checkers.journal_view import JournalView, reply_markers


def _call(li: int, c: Any) -> dict[str, Any]:
    return {"leg": li, "index": c.index, "t": c.t, "turn": c.turn}


def check(history: History) -> Any:
    legs = leg_by_index(history)
    view = JournalView(history)
    asst = {i: view.at(lg).assistant_count() for i, lg in legs.items()}
    journaled = view.journaled()
    groups = group_by_leg(history, history.model_calls, lambda c: c.key, lambda c: f"model call {c.index}")
    used: dict[int, str] = {}
    attributed: list[dict[str, Any]] = []
    violations: list[dict[str, Any]] = []
    new_turns: list[dict[str, Any]] = []
    after_end = view.after_end() if history.promises.resume_completed == "new-turn" else set()
    repeats = 0
    for key in sorted(groups, key=lambda k: groups[k][0][1].index):
        calls = sorted(groups[key], key=lambda p: (p[1].index, p[1].t))
        need = 1 + sum(1 for m in calls[0][1].messages if isinstance(m, dict) and m.get("role") == "assistant")
        for (lp, prev), (lc, cur) in zip(calls, calls[1:]):
            repeats += 1
            row = {"key": key, "turn": cur.turn, "repeat": _call(lc, cur), "previous": _call(lp, prev),
                   "calls": len(calls), "assistant_record": need}
            if lc in after_end and len(cur.messages) > len(prev.messages):
                new_turns.append({"key": key, "leg": lc, "index": cur.index})
                continue
            if lc == lp:
                violations.append({"kind": "repeat_within_leg", **row,
                                   "detail": f"leg {lc} made the same model call twice; no crash lies between them"})
                continue
            if journaled is None:
                lost = lambda i: asst[i] < need  # noqa: E731
            else:
                done = journaled.lines(lp, prev.t, reply_markers(prev.reply))
                lost = lambda i: journaled.lost(i, done)  # noqa: E731
            by, fault, refused = blame_repeat(
                legs, used, key, lp, lc, lost,
                held=(f"its journal holds assistant record #{need} (acknowledged)" if journaled is None
                      else journaled.held.format(item="the reply")),
                used_by="its one allowed repeat was already used by key ",
                not_killed=_not_killed,
                intact=f"tail fault left assistant record #{need} intact", promises=history.promises)
            if by is None:
                violations.append({"kind": "unattributed_repeat", **row, "refused_candidates": refused,
                                   "detail": f"model call for turn {cur.turn} repeated in leg {lc}; no crash accounts for it"})
                continue
            acted = _acted_on(history, lp, prev) if fault != "tail" and not is_tail(legs.get(lp)) else ""
            if acted:
                violations.append({"kind": "lost_delivered_reply", **row, "acted_on": acted, "detail": (
                    f"leg {lp} had the reply to turn {prev.turn} and went on ({acted}), so it was no longer in "
                    f"flight; its journal lost it at the crash and leg {lc} asked for it again")})
                continue
            attributed.append({"key": key, "turn": cur.turn, "repeat_leg": lc, "crash_leg": by,
                               "fault": fault})
    evidence: dict[str, Any] = {"checked": repeats, "calls": len(history.model_calls), "attributed": attributed}
    if new_turns:
        evidence["new_turns"] = new_turns
    if violations:
        evidence["summary"] = (f"{len(violations)} of {repeats} repeated model call(s) not accounted for by a crash "
                               f"(turns {sorted({v['turn'] for v in violations})})")
        evidence["violations"] = violations
        return make(__name__, INVALID, evidence)
    evidence["summary"] = (f"{repeats} repeated call(s) in {len(history.model_calls)}, each attributed to one crash"
                           if repeats else f"no model call repeated in {len(history.model_calls)}")
    return make(__name__, VALID, evidence)


def _acted_on(history: History, leg: int, call: Any) -> str:
    """What ``leg`` did after ``call``'s reply came, by its own evidence (a tool the reply asked for ran, or
    a later model call with a longer conversation was made): the reply was delivered and acted on, not in flight.  ``""``: nothing."""
    asked = {b.get("id") for b in call.reply if isinstance(b, dict) and b.get("type") == "tool_use"}
    ran = sorted(e.tool_use_id for e in history.effects if e.leg == leg and e.t > call.t and e.tool_use_id in asked)
    later = [c for c in history.model_calls if c.leg == leg and c.index > call.index and c.key != call.key
             and len(c.messages) > len(call.messages)]  # its conversation went on past the call
    return (f"ran {', '.join(ran)}" if ran else "") or (f"made model call {later[0].index}" if later else "")


def _not_killed(leg: Any) -> str:
    return "the previous call's leg was not killed" + (
        "" if leg is None else f" (exit_code={leg.exit_code}, fault={leg.fault.kind})")
