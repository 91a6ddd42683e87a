"""The power-loss family: crash states of a traced run, each recovered by the subject and judged.

Plan (pure): the crash states of the reference run's trace under
docs/persistence-model.md (:mod:`harness.families.power_loss.crashstates`),
deterministic for the seed; the first ``max_states`` distinct ones (default
the trial count) are recovered, every other distinct state is judged for
I4 alone.  Each trial's schedule names its state
(``[{"kind": "power_loss", "state": ID, "prefix_n": N}]``), so a replay
re-runs that one state.  Executor: lays the state's files in a fresh store
and runs one recovery leg (:func:`harness.families.power_loss.executor.explore_state`).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from harness.errors import SetupError
from harness.families.base import FamilyBase, Planned, Ran
from harness.families.power_loss.executor import CHECKED, context, explore_state, state_only, state_space
from harness.families.power_loss.params import MODES, Params
from harness.families.trace_points import pending_point_of
from harness.runner.trial import ReferenceRun, Runner, run_id_for
from harness.scenario.model import Scenario, family_params

__all__ = ["POWER_LOSS", "PowerLossFamily"]

_FAULTS = {"power_loss": 1, "crash_states": 1}


class _Executor:
    def __init__(self, scenario: Scenario, runner: Runner, reference: ReferenceRun) -> None:
        self.scenario = scenario
        self.shared = Path(tempfile.mkdtemp(prefix="fiskj-powerloss-tools-", dir=runner.tmp_root))
        self.ctx = context(runner, scenario, self.shared, reference)

    def run(self, planned: Planned) -> Any:
        state, explore, space = planned.item
        if explore:
            history = explore_state(self.ctx, state, space)
        else:
            history = state_only(self.scenario, self.ctx.run_id, state)
        history.seed, history.schedule = planned.seed, planned.schedule
        return Ran(history, dict(_FAULTS))

    def close(self) -> None:
        shutil.rmtree(self.shared, ignore_errors=True)


class PowerLossFamily(FamilyBase):
    """The power-loss family (see the module docstring); registered as :data:`POWER_LOSS`."""

    name = "power_loss"
    modes = MODES
    Params = Params

    def params(self, scenario: Scenario, count: int | None = None, seed: int | None = None) -> Params:
        return family_params(Params, scenario, {"max_states": count or scenario.trials.count,
                                                "seed": scenario.trials.seed if seed is None else seed}, {})




    def prepare(self, scenario: Scenario, runner: Runner, reference: ReferenceRun) -> ReferenceRun:
        """For ``crash_leg = "resume"``: a two-leg reference, killed right after the fsync of the first
        tool batch, then resumed to its end (the resume is the leg that loses power)."""
        if self.params(scenario).crash_leg != "resume":
            return reference
        kill = pending_point_of(reference.history, run_id_for(scenario))
        if kill is None:
            raise SetupError(f"{scenario.name}: the reference run shows no acknowledged tool batch: there is no "
                             f"resume to crash (crash_leg = \"resume\")")
        history = runner.run_trial(scenario, 0, [{"kind": "kill", "event": kill, "when": "after"}])
        if len(history.legs) != 2 or history.legs[-1].exit_code != 0:
            raise SetupError(f"{scenario.name}: the resume of a run killed at event {kill} did not complete in one "
                             f"leg (legs {len(history.legs)}, last exit {history.legs[-1].exit_code if history.legs else None})")
        last = history.legs[-1]
        return ReferenceRun(reference=reference.reference, history=history, events=len(last.trace),
                            duration_ms=(last.t_end - last.t_start) / 1e6)

    def fixed_plan(self, scenario: Scenario) -> bool:
        """Its trials are a function of the seed (the count only caps recoveries)."""
        return True


    def plan(self, scenario: Scenario, reference: ReferenceRun, count: int, seed: int,
             schedules: list[list[dict[str, Any]]] | None, subject: Any = None) -> list[Planned]:
        params = self.params(scenario, count, seed)
        space = state_space(reference, run_id_for(scenario), params)
        distinct = space.distinct
        explored = distinct[:params.max_states] if params.max_states else distinct
        checked = tuple(i for i in ("I4", *CHECKED) if i in scenario.check.invariants)
        out = [Planned([{"kind": "power_loss", "state": s.id, "prefix_n": s.prefix_n}], "crash-state", seed,
                       item=(s, True, space), invariants=checked)
               for s in sorted(explored, key=lambda s: (s.prefix_n, s.id))]
        out += [Planned([{"kind": "power_loss", "state": s.id, "prefix_n": s.prefix_n, "explore": False}],
                        "crash-state", seed, item=(s, False, space), invariants=("I4",))
                for s in distinct[len(explored):]]
        if schedules is not None:  # a replay: the states it names, each as it was planned
            wanted = {str(sch[0].get("state")) for sch in schedules if sch and isinstance(sch[0], dict)}
            out = [p for p in out if p.schedule[0]["state"] in wanted]
            if not out:
                raise ValueError(f"no crash state of this run matches {sorted(wanted)} (seed {seed})")
        return out

    def open(self, scenario: Scenario, runner: Runner, reference: ReferenceRun) -> _Executor:
        return _Executor(scenario, runner, reference)



#: The registered instance.
POWER_LOSS = PowerLossFamily()
