"""The race family: legs of the subject's own commands on one run, interleaved at sequence points, the same way
for every subject (the races, what each judges and how K runs: docs/scenarios.md, family ``race``; the plan:
:mod:`harness.families.race.plan`).  :meth:`RaceFamily.prepare` runs the uninterrupted run observed and probes a
start and a resume of it for their ``lock_point``; a race that starts by killing the run with its batch pending
takes that leg from the recording (docs/persistence-model.md "Kills from the recording").
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from harness.families.base import FamilyBase, Planned, Ran
from harness.families.race.params import MODES, Params
from harness.families.race.plan import NEVER, READER_RACE, plan_races, races_of
from harness.families.signals.recorded import prelude, slug_for
from harness.families.trace_points import pending_point_of
from harness.history.faults import fault_counts
from harness.runner.trial import ReferenceRun, Runner, run_id_for
from harness.scenario.model import Scenario

__all__ = ["RACE", "RaceFamily", "Prepared"]


@dataclass
class Prepared(ReferenceRun):
    """The uninterrupted run, observed, with ``start_lock`` and ``resume_lock``, the ``lock_point`` of a start and
    of a resume of a run with a pending batch (``None``: no lock taken, or no such race), and ``runner``, the
    observed runner the races run on (:meth:`Runner.observed`: the campaign's own when it observes, else its
    twin, closed with it)."""

    start_lock: int | None = None
    resume_lock: int | None = None
    runner: Runner | None = None


class _Executor:
    """Runs a planned race on ``runner``; with ``reference`` (the uninterrupted run, observed), a race whose first
    fault is an event kill (the run's pending batch) takes that leg 0 from the recording
    (:func:`harness.families.signals.recorded.prelude`, docs/persistence-model.md "Kills from the recording"):
    the race itself (the rival and the held leg) runs for real from the state the kill leaves."""

    def __init__(self, scenario: Scenario, runner: Runner, reference: ReferenceRun | None = None) -> None:
        self.scenario, self.runner, self.reference = scenario, runner, reference
        self.slug = slug_for(runner.subject)

    def run(self, planned: Planned) -> Ran:
        pre = prelude(self.reference, planned.schedule, self.slug) if self.reference is not None else None
        history = self.runner.run_trial(self.scenario, planned.seed, planned.schedule, prelude=pre)
        return Ran(history, {"race": 1, **fault_counts(history)})

    def close(self) -> None:
        pass  # the observed runner is closed with the campaign's


class RaceFamily(FamilyBase):
    """The race family (see the module docstring); registered as :data:`RACE`."""

    name = "race"
    modes = MODES
    Params = Params

    def unsupported(self, subject: Any, scenario: Scenario | None = None) -> str | None:
        """Why ``scenario`` cannot race ``subject`` at all, or ``None``: :data:`READER_RACE` needs the
        subject's own reading command."""
        if scenario is None or subject.caps.reading or READER_RACE not in races_of(scenario):
            return None
        return (f"{READER_RACE} needs the subject's own reading command (a profile's [reading], "
                f"docs/subject.md) to read the run while it is written")

    def prepare(self, scenario: Scenario, runner: Any, *, explicit: bool = False) -> Prepared:
        """The uninterrupted run observed (on :meth:`Runner.observed`: the unobserved runner runs no reference),
        and the lock points of a start and of a resume (IO), each from a probe held at a sequence point it never
        reaches (:data:`NEVER`), the resume's first leg killed with a pending tool batch; ``explicit`` (given
        schedules only: no plan to place): no probe, the lock points ``None``.  Raises
        :class:`harness.errors.SetupError` as the runner does."""
        obs = runner.observed()
        ref = obs.reference(scenario)
        races = set(races_of(scenario))
        never = {"kind": "hold", "at": NEVER}
        start_lock = resume_lock = None
        if "two-creates" in races and not explicit:
            start_lock = obs.run_trial(scenario, 0, [never]).legs[0].lock_point
        kill = pending_point_of(ref.history, run_id_for(scenario))
        if kill is not None and races & {"two-resumers", "two-writers"} and not explicit:
            probe = [{"kind": "kill", "event": kill, "when": "after"}, never]  # its leg 0 from the recording
            legs = obs.run_trial(scenario, 0, probe, prelude=prelude(ref, probe, slug_for(obs.subject))).legs
            resume_lock = legs[1].lock_point if len(legs) > 1 else None
        return Prepared(**{f.name: getattr(ref, f.name) for f in fields(ReferenceRun)}, start_lock=start_lock,
                        resume_lock=resume_lock, runner=obs)

    def plan(self, scenario: Scenario, reference: Any, count: int, seed: int,
             schedules: list[list[dict[str, Any]]] | None, subject: Any = None) -> list[Planned]:
        """:func:`harness.families.race.plan.plan_races` from the prepared run (pure)."""
        return plan_races(scenario, reference.history if reference is not None else None, count, seed,
                          schedules, run_id=run_id_for(scenario),
                          start_lock=getattr(reference, "start_lock", None),
                          resume_lock=getattr(reference, "resume_lock", None))

    def open(self, scenario: Scenario, runner: Runner, reference: Any) -> _Executor:
        """The executor of ``scenario``'s races on the prepared observed runner, its kills of the pending batch
        taken from ``reference``'s recording when it is the run prepared on that runner."""
        if isinstance(reference, Prepared) and reference.runner is not None:
            return _Executor(scenario, reference.runner, reference)
        return _Executor(scenario, runner.observed())


#: The registered instance.
RACE = RaceFamily()
