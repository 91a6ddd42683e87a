"""``fiskj-harness replay REPORT --trial K``: its arguments, its run (trial K of a JSON report re-run with the
same scenario, seed, schedule and subject, the report's references resolved wherever it now is:
:mod:`harness.report.portable`) and its reports."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from harness.campaign import interrupt
from harness.cli.arguments import _Usage, add_common_options
from harness.cli.reporting import _finish
from harness.cli.resolve import read_report, subject_of

__all__ = ["add_replay_parser", "cmd_replay"]


def add_replay_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``replay`` subcommand to ``sub`` (the parsers' ``add_subparsers``)."""
    replay = sub.add_parser("replay", help="re-run one trial of a JSON report",
                            description="Re-run trial K of REPORT with its scenario, seed, schedule and subject.")
    replay.add_argument("report", metavar="REPORT", help="a JSON report written by --report-json")
    replay.add_argument("--trial", type=int, required=True, metavar="K", help="the trial number in the report")
    replay.add_argument("--history", metavar="FILE", help="write the replayed trial's history (JSON) here")
    add_common_options(replay)
    replay.set_defaults(func=cmd_replay)
    return replay


def cmd_replay(args: argparse.Namespace, out: Any = None) -> int:
    """``fiskj-harness replay REPORT --trial K``: re-run one trial of a report; returns the exit status.

    The replayed trial keeps its number ``K`` in what is printed and written (``--report-json``: its row,
    group and ``replay ... --trial K`` reproducer), so the new report replays the same way."""
    from harness.campaign.campaign import Campaign
    from harness.scenario.generate import expand
    from harness.scenario.parse import load_scenario

    out = out or sys.stdout
    report = read_report(args.report)
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
        read = {k: v for k, v in (campaign_info.get("subject_env_read") or {}).items() if k not in os.environ}
        subject = subject_of(profile if profile is not None else campaign_info.get("subject"),
                             {**read, **(campaign_info.get("subject_env") or {})})  # this machine's own value wins
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
    from harness.report.results_dir import write_json

    if args.history and result.trials and result.trials[0].history is not None:
        write_json(args.history, history_to_json(result.trials[0].history))
    for t in result.trials:
        out.write(f"trial {t.index} {t.scenario} seed={t.seed} schedule={json.dumps(t.schedule)} "
                  f"(replayed from {args.report})\n")
        for v in t.verdicts:
            out.write(f"  {v.invariant} {v.status:<8} {v.summary[:150]}\n")
    from harness.report.probes import for_one_trial

    new_report = campaign_report(result, args.report_json)
    new_report["probes"] = for_one_trial(new_report.get("probes"))  # what this trial reached, not the catalogue
    return _finish(new_report, result, args, out)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
