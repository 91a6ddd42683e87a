"""What the ``fiskj`` command's modules share: exit statuses and argument types.

:mod:`fiskj.cli` (the dispatcher) and its subcommands :mod:`fiskj.cli_run` and
:mod:`fiskj.cli_session` import these from here, so no subcommand imports the
dispatcher that imports it.  Exit statuses: docs/spec.md section 13 (a suspend
exits 3) and ``fiskj --help``.
"""

from __future__ import annotations

import argparse

__all__ = ["EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "EXIT_SUSPENDED", "positive_int", "count"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_SUSPENDED = 3


def positive_int(text: str) -> int:
    """``argparse`` type: an integer >= 1; raises ``argparse.ArgumentTypeError`` naming the bad value."""
    return _int_at_least(text, 1)


def count(text: str) -> int:
    """``argparse`` type: an integer >= 0 (a count, such as retries); raises ``argparse.ArgumentTypeError``."""
    return _int_at_least(text, 0)


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
    return value
