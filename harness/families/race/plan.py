"""The race family's plan (pure: no IO): which leg is held at which sequence point (a lookup, read, open or lock
of the store: :data:`harness.runner.leg.HOLD_KINDS`), trial by trial; a leg's ``lock_point`` is the point at
which it asks for its first lock (:class:`harness.history.model.Leg`).
"""

from __future__ import annotations

from typing import Any

from harness.families.base import Planned
from harness.families.race.params import RACES
from harness.families.trace_points import pending_point_of, write_count
from harness.history.model import History
from harness.scenario.model import Scenario

__all__ = ["plan_races", "races_of", "hold_points", "READER_RACE", "LOCKED_POINTS", "NEVER"]

#: The race that needs the subject's own reading command (a profile's ``[reading]``).
READER_RACE = "readers-during-appends"

#: A sequence point no leg reaches: a probe held there is observed like a held leg and runs to its end.
NEVER = 1 << 30

#: How many sequence points past its lock a held leg is also held at (it holds the run there).
LOCKED_POINTS = 6


def races_of(scenario: Any) -> list[str]:
    """The races a scenario asks for: ``[faults] races`` when it names them, else from its name: ``race-<race>``
    names one race, any other name every race of :data:`RACES`.  Raises ``ValueError`` for an unknown race."""
    raw = getattr(scenario, "raw", None) or {}
    listed = (raw.get("faults") or {}).get("races")
    if listed:
        bad = [r for r in listed if r not in RACES]
        if bad:
            raise ValueError(f"unknown race(s) {bad}; known: {', '.join(RACES)}")
        return list(listed)
    name = getattr(scenario, "name", "") or ""
    return [name[len("race-"):]] if name[len("race-"):] in RACES else list(RACES)


def hold_points(lock: int | None, holding_first: bool = False) -> list[int]:
    """The sequence points K a race holds a leg at, in plan order (pure): the leg's points up to its lock,
    nearest the lock first (a read that the lock does not cover is caught at the first K after it), then
    :data:`LOCKED_POINTS` past it (the leg holds the run there); with ``holding_first``, those come first.
    Empty when ``lock`` is ``None`` (the plan then holds at K = 1, 2, ...)."""
    if not lock:
        return []
    before, holding = list(range(lock, 0, -1)), list(range(lock + 1, lock + 1 + LOCKED_POINTS))
    return holding + before if holding_first else before + holding


def plan_races(scenario: Scenario, history: History | None, count: int, seed: int,
               schedules: list[list[dict[str, Any]]] | None, *, run_id: str = "", start_lock: int | None = None,
               resume_lock: int | None = None) -> list[Planned]:
    """Trial ``i``: race ``i mod len(races)`` at its ``(i div len(races))``-th sequence point (pure; each race's
    K: docs/scenarios.md, family ``race``).

    ``history``: the uninterrupted run of ``scenario`` (observed), whose journal is ``run_id``'s;
    ``start_lock``, ``resume_lock``: the ``lock_point`` of a start and of a resume of it (``None``:
    unknown, K then counts 1, 2, ...); ``schedules``: explicit ones to replay instead.  Raises
    ``ValueError`` when the uninterrupted run gives a race nothing to race."""
    invariants = tuple(scenario.check.invariants)
    if schedules is not None:
        reader = any(e.get("reader") for s in schedules for e in s if isinstance(e, dict))
        judged = invariants + (("I10",) if reader and "I10" not in invariants else ())
        return [Planned(list(s), "explicit", seed, invariants=judged) for s in schedules]
    races = races_of(scenario)
    writes = write_count(history.legs[0].trace) if history is not None and history.legs else 0
    kill = pending_point_of(history, run_id) if history is not None else None
    if {"two-resumers", "two-writers", "holder-killed"} & set(races) and kill is None:
        raise ValueError("the uninterrupted run shows no tool batch to leave pending: the resumers have "
                         "nothing to race")
    if READER_RACE in races and writes < 1:
        raise ValueError("the uninterrupted run made no write: a reader has no append to race")
    locks = {"two-creates": start_lock, "two-resumers": resume_lock, "two-writers": resume_lock}
    pending = {"kind": "kill", "event": kill, "when": "after"}
    out = []
    for i in range(count):
        race, k = races[i % len(races)], 1 + i // len(races)
        judged = invariants
        if race == READER_RACE:
            schedule = [{"kind": "hold", "at": 1 + (k - 1) % writes, "ops": "write", "reader": True}]
            judged += ("I10",) if "I10" not in invariants else ()
        elif race == "holder-killed":
            schedule = [pending, {"kind": "kill", "event": k, "when": "after"}]
            # a takeover is judged by the result: a lock that outlived its holder leaves the run unfinished
            judged += ("I6",) if "I6" not in invariants else ()
        else:
            points = hold_points(locks[race], race == "two-writers")
            at = points[(k - 1) % len(points)] if points else k
            schedule = ([pending] if race != "two-creates" else []) + [{"kind": "hold", "at": at}]
            # two writers end as the uninterrupted run did, whichever held the run (I6)
            judged += ("I6",) if race == "two-writers" and "I6" not in invariants else ()
        out.append(Planned(schedule, f"race-{race}", seed, invariants=judged))
    return out
