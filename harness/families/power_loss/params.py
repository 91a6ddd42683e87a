"""``[faults]`` keys of the power-loss family: its TOML schema (docs/scenarios.md, docs/persistence-model.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.scenario.fields import bool_, choice, int_, key

__all__ = ["Params", "MODES"]

#: The ``[faults] family`` values this family runs.
MODES = ("power_loss",)


@dataclass(frozen=True)
class Params:
    """The power-loss keys (defaults when absent): docs/scenarios.md "[faults]", the tiers they size:
    docs/persistence-model.md "Tiered exploration"; ``seed`` (default ``trials.seed``) is not a file key."""

    max_states: int = field(default=64, metadata=key(int_(0)))
    resumes: int = field(default=8, metadata=key(int_(0)))
    batch_states: int = field(default=1024, metadata=key(int_(1)))
    sector_bytes: int = field(default=512, metadata=key(int_(1)))
    exhaustive_units: int = field(default=12, metadata=key(int_(0)))
    samples: int = field(default=64, metadata=key(int_(0)))
    zero_fill: bool = field(default=True, metadata=key(bool_))
    seed: int = 1
    stop_on_violation: bool = field(default=False, metadata=key(bool_))
    crash_leg: str = field(default="start", metadata=key(choice("start", "resume")))
