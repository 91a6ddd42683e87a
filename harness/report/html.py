"""The HTML report: one self-contained file with the campaign table, the violation groups and a timeline per
failing trial (docs/results.md "The HTML report").

``report.html`` is written into every results folder (:func:`harness.report.results_dir.write_results`).  It
needs nothing but a browser: no network, no external script, style sheet or font (a Content-Security-Policy
forbids any fetch); the timelines are SVG drawn by a small inline script from a JSON block in the page.

What it shows:

* the campaign: verdict, trials, faults, and a table of scenario x invariant verdict counts;
* the violation groups (:mod:`harness.report.groups`): cause, count, trials, smallest reproducer, example
  evidence;
* for each failing trial (invalid or unknown) kept in the results folder, at most :data:`MAX_TRIALS` of them
  (each group's reproducer first), a timeline with one lane per leg: the process from start to end (exit
  code or signal), its fault (kill, suspend, tail, power loss, io_error, hold, race), its journal writes,
  fsyncs and other journal calls (:func:`harness.checkers._trace.is_journal`), directory fsyncs, failed
  calls, the run-lock spans (:func:`harness.checkers._trace.lock_spans`), the model calls and the tool
  effects; times relative to the first leg's start.  What each violation's evidence names (a leg, a trace
  event ``n``, a journal ``seq``, a tool execution, a model call: :func:`evidence_marks`) is marked, and the
  evidence JSON is shown beside the timeline (click a violation to pick out its marks).

Everything taken from a history (journal bytes, output, tool ids, paths) is untrusted: it is escaped into
the page's HTML (:func:`html.escape`) or its JSON block (no ``<``, ``>``, ``&`` left in it), and the script
only ever sets it as text.  Size is bounded: :data:`MAX_EVENTS_PER_LANE` events per lane (every marked
event, fault, failed call, model call and tool effect kept first; the page says when it capped), excerpts
of :data:`MAX_EXCERPT` characters, output tails of :data:`MAX_OUTPUT` characters.

:func:`harness.report.results_dir.write_html_report` writes the report of a stored results folder again.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import quote

from harness.checkers._trace import events as trace_events
from harness.checkers._trace import is_journal, is_lock, lock_spans
from harness.history.model import History, Leg

__all__ = ["HTML_FILE", "MAX_TRIALS", "MAX_EVENTS_PER_LANE", "MAX_EXCERPT", "MAX_OUTPUT", "MAX_EVIDENCE_CHARS",
           "MAX_VIOLATIONS", "TrialView", "trial_view", "evidence_marks", "timeline", "render_html", "write_html",
           ]

#: The report's file name in a results folder.
HTML_FILE = "report.html"
#: At most this many failing trials get a timeline (each group's smallest reproducer first).
MAX_TRIALS = 20
#: At most this many events are drawn in one lane (marked events, faults, failed calls, model calls and
#: tool effects first; the rest sampled evenly).
MAX_EVENTS_PER_LANE = 300
#: Characters of written journal bytes kept per write event.
MAX_EXCERPT = 100
#: Characters of a leg's stdout and stderr shown (their end).
MAX_OUTPUT = 2000
#: Characters of one violation's evidence JSON shown.
MAX_EVIDENCE_CHARS = 12000
#: Violations of one verdict listed (and marked) per trial.
MAX_VIOLATIONS = 20

_SEQ_IN_TEXT = re.compile(r"\bseq (\d+)\b")
_N_IN_TEXT = re.compile(r"\bn=(\d+)\b")
_SEQ_IN_DATA = re.compile(rb'(?:^|\n)\{"seq":(\d+)')  # a record's first bytes, at a line's start
#: Evidence keys naming a trace event ``n`` of the leg in context.
_N_KEYS = ("n", "write_n", "fsync_n", "unlink_n", "first_n", "last_n")
_EXIT_MEANING = {0: "completed", 1: "error/refused", 2: "usage", 3: "suspended"}


@dataclass
class TrialView:
    """What the report needs of one failing trial: ``trial`` (its number), ``scenario``, ``seed``,
    ``schedule``, ``history``, ``verdicts`` (JSON dicts), ``folder`` (its results folder, relative to the
    report when possible, else ``None``), ``replay`` (the command that re-runs it), ``origin``."""

    trial: int
    scenario: str
    seed: Any
    history: History
    verdicts: list[dict[str, Any]]
    schedule: list[Any] = field(default_factory=list)
    folder: str | None = None
    replay: str | None = None
    origin: str | None = None

    @property
    def status(self) -> str:
        """``invalid`` when a verdict is invalid, else ``unknown`` when one is, else ``valid``."""
        statuses = {v.get("status") for v in self.verdicts}
        return "invalid" if "invalid" in statuses else "unknown" if "unknown" in statuses else "valid"


def _verdict_json(v: Any) -> dict[str, Any]:
    return v.to_json() if hasattr(v, "to_json") else dict(v)


def trial_view(trial: Any, *, folder: str | os.PathLike[str] | None = None, replay: str | None = None) -> TrialView:
    """A :class:`TrialView` of a :class:`harness.campaign.result.TrialResult` (attributes ``index``,
    ``history``, ``verdicts``, ...) or of a trial dict (:func:`harness.report.results_dir.recheck`'s: keys
    ``trial``, ``history``, ``verdicts``, ...).  Raises ``ValueError`` for a trial without a history."""
    get = (lambda k, d=None: trial.get(k, d)) if isinstance(trial, dict) else (lambda k, d=None: getattr(trial, k, d))
    history = get("history")
    if history is None:
        raise ValueError("a trial without a history has no timeline")
    number = get("trial", get("index"))
    judged = get("invariants") or ()  # a TrialResult: only the invariants the campaign judged count
    verdicts = [_verdict_json(v) for v in get("verdicts") or []]
    if judged:
        verdicts = [v for v in verdicts if v.get("invariant") in judged]
    return TrialView(trial=int(number if number is not None else 0), scenario=str(get("scenario") or history.scenario),
                     seed=get("seed", history.seed), history=history,
                     verdicts=verdicts, schedule=list(get("schedule") or history.schedule or []),
                     folder=str(folder) if folder is not None else get("folder"),
                     replay=replay, origin=get("origin"))


# --- what the evidence names -------------------------------------------------------------------


def evidence_marks(evidence: Any) -> set[tuple[Any, ...]]:
    """What one violation's evidence names, as marks to draw:

    * ``("leg", i)``: a leg (``leg``, ``legs``, any ``*_leg`` key);
    * ``("ev", leg, n)``: trace event ``n`` of a leg (``n``, ``write_n``, ``fsync_n``, ... in a dict whose
      ``leg`` is known there or in a dict around it);
    * ``("seq", s)``: a journal record (``seq``, ``*_seq``, or ``seq N`` in a sentence);
    * ``("effect", tool_use_id, attempt)``: one tool execution (a dict with ``attempt`` under a
      ``tool_use_id``); ``("tool", tool_use_id)`` every execution of a tool call named without one;
    * ``("call", index)``: a model call (a dict with ``index`` and ``turn``);
    * ``("n", n)``: ``n=N`` in a sentence, a traced call of no named leg (marked in a crash state's lane).

    Pure; never raises for evidence of any shape.
    """
    out: set[tuple[Any, ...]] = set()
    _walk(evidence, None, None, out, 0)
    return out


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _walk(obj: Any, leg: Any, tid: Any, out: set[tuple[Any, ...]], depth: int) -> None:
    if depth > 12:
        return
    if isinstance(obj, str):
        for m in _SEQ_IN_TEXT.finditer(obj):
            out.add(("seq", int(m.group(1))))
        for m in _N_IN_TEXT.finditer(obj):  # of no leg: used where only one trace is meant (a crash state)
            out.add(("n", int(m.group(1))))
        return
    if isinstance(obj, list):
        for item in obj[:200]:
            _walk(item, leg, tid, out, depth + 1)
        return
    if not isinstance(obj, dict):
        return
    if _int(obj.get("leg")):
        leg = obj["leg"]
    if isinstance(obj.get("tool_use_id"), str):
        tid = obj["tool_use_id"]
    for key, value in obj.items():
        if not isinstance(key, str):
            continue
        if (key == "leg" or key.endswith("_leg")) and _int(value):
            out.add(("leg", value))
        elif key == "legs" and isinstance(value, list):
            out.update(("leg", v) for v in value if _int(v))
        elif key in _N_KEYS and _int(value) and leg is not None:
            out.add(("ev", leg, value))
        elif (key == "seq" or key.endswith("_seq")) and _int(value):
            out.add(("seq", value))
        elif key == "tool_use_ids" and isinstance(value, list):
            out.update(("tool", v) for v in value if isinstance(v, str))
    if tid is not None and _int(obj.get("attempt")):
        out.add(("effect", tid, obj["attempt"]))
    if _int(obj.get("index")) and _int(obj.get("turn")):
        out.add(("call", obj["index"]))
    for key, value in obj.items():
        if isinstance(value, (dict, list)) or (isinstance(value, str) and key in ("detail", "why", "summary")):
            _walk(value, leg, tid, out, depth + 1)
    if isinstance(obj.get("tool_use_id"), str) and not any(m[0] == "effect" and m[1] == tid for m in out):
        out.add(("tool", tid))  # named without an attempt: every execution of it


# --- one trial's timeline, as data ---------------------------------------------------------------


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
        found = evidence.get("violations") if isinstance(evidence, dict) else None
        items = [x for x in found if isinstance(x, dict)] if isinstance(found, list) and found else []
        more = max(0, len(items) - MAX_VIOLATIONS)
        if not items:
            items = [evidence if isinstance(evidence, dict) else {"evidence": evidence}]
        items = items[:MAX_VIOLATIONS]
        for k, item in enumerate(items):
            kind = item.get("kind") or (evidence.get("reason") if isinstance(evidence, dict) else None) or v.get("status")
            out.append({"id": len(out), "invariant": str(v.get("invariant", "?")), "status": v.get("status"),
                        "kind": str(kind), "name": str(v.get("name", "")),
                        "summary": str(item.get("detail") or (evidence.get("summary") if isinstance(evidence, dict)
                                                               else "") or "")[:500],
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


def _classify(ev: dict[str, Any], run_id: str) -> str | None:
    op = ev.get("op")
    journal = is_journal(ev.get("path"), run_id) or (
        op == "rename" and (is_journal(ev.get("src"), run_id) or is_journal(ev.get("dst"), run_id)))
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
    if ev.get("path"):
        d["path"] = str(ev["path"])[-200:]
    for k in ("src", "dst"):
        if ev.get(k):
            d[k] = str(ev[k])[-200:]
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
    return {"leg": None, "kind": f"crash state {state.id}", "pid": None, "start": None, "end": None, "exit": "",
            "exit_class": "", "fault": "power loss", "argv": "no process ran: the crash state was judged on its own",
            "locks": [], "events": evs, "estimated": False, "other_calls": 0, "m": []}


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
    for tier in tiers[1:]:
        room = limit - len(keep)
        if room <= 0:
            break
        if len(tier) <= room:
            keep += tier
        else:
            keep += [tier[int(j * len(tier) / room)] for j in range(room)]
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
            kind = _classify(ev, history.run_id) or ("other" if m else None)
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
    outside: dict[str, Any] = {"leg": None, "kind": "outside any leg", "pid": None, "start": None, "end": None,
                               "exit": "", "exit_class": "", "fault": "", "argv": "", "locks": [], "events": [],
                               "estimated": False, "other_calls": 0, "m": []}

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


# --- the page -----------------------------------------------------------------------------------


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _script_json(data: Any) -> str:
    """``data`` as JSON safe inside a ``<script type="application/json">`` element: no ``<``, ``>`` or ``&``
    left (they are ``\\u003c`` ...), so no ``</script>`` in a history can end the element."""
    text = json.dumps(data, default=str, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _counts_cell(c: dict[str, Any] | None) -> str:
    if not c or not c.get("checked"):
        return '<td class="na" title="not judged">-</td>'
    cls = "bad" if c.get("invalid") else "warn" if c.get("unknown") else "ok"
    title = (f"checked {c.get('checked', 0)}, valid {c.get('valid', 0)} (vacuous {c.get('vacuous', 0)}), "
             f"invalid {c.get('invalid', 0)}, unknown {c.get('unknown', 0)}")
    text = f"{c.get('valid', 0)}/{c.get('checked', 0)}"
    if c.get("invalid"):
        text += f"<br><b>{c['invalid']} invalid</b>"
    if c.get("unknown"):
        text += f"<br><b>{c['unknown']} unknown</b>"
    return f'<td class="{cls}" title="{_e(title)}">{text}</td>'


def _campaign(report: dict[str, Any]) -> str:
    verdict = str(report.get("verdict", "unknown"))
    camp = report.get("campaign") or {}
    rate = report.get("trials_per_s")
    faults = report.get("faults") or {}
    out = [f'<p class="verdict {_e(verdict)}">verdict: <b id="verdict">{_e(verdict.upper())}</b></p>',
           f"<p>{_e(report.get('trials', 0))} trial(s) in {float(report.get('elapsed_s') or 0):.1f} s"
           + (f" ({float(rate):.1f} trials/s)" if rate else "")
           + (f"; subject: {_e(camp['subject_name'])}" if camp.get("subject_name") else "") + "</p>",
           "<p>faults: " + _e(", ".join(f"{k} {v}" for k, v in faults.items())) + "</p>"]
    if report.get("interrupted"):
        out.append('<p class="warn">interrupted: this report is partial</p>')
    for title, key in (("setup errors", "errors"), ("limits for this subject", "limits")):
        if camp.get(key):
            out.append(f"<p>{title}:</p><ul>" + "".join(f"<li>{_e(x)}</li>" for x in camp[key]) + "</ul>")
    invariants = list((report.get("invariants") or {}).keys())
    for sc in (report.get("scenarios") or {}).values():
        invariants += [i for i in sc.get("invariants", {}) if i not in invariants]
    head = "".join(f'<th title="{_e((report.get("invariants") or {}).get(i, {}).get("name", ""))}">{_e(i)}</th>'
                   for i in invariants)
    rows = []
    for name, sc in sorted((report.get("scenarios") or {}).items()):
        cells = "".join(_counts_cell(sc.get("invariants", {}).get(i)) for i in invariants)
        err = f' <span class="bad" title="{_e(sc["error"])}">(setup error)</span>' if sc.get("error") else ""
        rows.append(f'<tr data-scenario="{_e(name)}"><th>{_e(name)}{err}</th><td>{_e(sc.get("trials", 0))}</td>'
                    f'<td>{_e(sc.get("invalid_trials", 0))}</td><td>{_e(sc.get("unknown_trials", 0))}</td>{cells}</tr>')
    total = "".join(_counts_cell((report.get("invariants") or {}).get(i)) for i in invariants)
    rows.append(f'<tr class="total"><th>all scenarios</th><td>{_e(report.get("trials", 0))}</td><td></td><td></td>'
                f"{total}</tr>")
    out.append('<table id="campaign-table"><thead><tr><th>scenario</th><th>trials</th><th>invalid</th>'
               f"<th>unknown</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")
    out.append('<p class="note">a cell: valid/checked verdicts (hover for vacuous, invalid, unknown); '
               "- : not judged in that scenario</p>")
    for inv, why in (camp.get("not_applicable") or {}).items():
        out.append(f'<p class="note">{_e(inv)}: not applicable to this subject: {_e(why)}</p>')
    return "\n".join(out)


def _groups(report: dict[str, Any], drawn: set[int]) -> str:
    from harness.report.groups import group_rows

    out = []
    for title, rows_key, groups_key in (("Violations", "violations", "groups"),
                                        ("Unknown verdicts", "unknowns", "unknown_groups")):
        rows = report.get(rows_key) or []
        if not rows:
            continue
        groups = report.get(groups_key)
        if not isinstance(groups, list):
            groups = group_rows(rows, report.get("runs") or [])
        out.append(f"<h3>{title}: {len(rows)} in {len(groups)} group(s) by cause</h3>")
        for n, g in enumerate(groups, 1):
            rep, ex = g.get("reproducer") or {}, g.get("example") or {}
            trials = g.get("trials") or []
            links = ", ".join(f'<a href="#trial-{_e(t)}">{_e(t)}</a>' if t in drawn else _e(t) for t in trials[:60])
            if len(trials) > 60:
                links += f" ... ({len(trials) - 60} more)"
            rtrial = rep.get("trial")
            rlink = f'<a href="#trial-{_e(rtrial)}">trial {_e(rtrial)}</a>' if rtrial in drawn else f"trial {_e(rtrial)}"
            out.append(
                f'<div class="group" data-group="{n}"><h4>[{n}] {_e(g.get("title", ""))}: {_e(g.get("count", 0))} '
                f"trial(s) in {_e(', '.join(g.get('scenarios') or []))}</h4>"
                f"<p>{_e(g.get('name', ''))}</p><p>trials: {links}</p>"
                f"<p>smallest reproducer: {rlink} ({_e(rep.get('faults', 0))} fault(s)"
                + (f", {_e(rep['legs'])} leg(s)" if rep.get("legs") is not None else "")
                + f", seed {_e(rep.get('seed'))}), {_e(rep.get('minimal', ''))}</p>"
                f"<p>schedule: <code>{_e(json.dumps(rep.get('schedule'), default=str)[:400])}</code></p>"
                + (f"<p>replay: <code>{_e(rep['reproduce'])}</code></p>" if rep.get("reproduce") else "")
                + (f"<p>self-contained: <code>{_e(rep['reproduce_run'])}</code></p>" if rep.get("reproduce_run") else "")
                + f"<details><summary>example: trial {_e(ex.get('trial'))}: {_e(str(ex.get('summary', ''))[:300])}"
                f"</summary><pre>{_e(_json_text(ex.get('evidence')))}</pre></details></div>")
    if not out:
        out.append("<p>no violations</p>")
    return "\n".join(out)


def _order(views: list[TrialView], report: dict[str, Any]) -> list[TrialView]:
    """Failing trials, each group's reproducer and example first, then in trial order."""
    first: list[int] = []
    for key in ("groups", "unknown_groups"):
        for g in report.get(key) or []:
            for t in ((g.get("reproducer") or {}).get("trial"), (g.get("example") or {}).get("trial")):
                if isinstance(t, int) and t not in first:
                    first.append(t)
    rank = {t: i for i, t in enumerate(first)}
    failing = [v for v in views if v.status != "valid"]
    return sorted(failing, key=lambda v: (rank.get(v.trial, len(rank)), v.trial))


def _trial_section(view: TrialView, tl: dict[str, Any], number: int) -> str:
    failed = sorted({f"{v['invariant']} {v['status']}" for v in tl["violations"]})
    head = (f'<section class="trial" id="trial-{_e(view.trial)}" data-trial="{_e(view.trial)}">'
            f"<h3>trial {_e(view.trial)}: {_e(view.scenario)}, seed {_e(view.seed)}: {_e(', '.join(failed))}</h3>")
    info = [f"<p>schedule: <code>{_e(json.dumps(view.schedule, default=str)[:600])}</code>"
            + (f" (origin: {_e(view.origin)})" if view.origin else "") + "</p>"]
    if view.replay:
        info.append(f"<p>replay: <code>{_e(view.replay)}</code></p>")
    if view.folder:
        info.append(f'<p>its evidence: <a href="{_e(quote(view.folder))}/">{_e(view.folder)}/</a></p>')
    notes = []
    for lane in tl["lanes"]:
        if lane["capped"]:
            notes.append(f"leg {lane['leg']}: {len(lane['events'])} of {lane['total']} events drawn (capped at "
                         f"{MAX_EVENTS_PER_LANE}: every marked event, fault, failed call, model call and tool effect "
                         "kept first, the rest sampled)")
        if lane["estimated"]:
            notes.append(f"leg {lane['leg']}: some traced calls carry no time: placed between their neighbours")
        if lane["other_calls"]:
            notes.append(f"leg {lane['leg']}: {lane['other_calls']} other traced call(s) (reads, opens, mkdir, ...) "
                         "not drawn")
    h = view.history
    if not tl["lanes"]:
        notes.append("nothing to draw: this trial ran no leg and holds no crash state")
    notes += [f"note: {n}" for n in h.notes[:10]]
    if h.crash_state is not None:
        cs = h.crash_state
        notes.append(f"crash state {cs.id}: the first {cs.prefix_n} traced call(s) applied; persisted: "
                     f"{cs.persisted or '-'}; lost entries: {', '.join(cs.lost_entries) or 'none'}")
    if h.race is not None:
        notes.append(f"race {h.race.race} ({h.race.schedule})" + (f": setup error {h.race.setup_error}"
                                                                  if h.race.setup_error else ""))
    if notes:
        info.append('<ul class="notes">' + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    items = []
    for v in tl["violations"]:
        more = f' <span class="note">({v["more"]} more in trial.json)</span>' if v.get("more") else ""
        items.append(f'<li><button type="button" class="viol" data-v="{v["id"]}">{_e(v["invariant"])} '
                     f'{_e(v["kind"])}</button>{more}<div class="vsum">{_e(v["summary"])}</div>'
                     f'<pre class="evidence" data-v="{v["id"]}">{_e(v["json"])}</pre></li>')
    aside = ('<aside class="side"><p><b>evidence</b> (click one to pick out what it names)</p>'
             f'<ol class="viols">{"".join(items)}</ol><p><b>selected event</b></p>'
             '<pre class="ev-detail">(click an event of the timeline)</pre></aside>')
    box = (f'<div class="tl-wrap"><div class="tl-main"><div class="tl-bar"><button type="button" class="reset">'
           "reset zoom</button> drag across the timeline to zoom; click a leg's name to zoom to it</div>"
           f'<div class="tl" id="tl-{_e(view.trial)}" data-index="{number}" data-expect-lanes="{len(tl["lanes"])}" '
           f'data-expect-events="{tl["events"]}"><noscript>the timeline needs JavaScript</noscript></div></div>'
           f"{aside}</div>")
    outputs = []
    for leg in sorted(h.legs, key=lambda x: x.index):
        for name, text in (("stderr", leg.stderr), ("stdout", leg.stdout)):
            if text:
                cut = text[-MAX_OUTPUT:]
                outputs.append(f"<details><summary>leg {_e(leg.index)} {name} (last {len(cut)} of {len(text)} "
                               f"characters)</summary><pre>{_e(cut)}</pre></details>")
    return head + "".join(info) + box + "".join(outputs) + "</section>"


def render_html(report: dict[str, Any], views: Iterable[TrialView], *, title: str | None = None,
                max_trials: int = MAX_TRIALS, kept: int | None = None) -> str:
    """The whole report page (one self-contained HTML document) of ``report`` (a
    :func:`harness.report.report.build_report` dict) and its failing trials ``views``: the campaign table,
    the groups and at most ``max_trials`` timelines.  ``kept``: how many failing trials the results folder
    holds, when more than ``views`` (said in the page).  Escapes everything it takes from histories."""
    chosen = _order(list(views), report)
    failing = len(chosen) if kept is None else max(kept, len(chosen))
    shown = chosen[:max_trials]
    timelines = [timeline(v.history, v.verdicts) for v in shown]
    drawn = {v.trial for v in shown}
    sections = [_trial_section(v, tl, i) for i, (v, tl) in enumerate(zip(shown, timelines))]
    payload = {"timelines": [{"trial": v.trial, "end": tl["end"], "unit": tl["unit"], "lanes": tl["lanes"],
                              "violations": [{"id": x["id"], "invariant": x["invariant"], "kind": x["kind"]}
                                             for x in tl["violations"]]}
                             for v, tl in zip(shown, timelines)]}
    name = title or "fiskj-harness report"
    names = sorted((report.get("scenarios") or {}).keys())
    if names and not title:
        name += ": " + (names[0] if len(names) == 1 else f"{len(names)} scenarios")
    trials_note = (f"<p>{failing} failing trial(s) kept" + (f"; timelines of {len(shown)} (each group's smallest "
                   "reproducer and example first; the others are in trials/)" if failing > len(shown) else "")
                   + "</p>") if failing else "<p>no failing trial kept</p>"
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
        "style-src 'unsafe-inline'; img-src data:\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(name)}</title><style>{_CSS}</style></head>\n<body>",
        f"<h1>{_e(name)}</h1>",
        '<section id="campaign"><h2>Campaign</h2>', _campaign(report), "</section>\n",
        '<section id="groups"><h2>Violations by cause</h2>', _groups(report, drawn), "</section>\n",
        '<section id="trials"><h2>Failing trials</h2>', trials_note, _LEGEND, "\n".join(sections), "</section>\n",
        f'<script id="fiskj-data" type="application/json">{_script_json(payload)}</script>\n',
        f"<script>{_JS}</script>\n</body></html>\n"])


