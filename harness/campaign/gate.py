"""The CI durability gate: the bundled and regression scenarios within a time budget (``fiskj-harness gate``).

A gate *spends* its budget (docs/scenarios.md "The CI gate").  It runs
campaigns in *rounds*; round ``r`` draws every scenario's trials with
campaign seed ``trials.seed + r * SEED_STEP`` (``--seed S``: ``S + r *
SEED_STEP``), and each shard runs its positions of that plan
(:func:`harness.campaign.shard.shard_positions`).

* **Counted rounds** (the deterministic first pass, rounds ``0..R``): round
  ``r`` gives a scenario ``min(left, n * 2**r)`` trials (``n`` = the number
  of shards, ``left`` = what its ``trials.count`` has not had in rounds
  ``0..r-1``); a scenario whose plan is fixed (:func:`fixed_plan`) runs its
  whole plan in round 0.  ``R`` (:func:`counted_rounds`) is the first round
  after which every count is spent; it depends on the counts and ``n`` alone.
* **Fresh rounds** (``r > R``), while budget is left: a scenario with a
  growing plan gets ``trials.count`` trials drawn with the round's seed (new
  hypothesis-drawn schedules, kill points and timed faults, new race
  seeds); a scenario with a fixed plan gets its whole plan drawn with the
  round's seed minus every trial an earlier round planned, compared by
  content (:func:`trial_content`: a crash state's files, a tail mutation's
  bytes, else the schedule).  So power-loss states sampled from windows too
  large to enumerate and the seeded tail cuts and flips are drawn anew,
  while exhaustive kill points, explicit ``[faults] schedule``\\ s and
  io-error points do not change with the seed: such a scenario is *spent*
  once :data:`SPENT_AFTER` fresh rounds in a row plan nothing new.  The workload is the
  scenario's own in every round (its ``[workload] seed``): a fresh round
  varies the faults, never the workload, so every trial replays from its
  scenario file, its seed and its schedule (``replay``, the reproducer).

Budget: round 0 runs whole, so every scenario gets its first trials
whatever the budget.  Every later trial starts only if it can finish within
the budget by the estimate (:func:`_estimate`: the 90th percentile of its
scenario's measured trial durations so far, else of all trials').  A scenario
the budget left a trial of unstarted takes no later round; the gate ends
when no scenario is left, the budget is spent or it is interrupted.  A
trial that has started is not cut short, so a gate can overrun its budget by
about one trial (and the shrinking of a failure found in its last round).
In a round the scenarios run fewest trials first, so where the budget ends
it cuts the scenarios that had most.

Determinism: the content of round ``r`` of a scenario is a function of the
scenarios, ``r`` and ``n`` alone, never of timings; timings only decide
where the budget ends (which trials of the last rounds start, and the round
at which each scenario stops).  So the shards of a gate are disjoint, and
together they are the unsharded gate planned for ``n`` (``round_unit``) up to
where each shard's budget ended: every shard spends its own budget, on its
own machine.

An interruption (SIGINT, SIGTERM: :mod:`harness.campaign.interrupt`) ends the
round that runs as a campaign's interruption does and starts no other; the
result holds the trials of every round so far and says it was interrupted.
"""

from __future__ import annotations

import collections
import hashlib
import json
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from harness.campaign import interrupt
from harness.campaign.campaign import Campaign
from harness.campaign.result import CampaignResult, ScenarioRun, TrialResult
from harness.campaign.shard import shard_positions
from harness.families.base import Planned
from harness.families.registry import by_mode
from harness.names import SEED_STEP
from harness.runner.trial import Runner
from harness.scenario.model import Scenario
from harness.subject.contract import Subject

__all__ = ["GateResult", "run_gate", "gate_report", "render_gate_markdown", "render_gate_line", "fixed_plan",
           "counted_rounds", "trial_content"]

#: The quantile of a scenario's measured trial durations that estimates its next trial's (see :func:`_estimate`).
ESTIMATE_QUANTILE = 0.9

#: Fresh rounds in a row that plan no new trial of a fixed plan before it is spent (a seeded sample can
#: draw only known trials once and new ones with the next seed; an unseeded plan never draws a new one).
SPENT_AFTER = 3

