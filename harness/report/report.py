"""The campaign report: JSON dict, summary table, JUnit XML, Markdown, shard merge, exit status.

A *trial* (input of :func:`build_report`) is a dict: ``scenario``, ``seed``,
``schedule``, ``history`` (a :class:`~harness.history.model.History` or its JSON),
``verdicts`` (:class:`~harness.checkers.Verdict` or their JSON),
``duration_s``, ``faults`` (injected faults per family; derived from the
history's legs when absent) and optionally ``trial`` (its number; default
its position in the list).

The report dict (JSON-ready):

* ``format``: ``"fiskj-harness-report/1"``;
* ``trials``: number of trials;
* ``faults``: injected faults per kind ``kill``, ``suspend``, ``tail``,
  ``power_loss``, ``race`` (:data:`harness.names.FAULT_COUNTS`), plus
  ``crash_states`` (power-loss crash states judged by the cheap tier, an int, 0 when none) and,
  when any, ``crash_resumes`` (crash states recovered by a full resume of the agent)
  — all ints, flat;
* ``invariants``: per id ``{"name", "checked", "valid", "vacuous", "invalid", "unknown"}``
  (``vacuous``: the valid verdicts that had nothing to judge: ``checked: 0`` in their evidence,
  for I2 no tool execution and for I3 no model call);
* ``violations``: one per invalid verdict: ``trial``, ``invariant``, ``name``,
  ``scenario``, ``seed``, ``schedule``, ``summary``, ``evidence``,
  ``reproduce`` (``fiskj-harness replay REPORT --trial K``), ``faults`` (the
  trial's injected faults per kind), ``legs`` (its legs, ``None`` without a
  history) and ``family`` when the trial names it;
* ``unknowns``: the same shape for unknown verdicts;
* ``groups``: the violations grouped by cause, ``unknown_groups`` the unknowns
  (:func:`harness.report.groups.group_rows`: key, count, trials, smallest
  reproducer, one full example); the summary, the Markdown and the JUnit
  show groups, the rows stay here and in the results folder;
* ``scenarios``: per scenario ``{"trials", "invalid_trials", "unknown_trials",
  "duration_s", "invariants": {id: counts}}``;
* ``runs``: per trial ``{"trial", "scenario", "seed", "schedule", "status",
  "duration_s", "faults"}`` (what ``replay`` needs);
* ``elapsed_s``, ``trials_per_s`` (over ``elapsed_s``), ``power_loss_s`` (the summed durations of
  the power-loss trials), ``crash_states_per_s`` and ``crash_resumes_per_s`` (over ``power_loss_s``,
  the time spent on them, not over a campaign that also ran other families; ``None`` when zero);
* ``verdict``: ``invalid`` if any verdict is invalid, else ``unknown`` if any
  is unknown or no trial ran, else ``valid``;
* ``probes`` (campaign reports): the code probes of the reference the
  trials reached and those none reached (:mod:`harness.report.probes`);
* ``interrupted``: true when the campaign was interrupted (SIGINT, SIGTERM:
  :mod:`harness.campaign.interrupt`): the report holds the trials judged
  before it, and ``campaign.interrupted`` says by what and how many of the
  planned trials ran; the verdict is over those trials only.

The JSON Schema of the report is ``schemas/report.schema.json``.

:func:`campaign_report` builds the report of a campaign result, with the
``campaign`` block that ``replay`` and ``merge`` read.

Exit status (:func:`exit_status`): 0 when the verdict is valid, 1 otherwise
(:data:`harness.names.HARNESS_VALID`, :data:`~harness.names.HARNESS_VIOLATION`).
An *unknown* counts as a failure: a checker that crashed or could not
decide has not shown the invariant holds, and a gate must not pass on it.
(Checkers answer ``valid`` when there is nothing to judge, e.g. I1 with no
suspend, so unknown means missing evidence, never "not applicable".)
"""

from __future__ import annotations

import json
import textwrap
from typing import Any
from xml.etree import ElementTree as ET

