"""One failing trial's timeline, as data (JSON-ready) for the HTML report's script to draw: a lane per leg with its
process span, fault, journal writes, fsyncs and other journal calls, failed calls, run-lock spans, model calls
and tool effects, each marked with the violations whose evidence names it (:mod:`harness.report.marks`).
Size is bounded here (:data:`MAX_EVENTS_PER_LANE`, :data:`MAX_EXCERPT`, :data:`MAX_EVIDENCE_CHARS`,
:data:`MAX_VIOLATIONS`).  Pure: a history and its verdicts in, the timeline out."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from harness.checkers._trace import events as trace_events
from harness.checkers._trace import is_lock, lock_spans
from harness.history.journal_location import JournalLocation
from harness.history.model import History, Leg
from harness.report.marks import _int, evidence_marks

__all__ = ["MAX_EVENTS_PER_LANE", "MAX_EXCERPT", "MAX_EVIDENCE_CHARS", "MAX_VIOLATIONS", "timeline"]

#: At most this many events are drawn in one lane (marked events, faults, failed calls, model calls and
#: tool effects first; the rest sampled evenly).
MAX_EVENTS_PER_LANE = 300
#: Characters of written journal bytes kept per write event.
MAX_EXCERPT = 100
#: Characters of one violation's evidence JSON shown.
MAX_EVIDENCE_CHARS = 12000
#: Violations of one verdict listed (and marked) per trial.
MAX_VIOLATIONS = 20

_SEQ_IN_DATA = re.compile(rb'(?:^|\n)\{"seq":(\d+)')  # a record's first bytes, at a line's start
_EXIT_MEANING = {0: "completed", 1: "error/refused", 2: "usage", 3: "suspended"}


def _json_text(value: Any, limit: int = MAX_EVIDENCE_CHARS) -> str:
    text = json.dumps(value, indent=1, default=str, ensure_ascii=False)
    if len(text) > limit:
        text = text[:limit] + f"\n... ({len(text) - limit} more characters: the whole evidence is in trial.json)"
    return text


def _violations(verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trial's violations, one item per entry of each non-valid verdict's ``evidence["violations"]``
    (the whole evidence when it lists none), with their marks."""
    out: list[dict[str, Any]] = []
    for v in verdicts:
        if v.get("status") not in ("invalid", "unknown"):
            continue
        evidence = v.get("evidence")
        ev = evidence if isinstance(evidence, dict) else {}
        found = ev.get("violations")
        items = [x for x in found if isinstance(x, dict)] if isinstance(found, list) else []
        more = max(0, len(items) - MAX_VIOLATIONS)
        items = items[:MAX_VIOLATIONS] or [ev if isinstance(evidence, dict) else {"evidence": evidence}]
        for k, item in enumerate(items):
            out.append({"id": len(out), "invariant": str(v.get("invariant", "?")), "status": v.get("status"),
                        "kind": str(item.get("kind") or ev.get("reason") or v.get("status")),
                        "name": str(v.get("name", "")),
                        "summary": str(item.get("detail") or ev.get("summary") or "")[:500],
                        "json": _json_text(item), "marks": evidence_marks(item),
                        "more": more if k == len(items) - 1 else 0})
    return out


def _estimate_times(leg: Leg, evs: list[dict[str, Any]]) -> tuple[list[int], bool]:
    """Each event's time: its ``t``, else interpolated between its timed neighbours (by position), else
    spread over the leg's life.  Returns ``(times, estimated any)``."""
    known = [(i, ev["t"]) for i, ev in enumerate(evs) if _int(ev.get("t"))]
    if len(known) == len(evs):
        return [ev["t"] for ev in evs], False
    start = leg.t_start or (known[0][1] if known else 0)
    end = leg.t_end if leg.t_end and leg.t_end >= start else (known[-1][1] if known else start)
    anchors = [(-1, start)] + known + [(len(evs), max(end, known[-1][1] if known else end))]
    times = []
    j = 0
    for i, ev in enumerate(evs):
        if _int(ev.get("t")):
            times.append(ev["t"])
            continue
        while anchors[j + 1][0] < i:
            j += 1
        (ia, ta), (ib, tb) = anchors[j], anchors[j + 1]
        times.append(int(ta + (tb - ta) * (i - ia) / max(1, ib - ia)))
    return times, True


