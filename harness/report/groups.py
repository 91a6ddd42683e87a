"""Violations grouped by cause: one group per (invariant, rule, fault kind, what is involved), with its count,
smallest reproducer and one full example (the key and the reproducer's order: docs/results.md "Violations
grouped by cause").  Each group opens with one plain sentence in the
agent's own terms (:func:`sentence`).  Pure: no IO.
"""

from __future__ import annotations

import json
import re
from typing import Any

from harness.names import CRASH_RESUMES, CRASH_STATES, FAULT_FREE, NOT_INJECTED

__all__ = ["group_key", "involved", "first_violation", "fault_kinds", "fault_total", "group_rows", "group_title",
           "invariant_order", "key_trials", "minimal_note", "sentence", "SENTENCES"]

#: The record kind in a journal excerpt (fisk-ai v2 lines name it in their protocol id), or in a checker's
#: sentence about a record (``record seq 2 (assistant)``, harness/checkers/i4_acknowledged.py).
_RECORD_KIND = (re.compile(r"fisk-ai\.v\d+\.session\.([a-z_]+)"), re.compile(r"\brecord seq \d+ \(([a-z_]+)\)"))
#: Keys of a row's ``faults`` that count something other than injected faults.
_NOT_FAULTS = (CRASH_STATES, CRASH_RESUMES, NOT_INJECTED)  # counts of states, and of faults that never fired
_BIG = float("inf")


def first_violation(row: dict[str, Any]) -> dict[str, Any]:
    """The first entry of the row's ``evidence["violations"]`` (``{}`` when the evidence lists none)."""
    evidence = row.get("evidence")
    found = evidence.get("violations") if isinstance(evidence, dict) else None
    if isinstance(found, list) and found and isinstance(found[0], dict):
        return found[0]
    return {}


def involved(violation: dict[str, Any], row: dict[str, Any] | None = None) -> str:
    """The operation or record kind ``violation`` names, as ``"op fsync"``, ``"record assistant"``,
    ``"mutation cut"``; ``""`` when its evidence names none (``row``, the trial's row, is not read).

    Looked for in this order: the violation's own ``op`` (a traced call: I8, I4's truncations), the ``op``
    of the call that ``failed`` (an IO error swallowed, I4), the record kind of a journal line it quotes
    (``...session.assistant`` in an excerpt, ``record seq 2 (assistant)`` in a detail), the ``kind`` of a
    tail ``mutation`` (I5).
    """
    op = violation.get("op")
    if isinstance(op, str) and op:
        return f"op {op}"
    failed = violation.get("failed")
    if isinstance(failed, dict) and isinstance(failed.get("op"), str):
        return f"op {failed['op']}"
    if violation:
        text = json.dumps(violation, default=str)
        for pattern in _RECORD_KIND:
            match = pattern.search(text)
            if match:
                return f"record {match.group(1)}"
    mutation = violation.get("mutation")
    if isinstance(mutation, dict) and isinstance(mutation.get("kind"), str):
        return f"mutation {mutation['kind']}"
    return ""