from harness.report.reproduce import replay_command
from harness.checkers.verdict import INVALID, UNKNOWN, VALID, Verdict, combine, verdict_from_json
from harness.history.model import History, history_from_json
from harness.names import CRASH_RESUMES, CRASH_STATES, FAULT_COUNTS, NOT_INJECTED, HARNESS_VALID, HARNESS_VIOLATION, INVARIANTS
from harness.history.faults import fault_counts
from harness.report.groups import group_rows
from harness.report.probes import merge_probe_sections, probe_lines, probe_section

__all__ = ["FORMAT", "build_report", "campaign_report", "render_summary", "write_junit", "render_markdown",
           "merge_reports", "exit_status"]

FORMAT = "fiskj-harness-report/1"
#: ``vacuous`` counts the valid verdicts that had nothing to judge (the checker's evidence says
#: ``checked: 0``, e.g. I9 in a trial with no refused resume), so a table never passes off
#: "nothing happened" as "proved".
_COUNT_KEYS = ("checked", VALID, "vacuous", INVALID, UNKNOWN)

#: The evidence key that counts an invariant's occasions to judge, where it is not ``checked``
#: (I2's ``checked`` counts re-runs: a trial with executions and no re-run was judged).
_OCCASIONS = {"I2": "executions", "I3": "calls"}


def _counts() -> dict[str, int]:
    return {k: 0 for k in _COUNT_KEYS}


def _faults_of(trial: dict[str, Any], history: History | None) -> dict[str, int]:
    given = trial.get("faults")
    if given:
        return {k: int(v) for k, v in given.items() if isinstance(v, (int, float))}
    return fault_counts(history) if history is not None else {}


def build_report(trials: list[dict[str, Any]], *, report_path: str = "REPORT",
                 elapsed_s: float | None = None) -> dict[str, Any]:
    """Aggregate ``trials`` into the report dict described in the module docstring.

    ``report_path`` is the file the report will be written to (used in the
    ``reproduce`` commands); ``elapsed_s`` the campaign's wall-clock time
    (default: the sum of the trials' durations).
    """
    faults = {f: 0 for f in FAULT_COUNTS}
    faults[CRASH_STATES] = 0
    invariants: dict[str, dict[str, Any]] = {}
    scenarios: dict[str, dict[str, Any]] = {}
    violations: list[dict[str, Any]] = []
    unknowns: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    statuses: list[str] = []
    total_duration = 0.0
    power_loss_s = 0.0
    for pos, trial in enumerate(trials):
        k = int(trial.get("trial", pos))
        raw = trial.get("history")
        history = history_from_json(raw) if isinstance(raw, dict) else raw
        verdicts: list[Verdict] = [verdict_from_json(v) for v in trial.get("verdicts", [])]
        tf = _faults_of(trial, history)
        for fam, n in tf.items():
            faults[fam] = faults.get(fam, 0) + n
        duration = float(trial.get("duration_s") or 0.0)
        total_duration += duration
        if tf.get(CRASH_STATES) or tf.get(CRASH_RESUMES) or tf.get("power_loss"):
            power_loss_s += duration
        name = str(trial.get("scenario") or (history.scenario if history else "?"))
        seed = trial.get("seed", history.seed if history else None)
        schedule = trial.get("schedule", history.schedule if history else [])
        sc = scenarios.setdefault(name, {"trials": 0, "invalid_trials": 0, "unknown_trials": 0,
                                         "duration_s": 0.0, "invariants": {}})
        sc["trials"] += 1
        sc["duration_s"] = round(sc["duration_s"] + duration, 6)
        for v in verdicts:
            inv = invariants.setdefault(v.invariant, {"name": v.name, **_counts()})
            per = sc["invariants"].setdefault(v.invariant, {"name": v.name, **_counts()})
            vacuous = (v.status == VALID and isinstance(v.evidence, dict)
                       and v.evidence.get(_OCCASIONS.get(v.invariant, "checked")) == 0)
            for counts in (inv, per):
                counts["checked"] += 1
                counts[v.status] += 1
                counts["vacuous"] += vacuous
            if v.status in (INVALID, UNKNOWN):
                row = {"trial": k, "invariant": v.invariant, "name": v.name, "scenario": name, "seed": seed,
                       "schedule": schedule, "summary": v.summary, "evidence": v.evidence, "checker": v.checker,
                       "reproduce": replay_command(report_path, k), "faults": tf,
                       "legs": len(history.legs) if history is not None else None}
                if trial.get("family"):
                    row["family"] = trial["family"]
                (violations if v.status == INVALID else unknowns).append(row)
        status = combine([v.status for v in verdicts]) if verdicts else UNKNOWN
        statuses.append(status)
        if status == INVALID:
            sc["invalid_trials"] += 1
        elif status == UNKNOWN:
            sc["unknown_trials"] += 1
        runs.append({"trial": k, "scenario": name, "seed": seed, "schedule": schedule, "status": status,
                     "duration_s": duration, "faults": tf})
    elapsed = float(elapsed_s) if elapsed_s is not None else total_duration
    return _finish({
        "format": FORMAT, "trials": len(trials), "faults": faults,
        "invariants": dict(sorted(invariants.items(), key=lambda kv: _inv_order(kv[0]))),
        "violations": violations, "unknowns": unknowns, "scenarios": scenarios, "runs": runs,
        "elapsed_s": round(elapsed, 6), "report_path": report_path, "interrupted": False,
        "power_loss_s": round(power_loss_s, 6),
    }, statuses)


