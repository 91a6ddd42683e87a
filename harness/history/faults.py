"""Fault counts: how many faults of each kind a trial's history shows injected (families and report alike)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.names import NOT_INJECTED

if TYPE_CHECKING:
    from harness.history.model import History

__all__ = ["fault_counts"]


def fault_counts(history: History) -> dict[str, int]:
    """Faults injected in a trial, per kind (``kill``, ``suspend``, ...): its legs whose fault was injected;
    ``not_injected``: its legs whose scheduled fault never fired (the leg ended before its time or call), so a
    schedule that tested nothing is counted, never silent."""
    out: dict[str, int] = {}
    for leg in history.legs:
        if leg.fault.injected and leg.fault.kind != "none":
            out[leg.fault.kind] = out.get(leg.fault.kind, 0) + 1
        elif not leg.fault.injected and leg.fault.kind in ("kill", "suspend", "io_error"):
            out[NOT_INJECTED] = out.get(NOT_INJECTED, 0) + 1
    return out
