"""The ``fiskj-harness`` command: campaigns, replay, the CI gate, shard merging and the mutant self-test.

``fiskj-harness run [SCENARIO...] [--trials N] [--seed S] [--jobs J] [--subject CMD]
[--report-json FILE] [--junit FILE] [--schedule JSON] [--shard I/N] [--save-regression DIR]
[--results DIR] [--keep failures|all|none]``:
run a campaign (default: every bundled ``scenarios/*.toml``), show its
progress on stderr (:mod:`harness.cli.progress`: the total and an ETA on a
terminal, a status line every 10 s elsewhere) and a summary table at the end
(violations grouped by cause, :mod:`harness.report.groups`).
``--shard I/N`` runs shard I (0-based) of N of the campaign's trials;
``--save-regression DIR`` writes one scenario file per violation from its
shrunk schedule (:mod:`harness.campaign.regressions`).  Every campaign
writes a results folder (``fiskj-results/NAME/TIME/``, :mod:`harness.report.results_dir`,
docs/results.md): its reports and, per failing trial (every trial with
``--keep all``), the trial's history, journals, traces, output, effects and
model calls; ``--keep none`` writes none, ``--results DIR`` chooses the root.

``fiskj-harness check DIR``: judge the histories stored in a results folder
(or one trial folder) again with the current checkers, running nothing;
exit status as a campaign's.

``fiskj-harness replay REPORT --trial K``: re-run trial K of a JSON report
(same scenario, seed, schedule and subject) and judge it again; the report
may have been moved (its scenarios are found by bundled name or relative to
it, :mod:`harness.report.portable`).

``fiskj-harness gate [--budget SECONDS] [--junit FILE] [--summary FILE]``:
the bundled and regression scenarios, spending a time budget: their counts,
then fresh rounds with new seeds until it ends (:mod:`harness.campaign.gate`,
:mod:`harness.cli.gate_cmd`); the Markdown summary is also appended to
``$GITHUB_STEP_SUMMARY`` when that is set.

``fiskj-harness merge REPORT... [--report-json OUT]``: combine the JSON
reports of shards into one report and one verdict; only one complete set of
shards of one campaign merges (:func:`harness.campaign.shard.check_shard_set`).

``fiskj-harness mutants [NAME...] [--json] [--budget SECONDS]``: the
mutant self-test (:mod:`harness.selftest.run`): exit 0 when every mutant is
caught, 1 when one is not.

``--subject`` may name a mutant by its user-facing name, as reproducers
write it (``FISKJ_MUTANT=no-fsync python -m harness.selftest.subject``):
the mutant's preload is added (:func:`harness.selftest.mutants.with_preload`).

Exit status (:mod:`harness.names`): 0 every checked invariant held; 1 a
violation (or an undecided ``unknown`` verdict, which is not a pass); 2 a
usage or setup error (bad arguments, a scenario that does not parse, a
reference run that does not complete, a subject that does not start, shard
reports that are not one complete set); 130 interrupted by SIGINT (Ctrl-C),
143 by SIGTERM.

Interruption (:mod:`harness.campaign.interrupt`, docs/ci.md): SIGINT or
SIGTERM during ``run``, ``gate``, ``replay`` or ``mutants`` stops launching
trials, ends the running ones (their processes killed), writes the partial
report marked ``"interrupted": true`` (JSON, JUnit, Markdown, the results
folder), removes the trial directories and exits 130 or 143, without a
traceback, also when stdout or stderr is a closed pipe.

``fiskj-harness --version`` prints the version (:data:`fiskj.__version__`,
the package's one version constant).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fiskj.cli_common import positive_int

from harness.campaign import interrupt
from harness.cli.gate_cmd import add_gate_parser
from harness.names import HARNESS_USAGE, HARNESS_VALID, HARNESS_VIOLATION

__all__ = ["main", "build_parser", "resolve_scenarios", "subject_of", "version_text"]


class _Usage(Exception):
    """A usage or setup error: printed as one line, exit 2."""


def resolve_scenarios(args: list[str]) -> list[Any]:
    """Load the scenarios named on the command line.

    Each argument is a ``.toml`` file, a directory (its ``*.toml``), or the
    name of a bundled scenario (``kill-random`` for
    ``scenarios/kill-random.toml``), optionally followed by ``@wK``: draw K
    of a generated scenario (``[workload] generate``, which expands into its
    draws ``NAME.wK``: :mod:`harness.scenario.generate`).  No argument:
    every bundled scenario.
    Returns :class:`harness.scenario.parse.Scenario` objects; raises
    :class:`harness.scenario.parse.ScenarioError` (file, line, key) or ``_Usage``.
    """
    from harness.scenario.generate import expand_all, split_draw
    from harness.scenario.parse import ScenarioError, bundled_scenario_dir, bundled_scenarios, load_scenario

    def _named(arg: str) -> bool:  # a file, a directory or a bundled scenario by that very name
        try:
            return Path(arg).exists() or (bundled_scenario_dir() / f"{arg.removesuffix('.toml')}.toml").exists()
        except ScenarioError:
            return Path(arg).exists()

    draws = [(a, None) if _named(a) else split_draw(a) for a in args]
    if any(k is not None for _, k in draws):  # NAME@wK: draw K of a generated scenario (its reproducers)
        picked = []
        for base, k in draws:
            for s in resolve_scenarios([base]):
                if k is None:
                    picked.append(s)
                    continue
                if s.draw is None and not s.workload.generate:
                    raise _Usage(f"{base}@w{k}: scenario {s.name!r} generates no workloads")
                if s.draw == k:
                    picked.append(s)
            if k is not None and not any(s.draw == k for s in picked):
                n = len([s for s in resolve_scenarios([base]) if s.draw is not None])
                raise _Usage(f"{base}@w{k}: the scenario has no draw {k} (its draws: @w0 .. @w{n - 1})")
        return picked
    paths: list[Path] = []
    if not args:
        paths = bundled_scenarios()
        if not paths:
            raise _Usage(f"no scenarios in {bundled_scenario_dir()}")
    for arg in args:
        p = Path(arg)
        if p.is_dir():
            found = sorted(p.glob("*.toml"))
            if not found:
                raise _Usage(f"no *.toml scenarios in directory {arg}")
            paths += found
        elif p.exists():
            paths.append(p)
        else:
            try:
                candidate = bundled_scenario_dir() / (arg if arg.endswith(".toml") else arg + ".toml")
            except ScenarioError:
                candidate = None
            if candidate is None or not candidate.exists():
                raise _Usage(f"no scenario {arg!r}: not a file, a directory or a bundled scenario name")
            paths.append(candidate)
    scenarios = expand_all([load_scenario(p) for p in paths])  # a generated scenario: one per drawn workload
    names: dict[str, str] = {}
    for s in scenarios:
        if s.name in names and names[s.name] != s.path:
            raise _Usage(f"two scenarios are named {s.name!r}: {names[s.name]} and {s.path}")
        names[s.name] = str(s.path)
    return scenarios


def version_text() -> str:
    """What ``--version`` prints: ``fiskj-harness 0.1.0 (fiskj 0.1.0, Python 3.11.7)``, from
    :data:`fiskj.__version__`, the package's one version constant (pyproject.toml's ``version`` equals it,
    tests/test_cli_harness.py checks)."""
    import platform

    from fiskj import __version__

    return f"fiskj-harness {__version__} (fiskj {__version__}, Python {platform.python_version()})"


def _progress(args: argparse.Namespace, final: bool = True) -> Any:
    """The progress display of a campaign command (:class:`harness.cli.progress.Progress` on stderr), or ``None``
    with ``-q``."""
    from harness.cli.progress import Progress

    return None if args.quiet else Progress(sys.stderr, final=final)


def subject_of(command: str | list[str] | None, extra_env: dict[str, str] | None = None) -> Any:
    """The :class:`harness.subject.contract.Subject` of a ``--subject`` value (a command prefix or a profile
    file, :func:`harness.subject.profile.resolve_subject`), plus ``extra_env``, with the
    preload of a mutant named by ``FISKJ_MUTANT`` (:func:`harness.selftest.mutants.with_preload`).

    Raises ``_Usage`` for a subject that does not parse or an unknown mutant.
    """
    from dataclasses import replace

    from harness.selftest.mutants import with_preload
    from harness.subject.profile import resolve_subject

    try:
        subject = resolve_subject(command)
        if extra_env:
            subject = replace(subject, extra_env=tuple(subject.extra_env) + tuple(sorted(extra_env.items())))
        return with_preload(subject)
    except ValueError as exc:
        raise _Usage(f"--subject: {exc}") from None
    except KeyError as exc:
        raise _Usage(f"--subject: {exc.args[0]}") from None


def _write_json(path: str, data: dict[str, Any]) -> None:
    from harness.report.results_dir import write_json

    write_json(path, data)


def _write_report(path: str, report: dict[str, Any]) -> None:
    """Write the JSON ``report`` to ``path``, with the references that let it replay from anywhere
    (:func:`harness.report.portable.portable`)."""
    from harness.report.portable import portable

    _write_json(path, portable(report, path))


def _write_reports(report: dict[str, Any], args: argparse.Namespace) -> None:
    """Write ``report`` to ``--report-json`` and ``--junit``, where given."""
    from harness.report.report import write_junit

    if args.report_json:
        _write_report(args.report_json, report)
    if args.junit:
        write_junit(report, args.junit)


def _exit(report: dict[str, Any], errors: list[Any], ran: bool, nothing_ran: str,
          error: str = "setup error") -> int:
    """The exit status of a finished command: 2 when there are ``errors`` (each printed as
    ``fiskj-harness: <error>: ...``) or nothing ``ran`` (``nothing_ran`` printed); else 0 when every checked
    invariant of ``report`` held, 1 when not.  An interrupted command: ``128 + signal`` (130, 143), said on
    stderr with how many trials ran."""
    from harness.report.report import exit_status

    for err in errors:
        print(f"fiskj-harness: {error}: {err}", file=sys.stderr)
    if interrupt.requested():
        cut = (report.get("campaign") or {}).get("interrupted") or {}
        done = f" after {cut['done']} of {cut['planned']} planned trial(s)" if cut.get("planned") else ""
        where = f"; partial report: {report['report_path']}" if report.get("report_path") not in (None, "REPORT") \
            else ""
        print(f"fiskj-harness: interrupted by {interrupt.signal_name(interrupt.signum() or 2)}{done}{where}",
              file=sys.stderr)
        return interrupt.exit_status(interrupt.signum() or 2)
    if errors:
        return HARNESS_USAGE
    if not ran:
        print(f"fiskj-harness: {nothing_ran}", file=sys.stderr)
        return HARNESS_USAGE
    return exit_status(report)


def _shrink_lines(report: dict[str, Any]) -> str:
    """One line per shrink of the campaign (and its reproducer): a schedule of one fault is said to be
    already minimal, not shrunk (the shrink only moved its fault to an earlier failing point)."""
    out = []
    for s in report["campaign"]["shrinks"]:
        before, after = s.get("from_schedule"), s["schedule"]
        if before is not None and len(after) > len(before):  # the search found another failure, not a smaller one
            out.append(f"not shrunk: trial {s['from_trial']} ({s['scenario']}, {len(before)} fault(s)) stays the "
                       f"smallest reproducer; the shrink found another failing schedule, trial {s['trial']} "
                       f"({len(after)} fault(s)): {json.dumps(after)}\n")
        elif before is not None and len(before) <= 1:
            out.append(f"already minimal: trial {s['from_trial']} ({s['scenario']}) has a single fault; its earliest "
                       f"failing point is trial {s['trial']}: {json.dumps(after)}\n")
        else:
            what = (f"{len(before)} fault(s) -> {len(after)}, each at its earliest failing point"
                    if before is not None else "")
            out.append(f"shrunk: trial {s['from_trial']} -> trial {s['trial']} ({s['scenario']}; {what}): "
                       f"{json.dumps(after)}\n")
        if s.get("reproduce"):
            out.append(f"    reproduce: {s['reproduce']}\n")
    return "".join(out)


def _finish(report: dict[str, Any], result: Any, args: argparse.Namespace, out: Any,
            results: dict[str, Any] | None = None) -> int:
    from harness.report.report import render_summary

    _write_reports(report, args)
    if not args.quiet:
        out.write(render_summary(report))
        out.write(_shrink_lines(report))
        if results is not None:
            out.write(_results_line(results))
    elif results is not None:
        print(f"fiskj-harness: results in {results['folder']}", file=sys.stderr)
    return _exit(report, result.errors, bool(result.trials), "no trial ran")


def _results_line(results: dict[str, Any]) -> str:
    n = len(results["trials"])
    more = f", {results['not_kept']} more failing not kept" if results.get("not_kept") else ""
    return (f"results: {results['folder']}  (report.html, report.json, junit.xml, summary.md, {n} trial "
            f"folder(s){more}; judge them again: fiskj-harness check {results['folder']})\n")


def cmd_run(args: argparse.Namespace, out: Any = None) -> int:
    """``fiskj-harness run``: returns the exit status."""
    from harness.campaign.campaign import Campaign, subject_limits
    from harness.subject.contract import default_subject

    out = out or sys.stdout
    scenarios = resolve_scenarios(args.scenarios)
    schedules = None
    if args.schedule is not None:
        try:
            parsed = json.loads(args.schedule)
        except ValueError as exc:
            raise _Usage(f"--schedule is not JSON: {exc}") from None
        schedules = [parsed]
    subject = subject_of(args.subject)
    if args.no_readings:  # I10 is then not applicable: said before the first trial, never counted valid
        from dataclasses import replace as _replace
        base = subject or default_subject()
        subject = _replace(base, status_args=None, not_applicable=tuple(base.not_applicable) + (
            ("I10", "--no-readings: the subject's own reading is not asked"),))
    progress = _progress(args)
    try:
        campaign = Campaign(scenarios, trials=args.trials, seed=args.seed, jobs=args.jobs, subject=subject,
                            progress=progress, shrink_budget=args.shrink_budget, schedules=schedules,
                            shard=args.shard, keep_histories=args.keep == "all",
                            first_violation=args.first_violation,
                            skip_unsupported=not args.scenarios and schedules is None)  # the bundled set
    except ValueError as exc:
        raise _Usage(f"--schedule: {exc}") from None
    for line in subject_limits(scenarios, subject or default_subject()):  # said before the first trial
        print(f"fiskj-harness: limit for this subject: {line}", file=sys.stderr)
    from harness.report.results_dir import default_root, results_name, results_parent

    root, name = args.results or default_root(), results_name([s.name for s in scenarios])
    if args.keep != "none":
        results_parent(root, name)  # a root that cannot be written is said before the trials
    started = datetime.now(timezone.utc)  # names the results folder, made once the campaign is done
    try:
        result = campaign.run()
    finally:
        if progress is not None:
            progress.close()
    with interrupt.deferred():  # a signal now lets the reports be written whole, then exits 130/143
        return _run_reports(args, result, root, name, started, out)


def _run_reports(args: argparse.Namespace, result: Any, root: str, name: str, started: datetime, out: Any) -> int:
    """The reports of ``run``'s campaign ``result``: the results folder, ``--report-json``, ``--junit``,
    regression scenarios, the summary; returns the exit status."""
    from harness.report.report import campaign_report
    from harness.report.results_dir import make_results_dir

    folder = make_results_dir(root, name, started) if args.keep != "none" else None
    report_path = args.report_json or (str(folder / "report.json") if folder is not None else None)
    report = campaign_report(result, report_path)
    if folder is not None:
        report["campaign"]["results"] = str(folder)
    if args.shard:
        report["campaign"]["shard"] = f"{args.shard[0]}/{args.shard[1]}"
    if args.save_regression:
        from harness.campaign.regressions import save_regressions

        for path in save_regressions(result, args.save_regression):
            print(f"fiskj-harness: regression scenario {path}", file=sys.stderr)
    results = None
    if folder is not None:
        from harness.report.report import render_summary
        from harness.report.results_dir import write_results

        results = write_results(folder, report, result, keep=args.keep,
                                summary=render_summary(report) + _shrink_lines(report),
                                command=["fiskj-harness", *getattr(args, "argv", sys.argv[1:])])
    return _finish(report, result, args, out, results)


def cmd_replay(args: argparse.Namespace, out: Any = None) -> int:
    """``fiskj-harness replay REPORT --trial K``: re-run one trial of a report; returns the exit status.

    The replayed trial keeps its number ``K`` in what is printed and written (``--report-json``: its row,
    group and ``replay ... --trial K`` reproducer), so the new report replays the same way."""
    from harness.campaign.campaign import Campaign
    from harness.scenario.generate import expand
    from harness.scenario.parse import load_scenario

    out = out or sys.stdout
    try:
        with open(args.report, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError) as exc:
        raise _Usage(f"cannot read report {args.report}: {exc}") from None
    from harness.report.portable import scenario_path, subject_profile

    if not isinstance(report, dict) or not isinstance(report.get("runs", []), list):
        raise _Usage(f"report {args.report} is not a fiskj-harness report (no runs)")
    rows = [r for r in report.get("runs", []) if isinstance(r, dict) and _int(r.get("trial")) == args.trial]
    if not rows:
        raise _Usage(f"report {args.report} has no trial {args.trial} (it has {len(report.get('runs', []))})")
    row = rows[0]
    campaign_info = report.get("campaign") or {}
    scenario = load_scenario(scenario_path(report, row["scenario"], args.report))
    scenario = next((s for s in expand(scenario) if s.name == row["scenario"]), scenario)  # a generated draw
    if args.subject:
        subject = subject_of(args.subject)
    else:
        profile = subject_profile(report, args.report)
        subject = subject_of(profile if profile is not None else campaign_info.get("subject"),
                             campaign_info.get("subject_env"))
    campaign = Campaign([scenario], seed=row.get("seed"), jobs=1, subject=subject, shrink_budget=0,
                        schedules=[row.get("schedule", [])], keep_histories=True, origin="replay")
    result = campaign.run()
    if len(result.trials) == 1:  # the trial keeps its number: its rows, groups and reproducer say trial K
        result.trials[0].index = args.trial
    with interrupt.deferred():
        return _replay_reports(args, result, out)


def _replay_reports(args: argparse.Namespace, result: Any, out: Any) -> int:
    """What ``replay`` prints and writes of its one-trial campaign ``result``; returns the exit status."""
    from harness.history.model import history_to_json
    from harness.report.report import campaign_report

    if args.history and result.trials and result.trials[0].history is not None:
        _write_json(args.history, history_to_json(result.trials[0].history))
    for t in result.trials:
        out.write(f"trial {t.index} {t.scenario} seed={t.seed} schedule={json.dumps(t.schedule)} "
                  f"(replayed from {args.report})\n")
        for v in t.verdicts:
            out.write(f"  {v.invariant} {v.status:<8} {v.summary[:150]}\n")
    new_report = campaign_report(result, args.report_json)
    return _finish(new_report, result, args, out)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


#: Trials ``check`` lists one by one before it only counts them (a verdict that changed is always listed).
_CHECK_LINES = 50


def cmd_check(args: argparse.Namespace, out: Any = None) -> int:
    """``fiskj-harness check DIR``: judge the stored histories of a results folder (or a trial folder, or a
    ``history.json``) again with the current checkers, running nothing; returns the exit status (0 every
    checked invariant holds, 1 a violation or unknown, 2 nothing to judge or a folder that cannot be read,
    raised as :class:`harness.errors.ResultsError`)."""
    from harness.report.report import build_report, render_summary
    from harness.report.results_dir import load_stored, recheck

    out = out or sys.stdout
    where, stored_report, stored = load_stored(args.dir)
    if not stored:
        runs = len((stored_report or {}).get("runs", []))
        raise _Usage(f"{where} holds no trial history to judge"
                     + (f" (its campaign ran {runs} trial(s) and kept only failing ones: none failed; "
                        "run with --keep all to keep every trial)" if stored_report is not None else ""))
    started = time.monotonic()
    trials = recheck(stored)
    elapsed = time.monotonic() - started
    changed = shown = 0
    for t in trials:
        now = {v.invariant: v for v in t["verdicts"]}
        moved = {inv: was for inv, was in t["stored"].items() if inv in now and was != now[inv].status}
        changed += bool(moved)
        if not moved and shown >= _CHECK_LINES:  # a verdict that changed is always shown
            continue
        shown += 1
        head = f"trial {t['trial']} {t['scenario']} seed={t['seed']}"
        if not moved and all(v.status == "valid" for v in t["verdicts"]):
            out.write(f"{head}: all {len(t['verdicts'])} valid\n")
        for v in t["verdicts"]:
            if v.status != "valid" or v.invariant in moved:
                was = f" (stored: {moved[v.invariant]})" if v.invariant in moved else ""
                out.write(f"{head}: {v.invariant} {v.status}{was}: {v.summary[:200]}\n")
    if len(trials) > shown:
        out.write(f"... {len(trials) - shown} more trial(s) with the verdicts they had (every one: --report-json)\n")
    report_path = str(Path(where) / "report.json") if stored_report is not None else "REPORT"
    report = build_report(trials, report_path=report_path, elapsed_s=elapsed)  # the time it took to judge
    report["rows_path"] = getattr(args, "report_json", None)  # the stored report.json holds the old rows
    report["check"] = {"folder": str(where), "judged": len(trials), "changed": changed,
                       "campaign_trials": len((stored_report or {}).get("runs", [])) or None}
    for row in report["violations"] + report["unknowns"]:  # where each judged trial is stored
        src = next((s for s in trials if s["trial"] == row["trial"]), None)
        if src is not None:
            row["folder"] = src["folder"]
    _write_reports(report, args)
    if not args.quiet:
        out.write("\n" + render_summary(report))
        total = report["check"]["campaign_trials"]
        out.write(f"judged {len(trials)} stored trial(s)" + (f" of the campaign's {total}" if total else "")
                  + f" again with the current checkers; {changed} verdict set(s) changed from the stored ones\n")
    return _exit(report, [], True, "")


def _write_summary(markdown: str, path: str | None) -> None:
    """Write the Markdown summary to ``path`` (if given) and append it to ``$GITHUB_STEP_SUMMARY`` (if set)."""
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(markdown)
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        with open(step, "a", encoding="utf-8") as f:
            f.write(markdown + "\n")


def _gate_scenarios(args: list[str]) -> list[Any]:
    """The gate's scenarios: those named, else every bundled and every regression scenario."""
    from harness.scenario.parse import bundled_scenarios, regression_scenarios

    if args:
        return resolve_scenarios(args)
    paths = bundled_scenarios() + regression_scenarios()
    if not paths:
        raise _Usage("no bundled or regression scenarios")
    return resolve_scenarios([str(p) for p in paths])


