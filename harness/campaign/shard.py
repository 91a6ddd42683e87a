"""Sharding a campaign: shard ``i`` of ``n`` runs plan positions ``i, i + n, ...`` of every scenario, any family."""

from __future__ import annotations

__all__ = ["shard_positions", "parse_shard"]


def shard_positions(total: int, shard: tuple[int, int] | None) -> range:
    """Positions ``0..total-1`` of a plan that shard ``(i, n)`` runs: ``i, i + n, i + 2n, ...`` (all without a shard)."""
    if shard is None:
        return range(total)
    i, n = shard
    return range(i, total, n)


def parse_shard(text: str) -> tuple[int, int]:
    """Parse ``--shard I/N`` (``I`` 0-based, ``0 <= I < N``) into ``(I, N)``; raises ``ValueError``."""
    left, sep, right = str(text).partition("/")
    try:
        i, n = int(left), int(right)
    except ValueError:
        raise ValueError(f"a shard is I/N with integers 0 <= I < N (e.g. 0/4), got {text!r}") from None
    if not sep or n < 1 or not 0 <= i < n:
        raise ValueError(f"a shard is I/N with integers 0 <= I < N (e.g. 0/4), got {text!r}")
    return i, n
