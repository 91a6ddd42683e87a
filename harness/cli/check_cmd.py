"""``fiskj-harness check DIR``: its arguments and its run: judge the histories stored in a results folder (or
one trial folder, or a ``history.json``) again with the current checkers, running nothing; its reports."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from harness.cli.arguments import _Usage, add_report_options
from harness.cli.reporting import _exit, _write_reports

__all__ = ["add_check_parser", "cmd_check"]


def add_check_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``check`` subcommand to ``sub`` (the parsers' ``add_subparsers``)."""
    check = sub.add_parser("check", help="judge the histories stored in a results folder again, running nothing",
                           description="Judge every history stored in a results folder (or one trial folder, or "
                                       "a history.json) again with the current checkers, on the invariants the "
                                       "campaign judged; nothing is re-run.")
    check.add_argument("dir", metavar="DIR",
                       help="a results folder (fiskj-results/NAME/TIME, or fiskj-results/NAME for its latest), "
                            "a trial folder (.../trials/NNNN-NAME) or a history.json")
    add_report_options(check, " of the new verdicts", quiet="no summary table (the verdict lines stay)")
    check.set_defaults(func=cmd_check)
    return check


#: Trials ``check`` lists one by one before it only counts them (a verdict that changed is always listed).
_CHECK_LINES = 50


def cmd_check(args: argparse.Namespace, out: Any = None) -> int:
    """``fiskj-harness check DIR``: judge the stored histories of a results folder (or a trial folder, or a
    ``history.json``) again with the current checkers, running nothing; returns the exit status (0 every
    checked invariant holds, 1 a violation or unknown, 2 nothing to judge or a folder that cannot be read,
    raised as :class:`harness.errors.ResultsError`), like ``run``: a passing campaign that kept no trial
    (``--keep failures``, none failed) exits 0, saying there was nothing to judge again."""
    from harness.report.report import build_report, render_summary
    from harness.report.results_dir import load_stored, recheck

    out = out or sys.stdout
    where, stored_report, stored = load_stored(args.dir)
    if not stored:
        runs = len((stored_report or {}).get("runs", []))
        if stored_report is not None and runs and not stored_report.get("violations") \
                and not stored_report.get("unknowns") and not stored_report.get("interrupted"):
            out.write(f"{where}: its campaign ran {runs} trial(s), every invariant held, and it kept only "
                      "failing trials: nothing to judge again (run with --keep all to keep every trial)\n")
            return 0
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
