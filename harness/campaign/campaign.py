"""A campaign: many trials over scenarios, in parallel, with shrinking of failures (docs/architecture.md
"A campaign")."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from concurrent.futures import CancelledError, ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Callable

from harness.campaign import interrupt
from harness.report.reproduce import exact_schedule, reproducer, schedule_key
from harness.campaign.result import CampaignResult, ScenarioRun, TrialResult
from harness.campaign.stream import Next, TrialStream
from harness.checkers import check_all
from harness.errors import BrokenReference, SetupError, SubjectDidNotStart
from harness.names import FAULT_FREE
from harness.families.base import Planned
from harness.families.registry import by_mode
from harness.report.groups import fault_total, first_violation
from harness.runner.trial import Runner
from harness.scenario.generate import expand_all
from harness.scenario.model import Scenario
from harness.subject.contract import Subject
from harness.workload.build import ledger_tool

__all__ = ["Campaign", "subject_limits", "unsupported"]


def unsupported(subject: Subject, scenario: Scenario) -> str | None:
    """Why ``scenario`` cannot run against ``subject`` at all (a setup error), or ``None``: the subject's own
    limits (:meth:`harness.subject.capabilities.Capabilities.refuses`), then its family's."""
    if subject.jetstream is not None and scenario.faults.family != "jetstream":
        return "its store is a JetStream server only the jetstream family starts ([faults] family = \"jetstream\")"
    return subject.caps.refuses(scenario.workload) or by_mode(scenario.faults.family).unsupported(subject, scenario)


def subject_limits(scenarios: list[Scenario], subject: Subject, *, named: bool = False) -> list[str]:
    """What cannot be done for ``subject``, one line each, known before any trial: what the checkers cannot
    judge for it (:meth:`harness.subject.capabilities.Capabilities.limits`), and per scenario a family that
    cannot run at all (only that, once) or runs only in part.  ``named``: the scenarios were named on the command
    line, so one that cannot run at all is a setup error (:func:`unsupported`), said as such and not here."""
    out = subject.caps.limits()
    for scenario in scenarios:
        why = unsupported(subject, scenario)
        if why:  # it does not run: what its family could not do in it is beside the point
            out += [] if named else [f"{scenario.name}: {why}"]
            continue
        out += [f"{scenario.name}: {line}" for line in by_mode(scenario.faults.family).cannot(subject, scenario)]
    return out


#: Origins of trials never shrunk: a run with no fault, or a schedule given as it is (a regression
#: scenario's, ``--schedule``, replay): the user asked for exactly that trial.
GIVEN_ORIGINS = ("uninterrupted", "noop", "regression", "explicit", "replay")


def _judged(run: ScenarioRun, planned: Planned, history: Any, runner: Runner, index: int, *,
            schedule: list[dict[str, Any]], faults: dict[str, int], family: str, started: float | None,
            reproduce: Callable[[int, list[dict[str, Any]] | None], str] | None = None) -> TrialResult:
    """``history`` judged on ``planned``'s invariants (else the scenario's) less those not applicable to the
    subject, as trial ``index`` (``started``: its start by ``time.monotonic``; ``None``: no time spent;
    ``reproduce``: the run's :func:`harness.report.reproduce.reproducer`, made here when not given)."""
    skip = dict(runner.subject.caps.not_applicable)
    wanted = planned.invariants if planned.invariants is not None else run.scenario.check.invariants
    invariants = tuple(i for i in wanted if i not in skip)
    reproduce = reproduce or reproducer(run.scenario, runner.subject)
    return TrialResult(index=index, scenario=run.scenario.name, scenario_path=run.scenario.path, seed=planned.seed,
                       schedule=schedule, origin=planned.origin, verdicts=check_all(history, list(invariants)),
                       history=history, elapsed_s=0.0 if started is None else time.monotonic() - started,
                       reproduce=reproduce(planned.seed, schedule),
                       invariants=invariants, faults=faults, family=family,
                       probes=tuple(sorted({p["probe"] for p in history.probes})))


