"""The CI durability gate: the bundled and regression scenarios within a time budget (``fiskj-harness gate``).

The gate runs campaigns in *rounds*.  Round ``r`` gives every scenario a
plan of ``min(left, n * 2**r)`` trials (``n`` = the number of shards,
``left`` = what the scenario's ``trials.count`` has not planned yet),
drawn with campaign seed ``trials.seed + r * 1000``; each shard runs its
positions of that plan (:func:`harness.campaign.shard.shard_positions`).  So:

* trials are spread across scenarios: every scenario gets its first trials
  before any scenario gets many, and sizes double per round;
* the content of every round is a function of the scenarios alone, so the
  shards of a gate are disjoint whatever their timings;
* a scenario whose plan is fixed (exhaustive crash points with one faulted
  leg, a regression scenario's ``[faults] schedule``, the power-loss and
  tail families) runs its whole plan in round 0 and is done.

Before each round after the first, the gate estimates each scenario's
cost from its trials so far (seconds per trial, over ``jobs`` threads) and
takes scenarios, fewest trials first, while the estimate fits the budget
left; a scenario that does not fit stops there, and the gate ends when
none fits or every plan is spent.  A round that is running is not cut
short, so a gate can overrun its budget by the longest trial of its last
round (the estimate keeps that small).

Shrinking gets the time the rounds leave (at most ``shrink_budget``
trials per failing scenario per round).

An interruption (SIGINT, SIGTERM: :mod:`harness.campaign.interrupt`) ends the
round that runs as a campaign's interruption does and starts no other; the
result holds the trials of every round so far and says it was interrupted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from harness.campaign import interrupt
from harness.campaign.campaign import Campaign
from harness.campaign.result import CampaignResult, ScenarioRun, TrialResult
from harness.families.registry import by_mode
from harness.names import SEED_STEP
from harness.runner.trial import Runner
from harness.scenario.model import Scenario
from harness.subject.contract import Subject

__all__ = ["GateResult", "run_gate", "gate_report", "render_gate_markdown", "fixed_plan"]

#: Fraction of the budget the estimates may fill (the rest absorbs estimation error).
FILL = 0.85


def fixed_plan(scenario: Scenario) -> bool:
    """True when a scenario's plan does not depend on the trial count (it runs once, in round 0).

    Exhaustive single-leg crash points (``kill_points = "events"``,
    ``legs = 1``), an explicit ``[faults] schedule``, and the file-fault
    families (``power_loss``, ``tail``), whose crash states and mutations
    are a function of the seed and whose count is a cap on recoveries.
    """
    return by_mode(scenario.faults.family).fixed_plan(scenario)


@dataclass
class _Track:
    scenario: Scenario
    planned: int = 0
    trials: int = 0
    seconds: float = 0.0
    done: bool = False
    error: str | None = None
    run: ScenarioRun | None = None

    def left(self) -> int:
        return max(self.scenario.trials.count - self.planned, 0)

    def per_trial(self) -> float | None:
        return self.seconds / self.trials if self.trials else None


@dataclass
class GateResult:
    """What a gate ran: ``result`` (all rounds as one :class:`CampaignResult`), ``rounds``, the budget,
    per-scenario ``plan`` rows (name, trials run here, planned, done, error) and the shard."""

    result: CampaignResult
    rounds: int
    budget_s: float
    plan: list[dict[str, Any]] = field(default_factory=list)
    shard: tuple[int, int] | None = None


def _round_size(track: _Track, r: int, n: int) -> int:
    if fixed_plan(track.scenario):
        return track.left() if r == 0 else 0
    return min(track.left(), n * (2 ** r))


def run_gate(scenarios: list[Scenario], *, budget_s: float, jobs: int | None = None, subject: Subject | None = None,
             shard: tuple[int, int] | None = None, seed: int | None = None, shrink_budget: int = 10,
             progress: Callable[[str], None] | None = None, round_unit: int | None = None,
             trial_progress: Callable[[int, int, int], None] | None = None) -> GateResult:
    """Run the gate over ``scenarios`` (see the module docstring); returns a :class:`GateResult`.

    ``seed``: replaces every scenario's ``trials.seed`` as the base seed.
    ``progress``: called with one line per round.  ``round_unit``: the
    ``n`` of the round sizes (default: the number of shards), so that an
    unsharded gate can plan the rounds a sharded one does.
    ``trial_progress``: each round's campaign's ``progress(done, total,
    failing)`` (:class:`harness.campaign.campaign.Campaign`).
    """
    started = time.monotonic()
    n = round_unit or (shard[1] if shard else 1)
    tracks = [_Track(s) for s in scenarios]
    trials: list[TrialResult] = []
    errors: list[str] = []
    jobs_used = 1
    rounds = 0
    cut: dict[str, Any] | None = None
    with interrupt.cooperative(), Runner(subject=subject) as runner:
        for r in range(64):
            if interrupt.requested():  # no round starts after an interruption
                break
            left = budget_s - (time.monotonic() - started)
            chosen: list[tuple[_Track, int]] = []
            estimate = 0.0
            candidates = [t for t in tracks if not t.done and t.error is None]
            for t in sorted(candidates, key=lambda t: (t.trials, t.scenario.name)):
                size = _round_size(t, r, n)
                if size <= 0:
                    t.done = True
                    continue
                mine = len(range(shard[0], size, shard[1])) if shard else size
                cost = (t.per_trial() or 0.0) * mine / max(jobs or 1, 1)
                if r > 0 and (t.per_trial() is None or estimate + cost > left * FILL):
                    continue  # does not fit (or never ran a trial here to estimate from)
                chosen.append((t, size))
                estimate += cost
            if not chosen:
                break
            if r > 0 and left <= 0:
                break
            round_scenarios = []
            for t, size in chosen:
                base = seed if seed is not None else t.scenario.trials.seed
                round_scenarios.append(replace(t.scenario, trials=replace(t.scenario.trials, count=size,
                                                                         seed=base + r * SEED_STEP)))
                t.planned += size
            spare = budget_s - (time.monotonic() - started) - estimate
            campaign = Campaign(round_scenarios, jobs=jobs, runner=runner, shard=shard,
                                shrink_budget=shrink_budget if spare > 0 else 0, progress=trial_progress)
            try:
                result = campaign.run()
            except interrupt.Interrupted:  # came just before the round started: it ran nothing
                break
            if getattr(result, "interrupted", None):
                cut = dict(result.interrupted, round=r)
            jobs_used = result.jobs
            rounds += 1
            for err in result.errors:
                if err not in errors:
                    errors.append(err)
            by_name = {t.scenario.name: t for t, _ in chosen}
            for run in result.scenarios:
                t = by_name[run.scenario.name]
                if run.error:
                    t.error = run.error
                if t.run is None or t.run.reference is None:
                    t.run = run
            offset = len(trials)
            for tr in result.trials:
                t = by_name.get(tr.scenario)
                if t is not None:
                    t.trials += 1
                    t.seconds += tr.elapsed_s
                tr.index += offset
                if tr.shrunk_from is not None:
                    tr.shrunk_from += offset
                trials.append(tr)
            if progress is not None:
                progress(f"round {r}: {len(chosen)} scenario(s), {len(result.trials)} trial(s), "
                         f"{time.monotonic() - started:.1f} of {budget_s:.0f} s")
        subject_used = runner.subject
    scenario_runs = [t.run or ScenarioRun(scenario=t.scenario, seed=t.scenario.trials.seed, error=t.error)
                     for t in tracks]
    merged = CampaignResult(trials=trials, errors=errors, scenarios=scenario_runs,
                            elapsed_s=time.monotonic() - started, jobs=jobs_used, subject=subject_used)
    if cut is None and interrupt.requested():  # between two rounds
        cut = {"signal": interrupt.signal_name(interrupt.signum() or 2), "planned": len(trials), "done": len(trials),
               "round": rounds}
    elif cut is not None:  # the rounds before the interrupted one ran whole
        cut.update(planned=len(trials) - cut["done"] + cut["planned"], done=len(trials))
    merged.interrupted = cut  # type: ignore[attr-defined]
    plan = [{"scenario": t.scenario.name, "path": t.scenario.path, "trials": t.trials, "planned": t.planned,
             "count": t.scenario.trials.count, "seconds": round(t.seconds, 3),
             "complete": t.left() == 0 or (fixed_plan(t.scenario) and t.planned > 0), "error": t.error}
            for t in tracks]
    return GateResult(result=merged, rounds=rounds, budget_s=budget_s, plan=plan, shard=shard)


def gate_report(gate: GateResult, report_path: str | None) -> dict[str, Any]:
    """The JSON report of a gate: the campaign report plus ``gate`` (budget, rounds, shard, per-scenario plan).

    Every scenario appears under ``scenarios``, also one that ran no trial
    within the budget (``trials`` 0, each checked invariant with ``checked``
    0), so the JUnit file has a (skipped) test case for it.
    """
    from harness.checkers.verdict import CHECKERS
    from harness.report.report import campaign_report

    report = campaign_report(gate.result, report_path)
    for row in gate.plan:
        sc = report["scenarios"].setdefault(row["scenario"], {"trials": 0, "invalid_trials": 0, "unknown_trials": 0,
                                                             "duration_s": 0.0, "invariants": {}})
        run = next((r for r in gate.result.scenarios if r.scenario.name == row["scenario"]), None)
        checked = run.scenario.check.invariants if run is not None else ()
        for inv in checked:
            sc["invariants"].setdefault(inv, {"name": CHECKERS.get(inv, ("", inv))[1], "checked": 0, "valid": 0,
                                              "invalid": 0, "unknown": 0})
        if row.get("error"):
            sc["error"] = row["error"]
    report["gate"] = {"budget_s": gate.budget_s, "rounds": gate.rounds,
                      "shard": f"{gate.shard[0]}/{gate.shard[1]}" if gate.shard else None, "plan": gate.plan}
    return report


def render_gate_markdown(report: dict[str, Any]) -> str:
    """The gate's Markdown summary: the report's (verdict, faults, invariants, violations) and a scenario table."""
    from harness.report.report import render_markdown

    gate = report.get("gate", {})
    out = [render_markdown(report).rstrip("\n"), "",
           f"Budget {gate.get('budget_s', 0):.0f} s, {gate.get('rounds', 0)} round(s)"
           + (f", shard {gate['shard']}" if gate.get("shard") else "") + ".", "",
           "| scenario | trials | of | invalid | unknown | seconds |", "|---|---:|---:|---:|---:|---:|"]
    scenarios = report.get("scenarios", {})
    for row in gate.get("plan", []):
        sc = scenarios.get(row["scenario"], {})
        note = " (error)" if row.get("error") else ""
        out.append(f"| {row['scenario']}{note} | {row['trials']} | {row['count']} | {sc.get('invalid_trials', 0)} | "
                   f"{sc.get('unknown_trials', 0)} | {row['seconds']:.1f} |")
    return "\n".join(out) + "\n"
