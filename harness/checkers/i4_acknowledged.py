"""I4 no acknowledged record is lost.

Normative text: docs/spec.md section 15, I4 (acknowledged: section 9).

How it is judged.  From each leg's IO-seam trace, the journal lines the leg
wrote and then fsynced are its acknowledged records (decoded for their seq).
Each must be present, byte-identical, at the same seq in the snapshot of
that leg and of every later leg (a snapshot taken before the ack is not
asked), hence also in the final journal.  Violations:

* ``lost``: no line at that seq in a later snapshot;
* ``changed``: a line at that seq, but different bytes;
* ``seq_reacknowledged``: two different lines acknowledged at one seq;
* ``append_not_synced``: the durability rule itself (docs/spec.md section 9,
  rule 1: an append is one write, then an fsync of the journal): a journal write with no
  fsync attempt before the same process writes again, closes the journal
  or exits cleanly.  Such an engine acknowledges nothing, so without this
  rule it would pass vacuously; a killed leg's last write is exempt;
* ``truncated_acknowledged``: the journal cut (``ftruncate``, an ``O_TRUNC``
  open) below the end of a line acknowledged before, even if the same bytes
  are written back later (a reader that took good records for a torn tail);
* ``io_error_swallowed``: after a write or fsync of the journal failed
  (an injected IO error, docs/spec.md section 9), the same leg wrote or
  fsynced the journal again with success (a retried fsync that then claims
  success, an append past a hole), or ended the run as completed (exit 0):
  what failed was treated as acknowledged.

A ``lost``/``changed`` violation names the leg whose snapshot lacks it, the
ack (leg, pid, trace ``n`` of the write and fsync, offset) and, where the
bytes survive glued inside another line (defect 1, docs/spec.md section 16) or a later
leg's trace truncated the journal below its end (``ftruncate``, ``O_TRUNC``:
defect 3), that too.  A ``tail`` fault's destroyed records are the
nemesis's doing: records it removed are listed as ``destroyed_by_fault``
and no longer expected.  The run's own ``unlink`` of the journal (a
delete, or create removing a journal whose first append failed) retires
every record acknowledged before it (``retired_by_unlink``), and so does the
nemesis deleting a JetStream run while a leg was held after its call ``n``
(fault detail ``run_deleted_after_n``, docs/jetstream.md "Two writers of one
run"): the leg's records acknowledged after that must still be in the run.  With no
trace at all the verdict is unknown.

A ``jsonl`` journal (:class:`~harness.checkers.journal_view.JournalView` not ``decoded``; docs/subject.md "Journal
formats") has no seq: an acknowledged line is known by its byte offset and
must stay there, byte for byte and a whole line of its own (bytes glued
after a torn tail are ``changed``; ``offset_reacknowledged`` for two
different lines acknowledged at one offset).  An acknowledged line whose offset the
trace does not give makes the verdict unknown.

An opaque store (docs/subject.md "Journal formats") is judged from the agent's own reading instead
(:func:`_check_opaque`): what it acted on survives every crash its store promises to survive.

A power-loss crash state (``history.crash_state``, recorded by the
power-loss family; docs/persistence-model.md) is judged on the state
instead: a write of the journal (the crash state holds every file the agent wrote; only the journal's
lines are records) is acknowledged once the trace shows its call returned
(the crash model's :class:`~harness.history.model.CrashAck` s), and each
must be in the state, byte for byte, in a file that still has the inode it
was written to (:func:`lost_acknowledged`).
Violations are ``lost`` with the model's message as ``detail``, and
``lost_by_recovery`` when a journal line the state kept is not in the
final journal at its offset, byte for byte, after the recovery legs (a
recovery that cuts below acknowledged bytes); the evidence carries the
state's summary (``state``).  The legs of such a
history are not judged by the fsync rule: the crash model decides what the
leg that lost power had acknowledged (a correct writer's window between its
fsync and its directory fsync is no loss), and its trace is cut at the
crash point.
"""

