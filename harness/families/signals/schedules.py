"""Fault schedules: how a campaign draws the faults of its trials.

A schedule is a list of faults, one per leg (:mod:`harness.runner.faults`
validates them).  Timed faults and event kills are drawn with
:mod:`hypothesis` (the campaign shrinks a failing one:
:func:`harness.families.base.smaller_schedules`); event
kills of the first leg are also enumerated exhaustively.  Everything here is
deterministic for a seed.
"""

from __future__ import annotations

import random
import zlib
from typing import TYPE_CHECKING, Any, TypeVar

from harness.draws import seeded_draws
from harness.families.signals.params import Params
from harness.history.timeline import Timeline, first_journal_event
from harness.scenario.model import Scenario

if TYPE_CHECKING:  # an annotation only: this generator does no IO
    from harness.runner.trial import ReferenceRun

T = TypeVar("T")

__all__ = ["spread", "params_of", "schedule_strategy", "exhaustive_schedules", "plan_schedules", "seed_for"]


def params_of(scenario: Scenario) -> Params:
    """The scenario's signals-family :class:`Params` (the defaults for a hand-built scenario without them)."""
    params = scenario.faults.params
    return params if isinstance(params, Params) else Params()


def seed_for(seed: int, scenario: Scenario) -> int:
    """The seed of a scenario's draws: the campaign seed mixed with the scenario's name."""
    return (seed * 1_000_003 + zlib.crc32(scenario.name.encode())) & 0xFFFFFFFF


#: Resolution of a drawn fault time: the span (the subject's own work, :data:`_TAIL` more) in this many
#: steps, a prime, so that multiplying by :data:`_TIME_SCRAMBLE` permutes the steps.
_TIME_STEPS = 1_000_003
_TIME_SCRAMBLE = 618_034
#: How far past the subject's last observed work a timed fault may land, as a fraction of its span
#: (the exit after the last fsync: closing, releasing the lock, printing the answer).
_TAIL = 0.05


