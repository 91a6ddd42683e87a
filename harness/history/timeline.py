"""A leg's own time line: when the subject was ready and when it did its last work (pure; no IO).

Timed faults (``after_ms``) count from a leg's start, the moment the
harness started the process.  An agent's start-up (interpreter, imports,
signal handlers) is not its work: a fault drawn from the spawn lands there
far more often for a fast agent than for a slow one, and tests nothing
but a dead process.  The subject's own time line is measured on its
uninterrupted run instead: ``ready_ms`` is the first thing it did that an
outside observer records (a traced durability call on its journal, a
model call, a tool's effect), ``last_ms`` the last.  The signals family
draws timed faults inside ``[ready_ms, last_ms]`` (docs/scenarios.md
"Timed faults").
"""

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
    """The time line of leg ``index`` of ``history`` (its uninterrupted run's only leg, by default).

    Counts the leg's trace events (``t0``, else ``t``: the IO seam's and the
    observer's entry times), the model calls and the ledger effects of that
    leg.  A leg with nothing observed gets ``ready_ms = 0`` and ``last_ms =
    end_ms`` (its whole life).  Raises ``IndexError`` when there is no such leg.
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
