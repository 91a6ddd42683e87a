"""The ``fiskj`` command: dispatches to ``fiskj run`` and ``fiskj session ...``.

Exit status: 0 success (a completed run), 1 error, 2 usage error,
3 suspended run (``fiskj run``).  Subcommands live in their own modules:
:mod:`fiskj.cli_run` and :mod:`fiskj.cli_session`; what they share with this
one (exit statuses, ``positive_int``) is in :mod:`fiskj.cli_common`, so neither
imports this module.
"""

from __future__ import annotations

import argparse
import os
import sys

from .cli_common import EXIT_ERROR, EXIT_OK, EXIT_SUSPENDED, EXIT_USAGE, positive_int  # noqa: F401 - re-exported

__all__ = ["main", "build_parser", "parser", "positive_int", "EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "EXIT_SUSPENDED"]


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every subcommand registered."""
    from . import __version__, cli_run, cli_session

    parser = argparse.ArgumentParser(
        prog="fiskj",
        description="Run, suspend, resume and inspect checkpointed agent runs (fisk-ai v2 journals).",
    )
    parser.add_argument("--version", action="version", version=f"fiskj {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    cli_run.register(sub)
    cli_session.register(sub)
    return parser


_PARSER: list[argparse.ArgumentParser] = []


def parser() -> argparse.ArgumentParser:
    """The parser of :func:`build_parser`, built once per process (a forked leg inherits it warm:
    building one costs ~5 ms, most of it gettext looking for translations of argparse's messages)."""
    if not _PARSER:
        _PARSER.append(build_parser())
    return _PARSER[0]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fiskj`` console script; returns the exit status."""
    for name in ("stdout", "stderr"):  # a closed descriptor (`>&-`) leaves None: write nowhere
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w"))  # noqa: SIM115
    try:
        args = parser().parse_args(argv)  # imports the subcommands: Ctrl-C may land here, before any run exists
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    except KeyboardInterrupt:
        print("fiskj: interrupted before anything was started", file=sys.stderr)
        return EXIT_ERROR
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("fiskj: interrupted", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
