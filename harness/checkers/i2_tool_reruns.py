"""I2 at most one tool re-run per crash, and only the one in flight.

Normative text: docs/spec.md section 15, I2.

How it is judged, from the effects ledger (each execution: tool_use_id,
attempt, leg).  Executions of one id are ordered by (attempt, t); every
execution after the first is a *re-run*, and each must be attributed:

* to a killed or power-lost leg C that is the leg of the previous
  execution of that id (the id executed during C), whose journal after C
  holds no tool_result for it, and that no other re-run was attributed to
  (each crash accounts for at most one re-run); or
* to a ``tail`` fault on a leg between the previous execution and the
  re-run whose post-fault journal holds no tool_result for the id (the
  nemesis destroyed it; no per-fault limit).

A re-run in the same leg as the previous execution, or one no disruption
accounts for, is a violation.  A subject that promises to re-run the step in flight
(``interrupted_tool = "rerun-step"``) may re-run each tool whose result the crash lost once per crash.  A
subject that promises to report an interrupted tool (``interrupted_tool = "reported"``) never re-runs one the
journal it resumed from names (``reported_tool_rerun``): a line of it that decodes names the id (a torn
final line does not: the agent cannot read it).  When that journal also holds a complete line that does not
decode (I5 ``corrupt``), what the agent could read of it is unknown from outside (one agent stops at the bad
line, another skips it, Claude Code loses the lines its parentUuid chain no longer reaches): the promise is
not judged for that re-run (``reported_not_judged``, with the line) and the re-run is attributed as any
other.  Evidence names the id, both executions, the candidate legs and why each was refused.
"""

from __future__ import annotations

import json
from typing import Any

from harness.history.model import History
from harness.checkers.verdict import INVALID, VALID, make
from harness.checkers._common import blame_repeat, group_by_leg, leg_by_index, previous_snapshot
from harness.checkers.journal_view import JournalView


def _ex(li: int, e: Any) -> dict[str, Any]:
    return {"leg": li, "attempt": e.attempt, "pid": e.pid, "t": e.t, "tool": e.tool}


def check(history: History) -> Any:
    legs = leg_by_index(history)
    view = JournalView(history)
    results = {i: view.tool_result_ids(lg) for i, lg in legs.items()}
    journaled = view.journaled()
    groups = group_by_leg(history, history.effects, lambda e: e.tool_use_id,
                          lambda e: f"effect {e.tool_use_id}#{e.attempt}")
    used: dict[int, str] = {}
    per_tool: dict[str, dict[int, str]] = {}  # rerun-step: each tool of the step in flight once per crash
    attributed: list[dict[str, Any]] = []
    not_judged: list[dict[str, Any]] = []
    violations: list[dict[str, Any]] = []
    reruns = 0
    for tid in sorted(groups):
        execs = sorted(groups[tid], key=lambda p: (p[1].attempt, p[1].t))
        for (lp, prev), (lc, cur) in zip(execs, execs[1:]):
            reruns += 1
            row = {"tool_use_id": tid, "rerun": _ex(lc, cur), "previous": _ex(lp, prev),
                   "executions": len(execs)}
            if lc == lp:
                violations.append({"kind": "rerun_within_leg", **row,
                                   "detail": f"leg {lc} executed {tid} twice; no crash lies between them"})
                continue
            named, unreadable = _named(view, legs[lc], tid) if history.promises.interrupted_tool == "reported" \
                else (False, None)
            if named and unreadable is not None:
                not_judged.append({"tool_use_id": tid, "leg": lc, "unreadable": unreadable})
            elif named:
                violations.append({"kind": "reported_tool_rerun", **row,
                                   "detail": f"{tid} re-ran in leg {lc}: the journal it resumed from names it, and "
                                             "the agent promises to report an interrupted tool, never re-run it"})
                continue
            if journaled is None:
                lost = lambda i: tid not in results[i]  # noqa: E731
            else:
                done = journaled.lines(lp, prev.t, [tid.encode()])
                lost = lambda i: journaled.lost(i, done)  # noqa: E731
            by, fault, refused = blame_repeat(
                legs, per_tool.setdefault(tid, {}) if history.promises.interrupted_tool == "rerun-step" else used,
                tid, lp, lc, lost,
                held=(f"its journal holds the tool_result for {tid}" if journaled is None
                      else journaled.held.format(item=tid)),
                used_by="its one allowed re-run was already used by ",
                not_killed=lambda crash: f"the previous execution's leg was not killed ({_how(crash)})",
                intact=f"tail fault left the tool_result for {tid} intact", promises=history.promises)
            if by is None:
                violations.append({"kind": "unattributed_rerun", **row, "refused_candidates": refused,
                                   "detail": f"{tid} re-ran in leg {lc}; no crash accounts for it"})
                continue
            attributed.append({"tool_use_id": tid, "rerun_leg": lc, "crash_leg": by, "fault": fault})
    counts = {tid: len(v) for tid, v in sorted(groups.items()) if len(v) > 1}
    evidence: dict[str, Any] = {"checked": reruns, "executions": len(history.effects),
                                "rerun_ids": counts, "attributed": attributed}
    if not_judged:
        evidence["reported_not_judged"] = not_judged
    if violations:
        evidence["summary"] = (f"{len(violations)} of {reruns} tool re-run(s) not accounted for by a crash: "
                               + ", ".join(sorted({v['tool_use_id'] for v in violations})))
        evidence["violations"] = violations
        return make(__name__, INVALID, evidence)
    evidence["summary"] = (f"{reruns} re-run(s) across {len(history.effects)} execution(s), each attributed to "
                           "one crash" if reruns else f"no tool re-run in {len(history.effects)} execution(s)")
    return make(__name__, VALID, evidence)


def _named(view: JournalView, leg: Any, tid: str) -> tuple[bool, dict[str, Any] | None]:
    """Whether the journal ``leg`` resumed from names tool ``tid`` as the agent could read it, and its first
    complete line that does not decode (:meth:`Line.brief`; ``None``: none).  A journal of lines: a line that
    decodes holds the id as a JSON string; an opaque store: its bytes hold it."""
    before = previous_snapshot(view.history, leg) or b""
    if view.location.is_store:
        return tid.encode() in before, None
    snap = view.lines(before)
    quoted = json.dumps(tid).encode()
    named = any(ln.record is not None and quoted in ln.raw for ln in snap.lines)
    bad = next((ln for ln in snap.lines if ln.complete and ln.record is None), None)
    return named, None if bad is None else bad.brief()


def _how(leg: Any) -> str:
    if leg is None:
        return "no such leg"
    return f"exit_code={leg.exit_code}, exit_signal={leg.exit_signal}, fault={leg.fault.kind}"
