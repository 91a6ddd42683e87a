"""The checkers: pure judges of one :class:`~harness.history.model.History`.

One module per invariant of docs/spec.md (ids ``I1`` .. ``I9``, listed in
:data:`INVARIANTS`).  Each module exposes ``INVARIANT`` (the id), ``NAME``
and ``check(history) -> Verdict``, and states in its docstring the
invariant's normative text and how it is judged from the history.

A checker answers ``valid``, ``invalid`` (with evidence enough to act on)
or ``unknown`` (the history cannot decide it).  :func:`check_all` runs them
all; a checker that raises is recorded as ``unknown`` with the exception as
evidence, never as ``valid``.  Checkers do no IO: journal bytes are decoded
in memory.

Every evidence dict has ``summary`` (one line); an invalid verdict adds
``violations`` (a list of dicts, each with a ``kind``), and most verdicts
add ``checked`` (how many items were judged).  An unknown one has ``reason``.
"""

from __future__ import annotations

import importlib
import traceback
from dataclasses import asdict, dataclass
from typing import Any

from harness.history.model import History, history_from_json

__all__ = ["VALID", "INVALID", "UNKNOWN", "STATUSES", "INVARIANTS", "Verdict", "check_all", "verdict_from_json",
           "combine"]

VALID, INVALID, UNKNOWN = "valid", "invalid", "unknown"
STATUSES = (VALID, INVALID, UNKNOWN)

#: invariant id -> (checker module, name)
INVARIANTS: dict[str, tuple[str, str]] = {
    "I1": ("i1_suspend", "exactly-once after a clean suspend"),
    "I2": ("i2_tool_reruns", "at most one tool re-run per crash, only the one in flight"),
    "I3": ("i3_model_repeats", "at most one model call repeated per crash"),
    "I4": ("i4_acknowledged", "no acknowledged record lost"),
    "I5": ("i5_readable", "journal always readable, at most one torn tail"),
    "I6": ("i6_reference", "result equals the uninterrupted reference run"),
    "I7": ("i7_conversation", "conversation well-formed at every model call"),
    "I8": ("i8_one_writer", "one writer at a time"),
    "I9": ("i9_refusal", "a refused resume appends nothing"),
}


@dataclass
class Verdict:
    """One checker's answer about one history.

    ``status`` is ``valid``, ``invalid`` or ``unknown``; ``evidence`` is
    JSON-able; ``checker`` names the module that judged.
    """

    invariant: str
    name: str
    status: str
    evidence: Any
    checker: str

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"Verdict status {self.status!r} is not one of {STATUSES}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def summary(self) -> str:
        ev = self.evidence
        if isinstance(ev, dict) and isinstance(ev.get("summary"), str):
            return ev["summary"]
        return str(ev)


def verdict_from_json(data: dict[str, Any] | Verdict) -> Verdict:
    """Inverse of :meth:`Verdict.to_json` (a :class:`Verdict` is returned as is)."""
    if isinstance(data, Verdict):
        return data
    return Verdict(invariant=data["invariant"], name=data.get("name", ""), status=data["status"],
                   evidence=data.get("evidence"), checker=data.get("checker", ""))


def combine(statuses: list[str]) -> str:
    """Overall status: ``invalid`` beats ``unknown`` beats ``valid`` (nothing judged is ``valid``)."""
    if INVALID in statuses:
        return INVALID
    if UNKNOWN in statuses:
        return UNKNOWN
    return VALID


def _module(inv: str) -> Any:
    return importlib.import_module(f"{__name__}.{INVARIANTS[inv][0]}")


def check_all(history: History | dict[str, Any], invariants: list[str] | None = None) -> list[Verdict]:
    """Run the checkers of ``invariants`` (default: all, in id order) on ``history``.

    ``history`` may be a :class:`History` or its JSON form.  Unknown ids raise
    ``ValueError`` naming the known ones.  A checker that raises, or returns
    something that is not a :class:`Verdict` for its invariant, yields an
    ``unknown`` verdict whose evidence holds the error and a short traceback.
    """
    if isinstance(history, dict):
        history = history_from_json(history)
    ids = list(INVARIANTS) if invariants is None else [i.upper() for i in invariants]
    bad = [i for i in ids if i not in INVARIANTS]
    if bad:
        raise ValueError(f"unknown invariant id(s) {bad}; known: {', '.join(INVARIANTS)}")
    out = []
    for inv in ids:
        modname, name = INVARIANTS[inv]
        checker = f"{__name__}.{modname}"
        try:
            verdict = _module(inv).check(history)
            if not isinstance(verdict, Verdict) or verdict.invariant != inv:
                raise TypeError(f"{checker}.check returned {verdict!r:.120}, expected a Verdict for {inv}")
        except Exception as exc:  # noqa: BLE001 - a crashing checker is unknown, never valid
            tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
            verdict = Verdict(inv, name, UNKNOWN, {
                "summary": f"checker raised {type(exc).__name__}: {exc}",
                "reason": "checker raised",
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": "".join(tb[-3:])[-2000:],
            }, checker)
        out.append(verdict)
    return out


def make(module: str, status: str, evidence: dict[str, Any]) -> Verdict:
    """Build the verdict of checker ``module`` (uses its ``INVARIANT`` and ``NAME``)."""
    mod = importlib.import_module(module)
    return Verdict(mod.INVARIANT, mod.NAME, status, evidence, module)