#: (invariant, rule) -> the sentence that opens a group, ``str.format`` fields from its first violation.
SENTENCES = {
    ("I1", "suspend_not_journaled"): "Leg {leg} exited suspended, but its journal does not end with a suspend "
                                     "record (last line: {last_line}).",
    ("I1", "suspended_mid_batch"): "Leg {leg} suspended inside a tool batch it started, leaving tool_use "
                                   "{unanswered} unanswered.",
    ("I1", "tool_rerun"): "Tool call {tool_use_id} ran again in leg {after[0][leg]}, though it completed before "
                          "the clean suspend of leg {suspend_leg}.",
    ("I1", "model_call_repeated"): "The agent asked the model for turn {turn} again in leg {after[0][leg]}, though "
                                   "that call was answered before the clean suspend of leg {suspend_leg}.",
    ("I2", "unattributed_rerun"): "Tool call {tool_use_id} ran again in leg {rerun[leg]} (it first ran in leg "
                                  "{previous[leg]}), and no crash accounts for the re-run (leg "
                                  "{refused_candidates[0][leg]}: {refused_candidates[0][why]}).",
    ("I2", "rerun_within_leg"): "Leg {rerun[leg]} ran tool call {tool_use_id} twice.",
    ("I3", "unattributed_repeat"): "The agent asked the model for turn {turn} again in leg {repeat[leg]} (first "
                                   "asked in leg {previous[leg]}), and no crash accounts for the repeat (leg "
                                   "{refused_candidates[0][leg]}: {refused_candidates[0][why]}).",
    ("I3", "repeat_within_leg"): "Leg {repeat[leg]} asked the model for turn {turn} twice.",
    ("I4", "append_not_synced"): "The journal line written at byte {offset} (type {record_type}) by leg {leg} "
                                 "was never fsynced before the agent went on ({before}).",
    ("I4", "lost"): "The journal line acknowledged at byte {ack[offset]} (type {ack[record_type]}) by leg {ack[leg]} "
                    "is missing after leg {leg}.",
    ("I4", "changed"): "The journal line acknowledged at byte {ack[offset]} (type {ack[record_type]}) by leg {ack[leg]} "
                       "holds other bytes after leg {leg}.",
    ("I6", "answer_not_printed"): "Leg {leg} completed the run (exit 0) without printing the final answer.",
    ("I9", "not_refused"): "Leg {leg} resumed a run it had to refuse: exit {exit_code}, journal {bytes_before} -> "
                           "{bytes_after} bytes.",
    ("I9", "journal_changed"): "Leg {leg} refused to resume ({refusal}) but changed the journal from byte "
                               "{first_difference} ({bytes_before} -> {bytes_after} bytes).",
    ("I9", "did_work"): "Leg {leg} refused to resume ({refusal}) but called the model or ran a tool first.",
    ("I9", "refused_resumable"): "Leg {leg} refused to resume a run whose journal folds to {status_before} "
                                 "({refusal}).",
    ("I9", "new_turn_not_taken"): "Leg {leg} did not continue the completed run with a new turn, as the agent "
                                  "promises: exit {exit_code}.",
    ("I9", "no_op_did_something"): "Leg {leg} resumed the completed run and did something, where the agent "
                                   "promises nothing (journal changed: {journal_changed}).",
}


def sentence(row: dict[str, Any]) -> str:
    """The plain sentence that opens the group of report ``row`` (module docstring)."""
    first = first_violation(row)
    template = SENTENCES.get((str(row.get("invariant")), str(first.get("kind"))))
    if template:
        try:
            said = template.format_map(first)
            if not re.search(r"\bNone\b", said):  # a field the evidence left empty: say its detail instead
                return said
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            pass
    evidence = row.get("evidence")
    said = first.get("detail") or (evidence.get("summary") if isinstance(evidence, dict) else None) or ""
    return str(said)[:300]


def fault_kinds(row: dict[str, Any]) -> str:
    """The kinds of fault the row's trial injected, sorted and joined with ``+`` (``kill+suspend``); the
    row's ``family`` when it injected none it counts; ``none`` when neither is known."""
    faults = row.get("faults") or {}
    kinds = sorted(k for k, n in faults.items() if k not in _NOT_FAULTS and isinstance(n, (int, float)) and n > 0)
    if kinds:
        return "+".join(kinds)
    return str(row.get("family") or "none")


def fault_total(row: dict[str, Any]) -> int:
    """How many faults the row's trial injected: the sum of its ``faults`` counts (``crash_states`` not
    counted), else the length of its ``schedule``."""
    faults = row.get("faults")
    if isinstance(faults, dict) and faults:
        return int(sum(n for k, n in faults.items() if k not in _NOT_FAULTS and isinstance(n, (int, float))))
    schedule = row.get("schedule")
    return len(schedule) if isinstance(schedule, list) else 0


def group_key(row: dict[str, Any]) -> tuple[str, str, str, str]:
    """``(invariant, kind, faults, involved)`` of a report row (docs/results.md "Violations grouped by cause");
    ``faults`` is ``"any fault"`` for a violation no fault causes (:data:`harness.names.FAULT_FREE`)."""
    first = first_violation(row)
    kind = first.get("kind")
    if not isinstance(kind, str) or not kind:
        evidence = row.get("evidence")
        reason = evidence.get("reason") if isinstance(evidence, dict) else None
        kind = reason if isinstance(reason, str) and reason else "unspecified"
    invariant = str(row.get("invariant", "?"))
    faults = "any fault" if (invariant, kind) in FAULT_FREE else fault_kinds(row)
    return (invariant, kind, faults, involved(first, row))


def _size(row: dict[str, Any]) -> tuple[float, bool, float, float, int]:
    legs = row.get("legs")
    seed = row.get("seed")
    return (fault_total(row), row.get("origin") != "shrink", legs if isinstance(legs, int) else _BIG,
            seed if isinstance(seed, int) and not isinstance(seed, bool) else _BIG, _int(row.get("trial", 0)))


