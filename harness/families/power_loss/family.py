"""The power-loss family: crash states of a traced run, every one judged cheaply, a sample resumed in full.

The plan (pure, deterministic for the seed) takes the distinct crash states of the reference run's trace
(:mod:`harness.families.power_loss.crashstates`) in two tiers (:mod:`harness.families.power_loss.tiers`), bounded by
``--trials N``: docs/persistence-model.md "Tiered exploration".  A trial's schedule names it: a cheap batch that holds
by its range of the distinct states (``[{"kind": "power_loss", "cheap": [FROM, TO], ...}]``), one that does not by
its first failing state, replayed alone (``[{"kind": "power_loss", "state": ID, "prefix_n": N, "explore":
false}]``), a full resume by its state (``[{"kind": "power_loss", "state": ID, "prefix_n": N}]``: laid in a fresh
store and resumed by the journal-state engine, :func:`harness.families.power_loss.executor.explore_state`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from harness.errors import SetupError
from harness.families.base import FamilyBase, Planned, Ran
from harness.families.journal_state.ask import cheap_mode
from harness.families.journal_state.executor import StateExecutor
from harness.families.power_loss.crashstates import NOT_REPEATED, window
from harness.families.power_loss.executor import CHECKED, Space, explore_state, state_space
from harness.families.power_loss.params import MODES, Params
from harness.families.power_loss.tiers import CHEAP_CHECKED, cheap_limit, full_sample, judge_cheap, judge_cheap_opaque
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
        cheap = judge_cheap_opaque(self.ctx, states, space) if self.ctx.subject.caps.journal.is_store else \
            judge_cheap(self.ctx, states, planned.invariants or CHEAP_CHECKED,
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
        # a failing batch is named by its first failing state (that state replays alone); one state, by itself
        schedule = history.schedule if cheap.first is not None and len(states) > 1 else planned.schedule
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

    def unsupported(self, subject: Any, scenario: Scenario | None = None) -> str | None:
        """A subject that promises to survive a process crash only (``[promises] durable = "process-crash"``):
        a power loss is no promise of its, so not run.  A resume leg's power loss (``crash_leg = "resume"``) over
        an opaque store: the store the earlier legs left, rebuilt from their traces, is not proven faithful
        (docs/persistence-model.md "Opaque stores")."""
        if subject is not None and subject.promises.durable == "process-crash":
            return ("power loss: the subject promises to survive a process crash only ([promises] durable = "
                    "\"process-crash\"), so what a power loss takes is no broken promise; not run")
        if scenario is not None and subject is not None and subject.caps.journal.is_store \
                and self.params(scenario).crash_leg == "resume":
            return ("power loss of a resume leg over an opaque store: the store the earlier legs left would be "
                    "rebuilt from their traces, which a database's mmap writes can make unfaithful (a false alarm "
                    "seen on SQLite's WAL); not run (docs/persistence-model.md \"Opaque stores\")")
        return None

    def cannot(self, subject: Any, scenario: Scenario | None = None) -> list[str]:
        """How the cheap tier judges ``subject``'s crash states, when it cannot recover them itself."""
        line = cheap_limit(subject)
        return [line] if line else []

    def prepare(self, scenario: Scenario, runner: Runner, *, explicit: bool = False) -> ReferenceRun:
        """The uninterrupted run; for ``crash_leg = "resume"``: a two-leg reference, killed right after the fsync
        of the first tool batch, then resumed to its end (the resume is the leg that loses power)."""
        reference = runner.reference(scenario)
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

    def _space(self, scenario: Scenario, reference: ReferenceRun, count: int, seed: int,
               subject: Any) -> tuple[Params, Space]:
        """The scenario's params and the reference run's crash states, kept on it (a shrink plans one at a time)."""
        params = self.params(scenario, count, seed)
        spaces = vars(reference).setdefault("crash_spaces", {})
        key = (run_id_for(scenario), replace(params, max_states=0, resumes=0, batch_states=1, stop_on_violation=False))
        if key not in spaces:
            spaces[key] = state_space(reference, run_id_for(scenario), params, subject)
        return params, spaces[key]

    def _dropped(self, scenario: Scenario, reference: ReferenceRun, step: dict[str, Any]) -> tuple[list, list | None]:
        """The window's units at the crash point ``step`` names and the units its state dropped (sorted; ``None``:
        a size-only state or a batch, not shrunk)."""
        spaces = list(vars(reference).get("crash_spaces", {}).values())  # those the campaign planned from
        if not spaces:
            raise ValueError("no crash states planned from this reference run")
        trace, files, dirs, sector = spaces[0].start
        units = window(trace, files, dirs, int(step.get("prefix_n", 0)), sector_bytes=sector)[0]
        if "dropped" in step:
            return units, sorted(tuple(u) for u in step["dropped"])
        kept = next((s.kept for sp in spaces for s in sp.distinct if s.id == step.get("state")), None)
        return units, None if kept is None else sorted(set(units) - kept)

    def size(self, scenario: Scenario, reference: ReferenceRun, schedule: list[dict[str, Any]]) -> tuple[tuple, str]:
        """The units of the crash point's unsynced window the state dropped (docs/persistence-model.md)."""
        units, dropped = self._dropped(scenario, reference, schedule[0] if schedule else {})
        if dropped is None:
            return (len(units),), "a size-only state (no unit set to shrink)"
        return (len(dropped),), ", ".join(f"{sum(u[0] == k for u in dropped)} dropped {name}"
                                          for k, name in _UNITS.items() if any(u[0] == k for u in dropped)) \
            or f"none of {len(units)} unsynced units dropped"

    def smaller(self, scenario: Scenario, reference: ReferenceRun,
                schedule: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """The same crash point with fewer of its dropped units dropped (pure): none, each half (so a large set
        halves in a few steps whatever the budget), each one alone, all but one; as cheap a trial as the one
        shrunk (``explore``)."""
        step = schedule[0] if schedule else {}
        d = self._dropped(scenario, reference, step)[1] or []
        half = len(d) // 2
        subsets = [[]] + ([d[:half], d[half:]] if len(d) > 3 else []) + ([[u] for u in d] if len(d) > 1 else []) \
            + ([d[:i] + d[i + 1:] for i in range(len(d))] if len(d) > 2 else [])
        return [[{"kind": "power_loss", "prefix_n": step["prefix_n"], "dropped": [list(u) for u in sub],
                  **{k: step[k] for k in ("explore",) if k in step}}] for sub in subsets] if d else []

    def plan(self, scenario: Scenario, reference: ReferenceRun, count: int, seed: int,
             schedules: list[list[dict[str, Any]]] | None, subject: Any = None) -> list[Planned]:
        params, space = self._space(scenario, reference, count, seed, subject)
        run_id = run_id_for(scenario)
        cheap_inv = tuple(i for i in CHEAP_CHECKED if i == "I4" or i in scenario.check.invariants)
        full_inv = tuple(i for i in ("I4", *CHECKED) if i in scenario.check.invariants)
        if schedules is not None:  # a replay: the states and batches it names, each as it was planned
            return _replayed(schedules, space, seed, cheap_inv, full_inv)
        ordered = _ordered(space)
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


#: Kinds of window unit (:meth:`harness.families.power_loss.crashstates.Simulator.units`), as a shrink names them.
_UNITS = {"w": "write sector(s)", "e": "name op(s)", "t": "truncation(s)"}


def _ordered(space: Any) -> list[Any]:
    """The space's distinct crash states in plan order (by crash point, then id)."""
    return sorted(space.distinct, key=lambda s: (s.prefix_n, s.id))


def _replayed(schedules: list[list[dict[str, Any]]], space: Any, seed: int,
              cheap_inv: tuple[str, ...], full_inv: tuple[str, ...]) -> list[Planned]:
    """The trials ``schedules`` name: a state resumed in full, a state judged cheaply (``explore: false``),
    or a cheap batch (``cheap: [FROM, TO]``); a state is named by its id or by the units of its crash point's
    window it dropped (``prefix_n``, ``dropped``: a shrunk one, rebuilt alone: the space's states are not
    enumerated for it).  Raises ``ValueError`` for a state or range this plan lacks."""
    out: list[Planned] = []
    for sch in schedules:
        step = sch[0] if sch and isinstance(sch[0], dict) else {}
        if "cheap" in step:
            ordered = _ordered(space)
            rng = step["cheap"]
            if not (isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, int) for x in rng)
                    and 0 <= rng[0] < rng[1] <= len(ordered)):
                raise ValueError(f"no cheap batch {rng!r} among the {len(ordered)} crash states of this run "
                                 f"(seed {seed})")
            out.append(Planned(sch, "crash-state", seed, item=("cheap", ordered[rng[0]:rng[1]], space),
                               invariants=cheap_inv))
            continue
        if "dropped" in step:
            trace, files, dirs, sector = space.start
            state = window(trace, files, dirs, int(step.get("prefix_n", -1)), step["dropped"], sector_bytes=sector)[1]
        else:
            state = next((s for s in space.distinct if s.id == str(step.get("state"))), None)
        if state is None:
            raise ValueError(f"no crash state of this run matches {step.get('state')!r} (seed {seed}; this run's "
                             f"trace has {len(space.start[0])} durability events: {NOT_REPEATED})")
        if step.get("explore") is False:
            out.append(Planned(sch, "crash-state", seed, item=("cheap", [state], space), invariants=cheap_inv))
        else:
            out.append(Planned(sch, "crash-state", seed, item=("full", [state], space), invariants=full_inv))
    return out


#: The registered instance.
POWER_LOSS = PowerLossFamily()
