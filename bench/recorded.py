"""Section 3d of the bench (issue 27): crash points judged per second, every point killed for real (the old
way) next to the recorded way (leg 0 materialized from one uninterrupted run, one resume per distinct state),
per subject, side by side in one run, and where each way's time goes."""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from bench.common import median, row
from bench.meter import Meter

#: The subjects of the recorded-kills bench, in run order (:func:`bench_recorded`): the reference through its
#: IO seam, observed from outside, the Node.js agent, and two real agents (each when installed).
RECORDED_MODES = ("reference, IO seam", "reference, observed (black-box)", "foreign subject (Node.js), observed",
                  "Claude Code, observed", "LangGraph agent, observed")
#: The real agents' modes: their old way is bounded to a seeded sample of the plan's points.
AGENT_MODES = RECORDED_MODES[3:]
#: The parts of a trial's time the breakdown shows, in order (:func:`_meter`); ``recording run`` is the one
#: uninterrupted run (both ways need it: the plan is made from it), measured once per mode, as is the start of
#: the fork servers the trials' threads take over (forked legs; ``warm_s``).
PARTS = ("materializing states", "agent legs (waiting on the agent)", "process starts", "readings",
         "checkers", "waiting on a shared resume", "trial set-up and read-back", "rest of a trial")

_ROOT = Path(__file__).resolve().parents[1]


def agent_subject(mode: str, environ: dict[str, str] | None = None) -> tuple[str | None, str]:
    """The ``--subject`` value of a mode's subject and ``""``, or ``None`` and why it cannot run here."""
    from harness.selftest.targets import FOREIGN_SUBJECT

    env = os.environ if environ is None else environ
    if mode.startswith("foreign"):
        return (FOREIGN_SUBJECT.replace("subjects/", f"{_ROOT}/subjects/"), "") if shutil.which("node") \
            else (None, "node is not installed")
    if mode.startswith("Claude Code"):
        claude = env.get("FISKJ_CLAUDE_CODE") or str(_ROOT / ".cache/claude-code/node_modules/.bin/claude")
        if not os.access(claude, os.X_OK):
            return None, "Claude Code is not installed (export FISKJ_CLAUDE_CODE=\"$(scripts/install-claude-code.sh)\")"
        return f"FISKJ_CLAUDE_CODE={claude} {_ROOT}/subjects/claude-code/profile.toml", ""
    if mode.startswith("LangGraph"):
        python = env.get("FISKJ_LANGGRAPH_PYTHON") or str(_ROOT / ".cache/langgraph/bin/python")
        if not os.access(python, os.X_OK):
            return None, ("the LangGraph environment is not installed "
                          "(export FISKJ_LANGGRAPH_PYTHON=\"$(scripts/install-langgraph.sh)\")")
        return f"FISKJ_LANGGRAPH_PYTHON={python} {_ROOT}/subjects/langgraph/profile.toml", ""
    return None, ""


def _runner(mode: str, spec: str | None) -> Any:
    from harness.runner.trial import Runner
    from harness.subject.profile import resolve_subject

    if mode == RECORDED_MODES[0]:
        return Runner(observe=False)
    if mode == RECORDED_MODES[1]:
        return Runner(observe=True)
    return Runner(resolve_subject(spec))


def _meter() -> Meter:
    """The harness's functions a recorded or a real-kill trial spends its time in, each under its part of
    :data:`PARTS` (exclusive time: a leg's reading is a reading, not the leg's)."""
    from harness.campaign import campaign
    from harness.families.signals import family, recorded
    from harness.runner import leg, trial

    m = Meter()
    for owner in (recorded, family):
        m.wrap(owner, "prelude", PARTS[0])
    m.wrap(recorded, "state_key", PARTS[0]).wrap(trial, "lay_files", PARTS[0])
    m.wrap(trial.Runner, "_lay_prelude", PARTS[0])
    m.wrap(trial, "run_leg", PARTS[1])
    m.wrap(leg.LegStarter, "start", PARTS[2]).wrap(leg.LegStarter, "_start_plain", PARTS[2])
    m.wrap(leg.LegStarter, "read", PARTS[3])
    m.wrap(campaign, "check_all", PARTS[4])
    m.wrap(recorded.Recorder, "trial", PARTS[5])
    m.wrap(trial.Runner, "_run", PARTS[6])
    m.wrap(campaign.Campaign, "_judge", PARTS[7])
    return m


