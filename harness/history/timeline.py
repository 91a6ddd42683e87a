"""A leg's own time line: when the subject was ready and did its last work (pure; docs/history.md)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.history.model import History

__all__ = ["Timeline", "leg_timeline"]


@dataclass(frozen=True)
class Timeline:
    """A leg's time line in ms from its start: ``ready_ms`` (first observed work), ``last_ms`` (last), ``end_ms`` (exit)."""

    ready_ms: float
    last_ms: float
    end_ms: float

    @property
    def span_ms(self) -> float:
        """The span of the subject's own work, ``last_ms - ready_ms`` (at least 1 ms)."""
        return max(self.last_ms - self.ready_ms, 1.0)


def leg_timeline(history: History, index: int = 0) -> Timeline:
    """The time line of leg ``index`` of ``history`` (default: the uninterrupted run's only leg).

    Counts its trace events, model calls and ledger effects; with nothing
    observed ``ready_ms`` is 0 and ``last_ms`` is ``end_ms``.  Raises
    ``IndexError`` when there is no such leg.
    """
    leg = history.legs[index]
    start = leg.t_start
    times = [int(ev.get("t0") or ev.get("t") or 0) for ev in leg.trace]
    times += [c.t for c in history.model_calls if c.leg in (leg.index, -1)]
    times += [e.t for e in history.effects if e.leg in (leg.index, -1)]
    times = [(t - start) / 1e6 for t in times if t and leg.t_start <= t <= (leg.t_end or t)]
    end_ms = max((leg.t_end - start) / 1e6, 0.0) if leg.t_end else (max(times) if times else 0.0)
    if not times:
        return Timeline(ready_ms=0.0, last_ms=end_ms, end_ms=end_ms)
    return Timeline(ready_ms=min(times), last_ms=max(times), end_ms=end_ms)
