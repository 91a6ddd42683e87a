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
    """``fault``: what the nemesis does to the server (trial ``i`` of a power loss lays crash state ``i``: 0
    keeps no unsynced write, 1 every one, the rest a seeded sample; trial ``i`` of a kill SIGKILLs it right
    after its ``i+1``-th write; of 3 replicas, the stream's leader; trial ``i`` of a damage (3 replicas only)
    cuts or flips a bit of a follower's last block file at :func:`harness.families.jetstream.damage.spec_for`
    ``(i)``, then makes that follower the leader; trial ``i`` of a stale writer holds writer 1 after its
    ``i+1``-th acknowledged publish while the run is deleted: docs/jetstream.md); ``nodes``: whose power a power
    loss cuts (``"leader"``, or ``"all"`` the cluster's); ``sector_bytes``: the persistence model's unit
    (docs/persistence-model.md).  ``at``: a power loss's crash points (``"end"``: after the run;
    ``"every-ack"``: right after each acknowledged publish, ``"every-event"``: after each of the server's writes
    and fsyncs of its message blocks, the run cut there; trial ``i`` is point ``i // states + 1`` with crash
    state ``i % states``); ``states``: crash states per point; ``after``: a kill's op (``"write"`` of a block, or
    its ``"fsync"``: with ``sync_interval: always``, after the fsync, before the ack)."""

    fault: str = field(default="power-loss", metadata=key(choice(*FAULTS)))
    sector_bytes: int = field(default=512, metadata=key(int_(1)))
    nodes: str = field(default="leader", metadata=key(choice("leader", "all")))
    at: str = field(default="end", metadata=key(choice(*AT)))
    states: int = field(default=2, metadata=key(int_(1)))
    after: str = field(default="write", metadata=key(choice("write", "fsync")))
