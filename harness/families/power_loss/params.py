"""``[faults]`` keys of the power-loss family: its TOML schema (docs/scenarios.md, docs/persistence-model.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.scenario.fields import bool_, choice, int_, key

__all__ = ["Params", "MODES"]

#: The ``[faults] family`` values this family runs.
MODES = ("power_loss",)


@dataclass(frozen=True)
class Params:
    """The power-loss keys (defaults when absent); ``seed`` is not a file key.

    Exploration is tiered (docs/persistence-model.md "Tiered exploration"):
    every distinct crash state gets the cheap judgement (the crash model's
    I4, and the subject's own recovery and reading of the journal, I5); a
    sample gets a full resume of the agent to its end (I1-I3, I6-I10).

    ``max_states``: full resumes at most (0: every distinct state; default
    ``trials.count``; in a campaign the cheap trials count against
    ``--trials`` too); ``resumes``: the seeded sample of full resumes drawn
    besides the first state of every distinct recovery outcome;
    ``batch_states``: crash states judged cheaply per trial;
    ``sector_bytes``: the atomic write unit; ``exhaustive_units``: windows
    up to this many units are enumerated exhaustively; ``samples``: subsets
    drawn per larger window; ``zero_fill``: one size-without-data state per
    crash point (rule d); ``stop_on_violation``: stop at the first
    violating state; ``crash_leg``: which leg loses power: ``start`` (the
    run's first leg) or ``resume`` (the resume of a run killed with a
    pending batch, its journal already durable); ``seed``: default
    ``trials.seed``.
    """

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
