"""The CI durability gate: the bundled and regression scenarios as one campaign with a deadline and a seed
stream (docs/scenarios.md "The CI gate"); its run and its reports (budget, rounds, trials per scenario, seeds).
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.campaign import interrupt
from harness.campaign.campaign import Campaign
from harness.campaign.result import CampaignResult, ScenarioRun
from harness.names import SEED_STEP
from harness.runner.trial import Runner
from harness.scenario.model import Scenario
from harness.subject.contract import Subject

__all__ = ["GateResult", "run_gate", "gate_report", "gate_properties", "render_gate_markdown", "render_gate_line"]

#: Rounds listed one per row in the Markdown summary (the JSON report lists every round).
MARKDOWN_ROUNDS = 12


@dataclass
class GateResult:
    """What a gate ran: ``result`` (the campaign's :class:`CampaignResult`, each trial with its ``round``), the
    budget in seconds, ``plan`` (one row per scenario: trials judged, trials drawn, draws and their seeds,
    why it left the stream), ``round_log`` (one row per round: kind, seeds, scenarios, trials, scenarios
    the deadline left without a trial of it), the shard and the ``--seed`` given."""

    result: CampaignResult
    budget_s: float
    plan: list[dict[str, Any]] = field(default_factory=list)
    round_log: list[dict[str, Any]] = field(default_factory=list)
    shard: tuple[int, int] | None = None
    base_seed: int | None = None

    @property
    def rounds(self) -> int:
        """Rounds in which a trial was judged."""
        return len(self.round_log)


def run_gate(scenarios: list[Scenario], *, budget_s: float, jobs: int | None = None, subject: Subject | None = None,
             shard: tuple[int, int] | None = None, seed: int | None = None, shrink_budget: int = 10,
             progress: Callable[[str], None] | None = None,
             trial_progress: Callable[[int, int, int], None] | None = None, max_draws: int | None = None,
             keep_histories: bool = False, skip_unsupported: bool = False,
             clock: Callable[[], float] = time.monotonic) -> GateResult:
    """Run the gate over ``scenarios``; returns a :class:`GateResult`.  ``budget_s``: seconds by ``clock``
    (round 0 runs whole whatever it is); ``seed``: every scenario's draw-0 seed; ``progress``: called with a
    line as each round starts; ``trial_progress``: the campaign's ``progress``; the rest as
    :class:`harness.campaign.campaign.Campaign`'s."""
    started = clock()
    starts: list[float] = []  # when each round started, seconds by ``clock`` from the start

    def said(k: int, live: int) -> None:
        starts.append(clock() - started)
        if progress is not None:
            progress(f"round {k}: {live} scenario(s) in the stream, {starts[-1]:.1f} of {budget_s:.0f} s")

    with Runner(subject=subject) as runner:
        campaign = Campaign(scenarios, jobs=jobs, runner=runner, shard=shard, seed=seed, shrink_budget=shrink_budget,
                            progress=trial_progress, keep_histories=keep_histories, skip_unsupported=skip_unsupported,
                            budget_s=budget_s, clock=clock, seed_stream=True, max_draws=max_draws, on_round=said)
        try:
            result = campaign.run()
        except interrupt.Interrupted as exc:  # it came before the first trial: nothing ran
            result = CampaignResult(trials=[], errors=[], scenarios=[], elapsed_s=clock() - started, jobs=campaign.jobs,
                                    subject=runner.subject, interrupted={"signal": interrupt.signal_text(exc.signum),
                                                                         "planned": 0, "done": 0})
    finished = clock() - started
    log = _round_log(result, campaign.stream.waiting() if campaign.stream is not None else 0)
    for row in log:  # a round's seconds: from its start to the next one's (the last: to the end)
        k = row["round"]
        end = starts[k + 1] if k + 1 < len(starts) else finished
        row["started_s"] = round(starts[k], 3) if k < len(starts) else None
        row["seconds"] = round(max(end - (starts[k] if k < len(starts) else end), 0.0), 3)
    if result.interrupted:
        result.interrupted["round"] = len(log)
    ran = {r.scenario.name: r for r in result.scenarios}
    plan = [_plan_row(s, ran.get(s.name), result) for s in scenarios]
    return GateResult(result=result, budget_s=budget_s, plan=plan, round_log=log, shard=shard, base_seed=seed)


def _round_log(result: CampaignResult, waiting: int) -> list[dict[str, Any]]:
    """One row per round that judged a trial: ``kind`` (``counted``: every trial from its scenario's draw 0;
    ``fresh``: some from a fresh seed), ``seeds``, ``scenarios``, ``trials``, ``fresh_trials`` and
    ``not_started`` (the last round: scenarios still in the stream that the deadline left without its trial);
    :func:`run_gate` adds ``started_s`` and ``seconds``."""
    rows: dict[int, dict[str, Any]] = {}
    for t in result.trials:
        if t.round is None:
            continue
        row = rows.setdefault(t.round, {"round": t.round, "kind": "counted", "seeds": set(), "scenarios": set(),
                                        "trials": 0, "fresh_trials": 0, "not_started": 0})
        row["seeds"].add(t.seed)
        row["scenarios"].add(t.scenario)
        row["trials"] += 1
        if t.draw:
            row["fresh_trials"] += 1
            row["kind"] = "fresh"
    log = [dict(row, seeds=sorted(row["seeds"]), scenarios=len(row["scenarios"])) for _, row in sorted(rows.items())]
    if log:
        log[-1]["not_started"] = waiting
    return log


def _plan_row(scenario: Scenario, run: ScenarioRun | None, result: CampaignResult) -> dict[str, Any]:
    """A scenario's row of the gate's ``plan``: its trials here, their seconds, the rounds it had a trial in,
    trials drawn (all shards), its draws' seeds, and why it left the stream (``budget``: still in it when
    the deadline came)."""
    mine = [t for t in result.trials if t.scenario == scenario.name]
    seeds = run.seeds if run is not None else []
    rounds = sorted({t.round for t in mine if t.round is not None})
    ended = (run.ended if run is not None else "") or ("interrupted" if interrupt.requested() else "budget")
    if run is not None and run.error:
        ended = "error"
    return {"scenario": scenario.name, "path": scenario.path, "trials": len(mine),
            "planned": len(run.plan) if run is not None else 0, "count": scenario.trials.count,
            "seconds": round(sum(t.elapsed_s for t in mine), 3),
            "complete": len(seeds) > 1 or ended in ("plan", "spent", "draws"),
            "error": run.error if run is not None else None, "rounds": len(rounds),
            "last_round": rounds[-1] if rounds else None, "draws": len(seeds), "seeds": seeds,
            "fresh_trials": sum(1 for t in mine if t.draw),
            "ended": ended}


def gate_report(gate: GateResult, report_path: str | None) -> dict[str, Any]:
    """The JSON report of a gate: the campaign report plus ``gate`` (budget, rounds, ``round_log``, seed rule,
    shard, per-scenario ``plan``) and each ``runs`` row's ``round`` and ``draw``.  A scenario that ran no
    trial is under ``scenarios`` too (each checked invariant with ``checked`` 0: a skipped JUnit case)."""
    from harness.checkers.verdict import CHECKERS
    from harness.report.report import campaign_report, empty_counts, empty_scenario

    report = campaign_report(gate.result, report_path)
    streamed = {t.index: t for t in gate.result.trials if t.round is not None}
    for row in report.get("runs", []):
        if row.get("trial") in streamed:
            row["round"], row["draw"] = streamed[row["trial"]].round, streamed[row["trial"]].draw
    for row in gate.plan:
        sc = report["scenarios"].setdefault(row["scenario"], empty_scenario())
        run = next((r for r in gate.result.scenarios if r.scenario.name == row["scenario"]), None)
        for inv in run.scenario.check.invariants if run is not None else ():
            sc["invariants"].setdefault(inv, empty_counts(CHECKERS.get(inv, ("", inv))[1]))
        if row.get("error"):
            sc["error"] = row["error"]
    report["gate"] = {"budget_s": gate.budget_s, "rounds": gate.rounds, "seed": gate.base_seed, "seed_step": SEED_STEP,
                      "round_log": gate.round_log, "shard": f"{gate.shard[0]}/{gate.shard[1]}" if gate.shard else None,
                      "plan": gate.plan}
    return report


def _seeds_text(seeds: list[int]) -> str:
    """A scenario's draws' seeds: ``1`` / ``1, 1001`` / ``1 ... 9001 (10)``."""
    if len(seeds) <= 3:
        return ", ".join(str(s) for s in seeds) or "-"
    return f"{seeds[0]} ... {seeds[-1]} ({len(seeds)})"


def _spread(plan: list[dict[str, Any]]) -> str:
    """The trials per scenario as a range, ``2-3 trial(s) per scenario still drawing`` (those still in the stream
    at the deadline; else every scenario's)."""
    going = [row["trials"] for row in plan if row.get("ended") == "budget"]
    counts = going or [row["trials"] for row in plan if not row.get("error")]
    if not counts:
        return "no trial"
    low, high = min(counts), max(counts)
    return f"{low if low == high else f'{low}-{high}'} trial(s) per scenario" + (" still drawing" if going else "")


#: How the gate line says why scenarios left the stream (``plan`` rows' ``ended``).
_ENDED = {"budget": "still drawing when the deadline came", "spent": "spent (fresh seeds drew no new trial)",
          "error": "on a setup error", "interrupted": "on an interruption", "stopped": "stopped at a violation",
          "skipped": "not run (it cannot apply to this subject, or its uninterrupted run ended wrong)",
          "draws": "at the draw limit", "plan": "at the end of its plan"}


def render_gate_line(report: dict[str, Any]) -> str:
    """One line saying what a gate's budget bought: rounds, trials, trials per scenario, the seeds reached
    and why scenarios left the stream."""
    gate = report.get("gate", {})
    plan = gate.get("plan", [])
    total = sum(row.get("trials", 0) for row in (gate.get("round_log") or []))
    fresh = sum(row.get("fresh_trials", 0) for row in (gate.get("round_log") or []))
    draws = max((row.get("draws", 0) for row in plan), default=0)
    base = gate.get("seed")
    rule = f"{base} + {gate.get('seed_step', SEED_STEP)} j" if base is not None else \
        f"trials.seed + {gate.get('seed_step', SEED_STEP)} j"
    ended = collections.Counter(row.get("ended") or "?" for row in plan)
    why = ", ".join(f"{k} {_ENDED.get(w, w)}" for w, k in sorted(ended.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"gate: {gate.get('rounds', 0)} round(s) in {report.get('elapsed_s', 0):.1f} s of a "
            f"{gate.get('budget_s', 0):.0f} s budget; {total} trial(s), {_spread(plan)}; seeds {rule} for the j-th "
            f"draw, up to {draws} draw(s) a scenario ({fresh} trial(s) from fresh seeds)"
            + (f"; scenarios: {why}" if why else "") + "\n")


def gate_properties(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The gate's JUnit ``<properties>``: the budget, the rounds, and per scenario its trials and the seeds it
    reached."""
    gate = report.get("gate", {})
    return [("gate.budget_s", f"{gate.get('budget_s', 0):g}"), ("gate.rounds", str(gate.get("rounds", 0)))] + [
        (f"gate.{row['scenario']}", f"{row['trials']} trial(s), seeds {_seeds_text(row.get('seeds', []))}, "
                                    f"ended: {row.get('ended')}") for row in gate.get("plan", [])]


def render_gate_markdown(report: dict[str, Any]) -> str:
    """The gate's Markdown summary: the report's (verdict, faults, invariants, violations), what the budget
    bought (:func:`render_gate_line`), a table of rounds and one of scenarios (trials, seeds reached)."""
    from harness.report.report import render_markdown

    gate = report.get("gate", {})
    line = render_gate_line(report).strip().replace("gate: ", "", 1)
    out = [render_markdown(report).rstrip("\n"), "",
           f"Budget {gate.get('budget_s', 0):.0f} s, {gate.get('rounds', 0)} round(s)"
           + (f", shard {gate['shard']}" if gate.get("shard") else "") + ".", "",
           line[:1].upper() + line[1:] + ".", ""]
    log = gate.get("round_log") or []
    if log:
        out += ["| round | kind | seeds | scenarios | trials | not started | seconds |",
                "|---:|---|---|---:|---:|---:|---:|"]
        half = MARKDOWN_ROUNDS // 2
        shown = log if len(log) <= MARKDOWN_ROUNDS else log[:half] + log[-half:]
        for i, row in enumerate(shown):
            if len(log) > MARKDOWN_ROUNDS and i == half:
                out.append(f"| ... | | {len(log) - MARKDOWN_ROUNDS} more round(s) (the JSON report lists every one) "
                           "| | | | |")
            seeds = row.get("seeds") or []
            text = ", ".join(str(s) for s in seeds[:3]) + (", ..." if len(seeds) > 3 else "")
            out.append(f"| {row['round']} | {row['kind']} | {text} | {row['scenarios']} | {row['trials']} | "
                       f"{row['not_started']} | {row.get('seconds', 0):.1f} |")
        out.append("")
    out += ["| scenario | trials | rounds | draws | seeds | invalid | unknown | seconds | ended |",
            "|---|---:|---:|---:|---|---:|---:|---:|---|"]
    scenarios = report.get("scenarios", {})
    for row in gate.get("plan", []):
        sc = scenarios.get(row["scenario"], {})
        note = " (error)" if row.get("error") else ""
        out.append(f"| {row['scenario']}{note} | {row['trials']} | {row.get('rounds', 0)} | {row.get('draws', 0)} | "
                   f"{_seeds_text(row.get('seeds', []))} | {sc.get('invalid_trials', 0)} | "
                   f"{sc.get('unknown_trials', 0)} | {row['seconds']:.1f} | {row.get('ended', '')} |")
    return "\n".join(out) + "\n"