def _way(snapshot: dict[str, Any], wall: float, points: int) -> dict[str, Any]:
    """One way's time of one round: thread-seconds per part, the wall time, the points and the counts."""
    secs, calls, under = snapshot["seconds"], snapshot["calls"], snapshot["under"]
    return {"wall_s": wall, "points": points, "thread_s": {p: secs.get(p, 0.0) for p in PARTS},
            "legs": calls.get(PARTS[1], 0), "readings_asked": calls.get(PARTS[3], 0),
            "readings_started": under.get(f"{PARTS[2]}<{PARTS[3]}", 0),
            "process_starts": sum(n for k, n in under.items()
                                  if k.startswith(PARTS[2] + "<") and not k.endswith("<" + PARTS[2])),
            "checked": calls.get(PARTS[4], 0)}


def _old_sample(plan: list[Any], n: int | None, seed: int) -> list[Any]:
    """``plan``'s points the old way kills for real: all of them, or a seeded sample of ``n`` in plan order."""
    if n is None or len(plan) <= n:
        return list(plan)
    keep = set(random.Random(seed).sample(range(len(plan)), n))
    return [p for i, p in enumerate(plan) if i in keep]


def bench_recorded(*, rounds: int = 2, scenario_name: str = "kill-every-event", jobs: int | None = None,
                   modes: tuple[str, ...] = RECORDED_MODES[:4], agent_sample: int = 8, agent_rounds: int = 1,
                   seed: int = 27) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Section 3d (issue 27): crash points judged per second on ``scenario_name``'s plan, the old way (every
    point killed for real: the one leg runner runs the agent up to it, then the resume; the checkers judge)
    next to the recorded way (the campaign: leg 0 materialized from the uninterrupted run, one resume per
    distinct state), interleaved over ``rounds``, per subject mode of :data:`RECORDED_MODES`; returns
    (rows, details).  A real agent's (:data:`AGENT_MODES`) old way kills a seeded sample of ``agent_sample``
    of the plan's points (the recorded way judges the whole plan, those points included), over
    ``agent_rounds`` rounds.  ``details["recorded_breakdown"]``: where each way's time went per mode
    (:func:`breakdown_table`).  A mode whose subject is not installed is left out with a row that says so."""
    from harness.scenario.parse import bundled_scenario_dir, load_scenario

    scenario = load_scenario(bundled_scenario_dir() / f"{scenario_name}.toml")
    jobs = jobs or os.cpu_count() or 1
    rows: list[dict[str, Any]] = []
    details: dict[str, Any] = {"skipped": {}}
    specs: dict[str, str | None] = {}
    for mode in modes:
        if mode not in RECORDED_MODES:
            raise ValueError(f"unknown recorded-bench mode {mode!r}; known: {', '.join(RECORDED_MODES)}")
        spec, why = agent_subject(mode)
        if why:
            details["skipped"][mode] = why
            rows.append(row("recorded", f"{scenario_name}: crash points judged/s, recorded vs real kills, {mode}: "
                                        "not measured", None, note=why))
        else:
            specs[mode] = spec
    stats: dict[str, dict[str, Any]] = {m: {"old": [], "recorded": [], "resumes": [], "resumed_s": [], "shared_s": [],
                                           "legs": [], "legs_s": [], "recording_s": [], "warm_s": [],
                                           "ways": {"old": [], "recorded": []}} for m in specs}
    meter = _meter()
    with meter:
        for k in range(max(1, rounds)):
            for mode, spec in specs.items():
                agent = mode in AGENT_MODES
                if agent and k >= agent_rounds:
                    continue
                # A fresh runner a round: each round is a campaign from cold (its recording run, no reading or
                # probe shared from an earlier round's identical states, as one runner would share them).
                with _runner(mode, spec) as runner:
                    _round(runner, scenario, stats[mode], meter, jobs=jobs, seed=seed + k,
                           sample=agent_sample if agent else None)
    for mode, s in stats.items():
        old, rec = median(s["old"]), median(s["recorded"])
        met = rec >= 50 if mode == RECORDED_MODES[0] else rec >= 5 * old
        sampled = (f"the old way on a seeded sample of {s['old_points']} of the {s['points']} points (the same "
                   f"points judged both ways: the recorded way judges every point), "
                   if s["old_sampled"] else "")
        once = median(s["recording_s"]) + median(s["warm_s"])
        rec_all = s["points"] / (s["points"] / rec + once)
        per_round = ", ".join(f"{r / o:.1f}x" for r, o in zip(s["recorded"], s["old"]))
        target = ">= 50/s" if mode == RECORDED_MODES[0] else ">= 5x the real kills"
        rows.append(row("recorded", f"{scenario_name}: crash points judged/s, recorded vs real kills, {mode}", rec,
                        old, unit="points/s", target=target, met=met,
                        note=f"{sampled}median of {len(s['old'])} round(s), interleaved, each from cold (a fresh "
                             f"runner; per round {per_round}); {s['points']} points, {median(s['resumes']):g} resumes "
                             f"run (one per distinct state); a trial that ran a "
                             f"resume {median(s['resumed_s']) * 1e3:.0f} ms (its {median(s['legs']):g} agent legs "
                             f"{median(s['legs_s']) * 1e3:.0f} ms), one judged on a shared resume "
                             f"{(median(s['shared_s']) if s['shared_s'] else 0.0) * 1e3:.1f} ms; with the recording "
                             f"run ({median(s['recording_s']):.1f} s) and the fork servers' start "
                             f"({median(s['warm_s']):.1f} s), once a campaign, {rec_all:.1f} points/s"))
    details["recorded"] = stats
    details["recorded_breakdown"] = breakdown(stats)
    return rows, details


def _round(runner: Any, scenario: Any, s: dict[str, Any], meter: Meter, *, jobs: int, seed: int,
           sample: int | None) -> None:
    """One round of one mode on a fresh ``runner``: the recording run, the fork server started (when legs are
    forked: :meth:`harness.runner.starter.LegStarter.prepare`; each way's threads share it, so neither way's
    time holds a fork server's start), the old way (``sample``: on a seeded sample of
    that many points), then the recorded way (the campaign), each way's time by part from ``meter``; appended
    to ``s``."""
    from concurrent.futures import ThreadPoolExecutor

    from harness.campaign.campaign import Campaign
    from harness.checkers import check_all
    from harness.families.signals.family import SIGNALS

    t = time.perf_counter()
    ref = runner.reference(scenario)  # the recording run: both ways plan from it
    s["recording_s"].append(time.perf_counter() - t)
    t = time.perf_counter()
    runner.legs.prepare()  # the fork server, once a campaign as the recording run: not a point's time either way
    s["warm_s"].append(time.perf_counter() - t)
    plan = SIGNALS.plan(scenario, ref, scenario.trials.count, scenario.trials.seed, None)
    old_plan = _old_sample(plan, sample, seed)
    inv = list(scenario.check.invariants)
    judge = meter.timed(PARTS[4], check_all)
    trial = meter.timed(PARTS[7], lambda p: judge(runner.run_trial(scenario, p.seed, p.schedule), inv))
    meter.reset()
    t = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:  # the old way: a real kill at every point
        list(pool.map(trial, old_plan))
    wall = time.perf_counter() - t
    s["old"].append(len(old_plan) / wall)
    s["ways"]["old"].append(_way(meter.snapshot(), wall, len(old_plan)))
    meter.reset()
    t = time.perf_counter()
    result = Campaign([scenario], jobs=jobs, runner=runner, shrink_budget=0, keep_histories=True).run()
    wall = time.perf_counter() - t
    if result.errors:
        raise RuntimeError(f"campaign errors: {result.errors}")
    s["recorded"].append(len(result.trials) / wall)
    s["ways"]["recorded"].append(_way(meter.snapshot(), wall, len(result.trials)))
    ran = [r for r in result.trials if r.faults.get("crash_resumes")]
    s["resumes"].append(len(ran))
    s["resumed_s"] += [r.elapsed_s for r in ran]
    s["legs_s"] += [sum(lg.t_end - lg.t_start for lg in r.history.legs[1:] if not lg.fault.detail.get("shared")) / 1e9
                    for r in ran if r.history]
    s["legs"] += [sum(not lg.fault.detail.get("shared") for lg in r.history.legs[1:]) for r in ran if r.history]
    s["shared_s"] += [r.elapsed_s for r in result.trials if not r.faults.get("crash_resumes")]
    s["points"], s["old_points"], s["old_sampled"] = len(result.trials), len(old_plan), len(old_plan) < len(plan)


def breakdown(stats: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per mode and way (``"MODE / old"``, ``"MODE / recorded"``), from the last round: thread-ms per point of
    each part of :data:`PARTS` and its share of the parts' sum, wall ms per point, and the counts."""
    out: dict[str, dict[str, Any]] = {}
    for mode, s in stats.items():
        for way in ("old", "recorded"):
            if not s["ways"][way]:
                continue
            w = s["ways"][way][-1]
            n = max(1, w["points"])
            total = sum(w["thread_s"].values()) or 1e-9
            out[f"{mode} / {way}"] = {
                "points": w["points"], "wall_ms_per_point": w["wall_s"] / n * 1e3,
                "parts_ms_per_point": {p: v / n * 1e3 for p, v in w["thread_s"].items()},
                "shares": {p: v / total for p, v in w["thread_s"].items()},
                "recording_s": s["recording_s"][-1], "warm_s": s["warm_s"][-1], "legs": w["legs"],
                "readings_asked": w["readings_asked"],
                "readings_started": w["readings_started"], "process_starts": w["process_starts"],
                "resumes": s["resumes"][-1] if way == "recorded" else None}
    return out