def _data(ev: dict[str, Any]) -> bytes:
    raw = ev.get("data") or ""
    try:
        data = base64.b64decode(raw) if isinstance(raw, str) else bytes(raw)
    except (ValueError, TypeError):
        return b""
    n = ev.get("len")
    return data[:n] if _int(n) and 0 <= n < len(data) else data


def _excerpt(data: bytes) -> str:
    text = data[:MAX_EXCERPT].decode("utf-8", "backslashreplace").replace("\n", "\\n").replace("\x00", "\\0")
    return text + (f"... (+{len(data) - MAX_EXCERPT} bytes)" if len(data) > MAX_EXCERPT else "")


def _base(path: Any) -> str:
    return str(path).rsplit("/", 1)[-1] if path else ""


def _classify(ev: dict[str, Any], run_id: str, location: JournalLocation) -> str | None:
    op = ev.get("op")
    journal = location.is_journal(ev.get("path"), run_id) or (
        op == "rename" and (location.is_journal(ev.get("src"), run_id) or location.is_journal(ev.get("dst"), run_id)))
    lock = is_lock(ev.get("path"), run_id)
    flags = ev.get("flags") or []
    if ev.get("fault") or (ev.get("error") and (journal or lock or op in ("fsync", "fdatasync", "fsync_dir", "write"))):
        return "error"
    if journal and op == "write":
        return "write"
    if journal and op in ("fsync", "fdatasync"):
        return "fsync"
    if journal and (op in ("ftruncate", "unlink", "rename") or (op == "open" and isinstance(flags, list)
                                                                 and ("O_TRUNC" in flags or "O_CREAT" in flags))):
        return "jop"
    if op == "fsync_dir":
        return "dirsync"
    if lock and op in ("flock", "lock"):
        return "lock"
    return None


def _trace_event(ev: dict[str, Any], kind: str, t: int) -> tuple[dict[str, Any], list[int]]:
    """The drawn form of a trace event, and the journal seqs its written bytes start records of."""
    op, n = ev.get("op"), ev.get("n")
    d: dict[str, Any] = {k: ev[k] for k in ("n", "pid", "op", "fd", "offset", "len", "length", "flags", "operation",
                                             "cmd", "error", "fault", "t0", "t") if k in ev}
    d.update({k: str(ev[k])[-200:] for k in ("path", "src", "dst") if ev.get(k)})
    seqs: list[int] = []
    label = f"{op} n={n}"
    if op == "write":
        data = _data(ev)
        seqs = [int(s) for s in _SEQ_IN_DATA.findall(data[:1 << 20])]
        d["bytes"] = _excerpt(data)
        if seqs:
            d["seqs"] = seqs
            label += " seq " + ",".join(map(str, seqs[:5])) + ("..." if len(seqs) > 5 else "")
        if ev.get("offset") is not None:
            label += f" @{ev.get('offset')}+{ev.get('len', len(data))}"
    elif op in ("open", "fsync_dir", "unlink") and ev.get("path"):
        label += f" {_base(ev['path'])[:60]}"
    if ev.get("error"):
        label += f" failed: {str(ev['error'])[:60]}" + (" (injected)" if ev.get("fault") else "")
    return {"t": t, "k": kind, "label": label, "key": f"ev:{n}", "d": d}, seqs


def _reply_summary(reply: list[Any]) -> list[str]:
    out = []
    for block in reply[:20]:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_use":
            out.append(f"tool_use {block.get('name')} {block.get('id')}")
        elif block.get("type") == "text":
            out.append("text " + str(block.get("text", ""))[:MAX_EXCERPT])
        else:
            out.append(str(block.get("type")))
    return out


