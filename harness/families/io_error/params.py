"""``[faults]`` keys of the io_error family: its TOML schema (docs/scenarios.md "[faults]")."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.runner.faults import IO_ERROR_OPS, IO_ERRORS
from harness.scenario.fields import int_, key, list_of

__all__ = ["Params", "MODES"]

#: The ``[faults] family`` values this family runs.
MODES = ("io_error",)


@dataclass(frozen=True)
class Params:
    """The io_error keys (defaults when absent): docs/scenarios.md "[faults]"."""

    ops: tuple[str, ...] = field(default=IO_ERROR_OPS, metadata=key(list_of(IO_ERROR_OPS, nonempty=True)))
    errors: tuple[str, ...] = field(default=("eio", "enospc"), metadata=key(list_of(IO_ERRORS, nonempty=True)))
    max_points: int = field(default=0, metadata=key(int_(0)))
