"""Campaign executors of the families that are not agent legs: ``power_loss``, ``tail`` and ``race``.

:mod:`harness.families.power_loss.executor` and :mod:`harness.families.tail.executor` each run a whole
family for one scenario and return their own report; these executors turn
that report into campaign trials (:class:`harness.campaign.campaign.TrialResult`),
one per crash state explored and one per tail mutation judged, so the
``fiskj-harness run`` report counts, judges and reproduces them like kill
trials.  Both families are deterministic for a seed: the reproducer of a
trial re-runs its scenario with that seed (the ``state`` or ``mutation`` id
in the schedule names the trial within it).
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from typing import Any

from harness.campaign.campaign import TrialResult, reproduce_command, shard_positions
from harness.checkers import INVALID, UNKNOWN, VALID, Verdict
from harness.runner.trial import Runner
from harness.scenario.parse import Scenario

__all__ = ["power_loss", "tail", "run_race_family"]


def _reproduce(scenario: Scenario, seed: int, runner: Runner) -> str:
    """The command that re-runs the scenario's whole family with ``seed`` (its trials are a function of it)."""
    argv = ["fiskj-harness", "run", scenario.path or scenario.name, "--seed", str(seed)]
    if not runner.subject.is_reference:
        argv += ["--subject", runner.subject.command_line()]
    return shlex.join(argv)


def _trial(scenario: Scenario, seed: int, runner: Runner, schedule: list[dict[str, Any]], verdicts: list[Verdict],
           history: Any, elapsed: float, faults: dict[str, int]) -> TrialResult:
    return TrialResult(index=-1, scenario=scenario.name, scenario_path=scenario.path, seed=seed, schedule=schedule,
                       origin=schedule[0]["kind"], verdicts=verdicts, history=history, elapsed_s=elapsed,
                       reproduce=_reproduce(scenario, seed, runner),
                       invariants=tuple(sorted({v.invariant for v in verdicts})), faults=faults)


def power_loss(scenario: Scenario, seed: int, count: int, runner: Runner, *,
               schedules: list[list[dict[str, Any]]] | None = None,
               shard: tuple[int, int] | None = None) -> list[TrialResult]:
    """Run :func:`harness.families.power_loss.executor.run_power_loss` with ``seed``; one trial per crash state.

    ``count`` caps the states recovered (``max_states``) unless the scenario
    sets it.  States judged by I4 alone (distinct states beyond the cap)
    become trials too, so every crash state checked is counted under
    ``faults.crash_states``.  ``schedules`` is not used (the family's states
    are a pure function of the seed and the reference trace).
    """
    from harness.families.power_loss.executor import params_from, run_power_loss

    report = run_power_loss(scenario, runner=runner, params=params_from(scenario, seed=seed))
    results = report.results + report.unexplored
    out = []
    for pos in shard_positions(len(results), shard):
        r = results[pos]
        schedule = [{"kind": "power_loss", "state": r.state.get("id"), "prefix_n": r.state.get("prefix_n")}]
        out.append(_trial(scenario, seed, runner, schedule, r.verdicts, r.history, r.seconds,
                          {"power_loss": 1, "crash_states": 1}))
    return out