def _fault_event(leg: Leg, evs: list[dict[str, Any]], times: list[int]) -> dict[str, Any] | None:
    """The leg's fault as one event: when it struck and what it was."""
    f = leg.fault
    if f.kind in ("none", "") and not leg.timed_out:
        return None
    at = f.at if isinstance(f.at, dict) else {}
    t: int | None = None
    where = ""
    if f.kind == "io_error":
        hit = next((i for i, ev in enumerate(evs) if ev.get("fault")), None)
        if hit is not None:
            t, where = times[hit], f" at call n={evs[hit].get('n')}"
    if t is None and isinstance(at.get("after_ms"), (int, float)):
        t, where = leg.t_start + int(at["after_ms"] * 1_000_000), f" {at['after_ms']} ms after the start"
    if t is None and _int(at.get("event")) and evs:
        k = at["event"]
        if f.kind == "power_loss":  # the crash state holds the first k events of the trace
            i = min(k, len(evs)) - 1
            where = f" after event {k} (the crash point)"
        elif at.get("op"):
            idx = [i for i, ev in enumerate(evs) if ev.get("op") == at["op"]]
            i = idx[k - 1] if 0 < k <= len(idx) else -1
            where = f" at {at.get('when', 'after')} the {at['op']} number {k}"
        else:
            i = next((j for j, ev in enumerate(evs) if ev.get("n") == k), -1)
            where = f" {at.get('when', 'after')} call n={k}"
        if i >= 0:
            t = evs[i].get("t0", times[i]) if at.get("when") == "before" and _int(evs[i].get("t0")) else times[i]
    if t is None and f.kind == "hold" and _int(at.get("at")):
        where = f" at its call number {at['at']}" + (f" ({at['ops']})" if at.get("ops") else "") + " (time: the leg's end)"
    if t is None:  # tail and power-loss changes, a race, a timeout: after the leg
        t = leg.t_end or leg.t_start
        if f.kind in ("tail", "power_loss"):
            where = " after the leg ended"
    kind = f.kind if f.kind not in ("none", "") else "timeout"
    label = kind + (f" ({f.signal})" if f.signal else "") + where
    detail = {k: v for k, v in (f.detail or {}).items() if k in ("mutation", "kind", "size", "offset", "state", "persisted",
                                                                  "lost_entries", "race", "role", "schedule")}
    if detail:
        label += " " + json.dumps(detail, default=str)[:200]
    if leg.timed_out:
        label += " (the leg ran out of time: the runner killed it)"
    if not f.injected and f.kind not in ("none", ""):
        label += " (not injected: the leg ended first)"
    return {"t": t, "k": "fault", "label": label, "key": f"fault:{leg.index}",
            "d": {"kind": f.kind, "signal": f.signal, "at": at, "detail": f.detail, "injected": f.injected}}


def _crash_lane(state: Any, marks_of: Any) -> dict[str, Any]:
    """The lane of a crash state judged without a leg (power loss, docs/persistence-model.md): its
    acknowledged writes at their trace numbers, the calls that acknowledged them, and the crash point; the
    axis is the trace's call numbers (``n``), not time."""
    evs: list[dict[str, Any]] = []
    claims: dict[int, list[int]] = {}
    for a in state.acks:
        seqs = [int(x) for x in _SEQ_IN_DATA.findall(a.data[:1 << 20])]
        label = f"write n={a.n}" + (f" seq {','.join(map(str, seqs[:5]))}" if seqs else "") + \
            f" {_base(a.path)[:60]} bytes {a.offset}..{a.end}" + (f", acknowledged by n={a.claimed}" if a.claimed > 0 else "")
        evs.append({"t": a.n, "k": "write", "key": f"ev:{a.n}", "label": label,
                    "m": sorted(set(marks_of("n", a.n)) | {i for x in seqs for i in marks_of("seq", x)}),
                    "d": {"path": str(a.path)[-200:], "offset": a.offset, "end": a.end, "ino": a.ino, "n": a.n,
                          "claimed": a.claimed, "seqs": seqs, "bytes": _excerpt(a.data)}})
        if a.claimed > 0:
            claims.setdefault(a.claimed, []).append(a.n)
    for n, writes in sorted(claims.items()):
        evs.append({"t": n, "k": "fsync", "key": f"ev:{n}", "m": marks_of("n", n),
                    "label": f"n={n} acknowledged the write(s) n={', '.join(map(str, writes[:20]))}",
                    "d": {"n": n, "acknowledged": writes}})
    lost = ", ".join(state.lost_entries[:10]) or "none"
    evs.append({"t": state.prefix_n, "k": "fault", "key": "fault:power_loss", "m": [],
                "label": f"power lost after call n={state.prefix_n} (crash state {state.id}; persisted: "
                         f"{state.persisted or '-'}; lost entries: {lost})",
                "d": {"state": state.id, "prefix_n": state.prefix_n, "persisted": state.persisted,
                      "lost_entries": state.lost_entries[:50],
                      "files": {str(p)[-200:]: len(b) for p, b in list(state.files.items())[:50]}}})
    return _lane(kind=f"crash state {state.id}", fault="power loss", events=evs,
                 argv="no process ran: the crash state was judged on its own")


