"""``[faults]`` keys of the signals family (modes ``none``, ``kill``, ``suspend``, ``chain``): its TOML schema.

docs/scenarios.md "[faults]" is the normative key reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.runner.faults import SIGNALS
from harness.scenario.fields import bool_, choice, int_, key, list_of

__all__ = ["Params", "CHAIN_KINDS", "MODES"]

#: The ``[faults] family`` values this family runs.
MODES = ("none", "kill", "suspend", "chain")

#: Per-leg fault kinds of a ``chain``.
CHAIN_KINDS = ("none", "kill", "kill-event", "suspend", "suspend-event")


@dataclass(frozen=True)
class Params:
    """The signals family's keys (defaults when absent): docs/scenarios.md "[faults]"."""

    kill_points: str = field(default="random", metadata=key(choice("random", "events", "both")))
    suspend_points: str = field(default="random", metadata={**key(choice("random", "events", "both")),
                                                            "modes": ("suspend",)})
    signals: tuple[str, ...] = field(default=SIGNALS, metadata=key(list_of(SIGNALS, nonempty=True)))
    legs: int = field(default=1, metadata=key(int_(1)))
    chain: tuple[str, ...] = field(default=(), metadata={**key(list_of(CHAIN_KINDS)), "modes": ("chain",)})
    max_events: int = field(default=0, metadata=key(int_(0)))
    startup_points: bool = field(default=False, metadata=key(bool_))
