"""The HTML report: one self-contained page (campaign table, violation groups, a timeline per failing trial).

What it shows, its bounds and its escaping are docs/results.md "The HTML report"; a trial's timeline data is
:mod:`harness.report.timeline`'s, the legend, style sheet and script are ``harness/report/assets/``."""

from __future__ import annotations

import functools
import html
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import quote

from harness.checkers.verdict import combine
from harness.history.model import History
from harness.report.marks import evidence_marks
from harness.report.timeline import (MAX_EVENTS_PER_LANE, MAX_EVIDENCE_CHARS, MAX_EXCERPT, MAX_VIOLATIONS, _json_text,
                                     timeline)

__all__ = ["MAX_TRIALS", "MAX_EVENTS_PER_LANE", "MAX_EXCERPT", "MAX_OUTPUT", "MAX_EVIDENCE_CHARS", "MAX_VIOLATIONS",
           "TrialView", "trial_view", "evidence_marks", "timeline", "render_html", "write_html"]

#: At most this many failing trials get a timeline (each group's smallest reproducer first).
MAX_TRIALS = 20
#: Characters of a leg's stdout and stderr shown (their end).
MAX_OUTPUT = 2000


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
        return combine([v.get("status") for v in self.verdicts])


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
    verdicts = [v.to_json() if hasattr(v, "to_json") else dict(v) for v in get("verdicts") or []]
    if judged:
        verdicts = [v for v in verdicts if v.get("invariant") in judged]
    return TrialView(trial=int(number if number is not None else 0), scenario=str(get("scenario") or history.scenario),
                     seed=get("seed", history.seed), history=history,
                     verdicts=verdicts, schedule=list(get("schedule") or history.schedule or []),
                     folder=str(folder) if folder is not None else get("folder"),
                     replay=replay, origin=get("origin"))


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
    from harness.report.report import fault_line, interrupted_line, rate_text

    verdict = str(report.get("verdict", "unknown"))
    camp = report.get("campaign") or {}
    out = [f'<p class="verdict {_e(verdict)}">verdict: <b id="verdict">{_e(verdict.upper())}</b></p>',
           f"<p>{_e(rate_text(report))}" + (f"; subject: {_e(camp['subject_name'])}" if camp.get("subject_name")
                                           else "") + "</p>", f"<p>faults: {_e(fault_line(report))}</p>"]
    if report.get("interrupted"):
        out.append(f'<p class="warn">{_e(interrupted_line(report))}</p>')
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
    from harness.report.report import group_sections, reproducer_text

    def link(t: Any, text: str) -> str:
        return f'<a href="#trial-{_e(t)}">{_e(text)}</a>' if t in drawn else _e(text)

    out = []
    for title, _, rows, groups in group_sections(report):
        out.append(f"<h3>{_e(title[:1].upper() + title[1:])}: {len(rows)} in {len(groups)} group(s) by cause</h3>")
        for n, g in enumerate(groups, 1):
            rep, ex = g.get("reproducer") or {}, g.get("example") or {}
            trials = g.get("trials") or []
            links = ", ".join(link(t, str(t)) for t in trials[:60]) + (
                f" ... ({len(trials) - 60} more)" if len(trials) > 60 else "")
            out.append(
                f'<div class="group" data-group="{n}"><h4>[{n}] {_e(g.get("title", ""))}: {_e(g.get("count", 0))} '
                f"trial(s) in {_e(', '.join(g.get('scenarios') or []))}</h4>"
                f"<p><b>{_e(g.get('sentence', ''))}</b></p><p>{_e(g.get('name', ''))}</p><p>trials: {links}</p>"
                f"<p>smallest reproducer: {link(rep.get('trial'), reproducer_text(rep))}</p>"
                f"<p>schedule: <code>{_e(json.dumps(rep.get('schedule'), default=str)[:400])}</code></p>"
                + "".join(f"<p>{label}: <code>{_e(rep[key])}</code></p>" for label, key in
                          (("replay", "reproduce"), ("self-contained", "reproduce_run")) if rep.get(key))
                + f"<details><summary>example: trial {_e(ex.get('trial'))}: {_e(str(ex.get('summary', ''))[:300])}"
                f"</summary><pre>{_e(_json_text(ex.get('evidence')))}</pre></details></div>")
    if not out:
        out.append("<p>no violations</p>")
    return "\n".join(out)


