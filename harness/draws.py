"""Seeded draws from :mod:`hypothesis` strategies: the same values for a seed on every machine (pure; no
example database, nothing read or written on disk)."""

from __future__ import annotations

import random
from typing import Any

__all__ = ["seeded_draws"]


def seeded_draws(strategy: Any, count: int, seed: int) -> list[Any]:
    """Draw ``count`` values from ``strategy``, deterministically for ``seed`` (``[]`` for ``count <= 0``).

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
    try:
        find(strategy, collect, random=random.Random(seed), settings=settings(  # no database: nothing on disk
            max_examples=count, database=None, phases=[Phase.generate], deadline=None,
            suppress_health_check=list(HealthCheck), report_multiple_bugs=False, derandomize=False))
    except NoSuchExample:
        pass
    if not seen:
        return [[] for _ in range(count)]
    return [seen[i % len(seen)] for i in range(count)]