#: Rounds listed one per row in the Markdown summary (the JSON report lists every round).
MARKDOWN_ROUNDS = 12


def fixed_plan(scenario: Scenario) -> bool:
    """True when a scenario's plan does not depend on the trial count (it runs whole, in round 0).

    Exhaustive single-leg crash or suspend points (``kill_points`` or
    ``suspend_points = "events"``, ``legs = 1``), an explicit ``[faults] schedule``, io-error points
    (``max_points``), and the file-fault families (``power_loss``,
    ``tail``), whose crash states and mutations are a function of the seed
    and whose count is a cap on recoveries.
    """
    return by_mode(scenario.faults.family).fixed_plan(scenario)


def counted_rounds(scenarios: list[Scenario], n: int = 1) -> int:
    """``R``: the last counted round, the first after which every scenario's ``trials.count`` is spent
    when round ``r`` gives ``n * 2**r`` trials (a fixed plan: round 0).  ``n`` >= 1; 0 for no scenario."""
    last = 0
    for s in scenarios:
        if fixed_plan(s):
            continue
        r = 0
        while n * (2 ** (r + 1) - 1) < s.trials.count:
            r += 1
        last = max(last, r)
    return last


def _round_size(track: _Track, r: int, n: int, last_counted: int | None = None) -> int:
    """The trials round ``r`` plans for ``track``'s scenario, for ``n`` shards: a function of the scenario,
    ``r``, ``n`` and ``last_counted`` (``R``; ``None``: no fresh round) only.  0: none this round."""
    count = track.scenario.trials.count
    fresh = last_counted is not None and r > last_counted
    if fixed_plan(track.scenario):
        return count if r == 0 or fresh else 0
    before = n * (2 ** r - 1)
    if before < count:
        return min(count - before, n * 2 ** r)
    return count if fresh else 0


def _canon(x: Any) -> Any:
    """``x`` with its sets sorted and its dataclasses, tuples and dicts as plain lists (a stable repr)."""
    if isinstance(x, (set, frozenset)):
        return sorted((_canon(v) for v in x), key=repr)
    if isinstance(x, dict):
        return sorted(((repr(_canon(k)), _canon(v)) for k, v in x.items()), key=lambda kv: kv[0])
    if isinstance(x, (list, tuple)):
        return [_canon(v) for v in x]
    return x


