"""The fault families, registered by direct import: one line per family (adding one: docs/architecture.md).

The campaign, the scenario parser, the report and the shard logic find a family here and treat every family
alike (:class:`harness.families.base.Family`).
"""

from __future__ import annotations

from typing import Any

from harness.families.io_error.family import IO_ERROR
from harness.families.jetstream.family import JETSTREAM
from harness.families.power_loss.family import POWER_LOSS
from harness.families.race.family import RACE
from harness.families.signals.family import SIGNALS
from harness.families.tail.family import TAIL

__all__ = ["FAMILIES", "MODES", "by_mode"]

#: Every family, in report order.
FAMILIES: tuple[Any, ...] = (SIGNALS, TAIL, POWER_LOSS, RACE, IO_ERROR, JETSTREAM)

#: Every ``[faults] family`` value a scenario may name.
MODES: tuple[str, ...] = tuple(mode for family in FAMILIES for mode in family.modes)


def by_mode(mode: str) -> Any:
    """The family that runs ``[faults] family = mode``; raises ``KeyError`` for an unknown mode."""
    for family in FAMILIES:
        if mode in family.modes:
            return family
    raise KeyError(f"no fault family runs mode {mode!r} (known: {', '.join(MODES)})")

