"""``[faults]`` keys of the tail family: its TOML schema (docs/scenarios.md "[faults]")."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.scenario.fields import bool_, int_, key

__all__ = ["Params", "MODES"]

#: The ``[faults] family`` values this family runs.
MODES = ("tail",)


@dataclass(frozen=True)
class Params:
    """The tail keys (defaults when absent); ``seed`` (default ``trials.seed``) is not a file key.

    ``resume_checks`` defaults to ``trials.count``.
    """

    cut_every_offset_of_last_record: bool = field(default=True, metadata=key(bool_))
    random_cuts: int = field(default=16, metadata=key(int_(0)))
    zero_tail_bytes: int = field(default=4096, metadata=key(int_(0)))
    garbage_tails: int = field(default=4, metadata=key(int_(0)))
    flips: int = field(default=8, metadata=key(int_(0)))
    mid_run: bool = field(default=True, metadata=key(bool_))
    interior: bool = field(default=True, metadata=key(bool_))
    resume_checks: int = field(default=8, metadata=key(int_(0)))
    seed: int = 1