def campaign_report(result: Any, report_path: str | None) -> dict[str, Any]:
    """The report (:func:`build_report`) of a :class:`harness.campaign.result.CampaignResult`.

    Adds ``campaign`` (subject, seed, jobs, scenario files, shrinks, setup
    errors) so that ``replay`` can re-run any trial; each ``runs`` row gets
    ``origin`` (and ``shrunk_from``), each violation ``reproduce_run`` (a
    self-contained ``fiskj-harness run ... --schedule`` command,
    :func:`harness.report.reproduce.reproduce_command`).  Without a
    report file the ``reproduce`` commands are the self-contained ones.
    """
    trials = []
    for t in result.trials:
        trials.append({
            "trial": t.index, "scenario": t.scenario, "seed": t.seed, "schedule": t.schedule,
            "history": t.history, "verdicts": t.verdicts, "duration_s": round(t.elapsed_s, 6),
            "faults": t.faults, "family": t.family,
        })
    report = build_report(trials, report_path=report_path or "REPORT", elapsed_s=result.elapsed_s)
    by_index = {t.index: t for t in result.trials}
    for row in report.get("runs", []):
        t = by_index.get(row["trial"])
        if t is not None:
            row["origin"] = t.origin
            row.update({k: v for k, v in (("shrunk_from", t.shrunk_from), ("shrink", t.shrink)) if v not in (None, "")})
    for key in ("violations", "unknowns"):
        for row in report.get(key, []):
            t = by_index.get(row["trial"])
            if t is None:
                continue
            row["reproduce_run"] = t.reproduce
            row["origin"] = t.origin
            row.update({k: v for k, v in (("shrunk_from", t.shrunk_from), ("shrink", t.shrink)) if v not in (None, "")})
            if report_path is None:
                row["reproduce"] = t.reproduce
            if t.history is not None and key == "violations":
                row.setdefault("history_notes", t.history.notes)
    cut = getattr(result, "interrupted", None)  # {"signal", "planned", "done"} of an interrupted campaign
    report["interrupted"] = bool(cut)
    report["campaign"] = {
        "interrupted": dict(cut) if cut else None,
        "subject": None if _plain_reference(result.subject) else result.subject.spec(),
        "subject_name": ("fiskj, the reference (python -m fiskj)" if _plain_reference(result.subject)
                         else result.subject.label),
        "subject_env": dict(result.subject.extra_env),
        "not_applicable": dict(getattr(result, "not_applicable", {})),
        "jobs": result.jobs,
        "scenarios": {r.scenario.name: r.scenario.path for r in result.scenarios},
        "seeds": {r.scenario.name: r.seed for r in result.scenarios},
        "references": {r.scenario.name: {"events": r.reference.events, "duration_ms": round(r.reference.duration_ms, 3),
                                         "model_calls": r.reference.reference.model_calls,
                                         "effects": r.reference.reference.effects}
                       for r in result.scenarios if r.reference is not None},
        "shrinks": [{"scenario": t.scenario, "from_trial": t.shrunk_from, "trial": t.index, "schedule": t.schedule,
                     "from_schedule": next((o.schedule for o in result.trials if o.index == t.shrunk_from), None),
                     "reproduce": t.reproduce, "what": t.shrink}
                    for t in result.trials if t.origin == "shrink"],
        "not_shrunk": [{"scenario": t.scenario, "trial": t.index, "why": t.shrink, "reproduce": t.reproduce}
                       for t in result.trials if t.shrink and t.origin != "shrink"],
        "shrink_runs": {r.scenario.name: r.shrink_runs for r in result.scenarios if r.shrink_runs},
        "errors": list(result.errors),
        "limits": list(getattr(result, "limits", [])),
    }
    report["probes"] = probe_section(((t.scenario, t.probes) for t in result.trials),
                                     applies=result.subject is not None and result.subject.caps.fiskj_based,
                                     subject=result.subject.label)
    _group(report)  # again: the rows now carry their origin and commands
    return report


