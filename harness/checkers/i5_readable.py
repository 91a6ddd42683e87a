"""I5 the journal is always readable, with at most one torn tail.

Normative text: docs/spec.md section 15, I5 (torn tail and corruption: section 7).

How it is judged.  Every leg's journal snapshot is read in memory with
fiskj's own reader and fold (:func:`fiskj.reader.read_state` on the
bytes).  A leg with no journal, or one holding no complete record (empty,
or only a torn line: a create that died before its meta record was
acknowledged, which the next create reclaims), is noted, not judged.  A reader or fold error is a violation (``corrupt`` or
``fold_error``) naming the leg, line, byte offset and the line's bytes,
unless the whole journal is as a ``tail`` fault left it (the nemesis's
damage, listed under ``exempt``): once the engine appended past damaged
bytes, the damage is its own (a record glued onto a zero or garbage line).
Torn tails are listed per leg.  The fold is fiskj's (docs/spec.md section 8), so
a journal that goes on after an ``error``, ``budget`` or ``max_iterations``
terminal record (a resumed leg: fisk-ai resumes every run that is not
completed) is readable; a record after ``completed`` is a ``fold_error``.

Two more kinds of facts are judged here, when the history holds them:

* the reader's answers on mutated journals (``history.reader_checks``,
  the tail family): judged by :mod:`harness.checkers.i5_reader_answers`
  (violations of kind ``reader_answer``);
* the repair of a tail mutation (docs/spec.md section 9, rule 4: a torn
  tail is cut before the next append): a ``tail`` fault whose detail holds
  the mutation's ``good_size`` (the bytes the reader keeps) is followed by
  a leg whose journal keeps bytes ``[0, good_size)`` unchanged
  (``repair_changed_kept_bytes``) and, when that leg is the last, a final
  journal with no torn tail left (``torn_tail_left``: new records glued to
  the torn bytes, defect 1 of docs/spec.md section 16).

A ``jsonl`` journal (:class:`~harness.checkers.journal_view.JournalView` not ``decoded``; docs/subject.md "Journal
formats") is read at line level, with no fold: every complete line must be
one JSON value (``corrupt`` otherwise, first per snapshot), a final line
that is incomplete or not one is its torn tail, and the repair rule applies as above.

An opaque store (docs/subject.md "Journal formats") is not read at all: after each crash or damage, the next
leg the nemesis left alone resumes to the run's end, or refuses (exit error or usage, a message on standard
error) and leaves the store's bytes as they were (:func:`_check_opaque`).

``checked`` counts the snapshots read plus the answers and repairs judged.
"""

from __future__ import annotations

from io import BufferedReader, BytesIO
from typing import Any

from fiskj.errors import FiskjError
from fiskj.reader import JournalReader, read_state

from harness.history.journal_location import store_files
from harness.names import VOLATILE
from harness.history.model import History
from harness.names import EXIT_COMPLETED, EXIT_ERROR, EXIT_USAGE
from harness.checkers.verdict import INVALID, VALID, make
from harness.checkers._common import crash_kind, is_tail, legs_in_order, nemesis_prefix_holds, same_saved_state
from harness.checkers._trace import events
from harness.checkers.journal_view import JournalView
from harness.checkers.i5_reader_answers import reader_violations


def _holds_no_record(view: JournalView, data: bytes) -> bool:
    """True when fiskj's reader finds no complete record in ``data`` (and no corruption before one);
    for a journal whose records are not decoded (``jsonl``), when it holds no complete line."""
    if not view.decoded:
        return b"\n" not in data
    try:
        for _ in JournalReader(BufferedReader(BytesIO(data))):  # type: ignore[arg-type]
            return False
    except FiskjError:
        return False
    return True


def _repairs(view: JournalView) -> tuple[int, list[dict[str, Any]]]:
    """``(repairs judged, violations)``: each tail mutation with a ``good_size`` and the leg after it."""
    legs = legs_in_order(view.history)
    checked, out = 0, []
    for leg, nxt in zip(legs, legs[1:]):
        good = leg.fault.detail.get("good_size") if leg.fault.kind == "tail" else None
        if not isinstance(good, int):
            continue
        checked += 1
        kept, after = (leg.journal or b"")[:good], (nxt.journal or b"")[:good]
        row: dict[str, Any] = {"leg": nxt.index, "fault_leg": leg.index, "good_size": good,
                               "mutation": leg.fault.detail.get("mutation")}
        if after != kept:
            out.append({"kind": "repair_changed_kept_bytes", **row,
                        "detail": f"repair: the kept bytes [0, {good}) changed"})
        elif nxt is legs[-1] and (torn := _final_torn_tail(view, nxt.journal)):
            out.append({"kind": "torn_tail_left", **row, "torn_tail": torn,
                        "detail": f"repair: the resumed journal still ends in a torn tail {torn}"})
    return checked, out