def cmd_gate(args: argparse.Namespace, out: Any = None) -> int:
    """``fiskj-harness gate`` (:func:`harness.cli.gate_cmd.cmd_gate`, given this module's helpers); returns the
    exit status."""
    from harness.cli import gate_cmd

    return gate_cmd.cmd_gate(args, out, cli=sys.modules[__name__])


def _shard_scenario(report: dict[str, Any], report_path: str, name: str, as_ran: str) -> str:
    """Where a shard report's scenario ``name`` is now (its references resolved against the shard's own file,
    :func:`harness.report.portable.scenario_path`), else the path it ran from."""
    from harness.errors import ResultsError
    from harness.report.portable import scenario_path

    try:
        return scenario_path(report, name, report_path)
    except ResultsError:
        return as_ran


def cmd_merge(args: argparse.Namespace, out: Any = None) -> int:
    """``fiskj-harness merge REPORT...``: one report and one verdict from shard reports; returns the exit status.

    Only one complete set of shards merges (:func:`harness.campaign.shard.check_shard_set`): a missing or
    duplicated shard, an interrupted one, or shards of different campaigns exit 2, naming it."""
    from harness.campaign.shard import check_shard_set
    from harness.report.report import merge_reports, render_markdown, render_summary

    out = out or sys.stdout
    reports = []
    for path in args.reports:
        try:
            with open(path, encoding="utf-8") as f:
                reports.append(json.load(f))
        except (OSError, ValueError) as exc:
            raise _Usage(f"cannot read report {path}: {exc}") from None
    check_shard_set(args.reports, reports)  # one complete set of shards, else ResultsError (exit 2)
    try:
        merged = merge_reports(reports, report_path=args.report_json)
    except (ValueError, KeyError, TypeError) as exc:
        raise _Usage(f"cannot merge: {exc}") from None
    # One campaign block, so that `replay MERGED --trial K` works: scenario files, seeds, subject.
    campaigns = [r.get("campaign") or {} for r in reports]
    errors = [e for c in campaigns for e in c.get("errors", [])]
    merged["campaign"] = {
        "subject": next((c["subject"] for c in campaigns if c.get("subject")), None),
        "subject_env": next((c["subject_env"] for c in campaigns if c.get("subject_env")), {}),
        "scenarios": {k: _shard_scenario(rep, path, k, v) for rep, path in zip(reports, args.reports)
                      for k, v in ((rep.get("campaign") or {}).get("scenarios") or {}).items()},
        "seeds": {k: v for c in campaigns for k, v in (c.get("seeds") or {}).items()},
        "errors": errors,
        "shards": [c.get("shard") for c in campaigns],
    }
    _write_reports(merged, args)
    if args.summary or os.environ.get("GITHUB_STEP_SUMMARY"):
        _write_summary(render_markdown(merged), args.summary)
    if not args.quiet:
        out.write(render_summary(merged))
    return _exit(merged, errors, bool(merged["trials"]), "the reports hold no trial",
                 error="setup error in a shard")


