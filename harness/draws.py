"""Seeded draws from :mod:`hypothesis` strategies: the same values for a seed on every machine (pure; no
example database, nothing read or written on disk)."""

from __future__ import annotations

import random
from typing import Any

__all__ = ["hypothesis_settings", "seeded_draws"]


def hypothesis_settings(max_examples: int, shrink: bool) -> Any:
    """Settings for ``max_examples`` examples, generate phase only or also shrink; no database, no deadline,
    no health check (a draw may be slow or filtered), one bug reported."""
    from hypothesis import HealthCheck, Phase, settings

    phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]
    return settings(max_examples=max_examples, database=None, phases=phases, deadline=None,
                    suppress_health_check=list(HealthCheck), report_multiple_bugs=False, derandomize=False)


def seeded_draws(strategy: Any, count: int, seed: int) -> list[Any]:
    """Draw ``count`` values from ``strategy``, deterministically for ``seed`` (``[]`` for ``count <= 0``).

    A strategy with fewer distinct values than ``count`` repeats them
    cyclically; one that yields none gives ``[]`` (an empty schedule) each.
    """
    from hypothesis import find
    from hypothesis.errors import NoSuchExample

    seen: list[Any] = []

    def collect(value: Any) -> bool:
        seen.append(value)
        return False

    if count <= 0:
        return []
    try:
        find(strategy, collect, settings=hypothesis_settings(count, shrink=False), random=random.Random(seed))
    except NoSuchExample:
        pass
    if not seen:
        return [[] for _ in range(count)]
    return [seen[i % len(seen)] for i in range(count)]