from __future__ import annotations

import base64
import functools
import json
from dataclasses import replace
from typing import Any

from harness.history.model import CrashAck, CrashStateFacts, History, Leg
from harness.checkers.verdict import INVALID, UNKNOWN, VALID, make
from harness.checkers._common import crash_kind, is_tail, legs_in_order
from harness.checkers._trace import Ack, events, traced, unsynced_appends
from harness.checkers.journal_view import JournalView

#: The name of an acknowledged line's key in evidence: its seq (fisk-ai v2), or its byte offset (jsonl).
_KEY = {False: "seq", True: "offset"}


def _due(ack: Ack, acker: Leg, snap_leg: Leg) -> bool:
    """True when ``snap_leg``'s snapshot was taken after ``ack`` was acknowledged."""
    if acker.index == snap_leg.index:
        return True
    if ack.t is not None and snap_leg.t_end:
        return ack.t <= snap_leg.t_end
    if acker.t_end and snap_leg.t_end:
        return acker.t_end <= snap_leg.t_end and acker.index <= snap_leg.index
    return acker.index < snap_leg.index


def _truncations(view: JournalView, legs: list[Leg], ack: Ack) -> list[dict[str, Any]]:
    out = []
    for leg in legs:
        if leg.index < ack.leg:
            continue
        for ev in events(leg):
            if not view.is_journal(ev.get("path")) or ev.get("error"):
                continue
            if leg.index == ack.leg and ev.get("n", 0) <= ack.fsync_n:
                continue
            if ev.get("op") == "ftruncate" and (ack.end is None or ev.get("length", 0) < ack.end):
                out.append({"leg": leg.index, "pid": ev["pid"], "n": ev.get("n"), "op": "ftruncate",
                            "length": ev.get("length")})
            elif ev.get("op") == "open" and "O_TRUNC" in (ev.get("flags") or []):
                out.append({"leg": leg.index, "pid": ev["pid"], "n": ev.get("n"), "op": "open O_TRUNC"})
    return out


@functools.lru_cache(maxsize=4096)  # the same acknowledged lines recur in every later crash state
def _record_name(data: bytes) -> str:
    """``"record seq 7 (tool_result) "`` when ``data`` is one fisk-ai v2 line; for the JSON objects of a jsonl
    journal their own type and id, ``"lines user 5c1e..., assistant 9f0a... "``; else ``""`` (pure)."""
    names = []
    for line in data.split(b"\n"):
        try:
            obj = json.loads(line) if line.strip() else None
        except ValueError:
            return ""
        if obj is None:
            continue
        if not isinstance(obj, dict):
            return ""
        if "seq" in obj:
            kind = str(obj.get("protocol", "")).rsplit(".", 1)[-1] or "?"
            return f"record seq {obj['seq']} ({kind}) "
        names.append(" ".join(str(obj[k])[:36] for k in ("type", "subtype", "uuid") if isinstance(obj.get(k), str))
                     or "JSON")
    return f"line{'s' if len(names) > 1 else ''} {', '.join(names)} " if names else ""


def _why_gone(state: CrashStateFacts, path: str) -> str:
    """Which lost name operations took ``path`` away: a folder above it whose entry was never made durable
    (``mkdir``), or the file's own entry (``create``, ``rename``), as the crash state recorded them."""
    above = [e for e in state.lost_entries if e.startswith("mkdir ") and path.startswith(e[len("mkdir "):] + "/")]
    if above:
        return f"the entry of a folder above it was not made durable: lost {', '.join(above)}"
    own = [e for e in state.lost_entries if e.split(" ", 1)[-1].split(" -> ")[-1] == path]
    return (f"its directory entry was not made durable: lost {', '.join(own)}" if own
            else "its directory entry was not made durable")