def breakdown_table(parts: dict[str, dict[str, Any]], markdown: bool = False) -> str:
    """:func:`breakdown`'s figures as a table: one row per part (thread-ms a point and share), one column per
    mode and way, then the counts."""
    cols = list(parts)
    if not cols:
        return ""
    short = {RECORDED_MODES[0]: "ref seam", RECORDED_MODES[1]: "ref black-box", RECORDED_MODES[2]: "Node.js",
             RECORDED_MODES[3]: "Claude Code", RECORDED_MODES[4]: "LangGraph"}
    head = ["per point (thread-ms, share)"] + [f"{short.get(c.split(' / ')[0], c)} {c.split(' / ')[1]}" for c in cols]
    body = [["recording run, once a campaign (s)"] + [f"{parts[c]['recording_s']:.1f}" for c in cols],
            ["fork servers' start, once a campaign (s)"] + [f"{parts[c]['warm_s']:.1f}" for c in cols]]
    for p in PARTS:
        body.append([p] + [f"{parts[c]['parts_ms_per_point'][p]:.1f} ({parts[c]['shares'][p]:.0%})" for c in cols])
    body.append(["sum of parts (thread-ms)"] + [f"{sum(parts[c]['parts_ms_per_point'].values()):.1f}" for c in cols])
    body.append(["wall ms a point"] + [f"{parts[c]['wall_ms_per_point']:.1f}" for c in cols])
    body.append(["points judged"] + [str(parts[c]["points"]) for c in cols])
    body.append(["resumes run (distinct states)"] + ["-" if parts[c]["resumes"] is None else str(parts[c]["resumes"])
                                                     for c in cols])
    body.append(["agent legs run"] + [str(parts[c]["legs"]) for c in cols])
    body.append(["readings asked / processes"] + [f"{parts[c]['readings_asked']} / {parts[c]['readings_started']}"
                                                  for c in cols])
    body.append(["process starts (legs + readings)"] + [str(parts[c]["process_starts"]) for c in cols])
    if markdown:
        return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                         + ["| " + " | ".join(b) + " |" for b in body])
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *body])
