"""The io_error family: a write or fsync of the journal (of an opaque store: of any file below it) fails (EIO,
ENOSPC, a short write), then the run is resumed (docs/scenarios.md, family ``io_error``: the fault's source and
what I4 judges).

Plan (pure): one trial per journal write or fsync of the reference run (capped and spread evenly) and per error,
deterministic; each names its call (``[{"kind": "io_error", "action": "eio", "event": K, "op": "fsync"}]``: the
K-th fsync of the leg fails).  Executor: the legs of :meth:`harness.runner.trial.Runner.run_trial`.
"""

from __future__ import annotations

from typing import Any

from harness.families.base import FamilyBase, Planned
from harness.families.io_error.params import MODES, Params
from harness.families.signals.family import TrialExecutor
from harness.history.journal_location import JournalLocation
from harness.runner.faults import validate_schedule
from harness.runner.trial import ReferenceRun, Runner, run_id_for
from harness.scenario.model import Scenario

__all__ = ["IO_ERROR", "IoErrorFamily", "journal_calls"]


def journal_calls(trace: list[dict[str, Any]], run_id: str, journal: JournalLocation, op: str) -> list[int]:
    """The fault counts ``K`` that hit the journal's ``op`` calls in ``trace``: the position of each among the
    calls the fault counts (the IO seam counts its ``op`` calls; the observer counts the ``op`` calls on the
    journal's file, or on any file below an opaque store, only, whatever else the agent writes, an ``fsync``
    being any fsync or fdatasync: :func:`harness.runner.leg.observer_faults`)."""
    observed = any("seq" in ev for ev in trace)
    out, k = [], 0
    for ev in trace:
        kind = {"fdatasync": "fsync", "fsync_dir": "fsync"}.get(ev.get("op"), ev.get("op")) if observed else ev.get("op")
        mine = kind == op and journal.is_journal(ev.get("path"), run_id)
        if kind == op and (mine or not observed):
            k += 1
            if mine and not ev.get("error"):
                out.append(k)
    return out


def _spread(items: list[Any], cap: int) -> list[Any]:
    """At most ``cap`` of ``items``, evenly spaced, the first and last kept (all when ``cap`` is 0)."""
    if cap <= 0 or len(items) <= cap:
        return items
    if cap == 1:
        return [items[-1]]
    return [items[round(i * (len(items) - 1) / (cap - 1))] for i in range(cap)]


class IoErrorFamily(FamilyBase):
    """The io_error family (see the module docstring); registered as :data:`IO_ERROR`."""

    name = "io_error"
    modes = MODES
    Params = Params
    resumes = True

    #: A ``[faults] schedule`` in normal form; raises ``ValueError`` naming the bad fault.
    check_schedule = staticmethod(validate_schedule)

    def fixed_plan(self, scenario: Scenario) -> bool:
        return self.params(scenario).max_points > 0 or scenario.faults.schedule is not None

    def bound(self, scenario: Scenario, plan: list[Planned], n: int, seed: int) -> list[Planned]:
        """``--trials N``: ``n`` of the plan's failing calls, taken class by class (each op and error kind
        in turn, so every class runs once ``n`` reaches their number), each class's calls evenly spaced, the
        first and the last kept; the plan's order is kept."""
        if len(plan) <= n:
            return plan
        classes: dict[tuple[str, str], list[Planned]] = {}
        for p in plan:
            classes.setdefault((p.schedule[0].get("op", ""), p.schedule[0].get("action", "")), []).append(p)
        share = {k: n // len(classes) + (i < n % len(classes)) for i, k in enumerate(classes)}
        keep = {id(p) for k, group in classes.items() for p in _spread(group, share[k]) if share[k]}
        return [p for p in plan if id(p) in keep]

    def plan(self, scenario: Scenario, reference: ReferenceRun, count: int, seed: int,
             schedules: list[list[dict[str, Any]]] | None, subject: Any = None) -> list[Planned]:
        if schedules is not None or scenario.faults.schedule is not None:
            given = schedules if schedules is not None else [list(scenario.faults.schedule or ())]
            return [Planned(validate_schedule(s), "explicit", seed) for s in given]
        params = self.params(scenario)
        trace = reference.history.legs[0].trace
        out = []
        for op in params.ops:
            calls = _spread(journal_calls(trace, run_id_for(scenario), reference.history.journal, op),
                            params.max_points or count)
            for action in params.errors:
                if action == "short-write" and op != "write":
                    continue
                out += [Planned([{"kind": "io_error", "action": action, "event": k, "op": op}], "io-error", seed)
                        for k in calls]
        if not out:
            raise ValueError(f"the reference run's trace shows no journal {', '.join(params.ops)} to fail "
                             f"({len(trace)} events): nothing was observed, so nothing can be judged")
        return out

    def smaller(self, scenario: Scenario, reference: ReferenceRun,
                schedule: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """A single failing call (the plan's trials) moved to an earlier journal call of the same op: the first,
        the one half-way there, the one before (pure); any other schedule as :class:`FamilyBase` shrinks it."""
        if len(schedule) != 1 or not isinstance(schedule[0].get("event"), int):
            return super().smaller(scenario, reference, schedule)
        f = schedule[0]
        calls = [k for k in journal_calls(reference.history.legs[0].trace, run_id_for(scenario),
                                          reference.history.journal, str(f.get("op"))) if k < f["event"]]
        return [[{**f, "event": k}] for k in dict.fromkeys(calls[i] for i in (0, len(calls) // 2, -1))] if calls else []

    def open(self, scenario: Scenario, runner: Runner, reference: ReferenceRun) -> TrialExecutor:
        return TrialExecutor(scenario, runner)


#: The registered instance.
IO_ERROR = IoErrorFamily()