def trial_content(planned: Planned) -> str:
    """What a planned trial does, its seed aside, as a SHA-256 hex digest: its item's content when the item
    carries one (a crash state: ``key()``, its files, directories and acknowledged records; a tail mutation:
    its kind, bytes and expectation; with the strings and flags beside them, e.g. whether a crash state is
    recovered or judged for I4 alone), else its schedule.  Two trials with the same content are the same
    trial, so a fresh round of a fixed plan drops the ones an earlier round planned."""
    items = planned.item if isinstance(planned.item, tuple) else (planned.item,)
    parts: list[Any] = []
    carried = False
    for x in items:
        if callable(getattr(x, "key", None)):
            parts.append(_canon(x.key()))
            carried = True
        elif isinstance(getattr(x, "data", None), bytes):
            parts.append([getattr(x, "kind", None), x.data, getattr(x, "expect", None)])
            carried = True
        elif isinstance(x, (str, bool, int)):
            parts.append(x)
    if not carried:
        parts = [json.dumps(planned.schedule, sort_keys=True, default=str)]
    return hashlib.sha256(repr(parts).encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class _Track:
    scenario: Scenario
    planned: int = 0
    trials: int = 0
    seconds: float = 0.0
    durations: list[float] = field(default_factory=list)
    done: bool = False
    ended: str = ""
    error: str | None = None
    run: ScenarioRun | None = None
    rounds: int = 0
    fresh_trials: int = 0
    last_round: int | None = None
    seen: set[str] = field(default_factory=set)
    pending: set[str] = field(default_factory=set)
    refused: int = 0
    complete: bool = False
    empty_rounds: int = 0

    def per_trial(self) -> float | None:
        return self.seconds / self.trials if self.trials else None


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def _estimate(track: _Track, everyone: list[float]) -> float:
    """Seconds the next trial of ``track`` is expected to take: the :data:`ESTIMATE_QUANTILE` of its measured
    trial durations in this gate, else of every trial's, else 0 (nothing measured yet)."""
    mine = _quantile(track.durations, ESTIMATE_QUANTILE)
    if mine is not None:
        return mine
    return _quantile(everyone, ESTIMATE_QUANTILE) or 0.0


@dataclass
class GateResult:
    """What a gate ran: ``result`` (all rounds as one :class:`CampaignResult`), ``rounds`` (how many ran),
    the budget, per-scenario ``plan`` rows (name, trials run here, planned, done, error, rounds, why it
    ended), ``round_log`` (one row per round: kind, seeds, scenarios, trials, trials the budget left
    unstarted, seconds), ``counted`` (``R + 1``: the rounds that spend the counts), ``trial_rounds``
    (trial index -> its round) and the shard."""

    result: CampaignResult
    rounds: int
    budget_s: float
    plan: list[dict[str, Any]] = field(default_factory=list)
    shard: tuple[int, int] | None = None
    round_log: list[dict[str, Any]] = field(default_factory=list)
    counted: int = 1
    trial_rounds: dict[int, int] = field(default_factory=dict)
    base_seed: int | None = None


def run_gate(scenarios: list[Scenario], *, budget_s: float, jobs: int | None = None, subject: Subject | None = None,
             shard: tuple[int, int] | None = None, seed: int | None = None, shrink_budget: int = 10,
             progress: Callable[[str], None] | None = None, round_unit: int | None = None,
             trial_progress: Callable[[int, int, int], None] | None = None, fresh: bool = True,
             max_rounds: int | None = None, keep_histories: bool = False,
             skip_unsupported: bool = False) -> GateResult:
    """Run the gate over ``scenarios`` (see the module docstring); returns a :class:`GateResult`.

    ``budget_s``: seconds (> 0 in practice; round 0 runs whatever it is).
    ``seed``: replaces every scenario's ``trials.seed`` as the base seed.
    ``progress``: called with one line per round (its kind, seeds, trials).
    ``round_unit``: the ``n`` of the round sizes (default: the number of
    shards), so that an unsharded gate can plan the rounds a sharded one
    does.  ``trial_progress``: each round's campaign's ``progress(done,
    total, failing)`` (:class:`harness.campaign.campaign.Campaign`).
    ``fresh``: False stops when the counts are spent (rounds ``0..R``
    only); ``max_rounds``: at most that many rounds (tests);
    ``keep_histories``: keep every trial's history (``--keep all``); ``skip_unsupported``: a scenario
    that cannot apply to the subject is said ``NOT RUN`` in the limits, not a setup error (the default
    bundled set; :class:`harness.campaign.campaign.Campaign`).
    """
    started = time.monotonic()
    deadline = started + budget_s
    n = round_unit or (shard[1] if shard else 1)
    tracks = [_Track(s) for s in scenarios]
    by_name = {t.scenario.name: t for t in tracks}
    last_counted = counted_rounds(scenarios, n)
    trials: list[TrialResult] = []
    trial_rounds: dict[int, int] = {}
    everyone: list[float] = []
    errors: list[str] = []
    limits: list[str] = []
    log: list[dict[str, Any]] = []
    jobs_used = 1
    cut: dict[str, Any] | None = None
    lock = threading.Lock()
    r = 0
    with interrupt.cooperative(), Runner(subject=subject) as runner:
        while not interrupt.requested():  # no round starts after an interruption
            if (max_rounds is not None and r >= max_rounds) or (not fresh and r > last_counted):
                break
            if r > 0 and time.monotonic() >= deadline:
                break
            candidates = [t for t in tracks if not t.done and t.error is None]
            if not candidates:
                break
            chosen: list[tuple[_Track, int]] = []
            for t in sorted(candidates, key=lambda t: (t.trials, t.scenario.name)):
                size = _round_size(t, r, n, last_counted if fresh else None)
                if size <= 0:
                    continue
                if r > 0 and time.monotonic() + _estimate(t, everyone) > deadline:
                    t.done, t.ended = True, "budget"  # not one more trial of it fits
                    continue
                chosen.append((t, size))
            if not chosen:
                r += 1
                continue
            round_started = time.monotonic()
            estimate = sum(_estimate(t, everyone) * len(shard_positions(size, shard)) for t, size in chosen)
            estimate /= max(jobs or 1, 1)
            round_scenarios = []
            seeds: dict[str, int] = {}
            for t, size in chosen:
                base = seed if seed is not None else t.scenario.trials.seed
                seeds[t.scenario.name] = base + r * SEED_STEP
                round_scenarios.append(replace(t.scenario, trials=replace(t.scenario.trials, count=size,
                                                                         seed=seeds[t.scenario.name])))
                t.pending = set()
                t.refused = 0

            def keep(scenario: Scenario, planned: Planned) -> bool:
                t = by_name[scenario.name]
                if not fixed_plan(t.scenario):
                    return True
                key = trial_content(planned)
                t.pending.add(key)
                return key not in t.seen

            def admit(scenario: Scenario, r: int = r) -> bool:
                if r == 0:
                    return True
                t = by_name[scenario.name]
                with lock:
                    if time.monotonic() + _estimate(t, everyone) <= deadline:
                        return True
                    t.refused += 1
                    return False

            spare = deadline - time.monotonic() - estimate
            campaign = Campaign(round_scenarios, jobs=jobs, runner=runner, shard=shard,
                                shrink_budget=shrink_budget if spare > 0 else 0, progress=trial_progress,
                                keep=keep, admit=admit, keep_histories=keep_histories,
                                skip_unsupported=skip_unsupported)
            try:
                result = campaign.run()
            except interrupt.Interrupted:  # came just before the round started: it ran nothing
                break
            if getattr(result, "interrupted", None):
                cut = dict(result.interrupted, round=r)
            jobs_used = result.jobs
            for err in result.errors:
                if err not in errors:
                    errors.append(err)
            for line in getattr(result, "limits", []):  # said once, whatever the number of rounds
                if line not in limits:
                    limits.append(line)
            mine_total = 0
            for run in result.scenarios:
                t = by_name[run.scenario.name]
                t.rounds += 1
                t.last_round = r
                t.planned += len(run.plan)
                mine_total += len(shard_positions(len(run.plan), shard))
                t.seen |= t.pending
                if run.error:
                    t.error = run.error
                    t.ended = "error"
                elif run.skipped:  # its uninterrupted run ended wrong: judged once, nothing sound to compare with
                    t.done, t.ended = True, "uninterrupted run ended wrong"
                elif fixed_plan(t.scenario) and r > last_counted:
                    t.empty_rounds = 0 if run.plan else t.empty_rounds + 1
                    if t.empty_rounds >= SPENT_AFTER:  # fresh seeds draw no trial an earlier round had not
                        t.done, t.ended = True, "spent"
                if t.refused:
                    t.done, t.ended = True, "budget"
                elif r == _last_of(t, n) and not run.error and not interrupt.requested():
                    t.complete = True  # its count is spent: every trial of its counted rounds ran
                if t.run is None or t.run.reference is None:
                    t.run = run
            offset = len(trials)
            ran = 0
            for tr in result.trials:
                t = by_name.get(tr.scenario)
                if t is not None:
                    t.trials += 1
                    t.seconds += tr.elapsed_s
                    t.durations.append(tr.elapsed_s)
                    t.fresh_trials += r > last_counted
                everyone.append(tr.elapsed_s)
                tr.index += offset
                if tr.shrunk_from is not None:
                    tr.shrunk_from += offset
                trial_rounds[tr.index] = r
                trials.append(tr)
                ran += 1
            refused = sum(t.refused for t, _ in chosen)
            distinct = sorted(set(seeds.values()))
            row = {"round": r, "kind": "fresh" if r > last_counted else "counted", "seed_offset": r * SEED_STEP,
                   "seeds": distinct, "scenarios": len(chosen), "planned": mine_total, "trials": ran,
                   "not_started": refused, "seconds": round(time.monotonic() - round_started, 3)}
            log.append(row)
            if progress is not None:
                progress(_round_line(row, time.monotonic() - started, budget_s))
            if cut is not None:
                break
            r += 1
        subject_used = runner.subject
    for t in tracks:  # why the ones still going stopped
        if t.ended:
            continue
        if interrupt.requested():
            t.ended = "interrupted"
        elif max_rounds is not None and r >= max_rounds:
            t.ended = "max rounds"
        elif not fresh and r > last_counted:
            t.ended = "count"
        else:
            t.ended = "budget"
    scenario_runs = [t.run or ScenarioRun(scenario=t.scenario, seed=t.scenario.trials.seed, error=t.error)
                     for t in tracks]
    merged = CampaignResult(trials=trials, errors=errors, scenarios=scenario_runs,
                            elapsed_s=time.monotonic() - started, jobs=jobs_used, subject=subject_used,
                            limits=limits)
    if cut is None and interrupt.requested():  # between two rounds
        cut = {"signal": interrupt.signal_name(interrupt.signum() or 2), "planned": len(trials), "done": len(trials),
               "round": len(log)}
    elif cut is not None:  # the rounds before the interrupted one ran whole
        cut.update(planned=len(trials) - cut["done"] + cut["planned"], done=len(trials))
    merged.interrupted = cut  # type: ignore[attr-defined]
    plan = [{"scenario": t.scenario.name, "path": t.scenario.path, "trials": t.trials, "planned": t.planned,
             "count": t.scenario.trials.count, "seconds": round(t.seconds, 3),
             "complete": t.complete,
             "error": t.error, "rounds": t.rounds, "fresh_trials": t.fresh_trials, "last_round": t.last_round,
             "ended": t.ended}
            for t in tracks]
    return GateResult(result=merged, rounds=len(log), budget_s=budget_s, plan=plan, shard=shard, round_log=log,
                      counted=last_counted + 1, trial_rounds=trial_rounds, base_seed=seed)


def _last_of(track: _Track, n: int) -> int:
    """The round in which ``track``'s count is spent (0 for a fixed plan)."""
    return counted_rounds([track.scenario], n)


def _seed_text(seeds: list[int], offset: int) -> str:
    """How a round's seeds read: ``seed 9001`` when there is one, else the rule and a few of them."""
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    shown = ", ".join(str(s) for s in seeds[:4]) + (", ..." if len(seeds) > 4 else "")
    return f"seeds trials.seed + {offset} ({shown})"


def _round_line(row: dict[str, Any], elapsed: float, budget_s: float) -> str:
    """The progress line of one round."""
    cut = f", {row['not_started']} not started (budget)" if row["not_started"] else ""
    return (f"round {row['round']} ({row['kind']}, {_seed_text(row['seeds'], row['seed_offset'])}): "
            f"{row['scenarios']} scenario(s), {row['trials']} trial(s){cut}, {elapsed:.1f} of {budget_s:.0f} s")


def gate_report(gate: GateResult, report_path: str | None) -> dict[str, Any]:
    """The JSON report of a gate: the campaign report plus ``gate`` (budget, rounds, ``counted_rounds``,
    ``round_log``, shard, per-scenario plan), and each ``runs`` row's ``round``.

    Every scenario appears under ``scenarios``, also one that ran no trial
    within the budget (``trials`` 0, each checked invariant with ``checked``
    0), so the JUnit file has a (skipped) test case for it.
    """
    from harness.checkers.verdict import CHECKERS
    from harness.report.report import campaign_report

    report = campaign_report(gate.result, report_path)
    for row in report.get("runs", []):
        if isinstance(row.get("trial"), int) and row["trial"] in gate.trial_rounds:
            row["round"] = gate.trial_rounds[row["trial"]]
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
    report["gate"] = {"budget_s": gate.budget_s, "rounds": gate.rounds, "counted_rounds": gate.counted,
                      "seed": gate.base_seed, "seed_step": SEED_STEP, "round_log": gate.round_log,
                      "shard": f"{gate.shard[0]}/{gate.shard[1]}" if gate.shard else None, "plan": gate.plan}
    return report


def render_gate_line(report: dict[str, Any]) -> str:
    """One line saying what a gate's budget bought: rounds (counted, fresh), trials, trials the budget left
    unstarted, and the seeds (each trial's own is in the report's ``runs``)."""
    gate = report.get("gate", {})
    log = gate.get("round_log") or []
    counted = [r for r in log if r.get("kind") == "counted" and r.get("trials")]
    fresh = [r for r in log if r.get("kind") == "fresh" and r.get("trials")]
    total = sum(r.get("trials", 0) for r in log)
    parts = [f"gate: {len(log)} round(s) in {report.get('elapsed_s', 0):.1f} s of a {gate.get('budget_s', 0):.0f} s "
             f"budget"]
    if counted:
        parts.append(f"{_rounds(counted)} the scenarios' counts ({sum(r['trials'] for r in counted)} trial(s))")
    if fresh:
        parts.append(f"{_rounds(fresh)} fresh seeds ({sum(r['trials'] for r in fresh)} trial(s))")
    not_started = sum(r.get("not_started", 0) for r in log)
    base = gate.get("seed")
    step = gate.get("seed_step", SEED_STEP)
    rule = f"{base} + {step} x round" if base is not None else f"each scenario's trials.seed + {step} x round"
    ended = collections.Counter(row.get("ended") or "?" for row in gate.get("plan", []))
    why = ", ".join(f"{k} {_ENDED.get(why, why)}" for why, k in sorted(ended.items(), key=lambda kv: (-kv[1], kv[0])))
    return (", ".join(parts) + f"; {total} trial(s)"
            + (f", {not_started} not started (the budget ended)" if not_started else "") + f"; seeds {rule}"
            + (f"; scenarios stopped: {why}" if why else "") + "\n")


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


#: How the gate line says why scenarios stopped (``plan`` rows' ``ended``).
_ENDED = {"budget": "when the budget had no room for their next trial", "spent": "with every trial their plan can "
          "draw already run", "count": "at their trials.count", "error": "on a setup error",
          "interrupted": "on an interruption", "max rounds": "at the round limit"}


def _rounds(rows: list[dict[str, Any]]) -> str:
    """``round 3`` or ``rounds 0-3`` (rounds that ran no trial are not counted)."""
    return ("round " if len(rows) == 1 else "rounds ") + _span(rows)


def _span(rows: list[dict[str, Any]]) -> str:
    first, last = rows[0]["round"], rows[-1]["round"]
    return str(first) if first == last else f"{first}-{last}"


def render_gate_markdown(report: dict[str, Any]) -> str:
    """The gate's Markdown summary: the report's (verdict, faults, invariants, violations), what the budget
    bought (:func:`render_gate_line`), a table of rounds and one of scenarios."""
    from harness.report.report import render_markdown

    gate = report.get("gate", {})
    out = [render_markdown(report).rstrip("\n"), "",
           f"Budget {gate.get('budget_s', 0):.0f} s, {gate.get('rounds', 0)} round(s)"
           + (f", shard {gate['shard']}" if gate.get("shard") else "") + ".", "",
           _sentence(render_gate_line(report).strip().replace("gate: ", "", 1)), ""]
    log = gate.get("round_log") or []
    if log:
        out += ["| round | kind | seeds | scenarios | trials | not started | seconds |",
                "|---:|---|---|---:|---:|---:|---:|"]
        shown = log if len(log) <= MARKDOWN_ROUNDS else log[:MARKDOWN_ROUNDS // 2] + log[-MARKDOWN_ROUNDS // 2:]
        for i, row in enumerate(shown):
            if len(log) > MARKDOWN_ROUNDS and i == MARKDOWN_ROUNDS // 2:
                out.append(f"| ... | | {len(log) - MARKDOWN_ROUNDS} more round(s) (the JSON report lists every one) "
                           "| | | | |")
            seeds = row.get("seeds") or []
            text = ", ".join(str(s) for s in seeds[:3]) + (", ..." if len(seeds) > 3 else "")
            out.append(f"| {row['round']} | {row['kind']} | {text} | {row['scenarios']} | {row['trials']} | "
                       f"{row['not_started']} | {row['seconds']:.1f} |")
        out.append("")
    out += ["| scenario | trials | of | rounds | fresh | invalid | unknown | seconds |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    scenarios = report.get("scenarios", {})
    for row in gate.get("plan", []):
        sc = scenarios.get(row["scenario"], {})
        note = " (error)" if row.get("error") else ""
        out.append(f"| {row['scenario']}{note} | {row['trials']} | {row['count']} | {row.get('rounds', 0)} | "
                   f"{row.get('fresh_trials', 0)} | {sc.get('invalid_trials', 0)} | {sc.get('unknown_trials', 0)} | "
                   f"{row['seconds']:.1f} |")
    return "\n".join(out) + "\n"