def cmd_mutants(args: argparse.Namespace, out: Any = None) -> int:
    """``fiskj-harness mutants``: run the mutant self-test; 0 when every mutant is caught, else 1."""
    from harness.selftest.run import all_mutants, render_table, results_json, run_selftest

    out = out or sys.stdout
    known = all_mutants()
    unknown = [n for n in args.names if n not in known]
    if unknown:
        raise _Usage(f"unknown mutant(s) {', '.join(unknown)}; known: {', '.join(known)}")
    finished: list[Any] = []

    def done(r: Any) -> None:
        if interrupt.requested() and not r.caught:
            return  # cut short by the interruption: not a verdict on the mutant
        finished.append(r)
        if not (args.quiet or args.json):
            print(f"  {r.mutant}: {'caught' if r.caught else 'NOT caught'} ({r.elapsed_s:.1f} s)", file=sys.stderr)

    try:
        results = run_selftest(args.names or None, budget_s=args.budget, jobs=args.jobs, on_result=done)
    except KeyboardInterrupt as exc:  # the mutants run so far stand; the table says it is partial
        interrupt.note(getattr(exc, "signum", 2))
    with interrupt.deferred():
        if interrupt.requested():
            results = finished
            total = len(args.names or known)
            if args.json:
                doc = json.loads(results_json(results))
                doc.update(interrupted=True, signal=interrupt.signal_name(interrupt.signum() or 2), planned=total)
                out.write(json.dumps(doc, indent=1) + "\n")
            else:
                out.write(render_table(results))
                out.write(f"INTERRUPTED by {interrupt.signal_name(interrupt.signum() or 2)}: {len(results)} of "
                          f"{total} mutant(s) run; this table is partial\n")
            print(f"fiskj-harness: interrupted by {interrupt.signal_name(interrupt.signum() or 2)}", file=sys.stderr)
            return interrupt.exit_status(interrupt.signum() or 2)
        out.write(results_json(results) + "\n" if args.json else render_table(results))
        return HARNESS_VALID if all(r.caught for r in results) else HARNESS_VIOLATION


