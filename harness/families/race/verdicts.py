"""A race trial's result: the verdicts of the checkers that apply (the race's own included), and summaries.

The race's script only records facts (:class:`~harness.history.model.RaceFacts`);
:func:`judge` hands the history to :func:`harness.checkers.check_all`, whose
``race`` checker (:mod:`harness.checkers.race`) judges them.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from harness.checkers import INVALID, UNKNOWN, VALID, Verdict, check_all
from harness.history.model import History, history_to_json
from harness.families.race.catalog import INVARIANTS_BY_RACE

__all__ = ["RaceResult", "judge", "race_summary"]


@dataclass
class RaceResult:
    """One race trial: what was observed (``history``), the ``verdicts`` and ``metrics``.

    ``metrics``: ``refusal_ms`` (refused open/resume/create, start to
    answer), ``takeover_ms`` (open after a holder died, start to the lock),
    ``open_ms`` (that whole open, journal read and repair included),
    ``poll_loops`` (load+list rounds of a poller).
    """

    race: str
    seed: int
    schedule: str
    mutant: str | None
    history: History
    verdicts: list[Verdict]
    metrics: dict[str, list[float]]
    elapsed_s: float

    @property
    def ok(self) -> bool:
        """True when no verdict is invalid or unknown."""
        return all(v.status == VALID for v in self.verdicts)

    @property
    def violations(self) -> list[Verdict]:
        """The invalid verdicts."""
        return [v for v in self.verdicts if v.status == INVALID]

    def status(self) -> str:
        statuses = [v.status for v in self.verdicts]
        return INVALID if INVALID in statuses else UNKNOWN if UNKNOWN in statuses else VALID

    def reproducer(self) -> dict[str, Any]:
        """What replays this trial: race, seed, schedule, mutant, and the driver's steps."""
        return {"race": self.race, "seed": self.seed, "schedule": self.schedule, "mutant": self.mutant,
                "steps": self.history.schedule}

    def summary(self) -> str:
        bad = "; ".join(f"{v.invariant}: {v.summary}" for v in self.verdicts if v.status != VALID)
        return (f"{self.race} seed={self.seed} schedule={self.schedule}"
                f"{' mutant=' + self.mutant if self.mutant else ''}: {self.status()}" + (f" ({bad})" if bad else ""))

    def to_json(self) -> dict[str, Any]:
        return {"race": self.race, "seed": self.seed, "schedule": self.schedule, "mutant": self.mutant,
                "status": self.status(), "elapsed_s": self.elapsed_s, "metrics": self.metrics,
                "verdicts": [v.to_json() for v in self.verdicts], "history": history_to_json(self.history)}


def judge(history: History, scenario: Any) -> list[Verdict]:
    """The verdicts of a race trial's history: its invariants (:data:`INVARIANTS_BY_RACE`, those ``scenario``
    checks; docs/spec.md section 15), then its own ``race`` verdict (:mod:`harness.checkers.race`)."""
    race = history.race.race if history.race is not None else history.options.get("race")
    wanted = INVARIANTS_BY_RACE[race]
    if scenario is not None and getattr(scenario, "check", None) is not None:
        wanted = tuple(i for i in wanted if i in scenario.check.invariants)
    return check_all(history, [*wanted, "race"])


def race_summary(results: list[RaceResult]) -> dict[str, Any]:
    """Counts per race and status, trials per second, and refusal/takeover latencies (ms: median, max)."""
    out: dict[str, Any] = {"trials": len(results), "by_race": {}, "latency_ms": {}}
    total = sum(r.elapsed_s for r in results)
    out["trials_per_s"] = round(len(results) / total, 2) if total else None
    for r in results:
        row = out["by_race"].setdefault(r.race, {VALID: 0, INVALID: 0, UNKNOWN: 0})
        row[r.status()] += 1
    merged: dict[str, list[float]] = {}
    for r in results:
        for k, v in r.metrics.items():
            merged.setdefault(k, []).extend(v)
    for k, v in merged.items():
        if k in ("refusal_ms", "takeover_ms", "open_ms") and v:
            out["latency_ms"][k] = {"n": len(v), "median": round(statistics.median(v), 3), "max": round(max(v), 3)}
    return out
