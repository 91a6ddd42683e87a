"""I8 one writer at a time: docs/spec.md section 15, I8 (the rules, how it is judged, the violation kinds; the
lock: section 10)."""

from __future__ import annotations

from typing import Any

from harness.history.model import History, Leg
from harness.checkers.verdict import INVALID, UNKNOWN, VALID, make
from harness.checkers._common import crash_kind, legs_in_order, nemesis_prefix_holds
from harness.checkers._trace import Span, events, lock_spans, traced
from harness.checkers.journal_view import JournalView


def _overlap(a0: int | None, a1: int | None, b0: int | None, b1: int | None) -> bool:
    return a0 is not None and b0 is not None and a0 < (b1 if b1 is not None else a0 + 1) and b0 < (
        a1 if a1 is not None else b0 + 1)


def _covered(ev: dict[str, Any], spans: list[Span]) -> bool:
    """Whether trace event ``ev`` lies inside a lock span: of the same process for an IO-seam trace (its ``n``
    counts that process's calls), of any process of the leg for an observed one (``seq`` in ``ev``: its ``n`` is
    global over the leg's processes, and a child may take the lock on an inherited descriptor: ``flock(1)``)."""
    n, observed = ev.get("n", 0), "seq" in ev
    return any((observed or s.pid == ev.get("pid")) and s.first_n < n and (s.last_n is None or n < s.last_n)
               for s in spans)


def _ev(ev: dict[str, Any], leg: Leg) -> dict[str, Any]:
    """Trace event ``ev`` of ``leg`` as evidence."""
    return {"leg": leg.index, "pid": ev.get("pid"), "n": ev.get("n"), "op": ev.get("op"),
            **{k: ev[k] for k in ("t", "offset", "len", "length") if ev.get(k) is not None}}


def _lines(view: JournalView, legs: list[Leg], violations: list[dict[str, Any]]) -> int:
    checked, history = 0, view.history
    for leg in legs:
        snap = view.at(leg)
        for ln in snap.lines[:-1]:
            checked += 1
            if ln.record is None and not nemesis_prefix_holds(history, leg, ln.end):
                violations.append({"kind": "broken_line", "leg": leg.index, **ln.brief(),
                                   "envelopes": ln.raw.count(b'{"seq":'),
                                   "detail": "a journal line that is not one whole record (interleaved or glued)"})
    return checked


def _check_opaque(history: History, legs: list[Leg]) -> Any:
    """I8 for an opaque store, from outside (docs/spec.md section 15, "Opaque stores"; its locks are its own):
    of two legs whose processes coexisted, never both ran one tool (the ledger) or asked the model one thing (the
    model-call log): ``both_did_the_work``; a pair with a crashed leg is I2's and I3's."""
    violations, pairs = [], 0
    for i, a in enumerate(legs):
        for b in legs[i + 1:]:
            if not (a.t_end and b.t_end and a.t_start < b.t_end and b.t_start < a.t_end) \
                    or crash_kind(a, history.promises) or crash_kind(b, history.promises):
                continue  # (a crashed leg's work may be done again once: I2 and I3 judge that)
            pairs += 1
            tools = {e.tool_use_id for e in history.effects if e.leg == a.index} & \
                {e.tool_use_id for e in history.effects if e.leg == b.index}
            keys = {c.key for c in history.model_calls if c.leg == a.index} & \
                {c.key for c in history.model_calls if c.leg == b.index}
            if tools or keys:
                violations.append({"kind": "both_did_the_work", "legs": [a.index, b.index], "tool_use_ids":
                                   sorted(tools), "call_keys": sorted(keys), "detail": (
                    f"legs {a.index} and {b.index} ran at once on one run and both did the same work: "
                    f"{len(tools)} tool run(s), {len(keys)} model call(s)")})
    evidence: dict[str, Any] = {"checked": pairs, "concurrent_pairs": pairs}
    if violations:
        evidence["summary"] = (f"{len(violations)} pair(s) of concurrent legs both did the work: "
                               f"{violations[0]['detail']}")
        return make(__name__, INVALID, {**evidence, "violations": violations})
    evidence["summary"] = f"{pairs} pair(s) of concurrent legs, never both doing the same work (opaque store)"
    return make(__name__, VALID, evidence)


