"""``[faults]`` keys of the jetstream family: its TOML schema (docs/scenarios.md "[faults]", docs/jetstream.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.scenario.fields import choice, int_, key

__all__ = ["Params", "MODES", "FAULTS", "AT"]

#: The ``[faults] family`` values this family runs.
MODES = ("jetstream",)
#: What happens to the server (docs/jetstream.md "Server faults").
FAULTS = ("power-loss", "kill", "damage", "stale-writer")
#: Where a power loss's crash points are: the run's end, each acknowledged publish, each server block write or fsync.
AT = ("end", "every-ack", "every-event")


@dataclass(frozen=True)
class Params:
    """The jetstream keys (defaults when absent): docs/scenarios.md "[faults]"; what each fault does to trial
    ``i``: docs/jetstream.md "Server faults"."""

    fault: str = field(default="power-loss", metadata=key(choice(*FAULTS)))
    sector_bytes: int = field(default=512, metadata=key(int_(1)))
    nodes: str = field(default="leader", metadata=key(choice("leader", "all")))
    at: str = field(default="end", metadata=key(choice(*AT)))
    states: int = field(default=2, metadata=key(int_(1)))
    after: str = field(default="write", metadata=key(choice("write", "fsync")))