def _plain_reference(subject: Any) -> bool:
    """True for the reference subject as the harness starts it by default (no variables): a report then
    records no subject (``null``), so replay runs the replaying machine's own interpreter, never an
    absolute interpreter path from the machine that wrote the report."""
    return bool(getattr(subject, "is_reference", False)) and not subject.extra_env and not subject.profile


def _inv_order(inv: str) -> tuple[int, str]:
    return (list(INVARIANTS).index(inv), inv) if inv in INVARIANTS else (len(INVARIANTS), inv)


def _finish(report: dict[str, Any], statuses: list[str]) -> dict[str, Any]:
    elapsed, n = report["elapsed_s"], report["trials"]
    report["trials_per_s"] = round(n / elapsed, 3) if elapsed > 0 else None
    spent = float(report.get("power_loss_s") or 0.0) or elapsed  # a merged report: over its elapsed time
    states = report["faults"].get(CRASH_STATES, 0)
    report["crash_states_per_s"] = round(states / spent, 3) if spent > 0 and states else None
    resumes = report["faults"].get(CRASH_RESUMES, 0)
    report["crash_resumes_per_s"] = round(resumes / spent, 3) if spent > 0 and resumes else None
    report["verdict"] = combine(statuses) if statuses else UNKNOWN
    _group(report)
    return report


def _group(report: dict[str, Any]) -> None:
    """Set the report's ``groups`` and ``unknown_groups`` from its rows (:func:`harness.report.groups.group_rows`)."""
    report["groups"] = group_rows(report.get("violations", []), report.get("runs", []))
    report["unknown_groups"] = group_rows(report.get("unknowns", []), report.get("runs", []))


