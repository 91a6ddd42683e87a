"""What a ``fiskj-harness`` command shows and writes, and its exit status: the progress display, the
JSON/JUnit/Markdown reports, the terminal summary (shrinks, the results folder) and the status a finished (or
interrupted) command exits with."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.campaign import interrupt
from harness.names import HARNESS_USAGE

__all__: list[str] = []


def _progress(args: argparse.Namespace, final: bool = True) -> Any:
    """The progress display of a campaign command (:class:`harness.cli.progress.Progress` on stderr), or ``None``
    with ``-q``."""
    from harness.cli.progress import Progress

    return None if args.quiet else Progress(sys.stderr, final=final)


def _write_reports(report: dict[str, Any], args: argparse.Namespace,
                   properties: list[tuple[str, str]] | None = None) -> None:
    """Write ``report`` to ``--report-json`` (with the references that let it replay from anywhere:
    :func:`harness.report.portable.portable`) and ``--junit`` (with the suite's ``properties``), where given."""
    from harness.report.portable import portable
    from harness.report.report import write_junit
    from harness.report.results_dir import write_json

    if args.report_json:
        write_json(args.report_json, portable(report, args.report_json))
    if args.junit:
        write_junit(report, args.junit, properties)


def _exit(report: dict[str, Any], errors: list[Any], ran: bool, nothing_ran: str,
          error: str = "setup error", shown: bool = False) -> int:
    """The exit status of a finished command: 2 when there are ``errors`` (each printed as
    ``fiskj-harness: <error>: ...``) or nothing ``ran`` (``nothing_ran`` printed); else 0 when every checked
    invariant of ``report`` held, 1 when not.  An interrupted command: ``128 + signal`` (130, 143), said on
    stderr with how many trials ran.  ``shown``: the summary already printed the errors whole, so stderr
    gets the first line of each (a subject's stack trace is shown once)."""
    from harness.report.report import exit_status

    for err in errors:
        text = str(err)
        if shown and "\n" in text:
            text = text.split("\n", 1)[0].rstrip() + " ... (whole error: in the summary above)"
        print(f"fiskj-harness: {error}: {text}", file=sys.stderr)
    if interrupt.requested():
        cut = (report.get("campaign") or {}).get("interrupted") or {}
        done = f" after {cut['done']} of {cut['planned']} planned trial(s)" if cut.get("planned") else ""
        where = f"; partial report: {report['report_path']}" if report.get("report_path") not in (None, "REPORT") \
            else ""
        print(f"fiskj-harness: interrupted by {interrupt.signal_text()}{done}{where}",
              file=sys.stderr)
        return interrupt.exit_status(interrupt.signum() or 2)
    if errors:
        return HARNESS_USAGE
    if not ran:
        print(f"fiskj-harness: {nothing_ran}", file=sys.stderr)
        return HARNESS_USAGE
    return exit_status(report)


def _shrink_lines(report: dict[str, Any]) -> str:
    """One line per shrink of the campaign, saying what got smaller, with its reproducer; one per failure a
    shrink could not make smaller, saying why (docs/results.md "Shrinking")."""
    out = []
    for s in report["campaign"]["shrinks"]:
        out.append(f"shrunk: trial {s['from_trial']} -> trial {s['trial']} ({s['scenario']}; {s.get('what')}): "
                   f"{json.dumps(s['schedule'])}\n")
        out += [f"    reproduce: {s['reproduce']}\n"] if s.get("reproduce") else []
    out += [f"{n['why'].split(':')[0]}: trial {n['trial']} ({n['scenario']}){n['why'][n['why'].find(':'):]}\n"
            for n in report["campaign"].get("not_shrunk", [])]
    return "".join(out)


def _finish(report: dict[str, Any], result: Any, args: argparse.Namespace, out: Any,
            results: dict[str, Any] | None = None, *, extra: str = "", nothing_ran: str = "no trial ran",
            properties: list[tuple[str, str]] | None = None) -> int:
    """What a campaign command shows and writes at its end: ``--report-json``/``--junit`` (with the suite's
    ``properties``), the summary, the shrinks, ``extra`` and the results folder; returns the exit status."""
    from harness.report.report import render_summary

    _write_reports(report, args, properties)
    if not args.quiet:
        out.write(render_summary(report) + _shrink_lines(report) + extra)
        if results is not None:
            out.write(_results_line(results))
    elif results is not None:
        print(f"fiskj-harness: results in {results['folder']}", file=sys.stderr)
    return _exit(report, result.errors, bool(result.trials), nothing_ran, shown=not args.quiet)


def _results_place(args: argparse.Namespace, scenarios: list[Any]) -> tuple[str, str, datetime] | None:
    """Where ``run``'s or ``gate``'s results folder will go (root, name, the campaign's start), checked
    writable now, before any trial; ``None`` with ``--keep none``."""
    from harness.report.results_dir import default_root, results_name, results_parent

    if getattr(args, "keep", "none") == "none":
        return None
    root, name = getattr(args, "results", None) or default_root(), results_name([s.name for s in scenarios])
    results_parent(root, name)  # a root that cannot be written is said before the trials
    return root, name, datetime.now(timezone.utc)


def _provenance(args: argparse.Namespace, started: datetime) -> dict[str, Any]:
    """Where a campaign's report came from, for its ``campaign`` block (docs/results.md "The JSON report"):
    ``started`` (UTC, ISO 8601 to the second), ``command`` (as typed), ``version`` (fiskj-harness) and
    ``commit`` (:func:`_commit`)."""
    from fiskj import __version__

    return {"started": started.strftime("%Y-%m-%dT%H:%M:%SZ"), "version": __version__, "commit": _commit(),
            "command": ["fiskj-harness", *getattr(args, "argv", sys.argv[1:])]}


@functools.lru_cache(maxsize=1)
def _commit() -> str | None:
    """``git describe --always --dirty`` of the checkout the harness runs from (``None`` outside one), asked once
    per process: the harness code a process runs is the code it loaded, so its later campaigns (in-process
    callers run many: the gate, the test suite) name the same commit without a ``git`` start each."""
    import subprocess

    try:
        return subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"], capture_output=True,
                              text=True, cwd=Path(__file__).resolve().parents[2], timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _results_folder(place: tuple[str, str, datetime] | None) -> Path | None:
    """Make the results folder of a finished campaign (:func:`_results_place`)."""
    from harness.report.results_dir import make_results_dir

    return make_results_dir(*place) if place is not None else None


def _write_folder(folder: Path, report: dict[str, Any], result: Any, args: argparse.Namespace, summary: str) -> Any:
    """Fill the results ``folder`` (:func:`harness.report.results_dir.write_results`), named in the report."""
    from harness.report.results_dir import write_results

    report["campaign"]["results"] = str(folder)
    return write_results(folder, report, result, keep=args.keep, summary=summary,
                         command=["fiskj-harness", *getattr(args, "argv", sys.argv[1:])])


def _results_line(results: dict[str, Any]) -> str:
    n = len(results["trials"])
    more = f", {results['not_kept']} more failing not kept" if results.get("not_kept") else ""
    return (f"results: {results['folder']}  (report.html, report.json, junit.xml, summary.md, {n} trial "
            f"folder(s){more}; judge them again: fiskj-harness check {results['folder']})\n")


def _write_summary(markdown: str, path: str | None) -> None:
    """Write the Markdown summary to ``path`` (if given) and append it to ``$GITHUB_STEP_SUMMARY`` (if set)."""
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(markdown)
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        with open(step, "a", encoding="utf-8") as f:
            f.write(markdown + "\n")
