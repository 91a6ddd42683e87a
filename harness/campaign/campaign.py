"""A campaign: many trials over scenarios, in parallel, with shrinking of failures.

Per scenario:

1. the reference (uninterrupted) run, once (:meth:`harness.runner.trial.Runner.reference`);
   its IO-seam event count ``E`` and duration bound the fault parameters;
2. a plan of schedules (:func:`plan_schedules`):

   * ``kill_points = "events"``: exhaustive crash points, a kill after
     every seam event ``k = 1..E`` plus a kill before the first one
     (sampled, deterministically from the seed, when more than the cap);
   * everything else is drawn by :mod:`hypothesis` from the scenario's
     schedule strategy (:func:`schedule_strategy`), with
     ``hypothesis.find(strategy, collect, settings(phases=[generate],
     database=None), random=Random(seed))``: deterministic for a seed;

3. the trials run on ``jobs`` threads (the work is in subprocesses), each
   judged by :func:`harness.checkers.check_all`;
4. a hypothesis-drawn trial that violated an invariant is shrunk: ``find``
   runs again with the same seed (re-walking the same draws, answered from
   the results already in hand) and then shrinks, running new trials for
   new candidates until ``shrink_budget`` trials were spent.  The minimal
   failing schedule is kept as an extra trial (``origin = "shrink"``).

Every trial is reproducible from (scenario, seed, schedule): the run is a
function of the scenario and the schedule; the seed only chose the schedule.

Other fault families plug in through :data:`FAMILY_EXECUTORS`: a family
name maps to ``"module:function"``, resolved when a scenario of that family
runs.  The function is called as ``function(scenario, seed, count, runner,
schedules=None)`` and returns a list of :class:`TrialResult` (``index`` is
set by the campaign; ``schedules``, when given, are explicit schedules to
replay, one trial each, as written in a report's ``runs``); they live in
:mod:`harness.families.legacy`.  Schedules are drawn by :mod:`harness.families.signals.schedules`.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import shlex
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from harness.history.model import History
from harness.families.signals.faults import FAULT_KINDS, validate_schedule
from harness.runner.trial import ReferenceRun, Runner, SetupError
from harness.scenario.parse import Scenario
from harness.families.signals.schedules import (draw_schedules, exhaustive_schedules, hypothesis_settings, plan_schedules,
                        schedule_strategy, seed_for)
from harness.subject.contract import Subject

__all__ = [
    "TrialResult",
    "ScenarioRun",
    "CampaignResult",
    "Campaign",
    "schedule_strategy",
    "draw_schedules",
    "exhaustive_schedules",
    "plan_schedules",
    "reproduce_command",
    "fault_counts",
    "FAMILY_EXECUTORS",
    "shard_positions",
    "parse_shard",
]

#: Families whose trials are legs of the agent under a fault schedule (this module's own).
_EXECUTED_FAMILIES = ("none", "kill", "suspend", "chain")

#: Other families: name -> "module:function" (see the module docstring for the contract).
FAMILY_EXECUTORS: dict[str, str] = {
    "race": "harness.families.legacy:run_race_family",
    "power_loss": "harness.families.legacy:power_loss",
    "tail": "harness.families.legacy:tail",
}


@dataclass
class TrialResult:
    """One judged trial.

    ``index``: position in the campaign (0-based, the ``--trial K`` of
    replay); ``scenario``/``scenario_path``: which scenario; ``seed``: the
    seed its schedule was drawn from; ``schedule``: the fault per leg;
    ``origin``: ``exhaustive``, ``hypothesis``, ``noop``, ``shrink``,
    ``explicit`` or ``replay``; ``verdicts``: the checkers' answers
    (:class:`harness.checkers.Verdict`); ``history``: kept for failing
    trials (and all trials with ``keep_histories``), else ``None``;
    ``shrunk_from``: for a shrink result, the index of the trial it shrank;
    ``elapsed_s``: wall time.
    """

    index: int
    scenario: str
    scenario_path: str | None
    seed: int
    schedule: list[dict[str, Any]]
    origin: str
    verdicts: list[Any]
    history: History | None
    elapsed_s: float
    reproduce: str = ""
    shrunk_from: int | None = None
    invariants: tuple[str, ...] = ()
    faults: dict[str, int] = field(default_factory=dict)

    @property
    def failed(self) -> list[str]:
        """Ids of the checked invariants judged ``invalid``."""
        return [v.invariant for v in self.verdicts if v.status == "invalid" and v.invariant in self.invariants]

    @property
    def unknown(self) -> list[str]:
        """Ids of the checked invariants judged ``unknown``."""
        return [v.invariant for v in self.verdicts if v.status == "unknown" and v.invariant in self.invariants]


@dataclass
class ScenarioRun:
    """Per-scenario bookkeeping: the reference, planned schedules, errors, shrink statistics."""

    scenario: Scenario
    seed: int
    reference: ReferenceRun | None = None
    plan: list[tuple[list[dict[str, Any]], str]] = field(default_factory=list)
    error: str | None = None
    shrink_runs: int = 0


@dataclass
class CampaignResult:
    """The outcome of :meth:`Campaign.run`.

    ``trials``: every judged trial in index order; ``errors``: setup errors
    (a scenario whose reference run failed, an unsupported family), one
    line each; ``scenarios``: per scenario bookkeeping; ``elapsed_s``:
    wall time; ``jobs``, ``subject``: how it ran.
    """

    trials: list[TrialResult]
    errors: list[str]
    scenarios: list[ScenarioRun]
    elapsed_s: float
    jobs: int
    subject: Subject

    @property
    def violations(self) -> list[TrialResult]:
        """Trials with at least one invalid checked invariant."""
        return [t for t in self.trials if t.failed]

    @property
    def trials_per_second(self) -> float:
        """Judged trials per wall-clock second."""
        return len(self.trials) / self.elapsed_s if self.elapsed_s > 0 else 0.0


# --- schedules -------------------------------------------------------------------


def fault_counts(history: History) -> dict[str, int]:
    """Faults injected in a trial, per report family (``kill``, ``suspend``, ...)."""
    out: dict[str, int] = {}
    for leg in history.legs:
        if leg.fault.injected and leg.fault.kind != "none":
            out[leg.fault.kind] = out.get(leg.fault.kind, 0) + 1
    return out


def reproduce_command(scenario: Scenario, seed: int, schedule: list[dict[str, Any]], subject: Subject) -> str:
    """A shell command that re-runs exactly this trial: ``fiskj-harness run FILE --seed S --schedule JSON``."""
    argv = ["fiskj-harness", "run", scenario.path or scenario.name, "--seed", str(seed),
            "--schedule", json.dumps(schedule, separators=(",", ":"))]
    if not subject.is_reference or subject.extra_env:
        argv += ["--subject", subject.command_line()]  # with its variables (a mutant's FISKJ_MUTANT)
    return shlex.join(argv)


# --- the campaign ----------------------------------------------------------------------


class Campaign:
    """Runs trials of ``scenarios`` on ``jobs`` threads and shrinks failures.

    ``trials``: per-scenario count (default each scenario's
    ``trials.count``); ``seed``: campaign seed (default each scenario's
    ``trials.seed``); ``subject``: the agent (default reference);
    ``progress``: called as ``progress(done, total, violations)`` from
    the main thread; ``shrink_budget``: trials a shrink may run (0: no
    shrinking); ``keep_histories``: keep every history, not only failing
    ones; ``schedules``: explicit schedules to run instead of a plan (for
    ``--schedule`` and replay), applied to every scenario; ``shard``:
    ``(i, n)`` runs only shard ``i`` of ``n`` (0-based): the trials at
    positions ``p`` of each scenario's plan with ``p % n == i`` (see
    :func:`shard_positions`), so ``n`` shards are disjoint and together run
    the whole campaign.  Other families get ``shard`` when their executor
    accepts it, else a whole scenario goes to shard ``crc32(name) % n``.
    """

    def __init__(self, scenarios: list[Scenario], *, trials: int | None = None, seed: int | None = None,
                 jobs: int | None = None, subject: Subject | None = None,
                 progress: Callable[[int, int, int], None] | None = None, shrink_budget: int = 30,
                 keep_histories: bool = False, schedules: list[list[dict[str, Any]]] | None = None,
                 runner: Runner | None = None, origin: str = "explicit",
                 shard: tuple[int, int] | None = None) -> None:
        if shard is not None:
            i, n = shard
            if not (isinstance(i, int) and isinstance(n, int) and n >= 1 and 0 <= i < n):
                raise ValueError(f"a shard is (i, n) with 0 <= i < n, got {shard!r}")
        self.shard = shard
        self.scenarios = scenarios
        self.trials = trials
        self.seed = seed
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.progress = progress
        self.shrink_budget = shrink_budget
        self.keep_histories = keep_histories
        self.schedules = [_maybe_validate(s) for s in schedules] if schedules is not None else None
        self.explicit_origin = origin
        self._runner = runner
        self.subject = runner.subject if runner is not None else subject

    def _judge(self, scenario: Scenario, seed: int, schedule: list[dict[str, Any]], origin: str,
               runner: Runner, index: int) -> TrialResult:
        from harness.checkers import check_all

        t = time.monotonic()
        history = runner.run_trial(scenario, seed, schedule)
        verdicts = check_all(history, list(scenario.check.invariants))
        result = TrialResult(index=index, scenario=scenario.name, scenario_path=scenario.path, seed=seed,
                             schedule=schedule, origin=origin, verdicts=verdicts, history=history,
                             elapsed_s=time.monotonic() - t,
                             reproduce=reproduce_command(scenario, seed, schedule, runner.subject),
                             invariants=tuple(scenario.check.invariants), faults=fault_counts(history))
        if not (result.failed or self.keep_histories):
            result.history = None
        return result

    def run(self) -> CampaignResult:
        """Run the campaign; returns a :class:`CampaignResult`.  Never raises for a failing agent.

        A scenario whose family this runner does not execute, or whose
        reference run fails, is recorded in ``errors`` and skipped.
        """
        started = time.monotonic()
        runner = self._runner or Runner(subject=self.subject)
        self.subject = runner.subject
        runs = [ScenarioRun(scenario=s, seed=self.seed if self.seed is not None else s.trials.seed)
                for s in self.scenarios]
        errors: list[str] = []
        results: list[TrialResult] = []
        try:
            with ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="fiskj-trial") as pool:
                # 1. references, in parallel
                futures = {}
                others: list[tuple[ScenarioRun, Callable[..., list[TrialResult]]]] = []
                for run in runs:
                    family = run.scenario.faults.family
                    if family not in _EXECUTED_FAMILIES:
                        executor = _executor(family)
                        if isinstance(executor, str):
                            run.error = f"{run.scenario.path or run.scenario.name}: {executor}"
                        else:
                            others.append((run, executor))
                        continue
                    futures[pool.submit(runner.reference, run.scenario)] = run
                for fut in as_completed(futures):
                    run = futures[fut]
                    try:
                        run.reference = fut.result()
                    except SetupError as exc:
                        run.error = str(exc)
                # 2. plans (hypothesis draws: main thread only)
                jobs = []
                other_runs = {id(r) for r, _ in others}
                for run in runs:
                    if run.error:
                        errors.append(run.error)
                        continue
                    if id(run) in other_runs:
                        continue
                    assert run.reference is not None
                    if self.schedules is not None:
                        run.plan = [(s, self.explicit_origin) for s in self.schedules]
                    else:
                        count = self.trials or run.scenario.trials.count
                        run.plan = plan_schedules(run.scenario, run.reference, count, run.seed)
                    jobs += [(run, sch, origin) for p, (sch, origin) in enumerate(run.plan)
                             if p in shard_positions(len(run.plan), self.shard)]
                # 3. trials
                total = len(jobs)
                done = 0
                failing = 0
                trial_futures = {
                    pool.submit(self._judge, run.scenario, run.seed, sch, origin, runner, i): i
                    for i, (run, sch, origin) in enumerate(jobs)
                }
                slots: list[TrialResult | None] = [None] * total
                if self.progress:
                    self.progress(0, total, 0)
                for fut in as_completed(trial_futures):
                    i = trial_futures[fut]
                    try:
                        slots[i] = fut.result()
                    except SetupError as exc:
                        errors.append(str(exc))
                    except Exception as exc:  # a harness failure is never a pass: it is a setup error
                        run, sch, _ = jobs[i]
                        errors.append(f"{run.scenario.name}: trial with schedule {json.dumps(sch)} could not run: "
                                      f"{type(exc).__name__}: {exc}")
                    done += 1
                    if slots[i] is not None and slots[i].failed:
                        failing += 1
                    if self.progress:
                        self.progress(done, total, failing)
                results = [r for r in slots if r is not None]
                # 3b. other families, one executor per scenario, after the agent trials
                family_futures = {}
                for run, executor in others:
                    kwargs = _family_kwargs(executor, run.scenario, self.schedules, self.shard,
                                            self.trials or run.scenario.trials.count)
                    if kwargs is None:
                        continue  # another shard runs this scenario
                    family_futures[pool.submit(executor, run.scenario, run.seed,
                                               self.trials or run.scenario.trials.count, runner, **kwargs)] = run
                for fut in as_completed(family_futures):
                    run = family_futures[fut]
                    try:
                        results += fut.result()
                    except Exception as exc:  # never a pass
                        run.error = f"{run.scenario.path or run.scenario.name}: {type(exc).__name__}: {exc}"
                        errors.append(run.error)
                    if self.progress:
                        self.progress(len(results), len(results), sum(1 for r in results if r.failed))
                # scenario order, then the order each scenario produced them
                order = {id(run.scenario): k for k, run in enumerate(runs)}
                by_name = {run.scenario.name: order[id(run.scenario)] for run in runs}
                results.sort(key=lambda r: by_name.get(r.scenario, 0))
            for i, r in enumerate(results):
                r.index = i
            # 4. shrink (main thread: hypothesis is driven from one thread)
            if self.shrink_budget > 0 and self.schedules is None:
                results += self._shrink_all(runs, results, runner)
        finally:
            if self._runner is None:
                runner.close()
        for i, r in enumerate(results):
            r.index = i
        return CampaignResult(trials=results, errors=errors, scenarios=runs, elapsed_s=time.monotonic() - started,
                              jobs=self.jobs, subject=runner.subject)

    def _shrink_all(self, runs: list[ScenarioRun], results: list[TrialResult], runner: Runner) -> list[TrialResult]:
        out = []
        for run in runs:
            mine = [r for r in results if r.scenario == run.scenario.name and r.scenario_path == run.scenario.path]
            failed = [r for r in mine if r.failed and r.origin == "hypothesis"]
            if not failed or run.reference is None:
                continue
            first = min(failed, key=lambda r: r.index)
            shrunk = self._shrink(run, mine, first, runner)
            if shrunk is not None:
                out.append(shrunk)
        return out

    def _shrink(self, run: ScenarioRun, known: list[TrialResult], target: TrialResult,
                runner: Runner) -> TrialResult | None:
        """Shrink ``target``'s schedule with ``hypothesis.find``; returns the minimal failing trial or ``None``."""
        from hypothesis import find
        from hypothesis.errors import HypothesisException

        assert run.reference is not None
        wanted = set(target.failed)
        cache: dict[str, TrialResult] = {}
        for r in sorted(known, key=lambda r: bool(wanted & set(r.failed))):  # a failing result wins a tie
            cache[_canon(r.schedule)] = r
        cache[_canon(target.schedule)] = target
        count = sum(1 for _, origin in run.plan if origin == "hypothesis")
        spent = 0

        def fails(schedule: list[dict[str, Any]]) -> bool:
            nonlocal spent
            key = _canon(schedule)
            result = cache.get(key)
            if result is None:
                if spent >= self.shrink_budget:
                    return False
                spent += 1
                result = self._judge(run.scenario, run.seed, schedule, "shrink", runner, -1)
                cache[key] = result
            return bool(wanted & set(result.failed))

        try:
            minimal = find(schedule_strategy(run.scenario, run.reference), fails,
                           settings=hypothesis_settings(max(count, 1), shrink=True),
                           random=random.Random(seed_for(run.seed, run.scenario)))
        except HypothesisException as exc:
            print(f"fiskj-harness: shrinking {run.scenario.name} failed: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            return None
        finally:
            run.shrink_runs = spent
        result = cache.get(_canon(minimal))
        if result is None or _canon(minimal) == _canon(target.schedule):
            return None
        # A copy: the minimal schedule may be one of the campaign's own trials.
        return replace(result, origin="shrink", shrunk_from=target.index)


def shard_positions(total: int, shard: tuple[int, int] | None) -> range:
    """Positions ``0..total-1`` of a plan that shard ``(i, n)`` runs: ``i, i + n, i + 2n, ...`` (all without a shard)."""
    if shard is None:
        return range(total)
    i, n = shard
    return range(i, total, n)


def parse_shard(text: str) -> tuple[int, int]:
    """Parse ``--shard I/N`` (``I`` 0-based, ``0 <= I < N``) into ``(I, N)``; raises ``ValueError``."""
    left, sep, right = str(text).partition("/")
    try:
        i, n = int(left), int(right)
    except ValueError:
        raise ValueError(f"a shard is I/N with integers 0 <= I < N (e.g. 0/4), got {text!r}") from None
    if not sep or n < 1 or not 0 <= i < n:
        raise ValueError(f"a shard is I/N with integers 0 <= I < N (e.g. 0/4), got {text!r}")
    return i, n


def _family_kwargs(executor: Callable[..., Any], scenario: Scenario, schedules: list[list[dict[str, Any]]] | None,
                   shard: tuple[int, int] | None, count: int) -> dict[str, Any] | None:
    """Keyword arguments of a family executor call; ``None`` when the scenario belongs to another shard.

    ``schedules``: the campaign's explicit ones, else the scenario's own
    ``[faults] schedule`` repeated ``count`` times.  ``shard`` is passed when
    the executor takes it; else the whole scenario goes to shard
    ``crc32(name) % n``.
    """
    import inspect

    if schedules is None and scenario.faults.schedule is not None:
        schedules = [[dict(f) for f in scenario.faults.schedule] for _ in range(count)]
    kwargs: dict[str, Any] = {"schedules": schedules}
    if shard is not None:
        try:
            takes_shard = "shard" in inspect.signature(executor).parameters
        except (TypeError, ValueError):
            takes_shard = False
        if takes_shard:
            kwargs["shard"] = shard
        elif zlib.crc32(scenario.name.encode()) % shard[1] != shard[0]:
            return None
    return kwargs


def _canon(schedule: list[dict[str, Any]]) -> str:
    return json.dumps(validate_schedule(schedule), sort_keys=True)


def _maybe_validate(schedule: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Validate a schedule of this module's fault kinds; leave other families' schedules as they are."""
    if isinstance(schedule, list) and any(isinstance(f, dict) and f.get("kind") not in FAULT_KINDS
                                          for f in schedule):
        return schedule
    return validate_schedule(schedule)


def _executor(family: str) -> Callable[..., list[TrialResult]] | str:
    """The executor of ``family`` from :data:`FAMILY_EXECUTORS`, or a one-line reason why there is none."""
    target = FAMILY_EXECUTORS.get(family)
    if target is None:
        return f"fault family {family!r} has no executor"
    module, _, name = target.partition(":")
    try:
        fn = getattr(importlib.import_module(module), name, None)
    except ImportError as exc:
        return f"fault family {family!r}: cannot import {module}: {exc}"
    if fn is None:
        return f"fault family {family!r} is not executed yet ({module} has no {name})"
    return fn
