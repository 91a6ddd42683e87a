"""The campaign report: JSON dict, summary table, JUnit XML, Markdown, shard merge, exit status.

The report's fields, its verdict and exit status are docs/results.md "The JSON report"; its JSON Schema is
``schemas/report.schema.json``.  The text renderings share one view of the groups (:func:`group_sections`).
"""

from __future__ import annotations

import json
import textwrap
from typing import Any
from xml.etree import ElementTree as ET

from harness.report.reproduce import replay_command
from harness.checkers.verdict import INVALID, UNKNOWN, VALID, Verdict, combine, verdict_from_json
from harness.history.model import history_from_json
from harness.names import CRASH_RESUMES, CRASH_STATES, FAULT_COUNTS, NOT_INJECTED, HARNESS_VALID, HARNESS_VIOLATION
from harness.history.faults import fault_counts
from harness.report.groups import group_rows, invariant_order
from harness.report.probes import merge_probe_sections, probe_lines, probe_section

__all__ = ["FORMAT", "build_report", "campaign_report", "render_summary", "write_junit", "render_markdown",
           "merge_reports", "exit_status", "empty_counts", "empty_scenario", "group_sections", "reproducer_text",
           "fault_line", "interrupted_line", "rate_text"]

FORMAT = "fiskj-harness-report/1"
#: ``vacuous``: valid verdicts with nothing to judge (``checked: 0`` in their evidence).
_COUNT_KEYS = ("checked", VALID, "vacuous", INVALID, UNKNOWN)

#: The evidence key that counts an invariant's occasions to judge, where it is not ``checked``
#: (I2's ``checked`` counts re-runs: a trial with executions and no re-run was judged).
_OCCASIONS = {"I2": "executions", "I3": "calls"}
#: Keys of a trial dict copied into its ``runs`` row, and (with ``_ROW_KEYS``) its violation rows.
_RUN_KEYS = ("origin", "shrunk_from", "shrink")
_ROW_KEYS = ("family", "reproduce_run", "history_notes")


def empty_counts(name: str = "") -> dict[str, Any]:
    """An invariant's verdict counts (``name``, then :data:`_COUNT_KEYS`) before any verdict: all 0."""
    return {"name": name, **{k: 0 for k in _COUNT_KEYS}}


def empty_scenario() -> dict[str, Any]:
    """A report's ``scenarios`` entry before any trial: no trial, no verdict."""
    return {"trials": 0, "invalid_trials": 0, "unknown_trials": 0, "duration_s": 0.0, "invariants": {}}