def write_html(path: str | os.PathLike[str], report: dict[str, Any], views: Iterable[TrialView], **kw: Any) -> Path:
    """Write :func:`render_html` to ``path`` (through a temporary file and a rename); returns the path."""
    p = Path(path)
    text = render_html(report, views, **kw)
    tmp = p.with_name(f".{p.name}.tmp")
    tmp.write_text(text, encoding="utf-8", errors="replace")  # (a lone surrogate in some output)
    os.replace(tmp, p)
    return p


_LEGEND = (
    '<div class="legend"><svg viewBox="0 0 900 22" width="900" height="22" aria-hidden="true">'
    '<rect x="2" y="6" width="30" height="10" class="proc"/><text x="36" y="15">process</text>'
    '<rect x="100" y="8" width="30" height="6" class="lockspan"/><text x="134" y="15">run lock held</text>'
    '<rect x="230" y="5" width="3" height="12" class="ev k-write"/><text x="238" y="15">journal write</text>'
    '<rect x="330" y="3" width="2" height="16" class="ev k-fsync"/><text x="337" y="15">fsync</text>'
    '<rect x="385" y="5" width="2" height="12" class="ev k-dirsync"/><text x="392" y="15">dir fsync</text>'
    '<rect x="460" y="5" width="4" height="12" class="ev k-jop"/><text x="468" y="15">other journal call</text>'
    '<path d="M590,7 l8,8 M598,7 l-8,8" class="ev k-error"/><text x="603" y="15">failed call</text>'
    '<circle cx="690" cy="11" r="4.5" class="ev k-model"/><text x="698" y="15">model call</text>'
    '<path d="M775,16 l5,-10 l5,10 z" class="ev k-effect"/><text x="790" y="15">tool effect</text>'
    '<path d="M858,5 l6,6 l-6,6 l-6,-6 z" class="ev k-fault"/><text x="868" y="15">fault</text>'
    '</svg><span class="note"> red outline: named by the evidence</span></div>')

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em;color:#222;max-width:1500px}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;margin-top:1.6em}h4{margin:.3em 0}
code,pre{font:12px/1.35 ui-monospace,Menlo,Consolas,monospace}pre{white-space:pre-wrap;word-break:break-all;
background:#f6f6f6;padding:.4em;margin:.2em 0;max-height:26em;overflow:auto}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:center}
tbody th{text-align:left}td.ok{background:#e8f5e9}td.bad{background:#ffcdd2}td.warn{background:#fff3cd}
td.na{color:#999}tr.total{font-weight:bold}.verdict.valid b{color:#2e7d32}.verdict.invalid b{color:#c62828}
.verdict.unknown b{color:#b26a00}.bad{color:#c62828}.warn{color:#b26a00}.note{color:#666;font-size:.9em}
.group{border-left:4px solid #c62828;padding:.2em .8em;margin:.8em 0;background:#fffafa}
.trial{border-top:2px solid #999;margin-top:1.5em}
.tl-wrap{display:flex;gap:1em;align-items:flex-start}.tl-main{flex:3;min-width:0}
.side{flex:1;min-width:18em;max-width:32em}.viols{padding-left:1.4em}.viols pre{max-height:16em}
button.viol{font-weight:bold;cursor:pointer;border:1px solid #c62828;background:#fff;border-radius:3px}
button.viol.on{background:#c62828;color:#fff}.vsum{font-size:.9em;color:#444}
.tl svg{width:100%;height:auto;user-select:none;display:block}.tl text{font-size:11px;fill:#333}
.tl .axis line{stroke:#ddd}.tl .axis text{fill:#777;font-size:10px}
.lane-bg{fill:#fafafa;stroke:#e0e0e0}.lane.marked .lane-bg{fill:#fff5f5;stroke:#c62828;stroke-width:1.5}
.proc{fill:#cfd8dc;stroke:#90a4ae}.lockspan{fill:#ffe082;stroke:#c8a200;opacity:.85}
.exit.ok{fill:#2e7d32}.exit.bad{fill:#c62828;font-weight:bold}.exit.warn{fill:#b26a00}
.ev{cursor:pointer}.k-write{fill:#1e88e5}.k-fsync{fill:#2e7d32}.k-dirsync{fill:#00897b}.k-jop{fill:#6a1b9a}
.k-lock{fill:#8d6e63}.k-other{fill:#9e9e9e}.k-error{stroke:#b71c1c;stroke-width:2;fill:none}
.k-model{fill:#8e24aa}.k-effect{fill:#fb8c00}.k-fault{fill:#d50000}
.ev.marked{stroke:#d50000;stroke-width:2.5}.markline{stroke:#d50000;stroke-width:1;stroke-dasharray:2,2;opacity:.6}
.tl.focus .ev{opacity:.2}.tl.focus .ev.hl{opacity:1;stroke:#000;stroke-width:3}
.tl.focus .lane.hl .lane-bg{stroke:#000;stroke-width:2.5}
.brush{fill:rgba(30,136,229,.15);stroke:#1e88e5}.lanelabel{cursor:zoom-in}
.legend{margin:.5em 0}.legend text{font-size:11px}
"""

_JS = r"""
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var W = 1000, LABEL = 175, RIGHT = 95, AXIS = 26, LANE = 74;
  var ROW = {fault: 12, proc: 12, lock: 27, journal: 42, call: 58};
  window.addEventListener("error", function (e) {
    document.body.setAttribute("data-js-error", String(e.message || e));
  });
  var data = JSON.parse(document.getElementById("fiskj-data").textContent);

  function el(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) { if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, String(attrs[k])); }
    if (parent) parent.appendChild(e);
    return e;
  }
  function text(parent, x, y, s, cls) {
    var t = el("text", {x: x, y: y}, parent);
    if (cls) t.setAttribute("class", cls);
    t.textContent = s;
    return t;
  }
  var unit = "ns";
  function fmt(ns) {
    if (unit === "event") return "n=" + Math.round(ns);
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(a >= 1e10 ? 1 : 2) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e7 ? 1 : 2) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(1) + " \u00b5s";
    return Math.round(ns) + " ns";
  }
  function ticks(lo, hi, n) {
    var span = hi - lo;
    if (!(span > 0)) return [lo];
    var step = Math.pow(10, Math.floor(Math.log(span / n) / Math.LN10));
    var err = span / n / step;
    if (err >= 7.5) step *= 10; else if (err >= 3.5) step *= 5; else if (err >= 1.5) step *= 2;
    if (unit === "event") step = Math.max(1, Math.round(step));
    var out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9 && out.length < 50; t += step) out.push(t);
    return out;
  }
  function rowOf(k) {
    if (k === "fault") return ROW.fault;
    if (k === "lock") return ROW.lock;
    if (k === "model" || k === "effect") return ROW.call;
    return ROW.journal;
  }
  function shape(g, ev, x) {
    var y = rowOf(ev.k), s;
    if (ev.k === "model") s = el("circle", {cx: x, cy: y, r: 4.5}, g);
    else if (ev.k === "effect") s = el("path", {d: "M" + (x - 5) + "," + (y + 5) + " l5,-10 l5,10 z"}, g);
    else if (ev.k === "fault") s = el("path", {d: "M" + x + "," + (y - 7) + " l7,7 l-7,7 l-7,-7 z"}, g);
    else if (ev.k === "error") s = el("path", {d: "M" + (x - 4) + "," + (y - 4) + " l8,8 M" + (x + 4) + "," + (y - 4) + " l-8,8"}, g);
    else if (ev.k === "fsync") s = el("rect", {x: x - 1, y: y - 8, width: 2, height: 16}, g);
    else if (ev.k === "jop") s = el("rect", {x: x - 2, y: y - 6, width: 4, height: 12}, g);
    else if (ev.k === "lock") s = el("rect", {x: x - 1, y: y - 6, width: 2, height: 12}, g);
    else s = el("rect", {x: x - 1.5, y: y - 6, width: ev.k === "write" ? 3 : 2, height: 12}, g);
    return s;
  }

  function Timeline(box, tl, side) {
    this.box = box; this.tl = tl; this.side = side; this.focus = null;
    this.full = tl.unit === "event" ? [0, tl.end + 1] : [0, Math.max(1, tl.end) * 1.02];
  }
  Timeline.prototype.draw = function (dom) {
    var self = this, tl = this.tl, box = this.box;
    while (box.firstChild) box.removeChild(box.firstChild);
    var lo = dom[0], hi = dom[1], x0 = LABEL, x1 = W - RIGHT;
    unit = tl.unit || "ns";
    var H = AXIS + tl.lanes.length * LANE + 4;
    var svg = el("svg", {viewBox: "0 0 " + W + " " + H, "class": "tl-svg", role: "img"}, box);
    function X(t) { return x0 + (t - lo) / (hi - lo) * (x1 - x0); }
    function inView(t) { return t !== null && t >= lo && t <= hi; }
    var axis = el("g", {"class": "axis"}, svg);
    ticks(lo, hi, 8).forEach(function (t) {
      var x = X(t);
      el("line", {x1: x, x2: x, y1: AXIS - 6, y2: H}, axis);
      text(axis, x + 2, AXIS - 10, fmt(t));
    });
    text(axis, 4, AXIS - 10, unit === "event" ? "traced call number (n)" : "time since the first leg's start");
    var n = {lanes: 0, events: 0, marked: 0, spans: 0, lanesMarked: 0};
    tl.lanes.forEach(function (lane, i) {
      var g = el("g", {"class": "lane" + (lane.m.length ? " marked" : ""), "data-leg": lane.leg === null ? "none" : lane.leg,
                       "data-m": lane.m.join(" "), transform: "translate(0," + (AXIS + i * LANE) + ")"}, svg);
      el("rect", {x: 0, y: 0, width: W, height: LANE - 4, "class": "lane-bg"}, g);
      var label = el("g", {"class": "lanelabel"}, g);
      text(label, 6, 15, lane.leg === null ? lane.kind : "leg " + lane.leg + " " + lane.kind);
      if (lane.pid) text(label, 6, 29, "pid " + lane.pid, "note");
      if (lane.fault) text(label, 6, 43, lane.fault.length > 26 ? lane.fault.slice(0, 25) + "\u2026" : lane.fault, "bad");
      if (lane.capped) text(label, 6, 57, lane.events.length + " of " + lane.total + " events", "warn");
      else if (lane.estimated) text(label, 6, 57, "some times estimated", "warn");
      el("title", {}, label).textContent = (lane.argv || lane.kind) + (lane.fault ? "\nfault: " + lane.fault : "");
      if (lane.start !== null && lane.end !== null) {
        label.addEventListener("click", function () {
          var pad = Math.max(1, (lane.end - lane.start) * 0.03);
          self.draw([lane.start - pad, lane.end + pad]);
        });
      }
      if (lane.start !== null && lane.end !== null && lane.end >= lo && lane.start <= hi) {
        var a = X(Math.max(lo, lane.start)), b = X(Math.min(hi, lane.end));
        var bar = el("rect", {x: a, y: ROW.proc - 6, width: Math.max(1, b - a), height: 12, "class": "proc"}, g);
        el("title", {}, bar).textContent = "leg " + lane.leg + " " + lane.kind + ": " + fmt(lane.start) + " to " + fmt(lane.end) + ", " + lane.exit;
        n.spans++;
        if (inView(lane.end)) text(g, X(lane.end) + 4, ROW.proc + 4, lane.exit, "exit " + lane.exit_class);
      }
      lane.locks.forEach(function (s) {
        var st = s[0] === null ? lo : s[0], en = s[1] === null ? hi : s[1];
        if (en < lo || st > hi) return;
        var a = X(Math.max(lo, st)), b = X(Math.min(hi, en));
        var r = el("rect", {x: a, y: ROW.lock - 4, width: Math.max(1, b - a), height: 8, "class": "lockspan"}, g);
        el("title", {}, r).textContent = "run lock held by pid " + s[2] + ": " + fmt(st) + " to " + fmt(en);
        n.spans++;
      });
      lane.events.forEach(function (ev) {
        if (!inView(ev.t)) return;
        var x = X(ev.t);
        if (ev.m.length) el("line", {x1: x, x2: x, y1: 2, y2: LANE - 6, "class": "markline"}, g);
        var s = shape(g, ev, x);
        s.setAttribute("class", "ev k-" + ev.k + (ev.m.length ? " marked" : ""));
        s.setAttribute("data-key", ev.key);
        s.setAttribute("data-m", ev.m.join(" "));
        el("title", {}, s).textContent = fmt(ev.t) + (ev.est ? " (estimated)" : "") + ": " + ev.label;
        s.addEventListener("click", function () {
          unit = tl.unit || "ns";
          self.side.querySelector(".ev-detail").textContent =
            "leg " + (lane.leg === null ? "-" : lane.leg) + ", " + fmt(ev.t) + ": " + ev.label + "\n" + JSON.stringify(ev.d, null, 1);
        });
        n.events++;
        if (ev.m.length) n.marked++;
      });
      n.lanes++;
      if (lane.m.length) n.lanesMarked++;
    });
    this.brush(svg, X, lo, hi, H);
    box.setAttribute("data-lanes", n.lanes);
    box.setAttribute("data-events", n.events);
    box.setAttribute("data-marked", n.marked);
    box.setAttribute("data-lanes-marked", n.lanesMarked);
    box.setAttribute("data-spans", n.spans);
    box.setAttribute("data-domain", Math.round(lo) + " " + Math.round(hi));
    this.applyFocus();
  };
  Timeline.prototype.brush = function (svg, X, lo, hi, H) {
    var self = this, start = null, rect = null;
    function at(e) {
      var m = svg.getScreenCTM();
      if (!m) return null;
      var p = svg.createSVGPoint(); p.x = e.clientX; p.y = e.clientY;
      return p.matrixTransform(m.inverse()).x;
    }
    function back(x) { return lo + (x - LABEL) / (W - RIGHT - LABEL) * (hi - lo); }
    svg.addEventListener("mousedown", function (e) {
      var x = at(e);
      if (x === null || x < LABEL) return;
      start = x;
      rect = el("rect", {x: x, y: AXIS - 4, width: 0, height: H - AXIS, "class": "brush"}, svg);
      e.preventDefault();
    });
    svg.addEventListener("mousemove", function (e) {
      if (start === null) return;
      var x = at(e);
      rect.setAttribute("x", Math.min(start, x));
      rect.setAttribute("width", Math.abs(x - start));
    });
    svg.addEventListener("mouseup", function (e) {
      if (start === null) return;
      var x = at(e), a = Math.min(start, x), b = Math.max(start, x);
      start = null;
      if (b - a > 4) self.draw([back(a), back(b)]); else if (rect) { rect.remove(); rect = null; }
    });
    svg.addEventListener("dblclick", function () { self.draw(self.full); });
  };
  Timeline.prototype.applyFocus = function () {
    var box = this.box, id = this.focus;
    box.classList.toggle("focus", id !== null);
    Array.prototype.forEach.call(box.querySelectorAll(".hl"), function (e) { e.classList.remove("hl"); });
    if (id === null) return;
    Array.prototype.forEach.call(box.querySelectorAll('[data-m~="' + id + '"]'), function (e) { e.classList.add("hl"); });
  };

  var drawn = 0;
  data.timelines.forEach(function (tl, i) {
    var box = document.querySelector('.tl[data-index="' + i + '"]');
    if (!box) return;
    var section = box.closest("section.trial"), side = section.querySelector(".side");
    var t = new Timeline(box, tl, side);
    t.draw(t.full);
    section.querySelector("button.reset").addEventListener("click", function () { t.draw(t.full); });
    Array.prototype.forEach.call(side.querySelectorAll("button.viol"), function (b) {
      b.addEventListener("click", function () {
        var id = b.getAttribute("data-v");
        t.focus = t.focus === id ? null : id;
        Array.prototype.forEach.call(side.querySelectorAll("button.viol"), function (o) {
          o.classList.toggle("on", o.getAttribute("data-v") === t.focus);
        });
        t.applyFocus();
      });
    });
    drawn++;
  });
  document.body.setAttribute("data-timelines-drawn", String(drawn));
})();
"""