def _order(views: list[TrialView], report: dict[str, Any]) -> list[TrialView]:
    """Failing trials, each group's reproducer and example first, then in trial order."""
    from harness.report.groups import key_trials

    rank = {t: i for i, t in enumerate(key_trials(report))}
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
    if notes:
        info.append('<ul class="notes">' + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    items = [f'<li><button type="button" class="viol" data-v="{v["id"]}">{_e(v["invariant"])} {_e(v["kind"])}</button>'
             + (f' <span class="note">({v["more"]} more in trial.json)</span>' if v.get("more") else "")
             + f'<div class="vsum">{_e(v["summary"])}</div>'
             f'<pre class="evidence" data-v="{v["id"]}">{_e(v["json"])}</pre></li>' for v in tl["violations"]]
    aside = ('<aside class="side"><p><b>evidence</b> (click one to pick out what it names)</p>'
             f'<ol class="viols">{"".join(items)}</ol><p><b>selected event</b></p>'
             '<pre class="ev-detail">(click an event of the timeline)</pre></aside>')
    box = (f'<div class="tl-wrap"><div class="tl-main"><div class="tl-bar"><button type="button" class="reset">'
           "reset zoom</button> drag across the timeline to zoom; click a leg's name to zoom to it</div>"
           f'<div class="tl" id="tl-{_e(view.trial)}" data-index="{number}" data-expect-lanes="{len(tl["lanes"])}" '
           f'data-expect-events="{tl["events"]}"><noscript>the timeline needs JavaScript</noscript></div></div>'
           f"{aside}</div>")
    outputs = [f"<details><summary>leg {_e(leg.index)} {name} (last {min(len(text), MAX_OUTPUT)} of {len(text)} "
               f"characters)</summary><pre>{_e(text[-MAX_OUTPUT:])}</pre></details>"
               for leg in sorted(h.legs, key=lambda x: x.index)
               for name, text in (("stderr", leg.stderr), ("stdout", leg.stdout)) if text]
    return head + "".join(info) + box + "".join(outputs) + "</section>"


@functools.cache
def assets() -> tuple[str, str, str]:
    """The page's static text, inlined so it needs no network: (style sheet, script that draws each trial's
    timeline from the page's JSON block, timeline legend), from ``harness/report/assets/``."""
    folder = Path(__file__).with_name("assets")
    return tuple(  # type: ignore[return-value]
        (folder / name).read_text(encoding="utf-8") for name in ("report.css", "report.js", "legend.html"))


def render_html(report: dict[str, Any], views: Iterable[TrialView]) -> str:
    """The whole report page (one self-contained HTML document) of ``report`` (a
    :func:`harness.report.report.build_report` dict) and its failing trials ``views``: the campaign table,
    the groups and at most :data:`MAX_TRIALS` timelines.  Escapes everything it takes from histories."""
    chosen = _order(list(views), report)
    failing = len(chosen)
    shown = chosen[:MAX_TRIALS]
    timelines = [timeline(v.history, v.verdicts) for v in shown]
    drawn = {v.trial for v in shown}
    sections = [_trial_section(v, tl, i) for i, (v, tl) in enumerate(zip(shown, timelines))]
    payload = {"timelines": [{"trial": v.trial, "end": tl["end"], "unit": tl["unit"], "lanes": tl["lanes"],
                              "violations": [{"id": x["id"], "invariant": x["invariant"], "kind": x["kind"]}
                                             for x in tl["violations"]]}
                             for v, tl in zip(shown, timelines)]}
    css, js, legend = assets()
    name = "fiskj-harness report"
    names = sorted((report.get("scenarios") or {}).keys())
    if names:
        name += ": " + (names[0] if len(names) == 1 else f"{len(names)} scenarios")
    trials_note = (f"<p>{failing} failing trial(s) kept" + (f"; timelines of {len(shown)} (each group's smallest "
                   "reproducer and example first; the others are in trials/)" if failing > len(shown) else "")
                   + "</p>") if failing else "<p>no failing trial kept</p>"
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
        "style-src 'unsafe-inline'; img-src data:\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(name)}</title><style>{css}</style></head>\n<body>",
        f"<h1>{_e(name)}</h1>",
        '<section id="campaign"><h2>Campaign</h2>', _campaign(report), "</section>\n",
        '<section id="groups"><h2>Violations by cause</h2>', _groups(report, drawn), "</section>\n",
        '<section id="trials"><h2>Failing trials</h2>', trials_note, legend, "\n".join(sections), "</section>\n",
        f'<script id="fiskj-data" type="application/json">{_script_json(payload)}</script>\n',
        f"<script>{js}</script>\n</body></html>\n"])


def write_html(path: str | os.PathLike[str], report: dict[str, Any], views: Iterable[TrialView]) -> Path:
    """Write :func:`render_html` to ``path`` (through a temporary file and a rename); returns the path."""
    p = Path(path)
    text = render_html(report, views)
    tmp = p.with_name(f".{p.name}.tmp")
    tmp.write_text(text, encoding="utf-8", errors="replace")  # (a lone surrogate in some output)
    os.replace(tmp, p)
    return p