def build_report(trials: list[dict[str, Any]], *, report_path: str | None = "REPORT",
                 elapsed_s: float | None = None) -> dict[str, Any]:
    """Aggregate ``trials`` into the report dict (docs/results.md "The JSON report").

    A trial is a dict: ``scenario``, ``seed``, ``schedule``, ``history`` (a History or its JSON),
    ``verdicts`` (Verdicts or their JSON), ``duration_s``, ``faults`` (per kind; from the history's legs
    when absent), optionally ``trial`` (its number; default its position), ``family``, ``origin``,
    ``shrunk_from``, ``shrink``, ``reproduce_run`` and ``history_notes``.  ``report_path``: the file the report will
    be written to (its ``reproduce`` commands replay from it; ``None``: they are the ``reproduce_run``
    ones); ``elapsed_s``: the campaign's wall-clock time (default: the sum of the trials' durations).
    """
    faults = {f: 0 for f in (*FAULT_COUNTS, CRASH_STATES)}
    invariants: dict[str, dict[str, Any]] = {}
    scenarios: dict[str, dict[str, Any]] = {}
    rows: dict[str, list[dict[str, Any]]] = {INVALID: [], UNKNOWN: []}
    runs: list[dict[str, Any]] = []
    statuses: list[str] = []
    total_duration = power_loss_s = 0.0
    for pos, trial in enumerate(trials):
        k = int(trial.get("trial", pos))
        raw = trial.get("history")
        history = history_from_json(raw) if isinstance(raw, dict) else raw
        verdicts: list[Verdict] = [verdict_from_json(v) for v in trial.get("verdicts", [])]
        given = trial.get("faults")
        tf = ({f: int(n) for f, n in given.items() if isinstance(n, (int, float))} if given
              else fault_counts(history) if history is not None else {})
        for fam, n in tf.items():
            faults[fam] = faults.get(fam, 0) + n
        duration = float(trial.get("duration_s") or 0.0)
        total_duration += duration
        if tf.get(CRASH_STATES) or tf.get(CRASH_RESUMES) or tf.get("power_loss"):
            power_loss_s += duration
        name = str(trial.get("scenario") or (history.scenario if history else "?"))
        seed = trial.get("seed", history.seed if history else None)
        schedule = trial.get("schedule", history.schedule if history else [])
        sc = scenarios.setdefault(name, empty_scenario())
        sc["trials"] += 1
        sc["duration_s"] = round(sc["duration_s"] + duration, 6)
        run = {k2: trial[k2] for k2 in _RUN_KEYS if trial.get(k2) not in (None, "")}
        for v in verdicts:
            vacuous = (v.status == VALID and isinstance(v.evidence, dict)
                       and v.evidence.get(_OCCASIONS.get(v.invariant, "checked")) == 0)
            for counts in (invariants.setdefault(v.invariant, empty_counts(v.name)),
                           sc["invariants"].setdefault(v.invariant, empty_counts(v.name))):
                counts["checked"] += 1
                counts[v.status] += 1
                counts["vacuous"] += vacuous
            if v.status in rows:
                rows[v.status].append({
                    "trial": k, "invariant": v.invariant, "name": v.name, "scenario": name, "seed": seed,
                    "schedule": schedule, "summary": v.summary, "evidence": v.evidence, "checker": v.checker,
                    "reproduce": (replay_command(report_path, k) if report_path is not None
                                  else trial.get("reproduce_run")),
                    "faults": tf, "legs": len(history.legs) if history is not None else None, **run,
                    **{k2: trial[k2] for k2 in _ROW_KEYS if trial.get(k2) and (k2 != "history_notes"
                                                                                or v.status == INVALID)}})
        status = combine([v.status for v in verdicts]) if verdicts else UNKNOWN
        statuses.append(status)
        if status in (INVALID, UNKNOWN):
            sc[f"{status}_trials"] += 1
        runs.append({"trial": k, "scenario": name, "seed": seed, "schedule": schedule, "status": status,
                     "duration_s": duration, "faults": tf, **run})
    elapsed = float(elapsed_s) if elapsed_s is not None else total_duration
    return _finish({
        "format": FORMAT, "trials": len(trials), "faults": faults,
        "invariants": dict(sorted(invariants.items(), key=lambda kv: invariant_order(kv[0]))),
        "violations": rows[INVALID], "unknowns": rows[UNKNOWN], "scenarios": scenarios, "runs": runs,
        "elapsed_s": round(elapsed, 6), "report_path": report_path or "REPORT", "interrupted": False,
        "power_loss_s": round(power_loss_s, 6),
    }, statuses)


