"""The ``fiskj-harness`` command line's shared vocabulary: the usage error, argument types and the options
several subcommands take (the subject and report options of every campaign command; ``--results``/``--keep``,
the results folder of ``run`` and ``gate``, docs/results.md)."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

__all__ = ["add_common_options", "add_report_options", "add_results_options", "check_output_paths",
           "OUTPUT_FILE_OPTIONS"]

#: The options of every subcommand that name a file the command writes at its end (attribute, option).
OUTPUT_FILE_OPTIONS = (("report_json", "--report-json"), ("junit", "--junit"), ("summary", "--summary"),
                       ("history", "--history"))


class _Usage(Exception):
    """A usage or setup error: printed as one line, exit 2."""


def add_report_options(p: argparse.ArgumentParser, of: str = "",
                       quiet: str = "no progress line, no summary table") -> None:
    """Add ``--report-json``, ``--junit`` (``of``: what they report, in their help) and ``-q`` (``quiet``: its help)."""
    p.add_argument("--report-json", metavar="FILE", help=f"write the JSON report{of} here")
    p.add_argument("--junit", metavar="FILE", help=f"write JUnit XML{of} here (a test case per scenario and invariant)")
    p.add_argument("-q", "--quiet", action="store_true", help=quiet)


def add_common_options(p: argparse.ArgumentParser) -> None:
    """Add the options every campaign command (``run``, ``replay``, ``gate``) has: ``--subject``, the report
    options (:func:`add_report_options`) and ``--keep-dirs``."""
    p.add_argument("--subject", metavar="CMD|PROFILE.toml",
                   help="the agent: a subject profile (PROFILE.toml, docs/subject.md \"Subject profiles\") or a "
                        "command prefix that takes the contract's command line; default: python -m fiskj")
    add_report_options(p)
    p.add_argument("--keep-dirs", action="store_true",
                   help="keep each trial's directory (journal, ledger, observed calls, leg output) and name it "
                        "in the violation's notes (agent-leg trials; FISKJ_HARNESS_KEEP_DIRS=1)")


def add_results_options(p: argparse.ArgumentParser) -> None:
    """Add ``--results DIR`` and ``--keep failures|all|none``: where a campaign command's results folder goes and
    which trials it keeps (:mod:`harness.report.results_dir`, docs/results.md)."""
    from harness.report.results_dir import KEEP_CHOICES

    p.add_argument("--results", metavar="DIR",
                   help="root of the results folders: DIR/NAME/TIME/ (default: $FISKJ_HARNESS_RESULTS, else "
                        "./fiskj-results; docs/results.md)")
    p.add_argument("--keep", choices=KEEP_CHOICES, default="failures",
                   help="which trials get a folder of evidence in the results folder: failures (invalid or "
                        "unknown; default), all, or none (no results folder at all)")


def check_output_paths(args: argparse.Namespace) -> None:
    """Refuse, before any work starts, an output file (:data:`OUTPUT_FILE_OPTIONS`) the command could not write
    at its end: a folder, a file in a folder that does not exist or cannot be written, a file that cannot be
    overwritten; and a ``--save-regression`` folder that is a file or lies below one or cannot be written.
    Raises :class:`_Usage` naming the option and the path (exit 2); leaves nothing behind."""
    for attr, option in OUTPUT_FILE_OPTIONS:
        value = getattr(args, attr, None)
        if not value or not isinstance(value, str):
            continue
        path = Path(value)
        folder = path.parent if str(path.parent) else Path(".")
        if path.is_dir():
            raise _Usage(f"{option} {value}: is a folder, not a file")
        if not folder.is_dir():
            why = "is a file, not a folder" if folder.exists() else "does not exist"
            raise _Usage(f"{option} {value}: its folder {folder} {why}")
        if path.exists() and not os.access(path, os.W_OK):
            raise _Usage(f"{option} {value}: the file exists and cannot be overwritten")
        try:  # the report is written beside it first, then renamed: try that folder for real
            fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise _Usage(f"{option} {value}: cannot write in its folder {folder} ({exc.strerror})") from None
    folder_value = getattr(args, "save_regression", None)
    if folder_value and isinstance(folder_value, str):  # a folder the scenarios go into, made when needed
        near = next((p for p in (Path(folder_value), *Path(folder_value).parents) if p.exists()), Path("."))
        if not near.is_dir():
            raise _Usage(f"--save-regression {folder_value}: {near} is a file, not a folder")
        if not os.access(near, os.W_OK | os.X_OK):
            raise _Usage(f"--save-regression {folder_value}: cannot write in {near}")


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
