"""I9 a refused resume appends nothing.

Normative text: docs/spec.md section 15, I9 (what is refused: section 12).

How it is judged.  A *refused leg* exited 1 or 2 and its fault detail or
stderr mentions a refusal (``refus``, ``locked``, ``held by another``,
``fingerprint``, ...).  For each:

* ``changed_journal``: its IO-seam trace shows a change of the journal
  (write, ftruncate, unlink, rename, ``O_TRUNC`` open);
* ``journal_changed``: when no other leg ran at the same time and no file
  fault followed it (tail, power loss), its journal snapshot differs from the one before it (the previous leg's, or no file
  for the first leg); evidence gives both sizes, the first differing
  offset and the lines added;
* ``did_work``: a model call or a tool execution is attributed to it.

A resume that *must* be refused is judged too: a drift probe (a leg whose
fault detail says ``expect: refused``: the runner resumed with a changed
fingerprint and no ``--force``, ``[workload] drift``) that was not refused
(``not_refused``: it exited otherwise, evidence names the exit and the
drifted fields) is a violation, since whatever it then appended was
appended by a resume that should have appended nothing.

And a resume that must *not* be refused: a fisk-ai v2 journal whose run
is not completed (``open``, ``suspended``, or a leg's end ``error``,
``budget``, ``max_iterations``) is resumed (section 12, rule 2), so a
refused resume of it, alone (no other leg at the same time) and not a
drift probe, is ``refused_resumable`` unless the refusal names the lock or
the fingerprint of an unforced drifted resume; evidence gives the status
the journal before it folds to.  A journal that does not fold (corrupt,
never created) may be refused.

The resume of a completed run (``[check] resume_after_completed``) does what
its subject promises (docs/spec.md section 15 "Declared promises"): refused
(as above), ``new-turn`` (it must continue: exit completed, else
``new_turn_not_taken``) or ``no-op`` (no model call, no tool run, the journal
byte-identical, else ``no_op_did_something``).

Cutting the torn tail the leg found (an ``ftruncate`` to exactly the start
of the before-snapshot's unparsable final line, done under the lock before
the refusal) removes no record and is allowed; it is listed under
``tail_repairs``.  A refused leg that overlapped another leg in time, or whose snapshot is a
file fault's, and that left no trace cannot be judged: unknown.
"""

from __future__ import annotations

import re
from typing import Any

from fiskj.errors import FiskjError
from fiskj.reader import read_state
from harness.history.model import History, Leg
from harness.checkers.verdict import INVALID, UNKNOWN, VALID, make
from harness.checkers._common import (Unattributable, attribute, completed_probe, is_refusal, legs_in_order,
                                      previous_snapshot, same_saved_state)
from harness.names import EXIT_COMPLETED
from harness.checkers.journal_view import JournalView, Snapshot
from harness.checkers._trace import observed

#: The statuses whose run a resume continues (docs/spec.md section 12, rule 2; fisk-ai v2 does the same).
RESUMED = ("open", "suspended", "error", "budget", "max_iterations")


