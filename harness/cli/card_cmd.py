"""``fiskj-harness card REPORT...``: the durability report card of agents from campaign reports
(:mod:`harness.report.card`; docs/results.md "The report card"): the card and one page per agent, rebuilt."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.cli.arguments import _Usage

__all__ = ["add_card_parser", "cmd_card"]


def add_card_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``card`` subcommand to ``sub`` (the parsers' ``add_subparsers``)."""
    card = sub.add_parser("card", help="the durability report card of agents, from campaign reports",
                          description="Build the report card (agents by invariant and fault family) and a page per "
                                      "agent with each finding's reproducer, from JSON reports of `run`.")
    card.add_argument("reports", nargs="+", metavar="REPORT", help="JSON reports written by run --report-json")
    card.add_argument("--out", default="fiskj-results/card/README.md", metavar="FILE",
                      help="the card (default fiskj-results/card/README.md; the committed one, docs/agents/README.md, "
                           "is rebuilt by scripts/report-card.sh); the pages go to findings/ beside it")
    card.set_defaults(func=cmd_card)
    return card


def cmd_card(args: argparse.Namespace, out: Any = None) -> int:
    """``fiskj-harness card``: writes the card and its pages, prints their paths; returns 0.  A file that is not
    a campaign report is a :class:`harness.errors.ResultsError` naming it and the field (exit 2)."""
    from harness.report.card import card_pages, check_card_report
    from harness.report.results_dir import _read_json

    out = out or sys.stdout
    sources = [(path, check_card_report(path, _read_json(Path(path), "campaign report"))) for path in args.reports]
    folder = Path(args.out).parent
    explained = {p.stem: p.name for p in folder.glob("*.md") if p.name != Path(args.out).name} \
        if folder.is_dir() else {}
    pages = card_pages(sources, explained)
    for name, text in pages.items():
        path = Path(args.out) if name == "README.md" else folder / name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise _Usage(f"cannot write {path}: {exc.strerror}") from None
        out.write(f"{path}\n")
    return 0
