"""``fiskj-harness merge REPORT...``: its arguments and its run: the JSON reports of shards combined into one
report and one verdict (only one complete set of shards of one campaign merges:
:func:`harness.campaign.shard.check_shard_set`); its reports."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from harness.cli.arguments import _Usage, add_report_options
from harness.cli.reporting import _exit, _write_reports, _write_summary
from harness.cli.resolve import read_report

__all__ = ["add_merge_parser", "cmd_merge"]


def add_merge_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``merge`` subcommand to ``sub`` (the parsers' ``add_subparsers``)."""
    merge = sub.add_parser("merge", help="combine shard reports into one report and verdict",
                           description="Merge JSON reports (of `run --shard` or `gate --shard`) into one.")
    merge.add_argument("reports", nargs="+", metavar="REPORT", help="JSON reports written by --report-json")
    add_report_options(merge, " of the merged shards", quiet="no summary table")
    merge.add_argument("--summary", metavar="FILE", help="write a Markdown summary here (and to $GITHUB_STEP_SUMMARY)")
    merge.set_defaults(func=cmd_merge)
    return merge


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
    reports = [read_report(path) for path in args.reports]
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
        "subject_env_read": next((c["subject_env_read"] for c in campaigns if c.get("subject_env_read")), {}),
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