def schedule_strategy(scenario: Scenario, ref: ReferenceRun) -> Any:
    """The :mod:`hypothesis` strategy of fault schedules for ``scenario``: lists of 1..``faults.legs`` faults (a
    ``chain`` is its fixed list of kinds).

    Timed faults draw ``after_ms`` in the subject's own time line (docs/scenarios.md "[faults]", timed faults:
    from ``ready_ms`` to ``last_ms`` plus :data:`_TAIL` of that span, in millionths of it), the drawn step
    scrambled by a fixed permutation of the steps: hypothesis favours small integers, which would put most
    faults in the agent's start-up, where they test nothing.  Event kills draw ``k`` in ``1 .. E`` (the
    reference's seam events); a ``chain``'s later event kill (or suspend) counts the resume's own journal writes
    (``op: write``, ``k`` in ``1 .. W/2`` of the reference's ``W``), so it lands inside what the resume still does.
    """
    from hypothesis import strategies as st

    faults = params_of(scenario)
    timeline = ref.timeline or Timeline(ready_ms=0.0, last_ms=ref.duration_ms, end_ms=ref.duration_ms)
    start_ms = timeline.ready_ms
    span_ms = timeline.span_ms * (1.0 + _TAIL)
    events = max(ref.events, 1)

    # A time is drawn as millionths of the span, a range that does not depend on the measured
    # duration: the draws of a seed are then the same on every machine (and in every shard),
    # only scaled to the reference run's duration.
    def at(v: int) -> float:
        return round(start_ms + (v * _TIME_SCRAMBLE % _TIME_STEPS) * span_ms / _TIME_STEPS, 3)

    def timed_kill() -> Any:
        return st.builds(lambda v: {"kind": "kill", "after_ms": at(v)}, st.integers(0, _TIME_STEPS - 1))

    def event_kill() -> Any:
        return st.builds(lambda k: {"kind": "kill", "event": k, "when": "after"}, st.integers(1, events))

    def suspend() -> Any:
        return st.builds(lambda sig, v: {"kind": "suspend", "signal": sig, "after_ms": at(v)},
                         st.sampled_from(list(faults.signals)), st.integers(0, _TIME_STEPS - 1))

    # A resume after an earlier fault makes only what is left of the run, so an event counted over the whole
    # reference run mostly lands past its end.  A chain's later event kill therefore counts the resume's own
    # journal writes, in the first half of the reference's: the crash comes after it appended something.
    journal, run_id = ref.history.journal, ref.history.run_id
    writes = sum(1 for ev in (ref.history.legs[0].trace if ref.history.legs else [])
                 if ev.get("op") == "write" and journal.is_journal(ev.get("path"), run_id))

    def later_event_kill() -> Any:
        if writes < 2:
            return event_kill()
        return st.builds(lambda k: {"kind": "kill", "event": k, "when": "after", "op": "write"},
                         st.integers(1, max(1, writes // 2)))

    def event_suspend(later: bool = False) -> Any:
        sig = st.sampled_from(list(faults.signals))
        if later and writes >= 2:  # as a later event kill: counted over the resume's own journal writes
            return st.builds(lambda s, k: {"kind": "suspend", "signal": s, "event": k, "op": "write"},
                             sig, st.integers(1, max(1, writes // 2)))
        return st.builds(lambda s, k: {"kind": "suspend", "signal": s, "event": k}, sig, st.integers(1, events))

    by_kind = {"kill": timed_kill, "kill-event": event_kill, "suspend": suspend, "suspend-event": event_suspend,
               "none": lambda: st.just({"kind": "none"})}
    if scenario.faults.family == "chain":
        return st.tuples(*[(later_event_kill() if i and k == "kill-event" else event_suspend(True)
                            if i and k == "suspend-event" else by_kind[k]())
                           for i, k in enumerate(faults.chain)]).map(list)
    if scenario.faults.family == "suspend":
        leg = {"random": suspend, "events": event_suspend}.get(faults.suspend_points, lambda: st.one_of(
            suspend(), event_suspend()))()
    elif scenario.faults.family == "kill":
        leg = {"random": timed_kill, "events": event_kill}.get(faults.kill_points, lambda: st.one_of(
            timed_kill(), event_kill()))()
    else:
        return st.just([])
    return st.lists(leg, min_size=1, max_size=faults.legs)


def exhaustive_schedules(events: int, cap: int, seed: int, signals: tuple[str, ...] | None = None,
                         first: int = 1) -> list[list[dict[str, Any]]]:
    """Single-leg crash points: a kill before seam event 1 and after each event ``first-1..events``; with
    ``signals``, suspend points instead: a suspend right after each event ``first-1..events``, its signal
    taken from ``signals`` in turn.  ``first``: the agent's first journal operation (1 or less: none
    known); the points in its start-up before it would lose nothing of the run, so all but one are left out.

    When there are more than ``cap`` points, ``cap`` of them are sampled
    (deterministically from ``seed``; the first and last points are always
    kept) and returned in event order.
    """
    ks = range(max(1, first - 1), events + 1)
    if signals:
        points = [[{"kind": "suspend", "signal": signals[k % len(signals)], "event": k}] for k in ks]
    else:
        points = [[{"kind": "kill", "event": 1, "when": "before"}]]
        points += [[{"kind": "kill", "event": k, "when": "after"}] for k in ks]
    return spread(points, cap, seed)


def spread(points: list[T], cap: int, seed: int) -> list[T]:
    """At most ``cap`` of ``points`` in their order: all of them when they fit (or ``cap`` <= 0), else the first
    and the last and ``cap - 2`` sampled between them, deterministically for ``seed`` (``cap`` 1: the last)."""
    if cap <= 0 or len(points) <= cap:
        return list(points)
    if cap == 1:
        return [points[-1]]
    rng = random.Random(seed)
    middle = sorted(rng.sample(range(1, len(points) - 1), cap - 2))
    return [points[0]] + [points[i] for i in middle] + [points[-1]]


def plan_schedules(scenario: Scenario, ref: ReferenceRun, count: int, seed: int) -> list[tuple[list[dict[str, Any]], str]]:
    """The schedules of a scenario's trials, each with its origin, deterministic for ``seed``.

    A scenario with ``[faults] schedule``: that schedule ``count`` times
    (origin ``regression``).  ``none``: ``count`` no-op trials.  ``kill`` with ``kill_points =
    "events"`` (or ``suspend`` with ``suspend_points = "events"``): the exhaustive crash (suspend) points (capped by ``faults.max_events``
    or ``count``), then, when ``legs > 1``, hypothesis draws for the rest of
    ``count``.  Other families: ``count`` hypothesis draws.
    """
    faults = params_of(scenario)
    s = seed_for(seed, scenario)
    if scenario.faults.schedule is not None:  # a regression scenario: its one schedule, count times
        return [([dict(f) for f in scenario.faults.schedule], "regression") for _ in range(count)]
    if scenario.faults.family == "none":
        return [([], "noop") for _ in range(count)]
    plan: list[tuple[list[dict[str, Any]], str]] = []
    suspends = scenario.faults.family == "suspend" and faults.suspend_points == "events"
    if (scenario.faults.family == "kill" and faults.kill_points == "events") or suspends:
        cap = faults.max_events or count
        first = 0 if faults.startup_points or not ref.history.legs else first_journal_event(ref.history, file=True)
        plan += [(sch, "exhaustive") for sch in exhaustive_schedules(ref.events, cap, s,
                                                                     faults.signals if suspends else None, first)]
        if faults.legs == 1:
            return plan
    rest = count - len(plan)
    if rest > 0:
        plan += [(sch, "hypothesis") for sch in seeded_draws(schedule_strategy(scenario, ref), rest, s)]
    return plan