def check(history: History) -> Any:
    """Judge I8 on ``history``: a :class:`harness.checkers.verdict.Verdict` (valid, invalid, unknown)."""
    legs = legs_in_order(history)
    if history.journal.is_store:
        return _check_opaque(history, legs)
    violations: list[dict[str, Any]] = []
    view = JournalView(history)
    lines = _lines(view, legs, violations)
    spans = {leg.index: lock_spans(history, leg) for leg in legs}
    writes = {leg.index: view.writes(leg) for leg in legs}
    for leg in legs:
        violations += [{"kind": "write_without_lock", **_ev(ev, leg),
                        "detail": f"leg {leg.index} changed the journal ({ev.get('op')} n={ev.get('n')}) without "
                                  "holding the run lock"}
                       for ev in writes[leg.index] if not _covered(ev, spans[leg.index])]
        violations += [{"kind": f"{ev.get('op')}_without_lock", **_ev(ev, leg),
                        "detail": f"leg {leg.index} released the run lock before the {ev.get('op')} (n={ev.get('n')}) "
                                  "of a journal descriptor it had written: another writer could take over while its "
                                  "appends were not yet durable"}
                       for ev in _finishing_calls(view, leg) if not _covered(ev, spans[leg.index])]
        violations += _waited(history, leg)
    undecided: list[dict[str, Any]] = []
    pairs, untraced = 0, not traced(history)
    for i, a in enumerate(legs):
        for b in legs[i + 1:]:
            if not (a.t_end and b.t_end and a.t_start < b.t_end and b.t_start < a.t_end):
                continue
            if untraced:
                undecided.append({"legs": [a.index, b.index], "why": "the legs coexisted and left no IO-seam trace"})
            if not (writes[a.index] and writes[b.index]):
                continue
            pairs += 1
            timed = all(s.start is not None for s in spans[a.index] + spans[b.index]) and all(
                ev.get("t") is not None for ev in writes[a.index] + writes[b.index])
            if not timed:
                undecided.append({"legs": [a.index, b.index], "why": "both changed the journal while their processes "
                                  "coexisted, and the trace events carry no time t"})
                continue
            violations += _pair(a, b, spans, writes)
    evidence: dict[str, Any] = {"checked": lines + sum(len(w) for w in writes.values()) + pairs,
                                "lines_checked": lines, "journal_changes": sum(len(w) for w in writes.values()),
                                "concurrent_writer_pairs": pairs}
    if violations:
        evidence["summary"] = f"{len(violations)} one-writer violation(s): " + ", ".join(
            sorted({v["kind"] for v in violations})) + f" (first: leg {violations[0].get('leg', violations[0].get('legs'))})"
        evidence["violations"] = violations[:50]
        if undecided:
            evidence["undecided"] = undecided
        return make(__name__, INVALID, evidence)
    if undecided:
        evidence["summary"] = f"{len(undecided)} pair(s) of concurrent legs cannot be judged: {undecided[0]['why']}"
        evidence["reason"] = undecided[0]["why"]
        evidence["undecided"] = undecided
        return make(__name__, UNKNOWN, evidence)
    evidence["summary"] = (f"{lines} line(s) whole; {evidence['journal_changes']} journal change(s) all under the lock; "
                           f"{pairs} concurrent writer pair(s)")
    return make(__name__, VALID, evidence)


def _waited(history: History, leg: Leg) -> list[dict[str, Any]]:
    """``waited_for_lock``: ``leg`` timed out inside a lock call under the store, not one the harness held
    there (a race's ``pause``)."""
    if not leg.timed_out:
        return []
    return [{"kind": "waited_for_lock", **_ev(ev, leg),
             "detail": f"leg {leg.index} waited in {ev.get('op')} (n={ev.get('n')}) of the run lock until it was "
                       "killed: a busy lock must be refused at once (RunLocked), never waited for"}
            for ev in events(leg) if ev.get("op") in ("flock", "lock") and ev.get("error") == "KILLED"
            and "pause" not in str(ev.get("fault") or "").split(",")]


def _finishing_calls(view: JournalView, leg: Leg) -> list[dict[str, Any]]:
    """The fsyncs and the close of each journal descriptor a process of ``leg`` wrote, after its first write."""
    written: set[tuple[Any, Any]] = set()
    out = []
    for ev in events(leg):
        if not view.is_journal(ev.get("path")) or ev.get("error"):
            continue
        key = (ev.get("pid"), ev.get("fd"))
        if ev.get("op") == "write":
            written.add(key)
        elif ev.get("op") in ("fsync", "fdatasync", "close") and key in written:
            out.append(ev)
            if ev.get("op") == "close":
                written.discard(key)
    return out


def _pair(a: Leg, b: Leg, spans: dict[int, list[Span]], writes: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Violations between two concurrent, timed legs: overlapping lock holds, writes under the other's lock."""
    out = [{"kind": "lock_overlap", "legs": [a.index, b.index], "spans": [vars(sa), vars(sb)],
            "detail": "two processes held the run lock at the same time"}
           for sa in spans[a.index] for sb in spans[b.index] if _overlap(sa.start, sa.end, sb.start, sb.end)]
    return out + [{"kind": "write_under_foreign_lock", **_ev(ev, x), "holder_leg": y.index,
                   "detail": f"leg {x.index} changed the journal while leg {y.index} held the lock"}
                  for x, y in ((a, b), (b, a)) for ev in writes[x.index] if _held_at(spans[y.index], ev.get("t"))]


def _held_at(spans: list[Span], t: int | None) -> bool:
    """True when one of ``spans`` (another process's lock holds) covers time ``t``."""
    return t is not None and any(s.start is not None and s.start < t and (s.end is None or t < s.end) for s in spans)