def _lane(**given: Any) -> dict[str, Any]:
    """A lane of the timeline (:func:`timeline`): ``given`` over a lane of no leg with nothing in it."""
    return {"leg": None, "kind": "", "pid": None, "start": None, "end": None, "exit": "", "exit_class": "",
            "fault": "", "argv": "", "locks": [], "events": [], "estimated": False, "other_calls": 0, "m": [],
            **given}


def _exit(leg: Leg) -> tuple[str, str]:
    if leg.timed_out:
        return "timed out" + (f" ({leg.exit_signal})" if leg.exit_signal else ""), "bad"
    if leg.exit_signal:
        return leg.exit_signal, "bad"
    if leg.exit_code is None:
        return "exit unknown", "bad"
    text = f"exit {leg.exit_code}" + (f" ({_EXIT_MEANING[leg.exit_code]})" if leg.exit_code in _EXIT_MEANING else "")
    if leg.raw_exit_code is not None:
        text += f" (its own {leg.raw_exit_code})"
    return text, "ok" if leg.exit_code in (0, 3) else "warn"


def _cap(evs: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """At most ``limit`` events: every marked one and fault first, then failed calls, model calls and tool
    effects, then the rest, each tier sampled evenly when it does not fit; in time order."""
    if len(evs) <= limit:
        return evs
    tiers: list[list[int]] = [[], [], []]
    for i, ev in enumerate(evs):
        tiers[0 if ev["m"] or ev["k"] == "fault" else 1 if ev["k"] in ("error", "model", "effect") else 2].append(i)
    keep = list(tiers[0])
    for tier in tiers[1:]:  # (no room left: nothing more, as range(room) is empty)
        room = limit - len(keep)
        keep += tier if len(tier) <= room else [tier[int(j * len(tier) / room)] for j in range(room)]
    return [evs[i] for i in sorted(set(keep))]


def timeline(history: History, verdicts: list[dict[str, Any]], *,
             max_events: int = MAX_EVENTS_PER_LANE) -> dict[str, Any]:
    """The timeline of one trial, as the data the page's script draws (JSON-ready).

    ``{"t0": the first leg's start (monotonic ns), "end": the last time drawn (ns after t0), "lanes": [...],
    "violations": [...], "events": events drawn in all lanes, "marked": marked events, "lanes_marked": ...}``.
    A lane (one per leg, and one more for model calls and effects outside any leg) is ``{"leg", "kind",
    "pid", "start", "end", "exit", "exit_class", "fault", "locks": [[start, end]], "events": [{"t", "k",
    "label", "key", "d", "m"}], "total", "capped", "estimated", "other_calls", "m"}``; times are ns after
    ``t0``; ``m`` lists the ids of the violations that mark it.  A power-loss history judged on its crash
    state alone (no leg) has one lane, the crash state's, and ``"unit": "event"``: its axis counts traced
    calls, not time (``"ns"`` otherwise).  Pure.
    """
    legs = sorted(history.legs, key=lambda leg: leg.index)
    violations = _violations(verdicts)
    starts = [leg.t_start for leg in legs if leg.t_start]
    t0 = min(starts) if starts else min([c.t for c in history.model_calls] + [e.t for e in history.effects] + [0])

    def marks_of(kind: str, *key: Any) -> list[int]:
        return [v["id"] for v in violations if (kind, *key) in v["marks"]]

    def rel(t: int | None) -> int | None:
        return None if t is None else int(t - t0)

    lanes: list[dict[str, Any]] = []
    by_leg: dict[int, dict[str, Any]] = {}
    for leg in legs:
        evs = list(trace_events(leg))
        times, estimated = _estimate_times(leg, evs)
        drawn: list[dict[str, Any]] = []
        other = 0
        for ev, t in zip(evs, times):
            n = ev.get("n")
            m = marks_of("ev", leg.index, n) if _int(n) else []
            kind = _classify(ev, history.run_id, history.journal) or ("other" if m else None)
            if kind is None:
                other += 1
                continue
            item, seqs = _trace_event(ev, kind, t)
            if kind == "write":
                m = sorted(set(m) | {i for s in seqs for i in marks_of("seq", s)})
            item["m"] = m
            if estimated and not _int(ev.get("t")):
                item["est"] = True
            drawn.append(item)
        fault = _fault_event(leg, evs, times)
        if fault is not None:
            fault["m"] = []
            drawn.append(fault)
        locks = []
        for span in lock_spans(history, leg):
            s = span.start
            if s is None:
                s = next((t for ev, t in zip(evs, times) if ev.get("n") == span.first_n), leg.t_start)
            e = span.end if span.end is not None else (leg.t_end or s)
            locks.append([rel(s), rel(e), span.pid])
        exit_text, exit_class = _exit(leg)
        lane = {"leg": leg.index, "kind": leg.kind, "pid": leg.pid, "start": rel(leg.t_start),
                "end": rel(leg.t_end if leg.t_end else max(times, default=leg.t_start)),
                "exit": exit_text, "exit_class": exit_class, "fault": fault["label"] if fault else "",
                "argv": " ".join(map(str, leg.argv))[:300], "locks": locks, "events": drawn,
                "estimated": estimated, "other_calls": other, "m": marks_of("leg", leg.index)}
        lanes.append(lane)
        by_leg[leg.index] = lane
    outside = _lane(kind="outside any leg")

    def lane_of(leg_index: int, t: int) -> dict[str, Any]:
        if leg_index in by_leg:
            return by_leg[leg_index]
        for leg in legs:  # no leg recorded: the leg alive at that time
            if leg.t_start <= t <= (leg.t_end or leg.t_start):
                return by_leg[leg.index]
        return outside

    for c in history.model_calls:
        lane_of(c.leg, c.t)["events"].append({
            "t": c.t, "k": "model", "key": f"call:{c.index}", "m": marks_of("call", c.index),
            "label": f"model call {c.index} (turn {c.turn})" + (" streamed" if c.stream else ""),
            "d": {"index": c.index, "turn": c.turn, "leg": c.leg, "key": c.key, "stream": c.stream,
                  "messages": len(c.messages), "reply": _reply_summary(c.reply)}})
    for e in history.effects:
        m = sorted(set(marks_of("effect", e.tool_use_id, e.attempt)) | set(marks_of("tool", e.tool_use_id)))
        lane_of(e.leg, e.t)["events"].append({
            "t": e.t, "k": "effect", "key": f"effect:{e.tool_use_id}#{e.attempt}", "m": m,
            "label": f"tool {e.tool or '?'} {e.tool_use_id} attempt {e.attempt}",
            "d": {"tool_use_id": e.tool_use_id, "attempt": e.attempt, "pid": e.pid, "leg": e.leg, "tool": e.tool}})
    if outside["events"]:
        lanes.append(outside)
    unit = "ns"
    if not legs and history.crash_state is not None:  # judged on the crash state alone: no process ran
        unit = "event"
        lanes = [_crash_lane(history.crash_state, marks_of)]
        t0 = 0
    last = 0
    for lane in lanes:
        for ev in lane["events"]:
            ev["t"] = rel(ev["t"])
        lane["events"].sort(key=lambda ev: (ev["t"], ev["key"]))
        lane["total"] = len(lane["events"])
        lane["events"] = _cap(lane["events"], max_events)
        lane["capped"] = len(lane["events"]) < lane["total"]
        last = max([last] + [ev["t"] for ev in lane["events"]] + [lane["end"] or 0] + [s[1] or 0 for s in lane["locks"]])
    return {"t0": t0, "end": last, "unit": unit, "lanes": lanes,
            "violations": [{k: v for k, v in viol.items() if k != "marks"} for viol in violations],
            "events": sum(len(lane["events"]) for lane in lanes),
            "marked": sum(1 for lane in lanes for ev in lane["events"] if ev["m"]),
            "lanes_marked": sum(1 for lane in lanes if lane["m"])}
