"""The power-loss family: crash states of a traced run, every one judged cheaply, a sample resumed in full.

Plan (pure): the distinct crash states of the reference run's trace under
docs/persistence-model.md (:mod:`harness.families.power_loss.crashstates`),
deterministic for the seed, explored in two tiers
(:mod:`harness.families.power_loss.tiers`):

* **cheap trials**, first: every distinct state, ``batch_states`` a trial,
  judged for I4 (the crash model) and I5 (the subject's own recovery and
  reading of the state's journal).  A batch whose states all hold is one
  valid trial; one that does not names its first failing state, so its
  reproducer replays that state alone
  (``[{"kind": "power_loss", "state": ID, "prefix_n": N, "explore": false}]``);
  a batch that holds is named by its range of the distinct states
  (``[{"kind": "power_loss", "cheap": [FROM, TO], ...}]``);
* **full resumes**: the first state of every distinct recovery outcome and
  a seeded sample of ``resumes`` more
  (:func:`~harness.families.power_loss.tiers.full_sample`), each laid in a
  fresh store and recovered by one resume of the agent to its end
  (:func:`harness.families.power_loss.executor.explore_state`, through the
  journal-state engine, :mod:`harness.families.journal_state`), judged for
  the scenario's invariants (``[{"kind": "power_loss", "state": ID, "prefix_n": N}]``).

``--trials N`` bounds the plan: at most N trials, the cheap ones first
(their batches grow so that they take at most half of N, and at least one),
the full resumes in the rest (and at most ``max_states`` when the file sets it).
"""

from __future__ import annotations

import math
from typing import Any

from harness.errors import SetupError
from harness.families.base import FamilyBase, Planned, Ran
from harness.families.journal_state.ask import cheap_mode
from harness.families.journal_state.executor import StateExecutor
from harness.families.power_loss.executor import CHECKED, explore_state, state_space
from harness.families.power_loss.params import MODES, Params
from harness.families.power_loss.tiers import CHEAP_CHECKED, cheap_limit, full_sample, judge_cheap
from harness.families.trace_points import pending_point_of
from harness.runner.trial import ReferenceRun, Runner, run_id_for
from harness.scenario.model import Scenario, family_params

__all__ = ["POWER_LOSS", "PowerLossFamily", "batches"]