def _first_difference(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def _torn_cut(snap: Snapshot) -> int | None:
    """Offset of the snapshot's torn final line (incomplete or unparsable), or ``None``."""
    lines = snap.lines
    if lines and lines[-1].record is None:
        return lines[-1].offset
    return None


def _is_repair(ev: dict[str, Any], cut: int | None) -> bool:
    return cut is not None and ev.get("op") == "ftruncate" and ev.get("length") == cut


def _overlaps(leg: Leg, legs: list[Leg]) -> bool:
    return any(o.index != leg.index and o.t_end and leg.t_end and o.t_start < leg.t_end and leg.t_start < o.t_end
               for o in legs)


def _work(history: History, leg: Leg) -> list[dict[str, Any]]:
    def mine(ev: Any, what: str) -> bool:
        try:
            return attribute(history, ev.leg, ev.t, what) == leg.index
        except Unattributable:
            return False

    return ([{"model_call": c.index, "turn": c.turn, "key": c.key} for c in history.model_calls
             if mine(c, "model call")]
            + [{"tool_use_id": e.tool_use_id, "attempt": e.attempt, "pid": e.pid} for e in history.effects
               if mine(e, "effect")])


#: A refusal that names the lock or the resume guard: legitimate whatever the run's status.
_LOCK_OR_GUARD = re.compile(r"locked|held by another|in use by|fingerprint|configuration", re.I)


def _resumable_status(view: JournalView, leg: Leg, legs: list[Leg], before: bytes | None, why: str) -> str | None:
    """The status a refused resume's journal folded to when that run had to be resumed, else ``None``."""
    if leg.kind != "resume" or not view.decoded or not before or _overlaps(leg, legs):
        return None
    if leg.fault.detail.get("expect") == "refused" or _LOCK_OR_GUARD.search(why):
        return None
    try:
        status = read_state(before).status
    except FiskjError:  # corrupt, or never created: a refusal is the answer
        return None
    return status if status in RESUMED else None


def check(history: History) -> Any:
    legs = legs_in_order(history)
    view = JournalView(history)
    refused = [lg for lg in legs if is_refusal(lg)]
    violations: list[dict[str, Any]] = []
    undecided: list[dict[str, Any]] = []
    repairs: list[dict[str, Any]] = []
    refused_ids = {id(lg) for lg in refused}
    must_refuse = [lg for lg in legs if lg.fault.detail.get("expect") == "refused" and id(lg) not in refused_ids]
    for leg in must_refuse:
        before, after = previous_snapshot(history, leg), leg.journal
        violations.append({"kind": "not_refused", "leg": leg.index, "exit_code": leg.exit_code,
                           "exit_signal": leg.exit_signal, "drift": leg.fault.detail.get("drift"),
                           "bytes_before": None if before is None else len(before),
                           "bytes_after": None if after is None else len(after),
                           "stderr": (leg.stderr or "")[-300:]})
    # every resume of the completed run, the probe or a recovery that found the run's end, keeps the promise;
    # a leg a fault of its own cut short is not held to it
    want = history.promises.expect_after_completed
    promised = [(lg, want) for lg in legs if want in ("new-turn", "no-op") and lg.index in view.after_end()
                and (completed_probe(history, lg) or not lg.fault.injected)]
    for leg, want in promised:
        row = {"leg": leg.index, "exit_code": leg.raw_exit_code if leg.raw_exit_code is not None else leg.exit_code,
               "exit_signal": leg.exit_signal, "stdout_tail": (leg.stdout or "")[-200:]}
        if want == "new-turn" and leg.exit_code != EXIT_COMPLETED:
            violations.append({"kind": "new_turn_not_taken", **row, "stderr": (leg.stderr or "")[-300:],
                               "rule": "the agent promises to continue a completed run with a new turn"})
        work = _work(history, leg) if want == "no-op" else []
        if want == "no-op" and (work or leg.crashed or (leg.journal != previous_snapshot(history, leg)
                                                       and not same_saved_state(history, leg))):
            violations.append({"kind": "no_op_did_something", **row, "work": work[:10],
                               "journal_changed": leg.journal != previous_snapshot(history, leg),
                               "rule": "the agent promises that resuming a completed run does nothing"})
    for leg in refused:
        why = (leg.stderr or "").strip().splitlines()[-1:] or [str(leg.fault.detail)]
        base = {"leg": leg.index, "exit_code": leg.exit_code, "refusal": why[0][:200]}
        before, after = previous_snapshot(history, leg), leg.journal
        status = _resumable_status(view, leg, legs, before, why[0])
        if status is not None:
            violations.append({"kind": "refused_resumable", **base, "status_before": status,
                               "rule": "a run that is not completed is resumed (docs/spec.md section 12, rule 2)"})
        cut = _torn_cut(view.before(leg))
        changes = view.writes(leg)
        if cut is not None and any(_is_repair(ev, cut) for ev in changes):
            repairs.append({"leg": leg.index, "cut_at": cut, "bytes_before": len(before or b"")})
        changes = [ev for ev in changes if not _is_repair(ev, cut)]
        tidied = same_saved_state(history, leg)  # an opaque store tidied, what its reading holds unchanged
        if changes and not tidied:
            violations.append({"kind": "changed_journal", **base,
                               "events": [{k: ev.get(k) for k in ("n", "pid", "op", "offset", "len", "length")
                                           if ev.get(k) is not None} for ev in changes[:10]]})
        work = _work(history, leg)
        if work:
            violations.append({"kind": "did_work", **base, "work": work[:10]})
        if _overlaps(leg, legs) or leg.fault.kind in ("tail", "power_loss"):
            if not observed(history, leg):
                undecided.append({**base, "why": "overlapped another leg and left no IO-seam trace"
                                  if _overlaps(leg, legs) else f"its snapshot is after a {leg.fault.kind} fault "
                                  "and it left no IO-seam trace"})
            continue
        if before == after or tidied or (cut is not None and before is not None and after == before[:cut]):
            continue
        b, a = before or b"", after or b""
        at = _first_difference(b, a)
        added = [ln.brief() for ln in view.lines(a).lines if ln.end > at][:5]
        violations.append({"kind": "journal_changed", **base, "bytes_before": None if before is None else len(b),
                           "bytes_after": None if after is None else len(a), "first_difference": at,
                           "lines_after_difference": added})
    evidence: dict[str, Any] = {"checked": len(refused) + len(must_refuse) + len(promised),
                                "refused_legs": [lg.index for lg in refused]}
    if repairs:
        evidence["tail_repairs"] = repairs
    if violations:
        evidence["summary"] = f"{len(violations)} refused leg violation(s): " + "; ".join(
            f"leg {v['leg']} {v['kind']}" for v in violations[:5])
        evidence["violations"] = violations
        return make(__name__, INVALID, evidence)
    if undecided:
        evidence["summary"] = f"{len(undecided)} refused leg(s) cannot be judged (concurrent, untraced)"
        evidence["reason"] = "concurrent untraced refused leg"
        evidence["undecided"] = undecided
        return make(__name__, UNKNOWN, evidence)
    evidence["summary"] = (f"{len(refused)} refused leg(s), each left the journal byte-identical and did no work"
                           if refused else "no refused leg; nothing to judge") + "".join(
        f"; the resume of the completed run kept its promise ({want})" for _, want in promised)
    return make(__name__, VALID, evidence)
