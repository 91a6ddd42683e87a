"""``[faults]`` keys of the race family: its TOML schema (docs/scenarios.md "[faults]")."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.families.race.catalog import RACES
from harness.scenario.fields import key, list_of

__all__ = ["Params", "MODES"]

#: The ``[faults] family`` values this family runs.
MODES = ("race",)


@dataclass(frozen=True)
class Params:
    """``races``: which races (default: from the scenario's name, ``race-<race>``, else all of them)."""

    races: tuple[str, ...] = field(default=(), metadata=key(list_of(RACES, nonempty=True)))
