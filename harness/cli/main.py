"""The ``fiskj-harness`` command: ``run`` (a campaign with progress and a summary grouped by cause), the parser
and the entry point.  Each other subcommand is a module of its own (``*_cmd.py``) over what they share:
:mod:`harness.cli.arguments`, :mod:`harness.cli.resolve`, :mod:`harness.cli.reporting`.  The commands,
options and exit statuses are the README's "Everyday commands" and docs/ci.md's (interruption: 130/143).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from typing import Any

from fiskj.cli_common import positive_int

from harness.campaign import interrupt
from harness.cli.arguments import _shard, _Usage, add_common_options, add_results_options, check_output_paths
from harness.cli.card_cmd import add_card_parser
from harness.cli.check_cmd import add_check_parser
from harness.cli.gate_cmd import add_gate_parser
from harness.cli.merge_cmd import add_merge_parser
from harness.cli.mutants_cmd import add_mutants_parser
from harness.cli.replay_cmd import add_replay_parser
from harness.cli.reporting import (_finish, _progress, _provenance, _results_folder, _results_place, _shrink_lines,
                                   _write_folder)
from harness.cli.resolve import resolve_scenarios, subject_of
from harness.cli.streams import SafeStream
from harness.names import HARNESS_USAGE

__all__ = ["main", "build_parser", "version_text"]


def version_text() -> str:
    """What ``--version`` prints: ``fiskj-harness 0.1.0 (fiskj 0.1.0, Python 3.11.7)``, from
    :data:`fiskj.__version__`, the package's one version constant (pyproject.toml's ``version`` equals it,
    tests/test_cli_harness.py checks)."""
    import platform

    from fiskj import __version__

    return f"fiskj-harness {__version__} (fiskj {__version__}, Python {platform.python_version()})"


def cmd_run(args: argparse.Namespace, out: Any = None) -> int:
    """``fiskj-harness run``: returns the exit status."""
    from harness.campaign.campaign import Campaign, subject_limits, unsupported
    from harness.subject.contract import default_subject

    out = out or sys.stdout
    scenarios = resolve_scenarios(args.scenarios)
    schedules = None
    if args.schedule is not None:
        try:
            parsed = json.loads(args.schedule)
        except ValueError as exc:
            raise _Usage(f"--schedule is not JSON: {exc}") from None
        from harness.runner.faults import FAULT_KINDS, validate_schedule
        if not isinstance(parsed, list) or all(isinstance(f, dict) and f.get("kind", "none") in FAULT_KINDS
                                               for f in parsed):
            try:  # a kill/suspend/io-error schedule is checked here, before any scenario runs (others by their family)
                validate_schedule(parsed)
            except ValueError as exc:
                raise _Usage(f"--schedule: {exc}") from None
        schedules = [parsed]
    subject = subject_of(args.subject)
    if not args.scenarios and subject is not None and subject.jetstream is not None:
        scenarios = resolve_scenarios([], subject)
    if args.no_readings and not (subject and subject.caps.journal.is_store):  # (an opaque store is judged by it)
        # I10 is then not applicable: said before the first trial, never counted valid
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
    named = campaign.skip_unsupported is False
    cannot = [f"{s.path or s.name}: {why}" for s in scenarios
              if named and (why := unsupported(subject or default_subject(), s)) is not None]
    if cannot and len(cannot) == len(scenarios):  # nothing could run: said before any work, no results folder
        for line in cannot:
            print(f"fiskj-harness: setup error: {line}", file=sys.stderr)
        return HARNESS_USAGE
    for line in subject_limits(scenarios, subject or default_subject()):  # said before the first trial (a named
        # scenario that cannot run among them too: its setup error comes with the summary)
        print(f"fiskj-harness: limit for this subject: {line}", file=sys.stderr)
    place = _results_place(args, scenarios)
    started = datetime.now(timezone.utc)
    try:
        result = campaign.run()
    finally:
        if progress is not None:
            progress.close()
    with interrupt.deferred():  # a signal now lets the reports be written whole, then exits 130/143
        return _run_reports(args, result, place, out, started)


def _run_reports(args: argparse.Namespace, result: Any, place: Any, out: Any, started: datetime) -> int:
    """The reports of ``run``'s campaign ``result``: the results folder, ``--report-json``, ``--junit``,
    regression scenarios, the summary; returns the exit status."""
    from harness.report.report import campaign_report, render_summary

    folder = _results_folder(place)
    report = campaign_report(result, args.report_json or (str(folder / "report.json") if folder is not None else None))
    report["campaign"].update(_provenance(args, started))
    if args.shard:
        report["campaign"]["shard"] = f"{args.shard[0]}/{args.shard[1]}"
    if args.save_regression:
        from harness.campaign.regressions import save_regressions

        for path in save_regressions(result, args.save_regression):
            print(f"fiskj-harness: regression scenario {path}", file=sys.stderr)
    results = None
    if folder is not None:
        results = _write_folder(folder, report, result, args, render_summary(report) + _shrink_lines(report))
    return _finish(report, result, args, out, results)


def build_parser() -> argparse.ArgumentParser:
    """The ``fiskj-harness`` argument parser: ``run``, ``check``, ``replay``, ``gate``, ``merge``, ``mutants``,
        ``card``."""
    parser = argparse.ArgumentParser(
        prog="fiskj-harness",
        description="Crash-consistency campaigns for agent run journals: kill and suspend agents, "
                    "judge every trial against invariants I1..I11, shrink failures.",
        epilog="exit status: 0 all invariants held (mutants: every mutant caught), 1 violation or unknown verdict "
               "(mutants: one not caught), 2 usage or setup error, 130 interrupted by SIGINT (Ctrl-C), 143 by SIGTERM "
               "(the partial report is written, marked interrupted)")
    parser.add_argument("--version", action="version", version=version_text(),
                        help="print the version (fiskj-harness and fiskj) and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

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
                          "like subjects/node): I10 is then not applicable (an opaque store's is asked all the same)")
    run.add_argument("--first-violation", action="store_true",
                     help="stop each scenario at its first violating trial (the trials not started yet are not run)")
    run.add_argument("--shrink-budget", type=int, default=30, metavar="N",
                     help="trials a shrink of a failure may run (0: do not shrink; default 30)")
    run.add_argument("--shard", type=_shard, metavar="I/N",
                     help="run only shard I (0-based) of N: a deterministic, disjoint part of every scenario's trials")
    run.add_argument("--save-regression", metavar="DIR",
                     help="write one scenario file per violation, from its shrunk schedule, into DIR "
                          "(e.g. scenarios/regressions)")
    add_results_options(run)
    add_common_options(run)
    run.set_defaults(func=cmd_run)
    add_check_parser(sub)
    add_replay_parser(sub)
    add_gate_parser(sub)
    add_merge_parser(sub)
    add_mutants_parser(sub)
    add_card_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fiskj-harness`` console script; returns the exit status (0, 1, 2: :mod:`harness.names`;
    130 or 143 when interrupted by SIGINT or SIGTERM, :mod:`harness.campaign.interrupt`)."""
    real_out, real_err = sys.stdout, sys.stderr
    out, err = SafeStream(real_out), SafeStream(real_err)
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
                    print(f"fiskj-harness: interrupted by {interrupt.signal_text()}",
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
            check_output_paths(args)  # an output file that could not be written is said before any trial
            code = int(args.func(args))
        except _Usage as exc:
            print(f"fiskj-harness: {exc}", file=sys.stderr)
            code = HARNESS_USAGE
        except FiskjError as exc:  # ScenarioError, SetupError, ResultsError
            print(f"fiskj-harness: {exc}", file=sys.stderr)
            code = HARNESS_USAGE
        except ModuleNotFoundError as exc:  # the harness's own dependencies are an extra of the fiskj package
            print(f"fiskj-harness: {exc}; the harness needs its extras: from a clone of the repository, "
                  "pip install -e '.[harness]'", file=sys.stderr)
            code = HARNESS_USAGE
        except (KeyboardInterrupt, RuntimeError) as exc:  # a signal outside a campaign's waits, or in an import
            cause = _interruption(exc)  # (a signal while a module is imported comes wrapped in Python's RuntimeError)
            if cause is None:
                raise
            interrupt.note(getattr(cause, "signum", 2))
            print(f"fiskj-harness: interrupted by {interrupt.signal_text()}", file=sys.stderr)
        if interrupt.requested():  # the command wrote its partial reports and said so; nothing may outlive it
            with interrupt.deferred():
                interrupt.end_processes()
            code = interrupt.exit_status(interrupt.signum() or 2)
        return code


def _interruption(exc: BaseException) -> BaseException | None:
    """The KeyboardInterrupt (or interrupt.Interrupted) an exception was raised from, if any (its causes)."""
    cur: BaseException | None = exc
    for _ in range(20):
        if cur is None or isinstance(cur, KeyboardInterrupt):
            return cur
        cur = cur.__cause__ or cur.__context__
    return None


#: The commands that run trials (and make trial directories).
_RUNS_TRIALS = ("run", "replay", "gate", "mutants")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