def lost_acknowledged(state: CrashStateFacts) -> list[str]:
    """The acknowledged writes missing from crash ``state`` (empty when I4 holds; docs/persistence-model.md),
    one message each: the file, the record (when the bytes are one journal line), the bytes, the write and
    the fsync that acknowledged it, and what the file holds there after the power loss.  A write is in the
    state when a path that still has the inode it was written to holds its bytes at its offset."""
    out = []
    named: dict[int, list[str]] = {}  # inode -> the paths that have it
    for p, i in state.inodes.items():
        named.setdefault(i, []).append(p)

    def where(ack: CrashAck) -> str:
        synced = f", acknowledged by n={ack.claimed}" if ack.claimed else ""
        return (f"{ack.path}: {_record_name(ack.data)}bytes {ack.offset}..{ack.end} acknowledged "
                f"(write n={ack.n}{synced})")

    for ack in state.acks:
        paths = named.get(ack.ino, [])
        if not paths:
            out.append(f"{where(ack)} but the file is gone ({_why_gone(state, ack.path)})")
        elif not any(state.files[p][ack.offset:ack.end] == ack.data for p in paths):
            size = max(len(state.files[p]) for p in paths)
            what = (f"the file ends at byte {size}" if size <= ack.offset
                    else "the file holds other bytes there")
            out.append(f"{where(ack)} but not in the file: {what} (it was not durable when the power went)")
    return out


def _check_crash_state(state: CrashStateFacts, history: History | None = None) -> Any:
    if history is not None:  # the agent's journal is what it promises to keep; its other files are judged elsewhere
        view = JournalView(history)
        state = replace(state, acks=[a for a in state.acks if view.is_journal(a.path)])
    lost = lost_acknowledged(state)
    cut = _lost_by_recovery(state, JournalView(history), lost) if history is not None else []
    summary = (f"{len(lost)} acknowledged write(s) missing from crash state {state.id}: {lost[0]}" if lost
               else f"{len(cut)} acknowledged write(s) of crash state {state.id} destroyed by its recovery: "
                    f"{cut[0]['detail']}" if cut
               else f"all {len(state.acks)} acknowledged write(s) present in crash state {state.id}"
                    + (" and after its recovery" if history is not None and _recovered(history) else ""))
    evidence: dict[str, Any] = {"summary": summary, "checked": len(state.acks), "state": state.describe()}
    if lost or cut:
        evidence["violations"] = [{"kind": "lost", "detail": d} for d in lost] + cut
        return make(__name__, INVALID, evidence)
    return make(__name__, VALID, evidence)


def _recovered(history: History) -> Leg | None:
    """The last leg after the crash that left a journal snapshot (the recovery), or ``None``."""
    legs = [leg for leg in sorted(history.legs, key=lambda lg: lg.index) if leg.index >= 1 and leg.journal is not None]
    return legs[-1] if legs else None


def _lost_by_recovery(state: CrashStateFacts, view: JournalView, lost: list[str]) -> list[dict[str, Any]]:
    """``lost_by_recovery``: a journal line acknowledged before the crash and present in the crash state that
    the recovery (the legs after the crash) did not keep, byte for byte at its offset, in the final journal."""
    leg = _recovered(view.history)
    if leg is None or lost:
        return []
    out = []
    for ack in state.acks:
        if not view.is_journal(ack.path) or state.files.get(ack.path, b"")[ack.offset:ack.end] != ack.data:
            continue  # not the journal, or not in the crash state (the model's own judgement, above)
        now = leg.journal[ack.offset:ack.end] if leg.journal is not None else b""
        if now != ack.data:
            out.append({"kind": "lost_by_recovery", "leg": leg.index, "offset": ack.offset, "end": ack.end,
                        "detail": f"bytes {ack.offset}..{ack.end} acknowledged before the crash and present "
                                  f"after it are {'gone' if len(now) < ack.end - ack.offset else 'changed'} after "
                                  f"leg {leg.index}'s recovery (journal now {len(leg.journal or b'')} bytes)"})
    return out


