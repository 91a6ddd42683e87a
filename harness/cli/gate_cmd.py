"""``fiskj-harness gate``: its arguments, its run (:func:`harness.campaign.gate.run_gate`) and its reports
(docs/scenarios.md "The CI gate").
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from fiskj.cli_common import positive_int

from harness.campaign import interrupt
from harness.cli.arguments import _seconds, _shard, add_common_options, add_results_options
from harness.cli.reporting import _finish, _progress, _results_folder, _results_place, _write_folder, _write_summary
from harness.cli.resolve import _gate_scenarios, subject_of

__all__ = ["BUDGET_HELP", "add_gate_parser", "cmd_gate"]


#: What ``--budget`` means (the gate's --help; docs/scenarios.md says the same).
BUDGET_HELP = ("wall-clock seconds the gate spends (default 300): every scenario's k-th trial before any one's "
               "(k+1)-th, a spent plan drawn again from a fresh seed (new schedules, kill points, crash states), "
               "no trial started after the budget (round 0, a first trial of each, runs whole)")


def add_gate_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``gate`` subcommand to ``sub`` (the parsers' ``add_subparsers``), with the options every campaign
    command has (:func:`harness.cli.arguments.add_common_options`)."""
    gate = sub.add_parser("gate", help="CI gate: bundled and regression scenarios, spending a time budget",
                          description="Run the bundled and regression scenarios as one campaign: their plans "
                                      "interleaved trial by trial, each drawn again from a fresh seed when spent, "
                                      "until the time budget is spent. Every trial's seed is in the report; any "
                                      "failure replays.")
    gate.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                      help="scenario files, directories or bundled names (default: every bundled and regression one)")
    gate.add_argument("--budget", type=_seconds, default=300.0, metavar="SECONDS", help=BUDGET_HELP)
    gate.add_argument("--summary", metavar="FILE",
                      help="write the Markdown summary here (it is also appended to $GITHUB_STEP_SUMMARY when set)")
    gate.add_argument("--jobs", type=positive_int, metavar="J", help=f"parallel trials (default: {os.cpu_count()})")
    gate.add_argument("--seed", type=int, metavar="S",
                      help="base campaign seed: a scenario's j-th plan draws with S + 1000 j (default: its trials.seed)")
    gate.add_argument("--shard", type=_shard, metavar="I/N",
                      help="run only shard I (0-based) of N; each shard spends the whole budget")
    add_results_options(gate)
    add_common_options(gate)
    gate.set_defaults(func=cmd_gate)
    return gate


def cmd_gate(args: argparse.Namespace, out: Any = None) -> int:
    """``fiskj-harness gate``: the bundled and regression scenarios, spending ``--budget``; returns the exit
    status."""
    from harness.campaign.gate import run_gate

    out = out or sys.stdout
    scenarios = _gate_scenarios(args.scenarios)
    subject = subject_of(args.subject)
    place = _results_place(args, scenarios)
    progress = _progress(args, final=False)  # each round says its own start
    if progress is not None:
        progress.ends_at = progress.clock() + args.budget  # its ETA is the budget's end
    say = None if progress is None else (lambda line: progress.say(f"fiskj-harness gate: {line}"))
    try:
        gate = run_gate(scenarios, budget_s=args.budget, jobs=args.jobs, subject=subject, shard=args.shard,
                        seed=args.seed, progress=say, trial_progress=progress, keep_histories=args.keep == "all",
                        skip_unsupported=not args.scenarios)  # the bundled set: what cannot apply is said, not run
    finally:
        if progress is not None:
            progress.close()
    with interrupt.deferred():
        return _gate_reports(args, gate, out, place)


def _gate_reports(args: argparse.Namespace, gate: Any, out: Any, place: Any) -> int:
    """The reports of a gate run (results folder, JSON, JUnit, Markdown summary, the terminal summary and
    the gate's line); returns the exit status."""
    from harness.campaign.gate import gate_properties, gate_report, render_gate_line, render_gate_markdown
    from harness.report.report import render_summary

    folder = _results_folder(place)
    report = gate_report(gate, args.report_json or (str(folder / "report.json") if folder is not None else None))
    if folder is not None:
        report["campaign"]["results"] = str(folder)  # before --report-json is written
    _write_summary(render_gate_markdown(report), args.summary)
    line = render_gate_line(report)
    results = None
    if folder is not None:
        results = _write_folder(folder, report, gate.result, args, render_summary(report) + line)
    return _finish(report, gate.result, args, out, results, extra=line, nothing_ran="no trial ran within the budget",
                   properties=gate_properties(report))