def tail(scenario: Scenario, seed: int, count: int, runner: Runner, *,
         schedules: list[list[dict[str, Any]]] | None = None,
         shard: tuple[int, int] | None = None) -> list[TrialResult]:
    """Run :func:`harness.families.tail.executor.run_tails` with ``seed``; one trial per tail mutation judged.

    The reader's answer on each mutation is judged as I5 (a torn tail
    dropped and reported, interior damage raised naming its line); each
    resumed mutation as I4 (no acknowledged record lost or glued, the torn
    tail cut) with the shared checkers' evidence.
    """
    from harness.families.tail.executor import params_from, run_tails

    report = run_tails(scenario, runner=runner, params=params_from(scenario, seed=seed))
    trials: list[tuple[list[dict[str, Any]], list[Verdict]]] = []
    per = report.seconds / max(1, report.reader_checked + report.resumes)
    for i in range(report.reader_checked):
        trials.append(([{"kind": "tail", "check": "reader", "index": i}],
                       [Verdict("I5", "journal always readable, at most one torn tail", VALID,
                                {"summary": "reader answer right"}, __name__)]))
    for v in report.reader_violations:  # replace as many valid rows by the invalid ones
        trials.pop(0)
        trials.append(([{"kind": "tail", "check": "reader", "mutation": v["mutation"]["id"]}],
                       [Verdict("I5", "journal always readable, at most one torn tail", INVALID,
                                {"summary": v["reason"], **v}, __name__)]))
    for i in range(report.resumes - len(report.resume_violations)):
        trials.append(([{"kind": "tail", "check": "resume", "index": i}],
                       [Verdict("I4", "no acknowledged record lost", VALID,
                                {"summary": "resumed: repaired, nothing lost or glued"}, __name__)]))
    for v in report.resume_violations:
        trials.append(([{"kind": "tail", "check": "resume", "mutation": v["mutation"]["id"]}],
                       [Verdict("I4", "no acknowledged record lost", INVALID,
                                {"summary": "; ".join(v["problems"])[:300], **v}, __name__)]))
    if not trials:
        trials.append(([{"kind": "tail", "check": "none"}],
                       [Verdict("I5", "journal always readable, at most one torn tail", UNKNOWN,
                                {"summary": "no tail mutation was judged", "notes": report.notes}, __name__)]))
    return [_trial(scenario, seed, runner, trials[pos][0], trials[pos][1], None, per, {"tail": 1})
            for pos in shard_positions(len(trials), shard)]


def run_race_family(scenario: Scenario, seed: int, count: int, runner: Runner, *,
                    schedules: list[list[dict[str, Any]]] | None = None,
                    shard: tuple[int, int] | None = None) -> list[TrialResult]:
    """The ``race`` family: ``count`` trials of :func:`harness.families.race.run_race_trial`, cycling through its races.

    Trial ``i`` uses seed ``seed + i`` (as :func:`harness.families.race.run_races`).
    Its schedule is written ``[{"kind": "race", "race": R, "schedule": S}]``;
    ``schedules`` replays such entries (seed ``seed``).  The races drive
    their own agent (:mod:`harness.families.race.agent`, the reference store), not
    ``--subject``.  Every trial is judged by the race's checkers plus its
    own ``race`` verdict, which counts as a checked invariant.  A subject
    that carries ``FISKJ_MUTANT`` (:func:`harness.selftest.subject_for`)
    gives its mutant to the race agents.  ``shard`` keeps the plan
    positions of :func:`shard_positions`.
    """
    from harness.families.race import RaceDriver, races_of, run_race_trial

    plan: list[tuple[str, int, str | None]]
    if schedules is not None:
        plan = []
        for sch in schedules:
            if not (sch and sch[0].get("kind") == "race" and sch[0].get("race")):
                raise ValueError(f"a race scenario replays schedules like [{{'kind': 'race', 'race': ...}}], "
                                 f"got {sch!r}")
            plan.append((sch[0]["race"], seed, sch[0].get("schedule")))
    else:
        races = races_of(scenario)
        plan = [(races[i % len(races)], seed + i, None) for i in range(count)]
    plan = [plan[p] for p in shard_positions(len(plan), shard)]
    mutant = dict(runner.subject.extra_env).get("FISKJ_MUTANT") or None
    workdir = tempfile.mkdtemp(prefix="fiskj-races-", dir=runner.tmp_root)
    out = []
    try:
        with RaceDriver(mutant) as driver:
            for race, trial_seed, forced in plan:
                r = run_race_trial(scenario, race, trial_seed, workdir, driver=driver, schedule=forced)
                schedule = [{"kind": "race", "race": r.race, "schedule": r.schedule}]
                result = TrialResult(
                    index=-1, scenario=scenario.name, scenario_path=scenario.path, seed=trial_seed,
                    schedule=schedule, origin="race", verdicts=r.verdicts, history=r.history,
                    elapsed_s=r.elapsed_s, reproduce=reproduce_command(scenario, trial_seed, schedule, runner.subject),
                    invariants=tuple(scenario.check.invariants) + ("race",), faults={"race": 1})
                if not (result.failed or result.unknown):
                    result.history = None
                out.append(result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return out