def _cut_below_acks(view: JournalView, leg: Leg, expected: dict[Any, tuple[Ack, Leg]],
                    by_offset: bool) -> list[dict[str, Any]]:
    """``truncated_acknowledged``: an ``ftruncate`` (or ``O_TRUNC`` open) of the journal by ``leg`` below the
    end of a line acknowledged before it.  Even when the same bytes are written back afterwards (a resume
    that re-reads a shorter journal and re-does the work), acknowledged bytes were destroyed: a crash in
    between loses them.  Cutting a torn tail never goes below the last acknowledged line."""
    out: list[dict[str, Any]] = []
    for ev in events(leg):
        if not view.is_journal(ev.get("path")) or ev.get("error"):
            continue
        if ev.get("op") == "ftruncate" and ev.get("length") is not None:
            length = ev["length"]
        elif ev.get("op") == "open" and "O_TRUNC" in (ev.get("flags") or ()):
            length = 0
        else:
            continue
        n = ev.get("n", 0)
        cut = [a for a, acker in expected.values() if a.end is not None and a.end > length
               and (a.leg < leg.index or (a.leg == leg.index and a.fsync_n < n))]
        if cut:
            first = min(cut, key=lambda a: a.offset or 0)
            where = f"offset {first.offset}" if by_offset else f"seq {first.seq}"
            out.append({"kind": "truncated_acknowledged", "leg": leg.index, "op": ev.get("op"), "n": n,
                        "length": length, "acknowledged_cut": len(cut), "first": first.brief(),
                        "detail": f"leg {leg.index} cut the journal to {length} bytes ({ev.get('op')} n={n}), below "
                                  f"{len(cut)} acknowledged line(s) from {where} on"})
            break
    return out


def _swallowed_io_errors(view: JournalView, leg: Leg) -> list[dict[str, Any]]:
    """The leg's journal calls that succeeded after an injected IO error on the journal, and a completed exit."""
    trace = list(events(leg))
    failed = next((ev for ev in trace if ev.get("fault") and ev.get("error") and ev.get("op") in ("write", "fsync")
                   and view.is_journal(ev.get("path"))), None)
    if failed is None:
        return []
    out = []
    after = trace[trace.index(failed) + 1:]
    for ev in after:
        if ev.get("op") in ("write", "fsync") and not ev.get("error") and view.is_journal(ev.get("path")):
            out.append({"kind": "io_error_swallowed", "leg": leg.index, "failed": _call(failed), "then": _call(ev),
                        "detail": f"leg {leg.index}: the journal's {failed.get('op')} failed with "
                                  f"{failed.get('error')} (n={failed.get('n')}), then a {ev.get('op')} of the "
                                  f"journal succeeded (n={ev.get('n')}): the failed call was treated as done"})
            break
    if leg.exit_code == 0:
        out.append({"kind": "io_error_swallowed", "leg": leg.index, "failed": _call(failed), "then": "exit 0",
                    "detail": f"leg {leg.index}: the journal's {failed.get('op')} failed with {failed.get('error')} "
                              f"(n={failed.get('n')}), yet the leg completed the run (exit 0)"})
    return out


def _overlap(a: Leg, b: Leg) -> bool:
    return bool(a.t_end and b.t_end and a.t_start < b.t_end and b.t_start < a.t_end)


def _unobserved_changes(view: JournalView, legs: list[Leg]) -> list[dict[str, Any]]:
    """:func:`_unobserved_change` of every leg.  Legs that ran at the same time (a race's held leg and its
    rival) are replayed together, their calls merged in time order, and compared once, at the end of the
    last of them (before then another one may still write)."""
    out = []
    for i, leg in enumerate(legs):
        group = [o for o in legs if o is leg or _overlap(o, leg)]
        if len(group) > 1 and max(o.t_end for o in group) != leg.t_end:
            continue  # not the last of its group to end
        first = min(legs.index(o) for o in group)
        prev = legs[first - 1] if first > 0 else None
        u = _unobserved_change(view, prev, leg, group)
        if u:
            out.append(u)
    return out


