"""``[faults]`` keys of the race family: its TOML schema (docs/scenarios.md "[faults]"), and the races."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.scenario.fields import key, list_of

__all__ = ["Params", "MODES", "RACES"]

#: The ``[faults] family`` values this family runs.
MODES = ("race",)

#: The races, in the order a campaign cycles through them (:mod:`harness.families.race.family`).
RACES = ("two-writers", "two-resumers", "two-creates", "holder-killed", "readers-during-appends")


@dataclass(frozen=True)
class Params:
    """``races``: which races (default: from the scenario's name, ``race-<race>``, else all of them)."""

    races: tuple[str, ...] = field(default=(), metadata=key(list_of(RACES, nonempty=True)))