def merge_reports(reports: list[dict[str, Any]], *, report_path: str | None = None) -> dict[str, Any]:
    """Combine shard reports into one: counts summed, trials renumbered, one verdict.

    Trial numbers of later shards are offset so they stay unique (each row
    keeps ``shard`` and ``shard_trial``; each shard's ``campaign`` block, if
    any, is kept in ``campaigns``), and every ``reproduce`` command is
    rewritten for the merged report (``report_path``, default the first
    shard's).  ``elapsed_s`` is the
    longest shard's (shards run in parallel); the rate is over it.
    """
    path = report_path or (reports[0].get("report_path", "REPORT") if reports else "REPORT")
    out: dict[str, Any] = {"format": FORMAT, "trials": 0, "faults": {f: 0 for f in FAULT_COUNTS},
                           "invariants": {}, "violations": [], "unknowns": [], "scenarios": {}, "runs": [],
                           "elapsed_s": 0.0, "report_path": path, "shards": len(reports),
                           "interrupted": any(bool(rep.get("interrupted")) for rep in reports)}
    out["faults"][CRASH_STATES] = 0
    statuses: list[str] = []
    offset = 0
    for shard, rep in enumerate(reports):
        if rep.get("format", FORMAT) != FORMAT:
            raise ValueError(f"cannot merge a report of format {rep.get('format')!r}; expected {FORMAT!r}")
        out["trials"] += int(rep.get("trials", 0))
        for fam, n in rep.get("faults", {}).items():
            out["faults"][fam] = out["faults"].get(fam, 0) + int(n)
        for inv, counts in rep.get("invariants", {}).items():
            _add(out["invariants"].setdefault(inv, {"name": counts.get("name", ""), **_counts()}), counts)
        for name, sc in rep.get("scenarios", {}).items():
            dst = out["scenarios"].setdefault(name, {"trials": 0, "invalid_trials": 0, "unknown_trials": 0,
                                                     "duration_s": 0.0, "invariants": {}})
            for key in ("trials", "invalid_trials", "unknown_trials"):
                dst[key] += int(sc.get(key, 0))
            dst["duration_s"] = round(dst["duration_s"] + float(sc.get("duration_s", 0.0)), 6)
            for inv, counts in sc.get("invariants", {}).items():
                _add(dst["invariants"].setdefault(inv, {"name": counts.get("name", ""), **_counts()}), counts)
        if rep.get("campaign") is not None:
            out.setdefault("campaigns", []).append(rep["campaign"])
        for key in ("violations", "unknowns", "runs"):
            for row in rep.get(key, []):
                row = dict(row, trial=int(row["trial"]) + offset, shard=shard, shard_trial=int(row["trial"]))
                if "reproduce" in row:
                    row["reproduce"] = replay_command(path, row["trial"])
                out[key].append(row)
        offset += max([int(r["trial"]) + 1 for r in rep.get("runs", [])] + [int(rep.get("trials", 0))])
        out["elapsed_s"] = max(out["elapsed_s"], float(rep.get("elapsed_s") or 0.0))
        out["power_loss_s"] = round(float(out.get("power_loss_s") or 0.0) + float(rep.get("power_loss_s") or 0.0), 6)
        statuses.append(rep.get("verdict", UNKNOWN))
    out["invariants"] = dict(sorted(out["invariants"].items(), key=lambda kv: _inv_order(kv[0])))
    report = _finish(out, [])
    report["verdict"] = combine(statuses) if statuses and out["trials"] else UNKNOWN
    probes = merge_probe_sections([rep.get("probes") for rep in reports])
    if probes is not None:
        report["probes"] = probes
    return report


def _add(dst: dict[str, Any], src: dict[str, Any]) -> None:
    for key in _COUNT_KEYS:
        dst[key] += int(src.get(key, 0))


def exit_status(report: dict[str, Any]) -> int:
    """0 when the report's verdict is valid; 1 when invalid or unknown (unknown is not a pass)."""
    return HARNESS_VALID if report.get("verdict") == VALID else HARNESS_VIOLATION


# --- renderings ----------------------------------------------------------------------------


def _fault_line(report: dict[str, Any]) -> str:
    f = report.get("faults", {})
    parts = [f"{fam} {f.get(fam, 0)}" for fam in FAULT_COUNTS]
    said = []
    if f.get(CRASH_STATES):
        said.append(f"{f[CRASH_STATES]} crash states judged")
    if f.get(CRASH_RESUMES):
        said.append(f"{f[CRASH_RESUMES]} resumed in full")
    if said:
        spent = report.get("power_loss_s")
        parts[FAULT_COUNTS.index("power_loss")] += (f" ({', '.join(said)}"
                                                    + (f" in {spent:.1f} s of power-loss trials" if spent else "") + ")")
    extra = [f"{k} {v}" for k, v in f.items()
             if k not in FAULT_COUNTS and k not in (CRASH_STATES, CRASH_RESUMES, NOT_INJECTED)]
    if f.get(NOT_INJECTED):  # scheduled, never fired: those legs tested nothing of their fault
        extra.append(f"(not injected {f[NOT_INJECTED]}: the leg ended before the fault's time or call)")
    return "  ".join(parts + extra)


