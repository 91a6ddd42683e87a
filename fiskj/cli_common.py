"""What the ``fiskj`` command's modules share: exit statuses and argument types.

:mod:`fiskj.cli` (the dispatcher) and its subcommands :mod:`fiskj.cli_run` and
:mod:`fiskj.cli_session` import these from here, so no subcommand imports the
dispatcher that imports it.  Exit statuses: docs/spec.md section 13 (a suspend
exits 3) and ``fiskj --help``.
"""

from __future__ import annotations

import argparse

from typing import Any

__all__ = ["EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "EXIT_SUSPENDED", "positive_int", "count", "is_store_url",
           "open_store"]

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


def is_store_url(spec: str | None) -> bool:
    """True when a ``--store`` value names a JetStream store (``nats://`` or ``tls://``), not a directory."""
    return spec is not None and spec.startswith(("nats://", "tls://"))


def open_store(spec: str | None, *, reading: bool = False) -> Any:
    """The store a ``--store`` value names: :class:`fiskj.jetstream.JetStreamStore` for a ``nats://HOST:PORT/STREAM``
    URL (docs/store.md "The JetStream store"; ``reading``: a migrate's source, whose storage and replicas are not
    refused), else :class:`fiskj.store.FileStore` of the directory (None: the default).  Raises what the store's
    constructor raises (``StreamRefused``, ``StoreIOError``, ``UsageError``)."""
    if is_store_url(spec):
        from .jetstream import JetStreamStore

        return JetStreamStore(spec, reading=reading)
    from .store import FileStore

    return FileStore(spec)