def batches(states: int, count: int, batch_states: int) -> list[tuple[int, int]]:
    """The cheap trials' ranges ``[from, to)`` over ``states`` distinct states: ``batch_states`` each, fewer
    and larger when that would take more than half of the ``count`` trials (at least one).  Pure."""
    if states <= 0:
        return []
    n = max(1, min(math.ceil(states / batch_states), count // 2))
    return [(i * states // n, (i + 1) * states // n) for i in range(n)]


class _Executor(StateExecutor):
    """Runs a cheap batch or a full resume of a planned trial (the journal-state engine's executor)."""

    def run(self, planned: Planned) -> Any:
        tier, states, space = planned.item
        if tier == "full":
            history = explore_state(self.ctx, states[0], space)
            history.seed, history.schedule = planned.seed, planned.schedule
            return Ran(history, {"power_loss": 1, "crash_resumes": 1})
        self.runner.legs.prepare()
        cheap = judge_cheap(self.ctx, states, planned.invariants or CHEAP_CHECKED,
                            mode=cheap_mode(self.runner.subject, self.runner.readings), tmp_root=self.runner.tmp_root)
        history = cheap.first or cheap.last
        assert history is not None  # a batch holds at least one state
        bad = len(cheap.violating)
        history.notes.append(f"cheap tier ({cheap.mode}): {cheap.states} crash state(s) judged in "
                             f"{cheap.seconds * 1e3:.0f} ms ({cheap.asked} distinct journal(s) asked), "
                             f"{bad} not valid" + (f", first {cheap.violating[0][0].id}" if bad else ""))
        history.options["cheap"] = {"states": cheap.states, "asked": cheap.asked, "not_valid": bad,
                                     "seconds": round(cheap.seconds, 6), "mode": cheap.mode}
        history.seed = planned.seed
        # a failing batch is named by its first failing state (that state replays alone); one that holds, by itself
        schedule = history.schedule if cheap.first is not None else planned.schedule
        history.schedule = schedule
        return Ran(history, {"power_loss": 1, "crash_states": cheap.states}, schedule=schedule)


class PowerLossFamily(FamilyBase):
    """The power-loss family (see the module docstring); registered as :data:`POWER_LOSS`."""

    name = "power_loss"
    modes = MODES
    Params = Params

    def params(self, scenario: Scenario, count: int | None = None, seed: int | None = None) -> Params:
        return family_params(Params, scenario, {"max_states": count or scenario.trials.count,
                                                "seed": scenario.trials.seed if seed is None else seed}, {})

    def cannot(self, subject: Any, scenario: Scenario | None = None) -> list[str]:
        """How the cheap tier judges ``subject``'s crash states, when it cannot recover them itself."""
        line = cheap_limit(subject)
        return [line] if line else []

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
        """Its crash states are a function of the seed (the count only sizes the tiers)."""
        return True

    def plan(self, scenario: Scenario, reference: ReferenceRun, count: int, seed: int,
             schedules: list[list[dict[str, Any]]] | None, subject: Any = None) -> list[Planned]:
        params = self.params(scenario, count, seed)
        run_id = run_id_for(scenario)
        space = state_space(reference, run_id, params, subject)
        ordered = sorted(space.distinct, key=lambda s: (s.prefix_n, s.id))
        cheap_inv = tuple(i for i in CHEAP_CHECKED if i == "I4" or i in scenario.check.invariants)
        full_inv = tuple(i for i in ("I4", *CHECKED) if i in scenario.check.invariants)
        if schedules is not None:  # a replay: the states and batches it names, each as it was planned
            return _replayed(schedules, ordered, space, seed, cheap_inv, full_inv)
        ranges = batches(len(ordered), max(1, count), params.batch_states)
        out = [Planned([{"kind": "power_loss", "cheap": [a, b], "first": ordered[a].id, "last": ordered[b - 1].id}],
                       "crash-state", seed, item=("cheap", ordered[a:b], space), invariants=cheap_inv)
               for a, b in ranges]
        cap = max(0, count - len(out))
        if params.max_states:
            cap = min(cap, params.max_states)
        if cap:
            full, _ = full_sample(ordered, run_id, resumes=params.resumes, cap=cap, seed=params.seed,
                                  journal=reference.history.journal)
            out += [Planned([{"kind": "power_loss", "state": s.id, "prefix_n": s.prefix_n}], "crash-state", seed,
                            item=("full", [s], space), invariants=full_inv) for s in full]
        return out

    def open(self, scenario: Scenario, runner: Runner, reference: ReferenceRun) -> _Executor:
        return _Executor(scenario, runner, reference, prefix="fiskj-powerloss-tools-")


def _replayed(schedules: list[list[dict[str, Any]]], ordered: list[Any], space: Any, seed: int,
              cheap_inv: tuple[str, ...], full_inv: tuple[str, ...]) -> list[Planned]:
    """The trials ``schedules`` name: a state resumed in full, a state judged cheaply (``explore: false``),
    or a cheap batch (``cheap: [FROM, TO]``).  Raises ``ValueError`` for a state or range this plan lacks."""
    by_id = {s.id: s for s in ordered}
    out: list[Planned] = []
    for sch in schedules:
        step = sch[0] if sch and isinstance(sch[0], dict) else {}
        if "cheap" in step:
            rng = step["cheap"]
            if not (isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, int) for x in rng)
                    and 0 <= rng[0] < rng[1] <= len(ordered)):
                raise ValueError(f"no cheap batch {rng!r} among the {len(ordered)} crash states of this run "
                                 f"(seed {seed})")
            out.append(Planned(sch, "crash-state", seed, item=("cheap", ordered[rng[0]:rng[1]], space),
                               invariants=cheap_inv))
            continue
        state = by_id.get(str(step.get("state")))
        if state is None:
            raise ValueError(f"no crash state of this run matches {step.get('state')!r} (seed {seed})")
        if step.get("explore") is False:
            out.append(Planned(sch, "crash-state", seed, item=("cheap", [state], space), invariants=cheap_inv))
        else:
            out.append(Planned(sch, "crash-state", seed, item=("full", [state], space), invariants=full_inv))
    return out


#: The registered instance.
POWER_LOSS = PowerLossFamily()