def build_parser() -> argparse.ArgumentParser:
    """The ``fiskj-harness`` argument parser: ``run``, ``check``, ``replay``, ``gate``, ``merge``, ``mutants``."""
    parser = argparse.ArgumentParser(
        prog="fiskj-harness",
        description="Crash-consistency campaigns for agent run journals: kill and suspend agents, "
                    "judge every trial against invariants I1..I10, shrink failures.",
        epilog="exit status: 0 all invariants held (mutants: every mutant caught), 1 violation or unknown verdict "
               "(mutants: one not caught), 2 usage or setup error, 130 interrupted by SIGINT (Ctrl-C), 143 by SIGTERM "
               "(the partial report is written, marked interrupted)")
    parser.add_argument("--version", action="version", version=version_text(),
                        help="print the version (fiskj-harness and fiskj) and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--subject", metavar="CMD|PROFILE.toml",
                       help="the agent: a subject profile (PROFILE.toml, docs/subject.md \"Subject profiles\") or a "
                            "command prefix that takes the contract's command line; default: python -m fiskj")
        p.add_argument("--report-json", metavar="FILE", help="write the JSON report here")
        p.add_argument("--junit", metavar="FILE", help="write JUnit XML here (a test case per scenario and invariant)")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress line, no summary table")
        p.add_argument("--keep-dirs", action="store_true",
                       help="keep each trial's directory (journal, ledger, observed calls, leg output) and name it "
                            "in the violation's notes (agent-leg trials; FISKJ_HARNESS_KEEP_DIRS=1)")

    run = sub.add_parser("run", help="run a campaign over scenarios",
                         description="Run trials of each scenario under fault schedules and judge them.")
    run.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                     help="scenario files, directories or bundled names (default: every bundled scenario)")
    run.add_argument("--trials", type=positive_int, metavar="N", help="trials per scenario (default: the scenario's)")
    run.add_argument("--seed", type=int, metavar="S", help="campaign seed (default: the scenario's)")
    run.add_argument("--jobs", type=positive_int, metavar="J", help=f"parallel trials (default: {os.cpu_count()})")
    run.add_argument("--schedule", metavar="JSON",
                     help='run one trial per scenario with this schedule, e.g. \'[{"kind":"kill","event":7}]\'')
    run.add_argument("--no-readings", action="store_true",
                     help="do not ask the subject's own reading after each leg (a node start each, for an agent "
                          "like subjects/node): I10 is then not applicable")
    run.add_argument("--first-violation", action="store_true",
                     help="stop each scenario at its first violating trial (the trials not started yet are not run)")
    run.add_argument("--shrink-budget", type=int, default=30, metavar="N",
                     help="trials a shrink of a failure may run (0: do not shrink; default 30)")
    run.add_argument("--shard", type=_shard, metavar="I/N",
                     help="run only shard I (0-based) of N: a deterministic, disjoint part of every scenario's trials")
    run.add_argument("--save-regression", metavar="DIR",
                     help="write one scenario file per violation, from its shrunk schedule, into DIR "
                          "(e.g. scenarios/regressions)")
    run.add_argument("--results", metavar="DIR",
                     help="root of the results folders: DIR/NAME/TIME/ (default: $FISKJ_HARNESS_RESULTS, else "
                          "./fiskj-results; docs/results.md)")
    run.add_argument("--keep", choices=("failures", "all", "none"), default="failures",
                     help="which trials get a folder of evidence in the results folder: failures (invalid or "
                          "unknown; default), all, or none (no results folder at all)")
    common(run)
    run.set_defaults(func=cmd_run)

    check = sub.add_parser("check", help="judge the histories stored in a results folder again, running nothing",
                           description="Judge every history stored in a results folder (or one trial folder, or "
                                       "a history.json) again with the current checkers, on the invariants the "
                                       "campaign judged; nothing is re-run.")
    check.add_argument("dir", metavar="DIR",
                       help="a results folder (fiskj-results/NAME/TIME, or fiskj-results/NAME for its latest), "
                            "a trial folder (.../trials/NNNN-NAME) or a history.json")
    check.add_argument("--report-json", metavar="FILE", help="write the JSON report of the new verdicts here")
    check.add_argument("--junit", metavar="FILE", help="write JUnit XML of the new verdicts here")
    check.add_argument("-q", "--quiet", action="store_true", help="no summary table (the verdict lines stay)")
    check.set_defaults(func=cmd_check)

    replay = sub.add_parser("replay", help="re-run one trial of a JSON report",
                            description="Re-run trial K of REPORT with its scenario, seed, schedule and subject.")
    replay.add_argument("report", metavar="REPORT", help="a JSON report written by --report-json")
    replay.add_argument("--trial", type=int, required=True, metavar="K", help="the trial number in the report")
    replay.add_argument("--history", metavar="FILE", help="write the replayed trial's history (JSON) here")
    common(replay)
    replay.set_defaults(func=cmd_replay)

    add_gate_parser(sub, common, _seconds, positive_int, _shard).set_defaults(func=cmd_gate)

    merge = sub.add_parser("merge", help="combine shard reports into one report and verdict",
                           description="Merge JSON reports (of `run --shard` or `gate --shard`) into one.")
    merge.add_argument("reports", nargs="+", metavar="REPORT", help="JSON reports written by --report-json")
    merge.add_argument("--report-json", metavar="OUT", help="write the merged JSON report here")
    merge.add_argument("--junit", metavar="FILE", help="write JUnit XML of the merged report here")
    merge.add_argument("--summary", metavar="FILE", help="write a Markdown summary here (and to $GITHUB_STEP_SUMMARY)")
    merge.add_argument("-q", "--quiet", action="store_true", help="no summary table")
    merge.set_defaults(func=cmd_merge)

    mutants = sub.add_parser("mutants", help="mutant self-test: every broken variant of fiskj must be caught",
                             description="Run each mutant's target campaign (harness/selftest/targets.py) with the "
                                         "mutant applied in the agent only; print a table.")
    mutants.add_argument("names", nargs="*", metavar="NAME", help="mutants to run (default: all)")
    mutants.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    mutants.add_argument("--budget", type=_seconds, default=600.0, metavar="SECONDS",
                         help="time shared by the mutants for extra rounds (each runs its first campaign; default 600)")
    mutants.add_argument("--jobs", type=positive_int, metavar="J", help="parallel trials per campaign")
    mutants.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    mutants.set_defaults(func=cmd_mutants)
    return parser