def campaign_report(result: Any, report_path: str | None) -> dict[str, Any]:
    """The report (:func:`build_report`) of a :class:`harness.campaign.result.CampaignResult`, with the
    ``campaign`` block that ``replay`` and ``merge`` read.  Without a report file (``report_path`` ``None``)
    the ``reproduce`` commands are the self-contained ones."""
    report = build_report([
        {"trial": t.index, "scenario": t.scenario, "seed": t.seed, "schedule": t.schedule, "history": t.history,
         "verdicts": t.verdicts, "duration_s": round(t.elapsed_s, 6), "faults": t.faults, "family": t.family,
         "origin": t.origin, "shrunk_from": t.shrunk_from, "shrink": t.shrink, "reproduce_run": t.reproduce,
         "history_notes": t.history.notes if t.history is not None else None}
        for t in result.trials], report_path=report_path, elapsed_s=result.elapsed_s)
    cut = result.interrupted
    report["interrupted"] = bool(cut)
    plain = _plain_reference(result.subject)
    report["campaign"] = {
        "interrupted": dict(cut) if cut else None,
        "subject": None if plain else result.subject.spec(),
        "subject_name": "fiskj, the reference (python -m fiskj)" if plain else result.subject.label,
        "subject_env": dict(result.subject.extra_env),
        "subject_env_read": result.subject.read_env(),
        "subject_about": "fiskj/: this repository's journal and resume engine" if plain else result.subject.about,
        "promises": result.subject.semantics,
        "not_applicable": dict(getattr(result, "not_applicable", {})),
        "jobs": result.jobs,
        "scenarios": {r.scenario.name: r.scenario.path for r in result.scenarios},
        "families": {r.scenario.name: r.family.name for r in result.scenarios if r.family is not None},
        "not_run": {r.scenario.name: (r.not_run or r.error or "").removeprefix(f"{r.scenario.path}: ")
                    for r in result.scenarios if r.not_run or r.error},
        "seeds": {r.scenario.name: r.seed for r in result.scenarios},
        "references": {r.scenario.name: {"events": r.reference.events, "duration_ms": round(r.reference.duration_ms, 3),
                                         "model_calls": r.reference.reference.model_calls,
                                         "effects": r.reference.reference.effects}
                       for r in result.scenarios if r.reference is not None},
        "unjudged": _unjudged(result, report["scenarios"]),
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
    return report


def _plain_reference(subject: Any) -> bool:
    """True for the reference subject as the harness starts it by default (no variables): a report then
    records no subject (``null``), so replay runs the replaying machine's own interpreter, never an
    absolute interpreter path from the machine that wrote the report."""
    return bool(getattr(subject, "is_reference", False)) and not subject.extra_env and not subject.profile


def _finish(report: dict[str, Any], statuses: list[str]) -> dict[str, Any]:
    elapsed, n = report["elapsed_s"], report["trials"]
    report["trials_per_s"] = round(n / elapsed, 3) if elapsed > 0 else None
    spent = float(report.get("power_loss_s") or 0.0) or elapsed  # a merged report: over its elapsed time
    for key, fault in (("crash_states_per_s", CRASH_STATES), ("crash_resumes_per_s", CRASH_RESUMES)):
        count = report["faults"].get(fault, 0)
        report[key] = round(count / spent, 3) if spent > 0 and count else None
    report["verdict"] = combine(statuses) if statuses else UNKNOWN
    report["groups"] = group_rows(report.get("violations", []), report.get("runs", []))
    report["unknown_groups"] = group_rows(report.get("unknowns", []), report.get("runs", []))
    return report


def merge_reports(reports: list[dict[str, Any]], *, report_path: str | None = None) -> dict[str, Any]:
    """Combine shard reports into one (docs/results.md "The JSON report"): counts summed, trials renumbered,
    every ``reproduce`` rewritten for ``report_path`` (default the first shard's), one verdict.  Raises
    ``ValueError`` for a report of another format."""
    path = report_path or (reports[0].get("report_path", "REPORT") if reports else "REPORT")
    out: dict[str, Any] = {"format": FORMAT, "trials": 0, "faults": {f: 0 for f in (*FAULT_COUNTS, CRASH_STATES)},
                           "invariants": {}, "violations": [], "unknowns": [], "scenarios": {}, "runs": [],
                           "elapsed_s": 0.0, "report_path": path, "shards": len(reports), "power_loss_s": 0.0,
                           "interrupted": any(bool(rep.get("interrupted")) for rep in reports)}
    statuses: list[str] = []
    offset = 0
    for shard, rep in enumerate(reports):
        if rep.get("format", FORMAT) != FORMAT:
            raise ValueError(f"cannot merge a report of format {rep.get('format')!r}; expected {FORMAT!r}")
        out["trials"] += int(rep.get("trials", 0))
        for fam, n in rep.get("faults", {}).items():
            out["faults"][fam] = out["faults"].get(fam, 0) + int(n)
        _add(out["invariants"], rep.get("invariants", {}))
        for name, sc in rep.get("scenarios", {}).items():
            dst = out["scenarios"].setdefault(name, empty_scenario())
            for key in ("trials", "invalid_trials", "unknown_trials"):
                dst[key] += int(sc.get(key, 0))
            dst["duration_s"] = round(dst["duration_s"] + float(sc.get("duration_s", 0.0)), 6)
            _add(dst["invariants"], sc.get("invariants", {}))
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
        out["power_loss_s"] = round(out["power_loss_s"] + float(rep.get("power_loss_s") or 0.0), 6)
        statuses.append(rep.get("verdict", UNKNOWN))
    out["invariants"] = dict(sorted(out["invariants"].items(), key=lambda kv: invariant_order(kv[0])))
    report = _finish(out, statuses if out["trials"] else [])
    probes = merge_probe_sections([rep.get("probes") for rep in reports])
    if probes is not None:
        report["probes"] = probes
    return report


def _add(dst: dict[str, dict[str, Any]], src: dict[str, dict[str, Any]]) -> None:
    """Add the invariant counts ``src`` (id -> counts) into ``dst``."""
    for inv, counts in src.items():
        into = dst.setdefault(inv, empty_counts(counts.get("name", "")))
        for key in _COUNT_KEYS:
            into[key] += int(counts.get(key, 0))


def exit_status(report: dict[str, Any]) -> int:
    """0 when the report's verdict is valid; 1 when invalid or unknown (unknown is not a pass)."""
    return HARNESS_VALID if report.get("verdict") == VALID else HARNESS_VIOLATION


# --- renderings: one view of the facts (_sections, _reproducer), drawn as text, JUnit and Markdown ----------


def group_sections(report: dict[str, Any]) -> list[tuple[str, str, list[dict[str, Any]], list[dict[str, Any]]]]:
    """``(title, status, rows, groups)`` of the violations and the unknown verdicts that the report has; the
    groups are computed for a report that has none (an older version)."""
    out = []
    for title, status, rows_key, groups_key in (("violations", INVALID, "violations", "groups"),
                                                ("unknown verdicts", UNKNOWN, "unknowns", "unknown_groups")):
        rows = report.get(rows_key) or []
        groups = report.get(groups_key)
        if not isinstance(groups, list):
            groups = group_rows(rows, report.get("runs") or [])
        if rows or groups:
            out.append((title, status, rows, groups))
    return out


def reproducer_text(rep: dict[str, Any]) -> str:
    """``trial 3 (1 fault(s), 2 leg(s), seed 7), already minimal: a single fault``."""
    legs = rep.get("legs")
    return (f"trial {rep.get('trial')} ({rep.get('faults', 0)} fault(s)"
            + (f", {legs} leg(s)" if legs is not None else "") + f", seed {rep.get('seed')}), {rep.get('minimal')}")


def fault_line(report: dict[str, Any]) -> str:
    """The injected faults by kind, with the crash states judged and resumed beside ``power_loss`` (beside
    ``kill`` when only kills judged from one recording resumed crash states)."""
    f = report.get("faults", {})
    parts = [f"{fam} {f.get(fam, 0)}" for fam in FAULT_COUNTS]
    said = [f"{f[key]} {what}" for key, what in ((CRASH_STATES, "crash states judged"),
                                                 (CRASH_RESUMES, "resumed in full")) if f.get(key)]
    if said:  # beside power loss; with no power loss, beside the kills judged from one recording
        spent = report.get("power_loss_s") if f.get("power_loss") else None
        fam = "power_loss" if f.get("power_loss") or not f.get("kill") else "kill"
        parts[FAULT_COUNTS.index(fam)] += (f" ({', '.join(said)}"
                                           + (f" in {spent:.1f} s of power-loss trials" if spent else "") + ")")
    extra = [f"{k} {v}" for k, v in f.items()
             if k not in FAULT_COUNTS and k not in (CRASH_STATES, CRASH_RESUMES, NOT_INJECTED)]
    if f.get(NOT_INJECTED):  # scheduled, never fired: those legs tested nothing of their fault
        extra.append(f"(not injected {f[NOT_INJECTED]}: the leg ended before the fault's time or call)")
    return "  ".join(parts + extra)


def _clip(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` characters without joining two parts of it into one claim: whole
    ``; ``-separated clauses kept from its start, its last clause kept (where a violation names its cause), the
    clauses between said as ``...``; else its start cut between words and ended with `` ...``."""
    if len(text) <= width:
        return text
    parts = text.split("; ")
    head: list[str] = []
    for part in parts[:-1] if len(parts) > 2 else ():
        if len("; ".join([*head, part, "...", parts[-1]])) > width:
            break
        head.append(part)
    if head:
        return "; ".join([*head, "...", parts[-1]])
    cut = text[:width - 4]
    space = cut.rfind(" ")
    return (cut[:space] if space >= len(cut) * 5 // 6 else cut) + " ..."


def rate_words(rate: float) -> str:
    """A rate of trials per second in words a reader can use: ``4.0 trials/s`` at 1/s or more, else the
    seconds a trial takes (``12.5 s/trial``: a slow agent's rate never reads as ``0.0 trials/s``)."""
    return f"{rate:.1f} trials/s" if rate >= 0.95 else f"{1.0 / rate:.1f} s/trial"


def rate_text(report: dict[str, Any], note: str = "") -> str:
    """``12 trial(s)NOTE in 3.0 s (4.0 trials/s)`` (:func:`rate_words`)."""
    rate = report.get("trials_per_s")
    return (f"{report.get('trials', 0)} trial(s){note} in {report.get('elapsed_s', 0):.1f} s"
            + (f" ({rate_words(rate)})" if rate else ""))


def _unjudged(result: Any, scenarios: dict[str, Any]) -> dict[str, list[str]]:
    """Per scenario that ran trials, the invariants its ``[check]`` lists that no trial judged (not those the
    subject declares not applicable): its plan's trials did not reach them (a power-loss plan of one trial
    resumes no crash state in full), which the table alone would not show."""
    out = {}
    for run in result.scenarios:
        judged, check = scenarios.get(run.scenario.name, {}), getattr(run.scenario, "check", None)
        if check is not None and run.error is None and not run.skipped and judged.get("trials"):
            missed = [i for i in check.invariants
                      if i not in judged.get("invariants", {}) and i not in getattr(result, "not_applicable", {})]
            if missed:
                out[run.scenario.name] = missed
    return out


def render_summary(report: dict[str, Any], max_violations: int = 20) -> str:
    """A fixed-width text summary: trials, faults by kind, invariant table, violations with reproducers."""
    width = min(72, max([len(c.get("name", "")) for c in report.get("invariants", {}).values()] + [20]) + 2)
    shrinks = sum(1 for r in report.get("runs", []) if r.get("origin") == "shrink")
    camp = report.get("campaign") or {}
    errors, limits = camp.get("errors") or [], camp.get("limits") or []
    lines = [f"fiskj-harness: {rate_text(report, f' ({shrinks} of them shrinking a failure)' if shrinks else '')}"
             + f"   verdict: {str(report.get('verdict')).upper()}"
             + (" (PARTIAL: interrupted)" if report.get("interrupted") else "")
             + (f" + {len(errors)} setup error(s), listed below (exit 2)" if errors else ""),
             f"faults: {fault_line(report)}"]
    if camp.get("promises"):
        lines.append(f"promises: {camp['promises']}")
    if report.get("interrupted"):
        lines.append(interrupted_line(report))
    lines.append("")
    unjudged = [f"{name}: {', '.join(i)}" for name, i in (camp.get("unjudged") or {}).items()]
    for title, given in ((f"limits for this subject ({len(limits)}):", limits),
                         (f"setup errors ({len(errors)}; exit 2):", errors),
                         (f"checked by no trial run, though the scenario lists them ({len(unjudged)}; its plan's "
                          "trials did not reach them: more --trials may):", unjudged)):
        if given:
            lines += [title] + [f"  {line}" for line in given] + [""]
    if not report.get("trials"):  # nothing ran: no table of zeros, no probes, never "no violations"
        return "\n".join(lines + ["nothing judged: no trial ran" + (" (setup errors above)" if errors else "")]) + "\n"
    lines += probe_lines(report.get("probes")) + ([""] if report.get("probes") else [])
    lines.append(f"{'invariant':<10}{'name':<{width}}" + "".join(f"{k:>8}" for k in _COUNT_KEYS))
    for inv, c in report.get("invariants", {}).items():
        lines.append(f"{inv:<10}{textwrap.shorten(c.get('name', ''), width - 2, placeholder=' ..'):<{width}}"
                     + "".join(f"{c.get(k, 0):>8}" for k in _COUNT_KEYS))
    for inv, why in (camp.get("not_applicable") or {}).items():
        lines += textwrap.wrap(f"{inv:<10}not applicable to this subject: {why}", 10 + width + 40,
                               subsequent_indent=" " * 10, break_long_words=False)
    lines.append(f"{'':<10}(vacuous: valid with nothing to judge in that trial, e.g. no suspend for I1)")
    rows_path = _rows_path(report)
    for title, _, rows, groups in group_sections(report):
        lines += ["", f"{title}: {len(rows)} in {len(groups)} group(s) by cause"
                  + (f" (every row: {rows_path})" if rows_path not in (None, "REPORT") else "") + ":"]
        for n, group in enumerate(groups[:max_violations], 1):
            rep, ex = group["reproducer"], group["example"]
            lines += [f"  [{n}] {group['title']}: {group['count']} trial(s) in {', '.join(group['scenarios'])}"]
            lines += [f"      {_clip(group['sentence'], 300)}"] if group.get("sentence") else []
            lines += [f"      example: trial {ex['trial']} seed={ex['seed']}: {_clip(str(ex['summary']), 300)}",
                      f"      smallest reproducer: {reproducer_text(rep)}",
                      f"      schedule: {_clip(json.dumps(rep.get('schedule')), 150)}",
                      f"      reproduce: {rep.get('reproduce')}"]
        if len(groups) > max_violations:
            lines.append(f"  ... {len(groups) - max_violations} more group(s) ({_where_all(report)})")
    if not report.get("violations") and not report.get("unknowns"):
        lines += ["", "no violations"]
    return "\n".join(lines) + "\n"


def _rows_path(report: dict[str, Any]) -> str | None:
    """The file that holds this report's rows: ``rows_path`` when the report says (``check`` names the
    stored campaign's report for its replays, but its own rows are only in ``--report-json``), else
    ``report_path``."""
    return report["rows_path"] if "rows_path" in report else report.get("report_path")


def _where_all(report: dict[str, Any]) -> str:
    """Where every group is: the report's file when it is written to one, else how to get one."""
    path = _rows_path(report)
    if path not in (None, "REPORT"):
        return f"all of them are in {path}"
    return "not shown; --report-json FILE writes all of them"


def interrupted_line(report: dict[str, Any]) -> str:
    """``INTERRUPTED by SIGINT after 37 of 200 planned trial(s): this report is partial``."""
    cut = (report.get("campaign") or {}).get("interrupted") or {}
    after = f" after {cut['done']} of {cut['planned']} planned trial(s)" if cut.get("planned") else ""
    return f"INTERRUPTED by {cut.get('signal', 'a signal')}{after}: this report is partial"


def write_junit(report: dict[str, Any], path: str, properties: list[tuple[str, str]] | None = None) -> None:
    """Write JUnit XML: a testcase per scenario x invariant that held, and one per group of violations
    (docs/results.md "Violations grouped by cause"; so one bug found in 200 trials is one failure).

    ``properties``: ``(name, value)`` pairs written as the suite's ``<properties>`` (the gate's:
    :func:`harness.campaign.gate.gate_properties`).  A scenario invariant no trial judged is skipped; a
    scenario with a setup ``error`` makes each of its cases an error; a group is a ``failure`` (invalid) or
    an ``error`` (unknown) named after its title, holding its count, smallest reproducer and example's
    evidence; an interrupted campaign adds the error case ``campaign interrupted``.
    """
    suite = ET.Element("testsuite", name="fiskj-harness")
    if properties:
        props = ET.SubElement(suite, "properties")
        for name, value in properties:
            ET.SubElement(props, "property", name=name, value=value)
    counts = {"tests": 0, "failure": 0, "error": 0, "skipped": 0}

    def case(classname: str, name: str, time: str, tag: str | None = None, **attrs: str) -> ET.Element:
        counts["tests"] += 1
        el = ET.SubElement(suite, "testcase", classname=classname, name=name, time=time)
        if tag is not None:
            counts[tag] += 1
            el = ET.SubElement(el, tag, **attrs)
        return el

    for name, sc in sorted(report.get("scenarios", {}).items()):
        n = max(sc.get("trials", 0), 1)
        for inv, c in sc.get("invariants", {}).items():
            if not sc.get("error") and (c.get(INVALID) or c.get(UNKNOWN)):
                continue  # reported by its group(s) below
            args = (f"fiskj-harness.{name}", f"{inv} {c.get('name', '')}".strip(),
                    f"{sc.get('duration_s', 0.0) / n:.3f}")
            if sc.get("error"):  # the scenario could not run (its reference run failed, ...)
                case(*args, "error", message=str(sc["error"])[:300], type="setup")
            elif not c.get("checked"):  # no trial judged it (e.g. a gate's budget ran out first)
                case(*args, "skipped", message="no trial of this scenario was judged")
            else:
                case(*args)
    for _, kind, _, groups in group_sections(report):
        for group in groups:
            scenarios, rep, ex = group["scenarios"], group["reproducer"], group["example"]
            el = case("fiskj-harness." + (scenarios[0] if len(scenarios) == 1 else "groups"), group["title"], "0.000",
                      "failure" if kind == INVALID else "error", type=kind,
                      message=f"{group['count']} trial(s) {kind} in {', '.join(scenarios)}: "
                              f"{_clip(str(ex.get('summary', '')), 200)}")
            el.text = (f"{group['name']}\n"
                       f"trials: {', '.join(map(str, group['trials'][:50]))}"
                       + (" ..." if len(group["trials"]) > 50 else "") + "\n"
                       f"smallest reproducer: {reproducer_text(rep)}\n"
                       f"schedule: {json.dumps(rep.get('schedule'))}\n"
                       f"reproduce: {rep.get('reproduce')}\n"
                       + (f"reproduce (self-contained): {rep['reproduce_run']}\n" if rep.get("reproduce_run") else "")
                       + f"evidence (trial {ex.get('trial')}): "
                       f"{json.dumps(ex.get('evidence'), default=str)[:4000]}")
    if report.get("interrupted"):  # a partial campaign is never a pass
        case("fiskj-harness.campaign", "campaign interrupted", "0.000", "error", type="interrupted",
             message=interrupted_line(report))
    for attr, key in (("tests", "tests"), ("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
        suite.set(attr, str(counts[key]))
    suite.set("time", f"{report.get('elapsed_s', 0.0):.3f}")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def render_markdown(report: dict[str, Any], max_violations: int = 20) -> str:
    """A Markdown summary (for ``$GITHUB_STEP_SUMMARY``): verdict, faults, invariants, violations."""
    mark = {VALID: "✅ valid", INVALID: "❌ invalid", UNKNOWN: "⚠️ unknown"}.get(report.get("verdict"), "?")
    out = ["## fiskj-harness: " + mark + (" (partial: interrupted)" if report.get("interrupted") else ""), "",
           rate_text(report), ""]
    if report.get("interrupted"):
        out += [f"**⚠️ {interrupted_line(report)}**", ""]
    out += ["| fault | count |", "|---|---:|"]
    out += [f"| {k} | {v} |" for k, v in report.get("faults", {}).items()]
    out += ["", *(f"- {_md(line.strip())}" for line in probe_lines(report.get("probes"), width=1 << 20))]  # one bullet each
    out += ["", "| invariant | name | " + " | ".join(_COUNT_KEYS) + " |", "|---|---|" + "---:|" * len(_COUNT_KEYS)]
    for inv, c in report.get("invariants", {}).items():
        out.append(f"| {inv} | {c.get('name', '')} | " + " | ".join(str(c.get(k, 0)) for k in _COUNT_KEYS) + " |")
    for title, _, rows, groups in group_sections(report):
        out += ["", f"### {title[:1].upper() + title[1:]}: {len(rows)} in {len(groups)} group(s) by cause", "",
                "| # | cause | trials | scenarios | smallest reproducer | example |", "|---:|---|---:|---|---|---|"]
        for n, group in enumerate(groups[:max_violations], 1):
            rep, ex = group["reproducer"], group["example"]
            summary = _md(_clip(str(ex.get("summary", "")), 200))
            out.append(f"| {n} | **{_md(group['title'])}** | {group['count']} | {_md(', '.join(group['scenarios']))} | "
                       f"{_md(reproducer_text(rep))}: `{_md(str(rep.get('reproduce')))}` | "
                       f"trial {ex.get('trial')}: {summary} |")
        if len(groups) > max_violations:
            out.append(f"\n... {len(groups) - max_violations} more group(s) ({_where_all(report)})")
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    """``text`` safe in a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")
