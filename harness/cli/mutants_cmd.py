"""``fiskj-harness mutants [NAME...]``: its arguments and its run: the mutant self-test
(:mod:`harness.selftest.run`), its table or JSON (partial when interrupted) and its exit status (0 every
mutant caught, 1 one not)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from fiskj.cli_common import positive_int

from harness.campaign import interrupt
from harness.cli.arguments import _seconds, _Usage
from harness.names import HARNESS_VALID, HARNESS_VIOLATION

__all__ = ["add_mutants_parser", "cmd_mutants"]


def add_mutants_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``mutants`` subcommand to ``sub`` (the parsers' ``add_subparsers``)."""
    mutants = sub.add_parser("mutants", help="mutant self-test: every broken variant of fiskj must be caught",
                             description="Run each mutant's target campaign (harness/selftest/mutants.py) with the "
                                         "mutant applied in the agent only; print a table.")
    mutants.add_argument("names", nargs="*", metavar="NAME", help="mutants to run (default: all)")
    mutants.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    mutants.add_argument("--budget", type=_seconds, default=600.0, metavar="SECONDS",
                         help="time shared by the mutants for draws from further seeds (each runs its first draw "
                              "whole; default 600)")
    mutants.add_argument("--jobs", type=positive_int, metavar="J", help="parallel trials per campaign")
    mutants.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    mutants.add_argument("--list", action="store_true",
                         help="print each mutant's name, what it breaks and the scenario that targets it; run nothing")
    mutants.set_defaults(func=cmd_mutants)
    return mutants


def cmd_mutants(args: argparse.Namespace, out: Any = None) -> int:
    """``fiskj-harness mutants``: run the mutant self-test; 0 when every mutant is caught, else 1."""
    from harness.selftest.mutants import UNIT, get, mutants
    from harness.selftest.run import render_table, results_json, run_selftest

    out = out or sys.stdout
    known = [m.name for m in mutants()]
    unknown = [n for n in args.names if n not in known]
    if unknown:
        raise _Usage(f"unknown mutant(s) {', '.join(unknown)}; known: {', '.join(known)}")
    if getattr(args, "list", False):
        rows = [(m.name, f"{m.scenario} (unit tests)" if m.family == UNIT else f"{m.scenario} ({', '.join(m.expect)})",
                 m.defect) for m in map(get, args.names or known)]
        table = [("mutant", "target (invariants)", "what it breaks")] + rows
        a, b = (max(len(row[i]) for row in table) for i in (0, 1))
        for row in table:
            print(f"{row[0]:<{a}}  {row[1]:<{b}}  {row[2]}", file=out)
        return 0
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
                doc.update(interrupted=True, signal=interrupt.signal_text(), planned=total)
                out.write(json.dumps(doc, indent=1) + "\n")
            else:
                out.write(render_table(results))
                out.write(f"INTERRUPTED by {interrupt.signal_text()}: {len(results)} of "
                          f"{total} mutant(s) run; this table is partial\n")
            print(f"fiskj-harness: interrupted by {interrupt.signal_text()}", file=sys.stderr)
            return interrupt.exit_status(interrupt.signum() or 2)
        out.write(results_json(results) + "\n" if args.json else render_table(results))
        return HARNESS_VALID if all(r.caught for r in results) else HARNESS_VIOLATION