def _shard(text: str) -> tuple[int, int]:
    from harness.campaign.shard import parse_shard

    try:
        return parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


class _SafeStream:
    """``sys.stdout`` / ``sys.stderr`` for the duration of a command: a write to a closed pipe (``fiskj-harness run
    | head``, a CI log reader gone) is dropped instead of raising ``BrokenPipeError`` halfway through the
    reports; everything else is the stream's own."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        """Write ``text``; nothing once the stream is broken."""
        if self.broken or self._stream is None:
            return len(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self.broken = True
            return len(text)
        except ValueError:  # "I/O operation on closed file"; any other ValueError (an encoding's) is raised
            if not getattr(self._stream, "closed", False):
                raise
            self.broken = True
            return len(text)

    def flush(self) -> None:
        """Flush; nothing once the stream is broken."""
        if self.broken or self._stream is None:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self.broken = True
        except ValueError:
            if not getattr(self._stream, "closed", False):
                raise
            self.broken = True

    def isatty(self) -> bool:
        """The stream's own answer; False for a broken or missing one."""
        try:
            return not self.broken and self._stream is not None and bool(self._stream.isatty())
        except (OSError, ValueError):
            return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def silence(self) -> None:
        """After a broken pipe: point the stream's descriptor at /dev/null, so that the interpreter's last flush at
        exit does not print ``Exception ignored ... BrokenPipeError``."""
        if not self.broken or self._stream is None:
            return
        try:
            fd = self._stream.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fiskj-harness`` console script; returns the exit status (0, 1, 2: :mod:`harness.names`;
    130 or 143 when interrupted by SIGINT or SIGTERM, :mod:`harness.campaign.interrupt`)."""
    real_out, real_err = sys.stdout, sys.stderr
    out, err = _SafeStream(real_out), _SafeStream(real_err)
    sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
    try:
        with interrupt.handling(keep=argv is None):  # the console script: it exits next
            try:
                return _main(argv)
            except KeyboardInterrupt as exc:  # a signal outside any campaign (loading, before the first trial)
                interrupt.note(getattr(exc, "signum", 2))
                with interrupt.deferred():
                    interrupt.end_processes()
                    code = interrupt.exit_status(interrupt.signum() or 2)
                    print(f"fiskj-harness: interrupted by {interrupt.signal_name(interrupt.signum() or 2)}",
                          file=sys.stderr)
                    return code
    finally:
        for stream in (out, err):
            stream.flush()
        sys.stdout, sys.stderr = real_out, real_err
        out.silence()
        err.silence()


def _main(argv: list[str] | None) -> int:
    """:func:`main` inside its signal handling and guarded streams."""
    from fiskj.errors import FiskjError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # the command line, as a results folder records it
    keep_dirs = bool(getattr(args, "keep_dirs", False))
    if keep_dirs:
        os.environ["FISKJ_HARNESS_KEEP_DIRS"] = "1"  # read by every Runner this command makes
    # Trial directories go to a folder of this command's own, removed at the end whatever happened.
    with interrupt.private_tmp_root(enabled=not keep_dirs and args.command in _RUNS_TRIALS):
        try:
            code = int(args.func(args))
        except _Usage as exc:
            print(f"fiskj-harness: {exc}", file=sys.stderr)
            code = HARNESS_USAGE
        except FiskjError as exc:  # ScenarioError, SetupError, ResultsError
            print(f"fiskj-harness: {type(exc).__name__}: {exc}", file=sys.stderr)
            code = HARNESS_USAGE
        except ModuleNotFoundError as exc:  # the harness's own dependencies are an extra of the fiskj package
            print(f"fiskj-harness: {exc}; the harness needs its extras: from a clone of the repository, "
                  "pip install -e '.[harness]'", file=sys.stderr)
            code = HARNESS_USAGE
        except KeyboardInterrupt as exc:  # a signal outside a campaign's waits: before the first trial, ...
            interrupt.note(getattr(exc, "signum", 2))
            print(f"fiskj-harness: interrupted by {interrupt.signal_name(interrupt.signum() or 2)}", file=sys.stderr)
        except RuntimeError as exc:  # a signal while a module was being imported: Python wraps it in its error
            cause = _interruption(exc)
            if cause is None:
                raise
            interrupt.note(getattr(cause, "signum", 2))
            print(f"fiskj-harness: interrupted by {interrupt.signal_name(interrupt.signum() or 2)}", file=sys.stderr)
        if interrupt.requested():  # the command wrote its partial reports and said so; nothing may outlive it
            with interrupt.deferred():
                interrupt.end_processes()
            code = interrupt.exit_status(interrupt.signum() or 2)
        return code


def _interruption(exc: BaseException) -> BaseException | None:
    """The KeyboardInterrupt (or interrupt.Interrupted) an exception was raised from, if any (its causes)."""
    seen = 0
    cur: BaseException | None = exc
    while cur is not None and seen < 20:
        if isinstance(cur, KeyboardInterrupt):
            return cur
        cur, seen = cur.__cause__ or cur.__context__, seen + 1
    return None


#: The commands that run trials (and make trial directories).
_RUNS_TRIALS = ("run", "replay", "gate", "mutants")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