def minimal_note(reproducer: dict[str, Any], runs: dict[int, dict[str, Any]] | None = None,
                 group: set[int] | None = None) -> str:
    """What to say of a group's smallest reproducer (a report row; ``runs``: the report's runs by trial;
    ``group``: the group's trials): ``shrunk from trial K: <what got smaller>`` for a shrink's result; the
    shrink's own word on a trial it could not make smaller (``already minimal: ...``, ``not shrunk: ...``);
    that a trial of the group shrank to one grouped apart (its faults differ); else that it was not shrunk,
    and why (docs/results.md "Shrinking")."""
    runs = runs or {}
    run = runs.get(_int(reproducer.get("trial")), {})
    note = reproducer.get("shrink") or run.get("shrink")
    source = run.get("shrunk_from", reproducer.get("shrunk_from"))
    if (reproducer.get("origin") or run.get("origin")) == "shrink" and source is not None:
        return f"shrunk from trial {source}: {note or 'a smaller trial'}"
    if note:
        return note
    child = next((r for r in runs.values() if r.get("shrunk_from") in (group or {_int(reproducer.get("trial"))})),
                 None)
    if child is not None:
        return (f"trial {child['shrunk_from']} shrank to trial {child.get('trial')} ({child.get('shrink')}), "
                "grouped apart: its faults differ")
    n, origin = fault_total(reproducer), reproducer.get("origin") or run.get("origin")
    return ("fails with no fault injected" if n == 0 else "a schedule run as given (not shrunk)"
            if origin in ("replay", "explicit", "regression") else f"not shrunk ({n} fault(s)): a campaign shrinks one failure "
            "of each scenario, its smallest, within --shrink-budget; not this one")


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def group_title(group: dict[str, Any]) -> str:
    """One line naming a group's cause: ``I2 unattributed_rerun [kill] op fsync``."""
    key = group["key"]
    return " ".join(p for p in (key["invariant"], key["kind"], f"[{key['faults']}]", key["involved"]) if p)


def group_rows(rows: list[dict[str, Any]], runs: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Group report rows (``violations`` or ``unknowns``) by :func:`group_key`; ``runs``: the report's ``runs``
    rows (a shrunk trial's origin, the faults of the trial it shrank).  Returns the groups (their fields:
    docs/results.md "Violations grouped by cause") in invariant order, causes before consequences, most rows
    first within one invariant.  Never raises for a row missing keys: what is missing is left out.
    """
    by_run = {_int(r["trial"]): r for r in runs or [] if isinstance(r, dict) and "trial" in r}
    buckets: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        buckets.setdefault(group_key(row), []).append(row)
    out = []
    for key, members in buckets.items():
        best = min(members, key=_size)
        run = by_run.get(_int(best.get("trial")), {})
        reproducer = {
            "trial": best.get("trial"), "scenario": best.get("scenario"), "seed": best.get("seed"),
            "schedule": best.get("schedule"), "faults": fault_total(best), "legs": best.get("legs"),
            "origin": best.get("origin") or run.get("origin"), "reproduce": best.get("reproduce"),
            "reproduce_run": best.get("reproduce_run"),
            "minimal": minimal_note(best, by_run, {_int(m.get("trial")) for m in members}),
        }
        group = {"key": dict(zip(("invariant", "kind", "faults", "involved"), key)),
                 "name": best.get("name", ""), "count": len(members),
                 "trials": sorted({_int(m["trial"]) for m in members if "trial" in m}),
                 "scenarios": sorted({str(m.get("scenario")) for m in members}),
                 "reproducer": {k: v for k, v in reproducer.items() if v is not None}, "example": best}
        group["title"] = group_title(group)
        group["sentence"] = sentence(best)
        out.append(group)
    # causes before consequences: invariants in their order (a re-run, I2, or a lost record, I4, before the
    # unreadable journal or the different result it leads to, I5 and I6), then the biggest group first
    out.sort(key=lambda g: (invariant_order(g["key"]["invariant"]), -g["count"], g["title"]))
    return out


def invariant_order(inv: str) -> tuple[int, str]:
    """Sort key of an invariant id: I1 .. I10 in their order, then any other name."""
    return (int(inv[1:]), inv) if inv[:1] == "I" and inv[1:].isdigit() else (1 << 30, inv)


def key_trials(report: dict[str, Any]) -> list[int]:
    """The trials a report's groups (``groups``, then ``unknown_groups``) point at: each group's smallest
    reproducer and its example, in group order, each once."""
    return list(dict.fromkeys(t for g in (report.get("groups") or []) + (report.get("unknown_groups") or [])
                              for t in ((g.get("reproducer") or {}).get("trial"), (g.get("example") or {}).get("trial"))
                              if isinstance(t, int)))