def _clean_exits_with_torn_tails(view: JournalView, torn: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Legs that wrote the journal, exited by themselves (no signal, no fault after them, alone in time)
    and left it ending in a torn tail: only a crash leaves a partial line, so the engine frames its records
    so that its own last line reads as torn (a missing final newline, a record split over writes)."""
    out = []
    legs = legs_in_order(view.history)
    for row in torn:
        leg = next(lg for lg in legs if lg.index == row["leg"])
        alone = not any(o is not leg and o.t_end and leg.t_end and o.t_start < leg.t_end and leg.t_start < o.t_end
                        for o in legs)
        wrote = any(ev.get("op") == "write" and not ev.get("error") and view.is_journal(ev.get("path"))
                    for ev in events(leg))
        if (leg.exit_signal is None and leg.exit_code is not None and not leg.timed_out and alone and wrote
                and leg.fault.kind not in ("tail", "power_loss")
                and not (leg.fault.injected and leg.fault.kind != "suspend")  # a suspend ends at a boundary
                and not view.history.promises.aborts(leg)):  # unless the subject aborts on that signal
            out.append({"kind": "torn_tail_after_clean_exit", "leg": leg.index, "exit_code": leg.exit_code,
                        "torn_tail": {k: row[k] for k in ("offset", "length") if k in row},
                        "detail": f"leg {leg.index} exited {leg.exit_code} by itself, yet its journal ends in a "
                                  f"torn tail at offset {row.get('offset')}: only a crash leaves a partial line"})
    return out


def _final_torn_tail(view: JournalView, journal: bytes | None) -> Any:
    """The torn tail the final journal still ends in, else ``None``: the fold's (fisk-ai v2), or for a
    ``jsonl`` journal its last line when it has no newline (``{"offset", "length"}``)."""
    if view.decoded:
        return (view.history.final_state or {}).get("torn_tail")
    lines = view.lines(journal).lines
    if lines and (not lines[-1].complete or lines[-1].record is None):
        return {"offset": lines[-1].offset, "length": len(lines[-1].raw)}
    return None


def _read_lines(view: JournalView, leg: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Read a ``jsonl`` snapshot at line level: ``(corrupt line row or None, torn tail or None)``.

    Every line but the last must be one JSON value; a final line that is incomplete or is not one is the
    torn tail (as fiskj's reader: docs/spec.md section 7)."""
    snap = view.at(leg)
    torn = None
    for ln in snap.lines:
        if ln is snap.lines[-1] and (not ln.complete or ln.record is None):
            torn = {"leg": leg.index, "offset": ln.offset, "length": len(ln.raw), "good_size": ln.offset}
        elif ln.record is None:
            return {"kind": "corrupt", "leg": leg.index, "error": f"not one JSON value: {ln.error}", "line": ln.number,
                    "offset": ln.offset, "journal_bytes": len(snap.data), "fault": leg.fault.kind,
                    "text": ln.brief()["excerpt"], "_end": ln.end}, None
    return None, torn


def _check_opaque(history: History) -> Any:
    """I5 for an opaque store (module docstring; docs/spec.md section 15, "Opaque stores"): violations
    ``not_resumed`` (it died, hung or exited otherwise), ``refused_silently`` (no message on standard error)
    and ``refused_changed_store`` (the files it changed, by relative path; not judged while another leg ran)."""
    legs, violations, checked = legs_in_order(history), [], 0
    ends = {EXIT_COMPLETED, history.reference.exit_code if history.reference is not None else EXIT_COMPLETED}
    for prev, leg in zip(legs, legs[1:]):
        if (crash_kind(prev, history.promises) is None and not is_tail(prev)) or leg.fault.injected:
            continue  # (a leg the nemesis disturbed ended as the nemesis made it)
        checked += 1
        row = {"leg": leg.index, "after": prev.index, "fault": prev.fault.kind, "exit_code": leg.exit_code,
               "stderr": (leg.stderr or "")[-300:]}
        if leg.exit_code in ends and not leg.timed_out:
            continue
        if leg.exit_code not in (EXIT_ERROR, EXIT_USAGE) or leg.timed_out:
            how = ("hung" if leg.timed_out else f"signal {leg.exit_signal}" if leg.exit_signal
                   else f"exit {leg.exit_code}")
            violations.append({"kind": "not_resumed", **row, "detail": (
                f"after the {prev.fault.kind} of leg {prev.index} the agent neither resumed nor refused ({how})")})
            continue
        if not (leg.stderr or "").strip():
            violations.append({"kind": "refused_silently", **row, "detail": (
                f"leg {leg.index} refused the store the {prev.fault.kind} of leg {prev.index} left "
                f"(exit {leg.exit_code}) and said nothing on standard error")})
        was, now = ({k: v for k, v in store_files(d).items() if not k.endswith(VOLATILE)}
                    for d in (prev.journal, leg.journal))
        alone = not any(o is not leg and o.t_start < leg.t_end and leg.t_start < o.t_end for o in legs)
        changed = sorted(k for k in was.keys() | now.keys() if was.get(k) != now.get(k)) \
            if alone and not same_saved_state(history, leg) else []
        if changed:
            violations.append({"kind": "refused_changed_store", **row, "files": changed, "detail": (
                f"leg {leg.index} exited {leg.exit_code} (a refusal or an error) and changed the store: "
                f"{', '.join(changed[:5])}")})
    evidence: dict[str, Any] = {"checked": checked}
    if violations:
        evidence["summary"] = (f"{len(violations)} recovery leg(s) neither resumed nor refused cleanly: "
                               f"{violations[0]['detail']}")
        return make(__name__, INVALID, {**evidence, "violations": violations})
    evidence["summary"] = (f"after each of {checked} crash(es) or damage the agent resumed, or refused cleanly "
                           "(opaque store: not read)")
    return make(__name__, VALID, evidence)


def check(history: History) -> Any:
    """Judge I5 (docs/spec.md section 15; reading: section 7) on ``history``: its snapshots, reader answers and repairs."""
    violations: list[dict[str, Any]] = []
    exempt: list[dict[str, Any]] = []
    torn: list[dict[str, Any]] = []
    noted: list[dict[str, Any]] = []
    checked = 0
    if history.journal.is_store:
        return _check_opaque(history)
    view = JournalView(history)
    for leg in legs_in_order(history):
        data = leg.journal
        if data is None or _holds_no_record(view, data):
            noted.append({"leg": leg.index, "journal": "absent" if data is None else f"no complete record ({len(data)} bytes)"})
            continue
        checked += 1
        if not view.decoded:
            bad, tail = _read_lines(view, leg)
            if tail is not None:
                torn.append(tail)
            if bad is not None:
                bad.pop("_end")
                if nemesis_prefix_holds(history, leg, len(data)):  # nothing appended past the damage
                    exempt.append({**bad, "why": "the journal is as a tail fault left it, nothing appended since"})
                else:
                    violations.append(bad)
            continue
        try:
            state = read_state(data)
        except FiskjError as exc:
            line = _line_at(view.at(leg), exc)
            row: dict[str, Any] = {
                "kind": "fold_error" if "Consistency" in type(exc).__name__ else "corrupt",
                "leg": leg.index, "error": f"{type(exc).__name__}: {exc.message}",
                "line": exc.line if exc.line is not None else (line.number if line else None),
                "offset": exc.offset if exc.offset is not None else (line.offset if line else None),
                "journal_bytes": len(data), "fault": leg.fault.kind,
            }
            if line is not None:
                row["text"] = line.brief()["excerpt"]
                if nemesis_prefix_holds(history, leg, len(data)):  # nothing appended past the damage
                    exempt.append({**row, "why": "the journal is as a tail fault left it, nothing appended since"})
                    continue
            violations.append(row)
            continue
        if state.torn_tail is not None:
            torn.append({"leg": leg.index, **state.torn_tail.to_json(), "good_size": state.good_size})
    repaired, repairs = _repairs(view)
    repairs = _clean_exits_with_torn_tails(view, torn) + repairs
    answered, answers = reader_violations(history)
    evidence: dict[str, Any] = {"checked": checked + repaired + answered, "torn_tails": torn}
    if not view.decoded:
        evidence["journal_format"] = view.format
        evidence["not_judged"] = f"journal format {view.format}: read at line level only (no fold)"
    if answered:
        evidence["reader_checked"] = answered
    if repaired:
        evidence["repairs_checked"] = repaired
    if noted:
        evidence["not_judged"] = noted
    if exempt:
        evidence["exempt"] = exempt
    if violations or repairs or answers:
        parts = []
        if violations:
            parts.append(f"{len(violations)} unreadable journal snapshot(s): " + "; ".join(
                f"leg {v['leg']} line {v['line']} offset {v['offset']}: {_brief(v['error'])}" for v in violations[:3]))
        if repairs:
            parts.append("; ".join(v["detail"] for v in repairs[:3]))
        if answers:
            parts.append(f"{len(answers)} wrong reader answer(s): " + "; ".join(v["reason"] for v in answers[:3]))
        evidence["summary"] = "; ".join(parts)
        evidence["violations"] = violations + repairs + answers
        return make(__name__, INVALID, evidence)
    how = "read and folded" if view.decoded else "read line by line (each line one JSON value)"
    evidence["summary"] = f"{checked} journal snapshot(s) {how}; {len(torn)} torn tail(s) dropped" + (
        f"; {repaired} torn tail(s) repaired" if repaired else "") + (
        f"; {answered} reader answer(s) as labelled" if answered else "")
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


def _brief(error: str, most: int = 160) -> str:
    """``error`` whole when short, else cut at a word with an ellipsis (never mid-number: "line 1 column 5")."""
    return error if len(error) <= most else error[:most].rsplit(" ", 1)[0] + " ..."