class Campaign:
    """Runs trials of ``scenarios`` on ``jobs`` threads and shrinks failures (docs/architecture.md "A campaign").

    ``trials``: per-scenario count (default each scenario's ``trials.count``; given, it also bounds a fixed
    plan: :meth:`harness.families.base.Family.bound`); ``seed``: campaign seed (default each scenario's);
    ``subject``: the agent (default the reference; ``runner``: a Runner to use instead); ``progress``:
    ``progress(done, planned, failing)``, main thread; ``shrink_budget``: trials a shrink may run (0: none);
    ``keep_histories``: keep every history, not only failing ones; ``schedules``: explicit schedules run
    instead of a plan, with origin ``origin``; ``shard``: ``(i, n)``, 0-based; ``first_violation``: drop a
    scenario's trials not started yet once one fails; ``skip_unsupported``: a scenario that cannot apply
    (:func:`unsupported`) is ``NOT RUN``, not a setup error.  The gate's: ``budget_s`` (seconds by
    ``clock`` after which no trial starts, once round 0 has started whole), ``seed_stream`` (a spent plan
    is drawn again from a fresh seed), ``max_draws``, ``on_round(k, live)``; the self-test's
    ``whole_first_draw`` (the deadline stops no trial of a draw 0).  Raises ``ValueError`` for a bad
    ``shard`` or ``schedules``.
    """

    def __init__(self, scenarios: list[Scenario], *, trials: int | None = None, seed: int | None = None,
                 jobs: int | None = None, subject: Subject | None = None,
                 progress: Callable[[int, int, int], None] | None = None, shrink_budget: int = 30,
                 keep_histories: bool = False, schedules: list[list[dict[str, Any]]] | None = None,
                 runner: Runner | None = None, origin: str = "explicit",
                 shard: tuple[int, int] | None = None, first_violation: bool = False,
                 skip_unsupported: bool = False, budget_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic, seed_stream: bool = False,
                 max_draws: int | None = None, on_round: Callable[[int, int], None] | None = None,
                 whole_first_draw: bool = False) -> None:
        if shard is not None:
            i, n = shard
            if not (isinstance(i, int) and isinstance(n, int) and n >= 1 and 0 <= i < n):
                raise ValueError(f"a shard is (i, n) with 0 <= i < n, got {shard!r}")
        if schedules is not None and not (isinstance(schedules, list)
                                          and all(isinstance(s, list) for s in schedules)):
            raise ValueError(f"schedules must be a list of schedules (lists), got {schedules!r}")
        self.shard = shard
        self.scenarios = expand_all(scenarios)  # a generated scenario runs as its drawn workloads
        self.trials = trials
        self.seed = seed
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.progress = progress
        self.shrink_budget = shrink_budget
        self.keep_histories = keep_histories
        self.schedules = schedules
        self.explicit_origin = origin
        self._runner = runner
        self.first_violation = first_violation
        self.skip_unsupported = skip_unsupported
        self.budget_s, self.clock, self.seed_stream, self.max_draws = budget_s, clock, seed_stream, max_draws
        self.on_round, self.whole_first_draw = on_round, whole_first_draw
        self.started = 0.0
        self.planned = 0
        self.stream: TrialStream | None = None
        self.subject = runner.subject if runner is not None else subject
        self._executors: dict[int, Any] = {}
        self._reproducers: dict[int, Callable[[int, list[dict[str, Any]] | None], str]] = {}
        self._exec_lock = threading.Lock()

    def _once(self, made: dict[int, Any], run: ScenarioRun, make: Callable[[], Any]) -> Any:
        """``made``'s entry for ``run``, made by ``make()`` on first use (one per scenario, shared by the threads):
        the scenario's executor, its reproducer (:func:`harness.report.reproduce.reproducer`)."""
        with self._exec_lock:
            if id(run) not in made:
                made[id(run)] = make()
            return made[id(run)]

    def _judge(self, run: ScenarioRun, planned: Planned, runner: Runner, index: int) -> TrialResult:
        """Run one planned trial through its family's executor and judge its history with the checkers."""
        t = time.monotonic()
        executor = self._once(self._executors, run, lambda: run.family.open(run.scenario, runner, run.reference))
        ran = executor.run(planned)
        schedule = ran.schedule if ran.schedule is not None else planned.schedule
        if any("landed_after_event" in leg.fault.detail for leg in ran.history.legs):
            schedule = exact_schedule(schedule, ran.history.legs)  # timed kills replay as op-counted ones
        result = _judged(run, planned, ran.history, runner, index, schedule=schedule, faults=ran.faults,
                         family=run.family.name, started=t,
                         reproduce=self._once(self._reproducers, run, lambda: reproducer(run.scenario, runner.subject)))
        if not (result.failed or result.unknown or self.keep_histories):  # results folder: keep undecided ones too
            result.history = None
        return result

    def _draw(self, run: ScenarioRun, seed: int, runner: Runner) -> list[Planned]:
        """One draw of ``run``'s plan with ``seed`` (pure): the family's plan for ``trials`` (else the scenario's
        count), bounded by ``--trials``, or the explicit ``schedules`` with their origin."""
        count = self.trials or run.scenario.trials.count
        try:
            plan = run.family.plan(run.scenario, run.reference, count, seed, self.schedules, subject=runner.subject)
        except ValueError as exc:  # a schedule the user gave is the user's mistake, not the scenario file's
            if self.schedules is None:
                raise
            given = "the replayed trial's schedule" if self.explicit_origin == "replay" else "the --schedule given"
            raise ValueError(f"{given}: {exc}") from None
        if self.schedules is not None:
            return [replace(p, origin=self.explicit_origin) for p in plan]
        if self.trials is not None:  # --trials bounds every family
            plan = run.family.bound(run.scenario, plan, self.trials, seed)
        return plan

    def _may_start(self, stream: TrialStream, deadline: float | None) -> bool:
        """Whether another trial may start: no interruption, and round 0 is not over (it runs whole, so every
        scenario gets a first trial whatever the budget), or with ``whole_first_draw`` a trial of a draw 0 is
        left, or the deadline has not come."""
        if interrupt.requested():
            return False
        if deadline is None or (stream.round == 0 and stream.waiting()):
            return True
        if self.whole_first_draw and stream.first_draw_left():
            return True
        return self.clock() < deadline

    def _trials(self, pool: ThreadPoolExecutor, stream: TrialStream, runner: Runner, errors: list[str],
                references: list[Any], spare: set[int]) -> list[TrialResult]:
        """Run the stream's trials on ``pool``, at most ``jobs`` at a time, each started when a thread is free
        and in round order, until the stream is empty, the deadline came or an interruption; returns the
        judged trials in the order they started.  A setup error or harness failure of a trial goes to
        ``errors``; an interruption ends the running trials (and ``references``)."""
        deadline = None if self.budget_s is None else self.started + self.budget_s
        slots: list[TrialResult | None] = []
        running: dict[Any, tuple[Next, int]] = {}
        done = failing = 0
        if self.progress:
            self.progress(0, stream.planned, 0)
        while True:
            while len(running) < self.jobs and self._may_start(stream, deadline):
                nxt = stream.next()
                if nxt is None:
                    break
                running[pool.submit(self._judge, nxt.run, nxt.planned, runner, len(slots))] = (nxt, len(slots))
                slots.append(None)
            fut = next(interrupt.as_done(list(running)), None) if running else None
            if fut is None:
                break
            nxt, i = running.pop(fut)
            try:
                slots[i] = replace(fut.result(), round=nxt.round, draw=nxt.draw)
            except CancelledError:
                pass
            except SetupError as exc:
                errors.append(str(exc))
            except Exception as exc:  # a harness failure is never a pass: it is a setup error
                errors.append(f"{nxt.run.scenario.name}: trial with schedule {json.dumps(nxt.planned.schedule)} "
                              f"could not run: {type(exc).__name__}: {exc}")
            done += 1
            if slots[i] is not None and slots[i].failed:
                failing += 1
                if self.first_violation or getattr(nxt.run.family.params(nxt.run.scenario), "stop_on_violation",
                                                   False):
                    stream.stop(nxt.run)
            if self.progress:
                self.progress(done, stream.planned, failing)
        errors += [e for e in stream.errors if e not in errors]
        self.planned = stream.planned
        if interrupt.requested():  # --- interruption: end the running trials, drop them
            interrupt.end_trials(pool, [*references, *running], spare)
        return [r for r in slots if r is not None]

    def run(self) -> CampaignResult:
        """Run the campaign; returns a :class:`CampaignResult`.  Never raises for a failing agent: a scenario
        that cannot run is recorded in ``errors``.  After SIGINT or SIGTERM (docs/ci.md "Interruption") the
        result holds the trials judged so far and ``interrupted`` ``{"signal", "planned", "done"}``; without
        the command line's handlers the ``KeyboardInterrupt`` is raised again once all is ended.
        """
        with interrupt.cooperative():  # --- interruption (issue 16 item 6): a signal is acted on where it waits
            return self._run()

    def _run(self) -> CampaignResult:
        """The body of :meth:`run`, which makes a signal cooperative around it."""
        interrupt.check()  # --- interruption (issue 16 item 6): none launched after one
        spare = interrupt.descendants()  # processes that are not this campaign's
        started = time.monotonic()
        self.started = self.clock()
        runner = self._runner or Runner(subject=self.subject)
        self.subject = runner.subject
        runs = [ScenarioRun(scenario=s, seed=self.seed if self.seed is not None else s.trials.seed,
                            family=by_mode(s.faults.family)) for s in self.scenarios]
        errors: list[str] = []
        results: list[TrialResult] = []
        limits = subject_limits([run.scenario for run in runs], runner.subject, named=not self.skip_unsupported)
        try:  # the slower tool said once (harness/workload/ledger_build.py); a bad setting fails each trial's setup
            tool = ledger_tool()
            if tool.kind != "c":
                limits.append(f"ledger tool: python -I -S ledger_tool.py, about 10 ms more a tool run: {tool.reason}")
        except (ValueError, RuntimeError):
            pass
        for run in runs:  # a family that cannot run against this subject is an error, never a silent pass
            why = unsupported(runner.subject, run.scenario)
            if why is not None and self.skip_unsupported:  # the default set: said loudly, not an error
                run.skipped, run.not_run = True, why
                limits.append(f"{run.scenario.name}: NOT RUN for this subject (it cannot apply, see above; named "
                              "on the command line it is a setup error, exit 2)")
            elif why is not None:
                run.error = f"{run.scenario.path or run.scenario.name}: {why}"
        try:
            with ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="fiskj-trial") as pool:
                # 1. references: the first alone (a subject that cannot start is found once, its error said
                #    once, before any trial), then the others in parallel
                wanted = [run for run in runs
                          if run.error is None and not run.skipped and run.family.needs_reference(run.scenario)]
                futures: dict[Any, ScenarioRun] = {}
                uninterrupted: list[TrialResult] = []
                explicit = self.schedules is not None  # given schedules only: what a drawn plan needs is left out
                for batch in (wanted[:1], wanted[1:]):
                    submitted = {pool.submit(lambda r: r.family.prepare(r.scenario, runner, explicit=explicit),
                                             run): run for run in batch}
                    futures.update(submitted)
                    dead = self._collect_references(submitted, runner, limits, uninterrupted)
                    if dead is not None:  # every other scenario would fail the same way: not run, said once
                        for run in wanted[1:]:
                            run.error = (f"{run.scenario.name}: not run: the subject did not start (its error is "
                                         f"the one given for {dead.scenario.name})")
                        break
                # 2. plans (pure; hypothesis draws: main thread only): draw 0 of each, the rest as they are due
                stream = TrialStream([run for run in runs if not interrupt.requested()],
                                     lambda run, seed: self._draw(run, seed, runner), shard=self.shard,
                                     seed_stream=self.seed_stream, max_draws=self.max_draws, on_round=self.on_round,
                                     fixed=lambda run: run.family.fixed_plan(run.scenario))
                errors += [run.error for run in runs if run.error is not None]
                # 3. trials, round by round, while the deadline allows (harness.campaign.stream)
                results = uninterrupted + self._trials(pool, stream, runner, errors, list(futures), spare)
                self.stream = stream
            for i, r in enumerate(results):
                r.index = i
            # 4. shrink (main thread: hypothesis is driven from one thread)
            if self.shrink_budget > 0 and self.schedules is None and not interrupt.requested():
                try:
                    with interrupt.raising():  # its trials run in this thread: a signal stops them at once
                        results += self._shrink_all(runs, results, runner)
                except KeyboardInterrupt as exc:  # --- interruption: the trials so far stand, unshrunk
                    interrupt.note(getattr(exc, "signum", 2))
        finally:
            if interrupt.requested():  # --- interruption: no process of this campaign outlives it
                interrupt.end_processes(spare)
            with self._exec_lock:
                executors, self._executors = list(self._executors.values()), {}
                self._reproducers = {}
            for ex in executors:
                ex.close()
            if self._runner is None:
                runner.close()
        for i, r in enumerate(results):
            r.index = i
        out = CampaignResult(trials=results, errors=errors, scenarios=runs, elapsed_s=time.monotonic() - started,
                             jobs=self.jobs, subject=runner.subject, limits=limits,
                             not_applicable=dict(runner.subject.caps.not_applicable))
        if interrupt.requested():
            if not interrupt.installed():  # a library caller: its KeyboardInterrupt, now that all is ended
                interrupt.clear()
                raise KeyboardInterrupt
            out.interrupted = {"signal": interrupt.signal_text(), "planned": self.planned, "done": len(results)}
        return out

    def _collect_references(self, submitted: dict[Any, ScenarioRun], runner: Runner, limits: list[str],
                            uninterrupted: list[TrialResult]) -> ScenarioRun | None:
        """Wait for the reference runs ``submitted`` (future -> run) and record each on its run: the reference,
        or the uninterrupted run judged as a trial (:class:`BrokenReference`, appended to ``uninterrupted``),
        or the run's ``error``.  Returns a run whose subject did not start (:class:`SubjectDidNotStart`), else
        ``None``."""
        dead = None
        for fut in interrupt.as_done(submitted):
            run = submitted[fut]
            try:
                run.reference = fut.result()
            except BrokenReference as exc:  # it ran and ended wrong: a verdict, not a setup error
                exc.history.options["uninterrupted"] = True  # I6 says how it should have ended (history.ending)
                uninterrupted.append(_judged(run, Planned([], "uninterrupted", 0), exc.history, runner, 0, schedule=[],
                                             faults={}, family="none", started=None))
                run.skipped = True
                limits.append(f"{run.scenario.name}: its uninterrupted run ended wrong and is judged as a "
                              f"trial; no faulted trial runs (nothing sound to compare them with)")
            except SetupError as exc:
                run.error = str(exc)
                if isinstance(exc, SubjectDidNotStart) and dead is None:
                    dead = run
        return dead

    def _shrink_all(self, runs: list[ScenarioRun], results: list[TrialResult], runner: Runner) -> list[TrialResult]:
        """Shrink each scenario's smallest failing trial (by its family's :meth:`~harness.families.base.Family.size`;
        one that failed something a fault caused, when any did: :data:`harness.names.FAULT_FREE`);
        returns the shrunk trials (origin ``shrink``)."""
        out = []
        for run in runs:
            mine = [r for r in results if r.scenario == run.scenario.name and r.scenario_path == run.scenario.path]
            failed = [r for r in mine if r.failed and r.origin not in GIVEN_ORIGINS
                      and fault_total({"faults": r.faults, "schedule": r.schedule})]  # none injected: nothing to shrink
            failed = [r for r in failed if _violations(r) - FAULT_FREE] or failed  # one a fault caused, if any
            if failed and run.reference is not None:
                size = lambda r: run.family.size(run.scenario, run.reference, r.schedule)[0]  # noqa: E731
                try:
                    shrunk = self._shrink(run, mine, min(failed, key=lambda r: (size(r), r.index)), runner)
                except (ValueError, KeyError, IndexError, TypeError) as exc:  # a shrink never ends a campaign
                    print(f"fiskj-harness: not shrunk: {run.scenario.name}: {type(exc).__name__}: {exc}",
                          file=sys.stderr)
                    continue
                out += [shrunk] if shrunk is not None else []
        return out

    def _shrink(self, run: ScenarioRun, known: list[TrialResult], target: TrialResult,
                runner: Runner) -> TrialResult | None:
        """Shrink ``target`` greedily (docs/results.md "Shrinking"): the first of its family's smaller trials
        (:meth:`~harness.families.base.Family.smaller`) that fails the same way (an invariant it failed, with
        the same first violation; one no fault causes, :data:`harness.names.FAULT_FREE`, only when it failed
        nothing else) becomes the trial shrunk next, until none does or ``shrink_budget`` new trials
        ran.  Returns the smallest failing trial (origin ``shrink``, its ``shrink`` saying what got smaller), or
        ``None``, ``target.shrink`` then saying why not."""
        family, scenario, ref = run.family, run.scenario, run.reference
        wanted = _violations(target) - FAULT_FREE or _violations(target)  # what the faults caused, if anything
        cache: dict[str, TrialResult | None] = {}
        for r in sorted(known, key=lambda r: bool(wanted & _violations(r))):  # a failing result wins a tie
            cache[schedule_key(r.schedule)] = r
        spent = tried = 0
        best = target
        while True:
            key = family.size(scenario, ref, best.schedule)[0]
            for schedule in family.smaller(scenario, ref, best.schedule):
                hit = schedule_key(schedule) in cache
                if not family.size(scenario, ref, schedule)[0] < key or (not hit and spent >= self.shrink_budget):
                    continue
                result = cache.get(schedule_key(schedule))
                if not hit:
                    spent += 1
                    try:
                        planned = family.plan(scenario, ref, 1, target.seed, [schedule], subject=runner.subject)[0]
                        result = self._judge(run, replace(planned, origin="shrink", invariants=target.invariants),
                                             runner, -1)
                    except (ValueError, SetupError) as exc:  # a candidate that cannot run fails nothing
                        print(f"fiskj-harness: shrink of {scenario.name}: {json.dumps(schedule)}: {exc}",
                              file=sys.stderr)
                    cache[schedule_key(schedule)] = result
                tried += 1
                if result is not None and wanted & _violations(result):
                    best = result
                    break
            else:
                break
        run.shrink_runs = spent
        words = family.size(scenario, ref, target.schedule)[1]
        spent_all = f" (shrink budget {self.shrink_budget} spent)" if spent >= self.shrink_budget else ""
        if best is not target:  # a copy: the smallest may be one of the campaign's own trials
            return replace(best, origin="shrink", shrunk_from=target.index,
                           shrink=f"{words} -> {family.size(scenario, ref, best.schedule)[1]}{spent_all}")
        target.shrink = (f"already minimal: {words}, nothing smaller to try" if not tried else
                         f"not shrunk: none of the {tried} smaller trial(s) tried failed "
                         f"{'/'.join(sorted(target.failed))} the same way{spent_all}; it stays at {words}")
        return None


def _violations(result: TrialResult) -> set[tuple[str, str]]:
    """``(invariant, kind of its first violation)`` of each invariant ``result`` failed: what a shrunk trial
    must fail again."""
    return {(v.invariant, str(first_violation({"evidence": v.evidence}).get("kind", ""))) for v in result.verdicts
            if v.invariant in result.failed}
