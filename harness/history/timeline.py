"""A leg's own time line: when the subject was ready and did its last work (pure; docs/history.md)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.history.model import History

__all__ = ["Timeline", "leg_timeline", "first_journal_event"]


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


def first_journal_event(history: History, index: int = 0, file: bool = False) -> int:
    """The ``n`` (1-based seam event number) of leg ``index``'s first operation on the run's journal or its
    folder that did not fail (made, fsynced, a lock file in it; ``file``: on the journal itself); 0 when the
    journal was never touched.  What an agent does before it is start-up: a crash there loses nothing of the run."""
    trace = history.legs[index].trace if index < len(history.legs) else []
    hit = next((ev for ev in trace if history.journal.is_journal(ev.get("path"), history.run_id)), None)
    if hit is None or file:
        return int(hit.get("n") or trace.index(hit) + 1) if hit is not None else 0
    folder = str(hit["path"]).rpartition("/")[0]
    return next(int(ev.get("n") or i + 1) for i, ev in enumerate(trace) if ev is hit or (not ev.get("error") and (
        str(ev.get("path")) == folder or str(ev.get("path")).startswith(folder + "/"))))  # a failed lookup changed nothing


def leg_timeline(history: History, index: int = 0) -> Timeline:
    """The time line of leg ``index`` of ``history`` (default: the uninterrupted run's only leg).

    ``ready_ms`` is its first journal operation, model call or ledger effect (an agent's start-up, however
    many calls it makes, is not work: issue 26 item 1), else its first trace event; ``last_ms`` its last
    observed event of any kind.  With nothing observed ``ready_ms`` is 0 and ``last_ms`` is ``end_ms``.
    Raises ``IndexError`` when there is no such leg.
    """
    leg = history.legs[index]
    start = leg.t_start

    def ms(times: list[int]) -> list[float]:
        return [(t - start) / 1e6 for t in times if t and leg.t_start <= t <= (leg.t_end or t)]

    trace = [int(ev.get("t0") or ev.get("t") or 0) for ev in leg.trace]
    work = [int(ev.get("t0") or ev.get("t") or 0) for ev in leg.trace
            if history.journal.is_journal(ev.get("path"), history.run_id)]
    work += [c.t for c in history.model_calls if c.leg in (leg.index, -1)]
    work += [e.t for e in history.effects if e.leg in (leg.index, -1)]
    times, work_ms = ms(trace + work), ms(work)
    end_ms = max((leg.t_end - start) / 1e6, 0.0) if leg.t_end else (max(times) if times else 0.0)
    if not times:
        return Timeline(ready_ms=0.0, last_ms=end_ms, end_ms=end_ms)
    return Timeline(ready_ms=min(work_ms or times), last_ms=max(times), end_ms=end_ms)
