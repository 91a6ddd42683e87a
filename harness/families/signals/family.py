"""The signals family: legs of the agent under SIGKILL and SIGINT/SIGTERM faults (modes none, kill, suspend, chain).

Plan (pure, :mod:`harness.families.signals.schedules`): exhaustive crash
points at every durability event, and hypothesis-drawn timed kills,
suspends and chains, deterministic for a seed.  Executor: one trial is the
legs of :meth:`harness.runner.trial.Runner.run_trial` under its schedule.
docs/spec.md section 14 (the invariants), docs/scenarios.md (the keys).
"""

from __future__ import annotations

from typing import Any

from harness.families.base import FamilyBase, Planned, Ran
from harness.runner.faults import validate_schedule
from harness.families.signals.params import MODES, Params
from harness.families.signals.recorded import Recorder, prelude, resumes_first, slug_for
from harness.families.signals.schedules import plan_schedules, spread
from harness.history.faults import fault_counts
from harness.names import CRASH_RESUMES
from harness.runner.trial import ReferenceRun, Runner
from harness.scenario.model import Scenario

__all__ = ["SIGNALS", "SignalsFamily", "TrialExecutor"]


class TrialExecutor:
    """Runs a planned schedule as the legs of :meth:`harness.runner.trial.Runner.run_trial` (the signals
    and io_error families).  With ``reference`` (the uninterrupted run), a schedule whose first fault is an
    event kill takes its leg 0 from that recording (:mod:`harness.families.signals.recorded`), one resume per
    distinct state; a point the recording cannot stand in for is killed for real."""

    def __init__(self, scenario: Scenario, runner: Runner, reference: ReferenceRun | None = None) -> None:
        self.scenario, self.runner, self.reference = scenario, runner, reference
        self.recorder = Recorder(runner.run_trial)
        self.slug = slug_for(runner.subject)

    def run(self, planned: Planned) -> Ran:
        pre = prelude(self.reference, planned.schedule, self.slug) if self.reference is not None else None
        if pre is None:
            history = self.runner.run_trial(self.scenario, planned.seed, planned.schedule)
            return Ran(history, fault_counts(history))
        history, resumed = self.recorder.trial(self.scenario, planned.seed, planned.schedule, pre)
        return Ran(history, {**fault_counts(history), CRASH_RESUMES: int(resumed)})

    def close(self) -> None:
        pass


class SignalsFamily(FamilyBase):
    """The signals family (see the module docstring); an instance is registered as :data:`SIGNALS`."""

    name = "signals"
    modes = MODES
    Params = Params
    resumes = True

    def check(self, scenario: Scenario) -> tuple[str, str] | None:
        if scenario.faults.family == "chain" and not self.params(scenario).chain:
            return "family", "family 'chain' needs a non-empty [faults] chain list"
        return None

    #: A ``[faults] schedule`` in normal form; raises ``ValueError`` naming the bad fault.
    check_schedule = staticmethod(validate_schedule)

    def fixed_plan(self, scenario: Scenario) -> bool:
        """Its plan does not grow with the trial count: an explicit schedule, or one crash (suspend) point per
        event."""
        params = self.params(scenario)
        return scenario.faults.schedule is not None or (
            params.legs == 1 and ((scenario.faults.family == "kill" and params.kill_points == "events")
                                  or (scenario.faults.family == "suspend" and params.suspend_points == "events")))

    def plan(self, scenario: Scenario, reference: ReferenceRun, count: int, seed: int,
             schedules: list[list[dict[str, Any]]] | None, subject: Any = None) -> list[Planned]:
        if schedules is not None:
            return [Planned(validate_schedule(s), "explicit", seed) for s in schedules]
        return resumes_first(reference, [Planned(s, o, seed) for s, o in plan_schedules(scenario, reference, count, seed)])

    def open(self, scenario: Scenario, runner: Runner, reference: ReferenceRun) -> TrialExecutor:
        return TrialExecutor(scenario, runner, reference)

    def bound(self, scenario: Scenario, plan: list[Planned], n: int, seed: int) -> list[Planned]:
        """``--trials N`` of an exhaustive plan (every crash or suspend point, capped by ``max_events``, not by
        the count): ``n`` of its points, sampled as :func:`harness.families.signals.schedules.exhaustive_schedules`
        samples them (first and last kept, deterministic for ``seed``, in event order: :meth:`plan` puts the
        first point of every recorded state first), drawn trials after them up to ``n``."""
        points = [p for p in plan if p.origin == "exhaustive"]
        if len(plan) <= n or not points:
            return plan
        points.sort(key=lambda p: (p.schedule[0].get("event", 0), p.schedule[0].get("when") != "before"))
        keep = spread(points, n, seed)
        return keep + [p for p in plan if p.origin != "exhaustive"][: n - len(keep)]


#: The registered instance.
SIGNALS = SignalsFamily()