def _clip(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` characters keeping its start and its end (where a violation names its
    cause), cut between words when a space is near the cut (never more than a sixth of each half lost)."""
    if len(text) <= width:
        return text
    half = width // 2 - 2
    head, tail = text[:half], text[-half:]
    space = head.rfind(" ")
    if space >= half - half // 6:
        head = head[:space]
    space = tail.find(" ")
    if 0 <= space <= half // 6:
        tail = tail[space + 1:]
    return head + " .. " + tail


def render_summary(report: dict[str, Any], max_violations: int = 20) -> str:
    """A fixed-width text summary: trials, faults by kind, invariant table, violations with reproducers."""
    rate = report.get("trials_per_s")
    width = min(72, max([len(c.get("name", "")) for c in report.get("invariants", {}).values()] + [20]) + 2)
    shrinks = sum(1 for r in report.get("runs", []) if r.get("origin") == "shrink")
    lines = [f"fiskj-harness: {report.get('trials', 0)} trial(s)"
             + (f" ({shrinks} of them shrinking a failure)" if shrinks else "")
             + f" in {report.get('elapsed_s', 0):.1f} s"
             + (f" ({rate:.1f} trials/s)" if rate else "") + f"   verdict: {str(report.get('verdict')).upper()}"
             + (" (PARTIAL: interrupted)" if report.get("interrupted") else "")
             + (f" + {len(errs)} setup error(s), listed below (exit 2)"
                if (errs := (report.get("campaign") or {}).get("errors")) else ""),
             f"faults: {_fault_line(report)}", ""]
    if report.get("interrupted"):
        lines[-1:-1] = [_interrupted_line(report)]
    limits = (report.get("campaign") or {}).get("limits") or []
    if limits:
        lines += [f"limits for this subject ({len(limits)}):"] + [f"  {line}" for line in limits] + [""]
    errors = (report.get("campaign") or {}).get("errors") or []
    if errors:
        lines += [f"setup errors ({len(errors)}; exit 2):"] + [f"  {line}" for line in errors] + [""]
    lines += probe_lines(report.get("probes")) + ([""] if report.get("probes") else [])
    lines += [
             f"{'invariant':<10}{'name':<{width}}{'checked':>8}{'valid':>8}{'vacuous':>8}{'invalid':>8}{'unknown':>8}"]
    for inv, c in report.get("invariants", {}).items():
        lines.append(f"{inv:<10}{textwrap.shorten(c.get('name', ''), width - 2, placeholder=' ..'):<{width}}"
                     f"{c['checked']:>8}{c[VALID]:>8}{c.get('vacuous', 0):>8}{c[INVALID]:>8}{c[UNKNOWN]:>8}")
    for inv, why in ((report.get("campaign") or {}).get("not_applicable") or {}).items():
        lines += textwrap.wrap(f"{inv:<10}not applicable to this subject: {why}", 10 + width + 40,
                               subsequent_indent=" " * 10, break_long_words=False)
    lines.append(f"{'':<10}(vacuous: valid with nothing to judge in that trial, e.g. no suspend for I1)")
    for title, rows_key, groups_key in (("violations", "violations", "groups"),
                                        ("unknown verdicts", "unknowns", "unknown_groups")):
        rows = report.get(rows_key, [])
        if not rows:
            continue
        groups = _groups_of(report, rows_key, groups_key)
        lines += ["", f"{title}: {len(rows)} in {len(groups)} group(s) by cause"
                  + (f" (every row: {_rows_path(report)})" if _rows_path(report) not in (None, "REPORT")
                     else "") + ":"]
        for n, group in enumerate(groups[:max_violations], 1):
            rep, ex = group["reproducer"], group["example"]
            lines.append(f"  [{n}] {group['title']}: {group['count']} trial(s) in {', '.join(group['scenarios'])}")
            lines.append(f"      example: trial {ex['trial']} seed={ex['seed']}: {_clip(str(ex['summary']), 300)}")
            lines.append(f"      smallest reproducer: trial {rep['trial']} ({_size_text(rep)}), {rep['minimal']}")
            lines.append(f"      schedule: {_clip(json.dumps(rep.get('schedule')), 150)}")
            lines.append(f"      reproduce: {rep.get('reproduce')}")
        if len(groups) > max_violations:
            lines.append(f"  ... {len(groups) - max_violations} more group(s) ({_where_all(report)})")
    if not report.get("violations") and not report.get("unknowns"):
        lines += ["", "no violations"]
    return "\n".join(lines) + "\n"


def _rows_path(report: dict[str, Any]) -> str | None:
    """The file that holds this report's rows: ``rows_path`` when the report says (``check`` names the
    stored campaign's report for its replays, but its own rows are only in the file ``--report-json``
    writes), else ``report_path``."""
    return report["rows_path"] if "rows_path" in report else report.get("report_path")


def _where_all(report: dict[str, Any]) -> str:
    """Where every group is: the report's file when it is written to one, else how to get one."""
    path = _rows_path(report)
    if path not in (None, "REPORT"):
        return f"all of them are in {path}"
    return "not shown; --report-json FILE writes all of them"


def _interrupted_line(report: dict[str, Any]) -> str:
    """``INTERRUPTED by SIGINT after 37 of 200 planned trial(s): this report is partial``."""
    cut = (report.get("campaign") or {}).get("interrupted") or {}
    after = f" after {cut['done']} of {cut['planned']} planned trial(s)" if cut.get("planned") else ""
    return f"INTERRUPTED by {cut.get('signal', 'a signal')}{after}: this report is partial"


def _groups_of(report: dict[str, Any], rows_key: str, groups_key: str) -> list[dict[str, Any]]:
    """The report's groups of ``rows_key``, computed when the report has none (a report of an older version)."""
    groups = report.get(groups_key)
    if not isinstance(groups, list):
        groups = group_rows(report.get(rows_key, []), report.get("runs", []))
    return groups


def _size_text(rep: dict[str, Any]) -> str:
    legs = rep.get("legs")
    return f"{rep.get('faults', 0)} fault(s)" + (f", {legs} leg(s)" if legs is not None else "") + \
        f", seed {rep.get('seed')}"


def write_junit(report: dict[str, Any], path: str, properties: list[tuple[str, str]] | None = None) -> None:
    """Write JUnit XML: a testcase per scenario x invariant that held, and one per group of violations.

    ``properties``: ``(name, value)`` pairs written as the suite's ``<properties>`` (the gate's budget,
    trials per scenario and seeds: :func:`harness.campaign.gate.gate_properties`).

    A scenario invariant with no verdict (``checked`` 0) is a skipped test
    case; a scenario with an ``error`` (setup) makes each of its cases an
    error.  A scenario invariant with an invalid or unknown verdict has no
    case of its own: each group by cause (the report's ``groups``, unknown
    ones ``unknown_groups``; :mod:`harness.report.groups`) is one test case,
    named after the group's title (``I2 unattributed_rerun [kill]``), with a
    ``failure`` (invalid) or an ``error`` (unknown) holding the group's
    count, its smallest reproducer and its example's evidence.  So one bug
    found in 200 trials is one failure, not 200.  An interrupted campaign's
    report has one more case, ``campaign interrupted``, with an ``error``.
    """
    suite = ET.Element("testsuite", name="fiskj-harness")
    if properties:
        props = ET.SubElement(suite, "properties")
        for name, value in properties:
            ET.SubElement(props, "property", name=name, value=value)
    tests = failures = errors = skipped = 0
    for name, sc in sorted(report.get("scenarios", {}).items()):
        n = max(sc.get("trials", 0), 1)
        for inv, c in sc.get("invariants", {}).items():
            if not sc.get("error") and (c.get(INVALID) or c.get(UNKNOWN)):
                continue  # reported by its group(s) below
            tests += 1
            case = ET.SubElement(suite, "testcase", classname=f"fiskj-harness.{name}",
                                 name=f"{inv} {c.get('name', '')}".strip(),
                                 time=f"{sc.get('duration_s', 0.0) / n:.3f}")
            if sc.get("error"):  # the scenario could not run (its reference run failed, ...)
                errors += 1
                ET.SubElement(case, "error", message=str(sc["error"])[:300], type="setup")
                continue
            if not c.get("checked"):  # no trial judged it (e.g. a gate's budget ran out first)
                skipped += 1
                ET.SubElement(case, "skipped", message="no trial of this scenario was judged")
    for kind, tag, rows_key, groups_key in ((INVALID, "failure", "violations", "groups"),
                                            (UNKNOWN, "error", "unknowns", "unknown_groups")):
        for group in _groups_of(report, rows_key, groups_key):
            tests += 1
            failures += tag == "failure"
            errors += tag == "error"
            scenarios = group["scenarios"]
            case = ET.SubElement(suite, "testcase", name=group["title"], time="0.000",
                                 classname="fiskj-harness." + (scenarios[0] if len(scenarios) == 1 else "groups"))
            rep, ex = group["reproducer"], group["example"]
            el = ET.SubElement(case, tag, type=kind,
                               message=f"{group['count']} trial(s) {kind} in {', '.join(scenarios)}: "
                                       f"{_clip(str(ex.get('summary', '')), 200)}")
            el.text = (f"{group['name']}\n"
                       f"trials: {', '.join(map(str, group['trials'][:50]))}"
                       + (" ..." if len(group["trials"]) > 50 else "") + "\n"
                       f"smallest reproducer: trial {rep.get('trial')} ({_size_text(rep)}), {rep.get('minimal')}\n"
                       f"schedule: {json.dumps(rep.get('schedule'))}\n"
                       f"reproduce: {rep.get('reproduce')}\n"
                       + (f"reproduce (self-contained): {rep['reproduce_run']}\n" if rep.get("reproduce_run") else "")
                       + f"evidence (trial {ex.get('trial')}): "
                       f"{json.dumps(ex.get('evidence'), default=str)[:4000]}")
    if report.get("interrupted"):  # a partial campaign is never a pass
        tests += 1
        errors += 1
        case = ET.SubElement(suite, "testcase", name="campaign interrupted", classname="fiskj-harness.campaign",
                             time="0.000")
        ET.SubElement(case, "error", type="interrupted", message=_interrupted_line(report))
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    suite.set("time", f"{report.get('elapsed_s', 0.0):.3f}")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def render_markdown(report: dict[str, Any], max_violations: int = 20) -> str:
    """A Markdown summary (for ``$GITHUB_STEP_SUMMARY``): verdict, faults, invariants, violations."""
    mark = {VALID: "✅ valid", INVALID: "❌ invalid", UNKNOWN: "⚠️ unknown"}.get(report.get("verdict"), "?")
    rate = report.get("trials_per_s")
    out = ["## fiskj-harness: " + mark + (" (partial: interrupted)" if report.get("interrupted") else ""), "",
           f"{report.get('trials', 0)} trial(s) in {report.get('elapsed_s', 0):.1f} s"
           + (f" ({rate:.1f} trials/s)" if rate else ""), ""]
    if report.get("interrupted"):
        out += [f"**⚠️ {_interrupted_line(report)}**", ""]
    out += ["| fault | count |", "|---|---:|"]
    out += [f"| {k} | {v} |" for k, v in report.get("faults", {}).items()]
    out += ["", *(f"- {_md(line.strip())}" for line in probe_lines(report.get("probes"), width=1 << 20))]  # one bullet each
    out += ["", "| invariant | name | checked | valid | vacuous | invalid | unknown |", "|---|---|---:|---:|---:|---:|---:|"]
    for inv, c in report.get("invariants", {}).items():
        out.append(f"| {inv} | {c.get('name', '')} | {c['checked']} | {c[VALID]} | {c.get('vacuous', 0)} | "
                   f"{c[INVALID]} | {c[UNKNOWN]} |")
    for title, rows_key, groups_key in (("Violations", "violations", "groups"),
                                        ("Unknown verdicts", "unknowns", "unknown_groups")):
        rows = report.get(rows_key, [])
        if not rows:
            continue
        groups = _groups_of(report, rows_key, groups_key)
        out += ["", f"### {title}: {len(rows)} in {len(groups)} group(s) by cause", "",
                "| # | cause | trials | scenarios | smallest reproducer | example |", "|---:|---|---:|---|---|---|"]
        for n, group in enumerate(groups[:max_violations], 1):
            rep, ex = group["reproducer"], group["example"]
            summary = _md(_clip(str(ex.get("summary", "")), 200))
            out.append(f"| {n} | **{_md(group['title'])}** | {group['count']} | {_md(', '.join(group['scenarios']))} | "
                       f"trial {rep.get('trial')} ({_size_text(rep)}; {rep.get('minimal')}): "
                       f"`{_md(str(rep.get('reproduce')))}` | trial {ex.get('trial')}: {summary} |")
        if len(groups) > max_violations:
            out.append(f"\n... {len(groups) - max_violations} more group(s) ({_where_all(report)})")
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    """``text`` safe in a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")
