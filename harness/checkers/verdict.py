"""The one verdict type of the harness: what a checker answers about one history (docs/spec.md section 15).

A checker answers ``valid``, ``invalid`` (with evidence) or ``unknown``, built with :func:`make` so that an
invariant's id (:data:`INVARIANTS`) and name are written once (:data:`CHECKERS`); no family builds its own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from harness.names import INVARIANTS

__all__ = ["VALID", "INVALID", "UNKNOWN", "STATUSES", "INVARIANTS", "CHECKERS", "Verdict", "verdict_from_json",
           "combine", "make"]

VALID, INVALID, UNKNOWN = "valid", "invalid", "unknown"
STATUSES = (VALID, INVALID, UNKNOWN)

#: invariant id -> (checker module in harness.checkers, name); docs/spec.md section 15.  The ids are
#: :data:`harness.names.INVARIANTS`, in that order (tests/test_checkers.py).
CHECKERS: dict[str, tuple[str, str]] = {
    "I1": ("i1_suspend", "exactly-once after a clean suspend"),
    "I2": ("i2_tool_reruns", "at most one tool re-run per crash, only the one in flight"),
    "I3": ("i3_model_repeats", "at most one model call repeated per crash"),
    "I4": ("i4_acknowledged", "no acknowledged record lost"),
    "I5": ("i5_readable", "journal always readable, at most one torn tail"),
    "I6": ("i6_reference", "result equals the uninterrupted reference run"),
    "I7": ("i7_conversation", "conversation well-formed at every model call"),
    "I8": ("i8_one_writer", "one writer at a time"),
    "I9": ("i9_refusal", "a refused resume appends nothing"),
    "I10": ("i10_reading", "the subject's own reading agrees with the journal"),
    "I11": ("i11_workload", "the run is faithful to its workload"),
}


@dataclass
class Verdict:
    """One checker's answer about one history (docs/spec.md section 15): ``status`` one of :data:`STATUSES`
    (``ValueError`` otherwise), ``evidence`` JSON-able, ``checker`` the module that judged."""

    invariant: str
    name: str
    status: str
    evidence: Any
    checker: str

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"Verdict status {self.status!r} is not one of {STATUSES}")

    def to_json(self) -> dict[str, Any]:
        """The verdict as a JSON-ready dict (inverse: :func:`verdict_from_json`)."""
        return asdict(self)

    @property
    def summary(self) -> str:
        """The evidence's one-line ``summary`` (the evidence itself when it has none)."""
        ev = self.evidence
        return ev["summary"] if isinstance(ev, dict) and isinstance(ev.get("summary"), str) else str(ev)


def verdict_from_json(data: dict[str, Any] | Verdict) -> Verdict:
    """Inverse of :meth:`Verdict.to_json` (a :class:`Verdict` is returned as is)."""
    if isinstance(data, Verdict):
        return data
    return Verdict(invariant=data["invariant"], name=data.get("name", ""), status=data["status"],
                   evidence=data.get("evidence"), checker=data.get("checker", ""))


def combine(statuses: list[str]) -> str:
    """Overall status (docs/spec.md section 15): ``invalid`` beats ``unknown`` beats ``valid``; nothing judged
    is ``valid``."""
    return next((s for s in (INVALID, UNKNOWN) if s in statuses), VALID)


def make(module: str, status: str, evidence: dict[str, Any]) -> Verdict:
    """The verdict of checker ``module`` (``harness.checkers.<name>``), with the id and name it is registered
    under in :data:`CHECKERS`; ``ValueError`` for a module that is not registered."""
    for inv, (modname, name) in CHECKERS.items():
        if module == f"harness.checkers.{modname}":
            return Verdict(inv, name, status, evidence, module)
    raise ValueError(f"{module} is not a registered checker; known: "
                     f"{', '.join(m for m, _ in CHECKERS.values())}")
