"""What the ``fiskj`` command's modules share: exit statuses and argument types.

:mod:`fiskj.cli` (the dispatcher) and its subcommands :mod:`fiskj.cli_run` and
:mod:`fiskj.cli_session` import these from here, so no subcommand imports the
dispatcher that imports it.  Exit statuses: docs/spec.md section 13 (a suspend
exits 3) and ``fiskj --help``.
"""

from __future__ import annotations

import argparse

__all__ = ["EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "EXIT_SUSPENDED", "positive_int"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_SUSPENDED = 3


def positive_int(text: str) -> int:
    """``argparse`` type: an integer >= 1; raises ``argparse.ArgumentTypeError`` naming the bad value."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
