"""Seeded draws from :mod:`hypothesis` strategies: the same values for a seed on every machine (pure; no
example database, nothing read or written on disk)."""

from __future__ import annotations

import random
from typing import Any, Callable

__all__ = ["seeded_draws"]


def _no_local_constants() -> Callable[[], None]:
    """Make hypothesis's draws see none of its "local constants" (6.131 on) until the returned function is called.

    Hypothesis takes them from the source of every loaded module it deems local (not the standard library,
    not site-packages): the first draw of a process parses all of fiskj's and the harness's modules (about
    1.5 s of CPU, its cache written to ``.hypothesis/`` in the working directory), and the values then
    depend on which modules the process imported and on whether the harness is installed editable.  Here a
    draw sees the global constants only, as for an installed harness.  Drawing happens on one thread (the
    campaign's main thread), so the swap is not raced; the constants cache is emptied on both sides, since
    a value cached by another draw would carry that draw's local constants."""
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
        cache, original = providers.CONSTANTS_CACHE, providers._get_local_constants
    except (ImportError, AttributeError):  # another hypothesis: draws as it draws
        return lambda: None
    empty = Constants()
    cache.cache.clear()
    providers._get_local_constants = lambda: empty

    def restore() -> None:
        providers._get_local_constants = original
        cache.cache.clear()
    return restore


def seeded_draws(strategy: Any, count: int, seed: int) -> list[Any]:
    """Draw ``count`` values from ``strategy``, deterministically for ``seed`` (``[]`` for ``count <= 0``):
    the same values whatever else the process imported (:func:`_no_local_constants`).

    A strategy with fewer distinct values than ``count`` repeats them
    cyclically; one that yields none gives ``[]`` (an empty schedule) each.
    """
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import NoSuchExample

    seen: list[Any] = []

    def collect(value: Any) -> bool:
        seen.append(value)
        return False

    if count <= 0:
        return []
    restore = _no_local_constants()
    try:
        find(strategy, collect, random=random.Random(seed), settings=settings(  # no database: nothing on disk
            max_examples=count, database=None, phases=[Phase.generate], deadline=None,
            suppress_health_check=list(HealthCheck), report_multiple_bugs=False, derandomize=False))
    except NoSuchExample:
        pass
    finally:
        restore()
    if not seen:
        return [[] for _ in range(count)]
    return [seen[i % len(seen)] for i in range(count)]