def _unobserved_change(view: JournalView, prev: Leg | None, leg: Leg,
                       group: list[Leg] | None = None) -> dict[str, Any] | None:
    """For a leg observed from outside: the journal bytes its observed writes, truncations and
    ``O_TRUNC`` opens make from what it found (the previous snapshot), when they differ from its own
    snapshot (a write the observer did not see: ``mmap``, io_uring, a rename onto the journal); else ``None``.
    ``group``: the legs that ran at the same time as it (itself included), whose calls are replayed
    together in time order.  A write its process was SIGKILLed inside (``error: KILLED``, its bytes never
    logged) wrote some prefix of its ``count`` bytes or none: the bytes on disk in that range decide which,
    so identical runs give one verdict whatever the kernel did.  Legs whose journal a fault replaced (tail, power loss) are not checked."""
    members = group or [leg]
    trace = list(events(leg))
    if not trace or "seq" not in trace[0] or leg.fault.kind in ("tail", "power_loss") or leg.journal is None:
        return None
    if len(members) > 1:
        if any(o.fault.kind in ("tail", "power_loss") or not o.trace for o in members):
            return None
        trace = sorted((ev for o in members for ev in events(o)), key=lambda ev: ev.get("t0", ev.get("t", 0)))
    data = bytearray(prev.journal or b"") if prev is not None else bytearray()
    killed: list[tuple[int, int]] = []
    for ev in trace:
        if not view.is_journal(ev.get("path")) or (ev.get("error") and ev.get("op") != "write"):
            continue
        op = ev.get("op")
        if op == "write" and ev.get("error") == "KILLED" and ev.get("offset") is not None:
            killed.append((ev["offset"], int(ev.get("count") or 0)))  # its bytes were never logged
            continue
        if op == "open" and "O_TRUNC" in (ev.get("flags") or ()):
            del data[:]
        elif op == "open" and ev.get("created"):
            del data[:]
        elif op == "ftruncate" and ev.get("length") is not None:
            del data[ev["length"]:]
            data.extend(bytes(max(0, ev["length"] - len(data))))
        elif op == "write" and ev.get("offset") is not None:
            chunk = base64.b64decode(ev.get("data") or "")
            off = ev["offset"]
            data.extend(bytes(max(0, off - len(data))))
            data[off:off + len(chunk)] = chunk
        elif op in ("rename", "unlink", "link"):
            return None  # the journal's name moved: the replay cannot follow it
    for off, count in killed:  # SIGKILL inside write(2): the kernel wrote some prefix of it, decided on disk
        off = off if off >= 0 else len(data)  # -1: an O_APPEND write, whose offset is the file's end
        k = max(0, min(count, len(leg.journal) - off))
        data.extend(bytes(max(0, off + k - len(data))))
        data[off:off + k] = leg.journal[off:off + k]
    if bytes(data) == leg.journal:
        return None
    at = next((i for i, (a, b) in enumerate(zip(data, leg.journal)) if a != b), min(len(data), len(leg.journal)))
    return {"leg": leg.index, "expected_bytes": len(data), "journal_bytes": len(leg.journal), "first_difference": at,
            "detail": f"{len(leg.journal)} bytes on disk, {len(data)} from the observed calls, first difference "
                      f"at offset {at}"}


def _call(ev: dict[str, Any]) -> dict[str, Any]:
    return {k: ev.get(k) for k in ("n", "op", "pid", "error", "fault", "offset", "len") if ev.get(k) is not None}


def _check_opaque(history: History) -> Any:
    """I4 for an opaque store (docs/spec.md section 15, "Opaque stores"): after each leg (a crash: before the
    next resume) the agent's reading holds every tool_use id whose result it sent to the model (the requests of
    the model-call log up to that leg) and the final answer the leg printed (``acted_on_lost``, ``answer_lost``,
    ``run_lost``, ``unreadable``: its reading command fails).  Work done before a ``tail`` fault is not owed
    after it; a leg with no usable reading after it leaves the verdict unknown.  (A store that promises to survive
    a process crash only is never power-lost: the power-loss family does not run for it.)"""
    view = JournalView(history)
    want = history.reference.printed_answer if history.reference is not None else ""
    violations, unread, excused, since, checked = [], [], [], -1, 0
    for leg in legs_in_order(history):
        kind = crash_kind(leg, history.promises)
        if is_tail(leg):
            excused.append({"leg": leg.index, "why": "a tail fault"})
            since = leg.index
            continue
        acted = {t: c.index for c in history.model_calls if since < c.leg <= leg.index for t in c.sent_results}
        printed = bool(want) and want in (leg.stdout or "")
        if (not acted and not printed) or (leg.reading is None and kind is None):
            continue  # (a leg that did not crash and was not read: the next crash's reading holds it all)
        checked += 1
        held, r = view.held(leg), leg.reading or {}
        row = {"leg": leg.index, "crash": kind or "none"}
        if held is None and r.get("exit_code") not in (None, 0):  # the agent itself cannot read what it acted on
            violations.append({"kind": "unreadable", **row, "acted_on": sorted(acted), "error": r.get("error"),
                               "stderr": str(r.get("stderr", ""))[-300:], "detail": (
                f"leg {leg.index} acted on the run, and the agent's own reading after the "
                f"{'crash' if kind else 'leg'} fails: {r.get('error')}")})
        elif held is None:
            unread.append({**row, "why": r.get("error") or "no reading after the leg"})
        elif r.get("status") is None:
            violations.append({"kind": "run_lost", **row, "acted_on": sorted(acted), "detail": (
                f"leg {leg.index} acted on the run (it sent {len(acted)} tool result(s) to the model), and its "
                f"reading after the {'crash' if kind else 'leg'} has no such run")})
        else:
            lost = sorted(t for t in acted if t.encode() not in held)
            if lost:
                violations.append({"kind": "acted_on_lost", **row, "tool_use_ids": lost,
                                   "model_calls": sorted({acted[t] for t in lost}), "detail": (
                    f"leg {leg.index} sent the result(s) of {', '.join(lost)} to the model, and its reading after the "
                    f"{'crash' if kind else 'leg'} does not list them in tool_results")})
            if printed and not (isinstance(r.get("answer"), str) and want in r["answer"]):
                violations.append({"kind": "answer_lost", **row, "want_tail": want[-80:], "answer": r.get("answer"),
                                   "detail": f"leg {leg.index} printed the final answer, and its reading after the "
                                             f"{'crash' if kind else 'leg'} does not hold it"})
    evidence: dict[str, Any] = {"checked": checked, **({"excused": excused} if excused else {}),
                                **({"unread": unread} if unread else {})}
    if violations:
        evidence["summary"] = (f"{len(violations)} leg(s) whose reading lost what the agent acted on: "
                               f"{violations[0]['detail']}")
        return make(__name__, INVALID, {**evidence, "violations": violations})
    if unread:
        return make(__name__, UNKNOWN, {**evidence, "reason": "no usable reading", "summary": (
            f"{len(unread)} leg(s) acted on the run and left no usable reading: {unread[0]['why']}")})
    evidence["summary"] = (f"what the agent acted on is in its reading after each of {checked} leg(s)" if checked
                           else "the agent acted on nothing (no tool result sent, no answer printed)")
    return make(__name__, VALID, evidence)


def check(history: History) -> Any:
    """Judge I4 (docs/spec.md section 15; durability rules of section 9) on ``history``.

    Acknowledged records across the legs (from their traces and snapshots),
    or, when the history holds a power-loss crash state, acknowledged
    writes in that state (see the module docstring).
    """
    if history.journal.is_store:
        return _check_opaque(history)
    if history.crash_state is not None:
        return _check_crash_state(history.crash_state, history)
    legs = legs_in_order(history)
    view = JournalView(history)
    if not traced(history):
        return make(__name__, UNKNOWN, {
            "summary": "no leg left an IO-seam trace: acknowledged records cannot be known",
            "reason": "no trace", "checked": 0})
    acks_by_leg = {leg.index: view.acknowledged(leg) for leg in legs}
    ackers = {leg.index: leg for leg in legs}
    by_offset = not view.decoded  # a jsonl journal: a line is known by where it lies
    expected: dict[int, tuple[Ack, Leg]] = {}
    violations: list[dict[str, Any]] = []
    destroyed: list[dict[str, Any]] = []
    retired: list[dict[str, Any]] = []
    unplaced: list[dict[str, Any]] = []
    reported: set[int] = set()
    total = 0
    for snap_leg in legs:
        for ack in acks_by_leg[snap_leg.index]:
            total += 1
            key = ack.offset if by_offset else ack.seq
            if key is None:
                if by_offset:  # the trace did not say where the write landed
                    unplaced.append(ack.brief())
                else:
                    violations.append({"kind": "undecodable_ack", "ack": ack.brief(),
                                       "detail": "an acknowledged journal line does not decode as a record"})
                continue
            old = expected.get(key)
            if old is not None and old[0].line != ack.line:
                kind, what = ("offset_reacknowledged", f"offset {key}") if by_offset else ("seq_reacknowledged", f"seq {key}")
                violations.append({"kind": kind, _KEY[by_offset]: key, "first": old[0].brief(), "second": ack.brief(),
                                   "detail": f"two different lines were acknowledged at {what}"})
                continue
            expected.setdefault(key, (ack, ackers[ack.leg]))
        unlinks = [ev.get("n", 0) for ev in events(snap_leg) if ev.get("op") == "unlink" and not ev.get("error")
                   and view.is_journal(ev.get("path"))]
        deleted = snap_leg.fault.detail.get("run_deleted_after_n") if snap_leg.fault.injected else None
        if isinstance(deleted, int):  # the nemesis deleted the run while the leg was held after that call
            unlinks.append(deleted)
        if unlinks:
            for key in [k for k, (a, _) in expected.items() if not (a.leg == snap_leg.index and a.fsync_n > max(unlinks))]:
                retired.append({_KEY[by_offset]: key, "unlink_leg": snap_leg.index, "unlink_n": max(unlinks)})
                del expected[key]
        violations += _cut_below_acks(view, snap_leg, expected, by_offset)
        snap = view.at(snap_leg)
        for key in sorted(expected):
            ack, acker = expected[key]
            if not _due(ack, acker, snap_leg):
                continue
            if by_offset:  # the same bytes, as a whole line of its own (not glued to what precedes it)
                if snap.data[key:key + len(ack.line)] == ack.line and (key == 0 or snap.data[key - 1] == 0x0A):
                    continue
                lines = [ln for ln in snap.lines if ln.offset <= key < ln.end]
            else:
                lines = snap.by_seq(key)
                if any(ln.raw == ack.line for ln in lines):
                    continue
            if snap_leg.fault.kind == "tail":
                destroyed.append({_KEY[by_offset]: key, "fault_leg": snap_leg.index, "ack": ack.brief()})
                del expected[key]
                continue
            if key in reported:
                continue
            reported.add(key)
            row: dict[str, Any] = {"kind": "changed" if lines else "lost", _KEY[by_offset]: key, "leg": snap_leg.index,
                                   "journal_exists": snap_leg.journal is not None,
                                   "journal_bytes": len(snap_leg.journal or b""), "ack": ack.brief(),
                                   "found": [ln.brief() for ln in lines]}
            at = snap.data.find(ack.line.rstrip(b"\n"))
            if at != -1:
                host = next(ln for ln in snap.lines if ln.offset <= at < ln.end)
                row["glued_into"] = host.brief()
            cuts = _truncations(view, legs, ack)
            if cuts:
                row["truncated_by"] = cuts
            what = f"the line at offset {key}" if by_offset else f"record seq {key}"
            row["detail"] = (f"{what} acknowledged by leg {ack.leg} ({ack.op} n={ack.fsync_n}) is "
                             f"{'changed' if lines else 'missing'} in the journal after leg {snap_leg.index}")
            violations.append(row)
    power_loss_promised = history.promises.durable == "power-loss"  # the fsync rule is what power loss needs
    for leg in legs:
        violations += _swallowed_io_errors(view, leg)
        for w in unsynced_appends(history, leg) if power_loss_promised else ():
            violations.append({"kind": "append_not_synced", **w,
                               "detail": f"leg {leg.index} wrote the journal (n={w['n']}) and went on ({w['before']}) "
                                         "without an fsync: nothing it appended was ever acknowledged"})
    evidence: dict[str, Any] = {"checked": total, f"acknowledged_{_KEY[by_offset]}s": sorted(expected),
                                "untraced_legs": [lg.index for lg in legs if not lg.trace]}
    if by_offset:
        evidence["journal_format"] = view.format
    if not power_loss_promised:
        evidence["not_judged"] = ("append_not_synced: the subject promises to survive a process crash only "
                                  "([promises] durable = \"process-crash\"), and a kill keeps what was written")
    if unplaced:  # an acknowledged line nobody can look for is not a pass
        evidence.update(unplaced=unplaced, reason="write offset unknown",
                        summary=f"{len(unplaced)} acknowledged line(s) whose offset the trace does not give: "
                                "with a jsonl journal a line is found by its offset")
    if destroyed:
        evidence["destroyed_by_fault"] = destroyed
    if retired:
        evidence["retired_by_unlink"] = retired
    if violations:
        evidence["summary"] = (f"{len(violations)} durability violation(s) of the journal (acknowledged or acted on): "
                               + "; ".join(_brief(v) for v in violations[:5]))
        evidence["violations"] = violations
        return make(__name__, INVALID, evidence)
    if unplaced:
        return make(__name__, UNKNOWN, evidence)
    unobserved = _unobserved_changes(view, legs)
    if unobserved:  # the observer missed how the journal changed: what it saw proves nothing
        evidence.update(unobserved=unobserved, reason="unobserved change",
                        summary=f"the journal after leg {unobserved[0]['leg']} is not what the observed writes "
                                f"make ({unobserved[0]['detail']}): acknowledged records cannot be known")
        return make(__name__, UNKNOWN, evidence)
    evidence["summary"] = f"{total} acknowledged record(s), all present in every later journal snapshot"
    return make(__name__, VALID, evidence)


def _brief(v: dict[str, Any]) -> str:
    if v["kind"] == "append_not_synced":
        what = f" ({v['record']})" if v.get("record") else ""
        return f"leg {v['leg']} write n={v['n']}{what} not fsynced before {v['before']}"
    if v["kind"] in ("io_error_swallowed", "truncated_acknowledged"):
        return v["detail"]
    if v["kind"] == "undecodable_ack":
        return f"leg {v['ack']['leg']} acknowledged a line that is not a record (offset {v['ack'].get('offset')})"
    where = f"offset {v['offset']}" if "offset" in v else f"seq {v.get('seq')}"
    if "second" in v:  # two different lines acknowledged at one place
        return f"{where}: leg {v['first'].get('leg')} and leg {v['second'].get('leg')} acknowledged different lines"
    return f"{where} {v['kind']} after leg {v.get('leg', v.get('ack', {}).get('leg'))}"
