"""Section 3 of the bench: kill-campaign trials/s and its per-trial costs; power-loss crash states/s."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import fs_type, median, row



# --- 3. campaign -----------------------------------------------------------------------------------

_POWER_LOSS_TOML = '''
name = "bench-power-loss"
purpose = "the power-loss bench: the small workload of tests/test_powerloss.py"
[workload]
turns = 1
tools_per_turn = 2
[faults]
family = "power_loss"
[trials]
count = 40
seed = 3
timeout_s = 60
'''


def _time_cmd(argv: list[str], n: int, env: dict[str, str] | None = None, stdin: bytes | None = None) -> float:
    """Median wall seconds of running ``argv`` to completion ``n`` times."""
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(argv, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
        out.append(time.perf_counter() - t)
    return median(out)


def _run_cpu(argv: list[str], env: dict[str, str], stdin: bytes) -> tuple[float, float]:
    """Run ``argv`` once to completion: (wall seconds, CPU seconds of the child, user + system)."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    proc.stdin.write(stdin)
    proc.stdin.close()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime


def ledger_tool_costs(directory: str | None, n: int = 200) -> dict[str, float]:
    """Median seconds of one ledger tool run: ``{"c": wall, "python": wall, "c_cpu": cpu, "python_cpu": cpu}``.

    ``n`` runs of each, interleaved (so both see the same load), on one ledger in ``directory`` (the
    trials' file system), with a tool input as harness/workload/server.py sends it (the compiled
    tool's fast path; ``[BINARY, python, SCRIPT, NAME]``, as the agents run it).  CPU is the
    child's user + system time (``wait4``)."""
    from harness.workload.build import ledger_tool_path
    from harness.workload.ledger_build import ledger_binary

    python = os.path.realpath(sys.executable)
    tools = {"c": [str(ledger_binary()), python, ledger_tool_path(), "effect_a"],
             "python": [python, "-I", "-S", ledger_tool_path(), "effect_a"]}
    ledger_dir = tempfile.mkdtemp(prefix="fiskj-bench-ledger-", dir=directory)
    try:
        env = {"FISKJ_LEDGER": os.path.join(ledger_dir, "ledger.jsonl"), "FISKJ_HARNESS_LEG": "0",
               "PATH": os.environ.get("PATH", "")}
        stdin = b'{"tool_use_id": "toolu_01_0_0", "n": 3, "sleep_ms": 0}'
        runs: dict[str, list[tuple[float, float]]] = {kind: [] for kind in tools}
        for _ in range(n):
            for kind, argv in tools.items():
                runs[kind].append(_run_cpu(argv, env, stdin))
        costs = {kind: median(w for w, _ in rs) for kind, rs in runs.items()}
        costs.update({f"{kind}_cpu": median(c for _, c in rs) for kind, rs in runs.items()})
        return costs
    finally:
        shutil.rmtree(ledger_dir, ignore_errors=True)


def _fork_exit(n: int) -> float:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        out.append(time.perf_counter() - t)
    return median(out)


def _fsync_latency(directory: str, n: int = 50) -> float:
    fd, path = tempfile.mkstemp(prefix="fiskj-bench-fsync-", dir=directory)
    try:
        out = []
        for _ in range(n):
            os.write(fd, b"x" * 300)
            t = time.perf_counter()
            os.fsync(fd)
            out.append(time.perf_counter() - t)
        return median(out)
    finally:
        os.close(fd)
        os.unlink(path)


def _model_call_latency(server: Any, n: int = 30) -> float:
    from fiskj.model import AnthropicClient
    from harness.workload.server import Script, Turn, api_key

    session = server.open_session(Script(seed=1, turns=(Turn(text="hi"),)))
    try:
        client = AnthropicClient(server.base_url, api_key(session.token, 0))
        request = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "hello"}]}
        client.complete(request)
        out = []
        for _ in range(n):
            t = time.perf_counter()
            client.complete(request)
            out.append(time.perf_counter() - t)
        return median(out)
    finally:
        server.close_session(session.token)


def bench_campaign(*, trials: int = 24, scenario_name: str = "kill-every-event", jobs: int | None = None,
                   probe_n: int = 10, repeats: int = 1, tool_runs: int = 200) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Section 3a: a kill campaign's trials/s and the share of each cost per trial; returns (rows, details).

    The ledger tool in the shares is the one the campaign ran (``$FISKJ_LEDGER_TOOL``, default the
    compiled tool); both tools' cost per run is measured side by side (:func:`ledger_tool_costs`)."""
    from harness.campaign.campaign import Campaign
    from harness.checkers import check_all
    from harness.runner.trial import Runner
    from harness.scenario.parse import bundled_scenario_dir, load_scenario
    from harness.workload.build import ledger_tool

    scenario = load_scenario(bundled_scenario_dir() / f"{scenario_name}.toml")
    jobs = jobs or os.cpu_count() or 1
    rows, details = [], {}
    with Runner() as runner:
        runner.reference(scenario)  # once, outside the timed campaigns (cached per runner)
        done, rates, wall = [], [], 0.0
        for _ in range(max(1, repeats)):
            t = time.perf_counter()
            result = Campaign([scenario], trials=trials, jobs=jobs, runner=runner, shrink_budget=0,
                              keep_histories=True).run()
            elapsed = time.perf_counter() - t
            if result.errors:
                raise RuntimeError(f"campaign errors: {result.errors}")
            done += result.trials
            rates.append(len(result.trials) / elapsed)
            wall += elapsed
        histories = [r.history for r in done if r.history is not None]
        # what one trial does, counted from its history
        legs = median(len(h.legs) for h in histories)
        tools = median(len(h.effects) for h in histories)
        calls = median(len(h.model_calls) for h in histories)
        syncs = median(sum(1 for leg in h.legs for ev in leg.trace if ev.get("op") in ("fsync", "fdatasync", "fsync_dir"))
                       for h in histories)
        trial_s = median(r.elapsed_s for r in done)
        legs_s = median(sum((leg.t_end - leg.t_start) / 1e9 for leg in h.legs) for h in histories)
        # each cost on its own
        check_s = []
        for h in histories:
            c = time.perf_counter()
            check_all(h, list(scenario.check.invariants))
            check_s.append(time.perf_counter() - c)
        py = sys.executable
        start_plain = _time_cmd([py, "-c", "pass"], probe_n)
        start_isolated = _time_cmd([py, "-I", "-S", "-c", "pass"], probe_n)
        start_fiskj = _time_cmd([py, "-c", "import fiskj.cli, fiskj.cli_run, fiskj.loop, fiskj.store"], probe_n)
        fork = _fork_exit(probe_n * 3)
        tool_costs = ledger_tool_costs(runner.tmp_root, n=tool_runs)
        tool = ledger_tool()  # the one the campaign's agents ran
        tool_s = tool_costs[tool.kind]
        model_s = _model_call_latency(runner.server, probe_n * 3)
        fsync_s = _fsync_latency(runner.tmp_root or tempfile.gettempdir())
        leg_start = fork if runner.fork_server else start_fiskj
    lo, hi = scenario.workload.tool_ms
    sleep_s = (lo + hi) / 2 / 1000
    inside = {
        "leg start (" + ("fork server" if runner.fork_server else "interpreter + imports") + ")": legs * leg_start,
        f"tool processes ({tool.kind} ledger tool + ledger fsync)": tools * tool_s,
        "tool sleep (scripted)": tools * sleep_s,
        "model server round trips": calls * model_s,
        f"fsync ({fs_type(runner.tmp_root or tempfile.gettempdir())})": syncs * fsync_s,
    }
    parts = dict(inside)
    parts["rest of the legs (fiskj CLI, loop, journal, trace; CPU contention)"] = max(0.0, legs_s - sum(inside.values()))
    parts["checking (check_all)"] = median(check_s)
    accounted = sum(parts.values())
    tps = median(rates)
    details["campaign"] = {"scenario": scenario.name, "trials": len(done), "jobs": jobs, "wall_s": wall,
                           "trials_per_s_runs": rates,
                           "trials_per_s": tps, "trial_median_s": trial_s, "legs_median_s": legs_s, "per_trial": {
                               "legs": legs, "tool_runs": tools, "model_calls": calls, "fsyncs": syncs},
                           "unit_costs_s": {"python -c pass": start_plain, "python -I -S -c pass": start_isolated,
                                            "python + fiskj imports": start_fiskj, "fork+exit": fork,
                                            "ledger tool run": tool_s, "ledger tool run (c)": tool_costs["c"],
                                            "ledger tool run (python)": tool_costs["python"],
                                            "ledger tool run CPU (c)": tool_costs["c_cpu"],
                                            "ledger tool run CPU (python)": tool_costs["python_cpu"],
                                            "model call": model_s, "fsync": fsync_s,
                                            "check_all": median(check_s)},
                           "shares": {k: v / trial_s for k, v in parts.items()},
                           "fork_server": runner.fork_server, "tmp_root": runner.tmp_root,
                           "ledger_tool": {"kind": tool.kind, "reason": tool.reason, "runs": tool_runs}}
    rows.append(row("campaign", f"{scenario.name}: trials/s ({jobs} jobs)", tps, None, unit="trials/s",
                    target=">= 20/s", met=tps >= 20,
                    note=f"median of {len(rates)} campaign(s), {len(done)} trials in {wall:.1f} s (the plan: a kill "
                         f"after each IO-seam event); median trial {trial_s * 1e3:.0f} ms "
                         f"({legs:g} legs, {tools:g} tool runs, {calls:g} model calls, {syncs:g} fsyncs)"))
    rows.append(row("campaign", "  ledger tool run: compiled fast path (c) vs python -I -S", tool_costs["c"] * 1e3,
                    tool_costs["python"] * 1e3, unit="ms/run", ratio=tool_costs["c"] / tool_costs["python"],
                    note=f"wall, median of {tool_runs} runs each, interleaved; the campaign ran the {tool.kind} tool "
                         f"({tool.reason})"))
    rows.append(row("campaign", "  ledger tool run CPU: compiled fast path (c) vs python -I -S",
                    tool_costs["c_cpu"] * 1e3, tool_costs["python_cpu"] * 1e3, unit="ms CPU/run",
                    ratio=tool_costs["c_cpu"] / max(tool_costs["python_cpu"], 1e-9),
                    note=f"user + system of the tool process (wait4), median of the same {tool_runs} runs"))
    for name, cost in parts.items():
        rows.append(row("campaign", f"  share: {name}", cost * 1e3, None, unit="ms/trial",
                        ratio=cost / trial_s, note=f"{cost / trial_s:.0%} of a median trial"))
    rows.append(row("campaign", "  share: harness outside the legs (setup, reading, folding, waits)",
                    max(0.0, trial_s - accounted) * 1e3, None, unit="ms/trial",
                    ratio=max(0.0, trial_s - accounted) / trial_s,
                    note=f"{max(0.0, trial_s - accounted) / trial_s:.0%}; python -c pass {start_plain * 1e3:.1f} ms, "
                         f"-I -S {start_isolated * 1e3:.1f} ms, fork+exit {fork * 1e3:.2f} ms"))
    return rows, details


#: The modes of the crash-state bench, in run order (:func:`bench_crash_states`).
CRASH_STATE_MODES = ("reference, IO seam", "reference, observed (black-box)", "foreign subject (Node.js), observed",
                     "reference, IO seam, no-fsync mutant (large state space)")


def _with_faults(scenario: Any, **keys: Any) -> Any:
    """``scenario`` with ``keys`` given in its ``[faults]`` table (over the file's)."""
    import dataclasses

    given = tuple((k, v) for k, v in scenario.faults.given if k not in keys) + tuple(keys.items())
    return dataclasses.replace(scenario, faults=dataclasses.replace(scenario.faults, given=given))


def _power_loss_tiers(scenario: Any, runner: Any) -> dict[str, Any]:
    """The power-loss family of ``scenario`` by ``runner``'s subject (its reference already run), each tier
    a campaign of its own so that neither competes with the other for the CPU: the cheap tier (``--trials
    1``: one batch of every distinct state, no full resume; ``judged``, ``judged_per_s`` by the tier's own
    clock, ``journals_asked``, ``cheap_mode``), then the full sample's resumes replayed by their schedules
    (``explored``, ``explored_per_s`` over the wall time of that campaign's trials; ``outcomes``: distinct recovery
    outcomes); and the state space (``distinct``, ``built``, ``crash_points``, ``trace_events``)."""
    from harness.campaign.campaign import Campaign
    from harness.families.power_loss.executor import state_space
    from harness.families.power_loss.family import POWER_LOSS
    from harness.families.power_loss.tiers import full_sample
    from harness.runner.trial import run_id_for

    result = Campaign([scenario], runner=runner, trials=1, shrink_budget=0, keep_histories=True).run()
    if result.errors or len(result.trials) != 1:
        raise RuntimeError(f"the power-loss bench's cheap tier did not run as one batch: {result.errors}")
    cheap = result.trials[0].history.options["cheap"]
    params = POWER_LOSS.params(scenario)
    space = state_space(result.scenarios[0].reference, run_id_for(scenario), params, runner.subject)
    chosen, outcomes = full_sample(space.distinct, run_id_for(scenario), resumes=params.resumes,
                                   cap=params.max_states, seed=params.seed, journal=runner.subject.caps.journal)
    schedules = [[{"kind": "power_loss", "state": s.id, "prefix_n": s.prefix_n}] for s in chosen]
    ticks: list[float] = []  # progress is called as the trials start (after the plan) and as each one ends
    full = Campaign([scenario], runner=runner, schedules=schedules, shrink_budget=0,
                    progress=lambda *_: ticks.append(time.perf_counter())).run()
    wall = ticks[-1] - ticks[0]
    if full.errors:
        raise RuntimeError(f"the power-loss bench's full resumes did not run: {full.errors}")
    return {"judged": cheap["states"], "judged_per_s": round(cheap["states"] / cheap["seconds"], 1),
            "journals_asked": cheap["asked"], "cheap_mode": cheap["mode"],
            "explored": len(full.trials), "explored_per_s": round(len(full.trials) / wall, 1),
            "outcomes": outcomes, "distinct": len(space.distinct), "built": sum(len(p.states) for p in space.points),
            "crash_points": len(space.points), "trace_events": space.trace_events}


def bench_crash_states(*, explore: int = 8, rounds: int = 3, scenario_name: str = "power-loss-basic",
                       modes: tuple[str, ...] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Section 3b: power-loss crash states built and I4-checked per second (pure); then, per mode (the
    reference with its IO seam, the reference observed from outside, the foreign Node.js subject when node
    is installed), interleaved over ``rounds``, the tiered exploration of bundled ``scenario_name``: crash
    states judged cheaply per second (every distinct state: the crash model's I4 and the subject's own
    recovery and reading, I5) side by side with full resumes per second (``explore`` of them, the old way:
    a recovery leg each); and the cheap tier on a large state space (the no-fsync mutant's).  ``modes``:
    the names of the modes to run (default all of :data:`CRASH_STATE_MODES`)."""
    from harness.checkers.i4_acknowledged import lost_acknowledged
    from harness.families.power_loss.crashstates import crash_points
    from harness.history.model import CrashStateFacts
    from harness.runner.trial import Runner
    from harness.scenario.parse import bundled_scenario_dir, load_scenario, parse_scenario
    from harness.selftest.mutants import subject_for
    from harness.selftest.targets import FOREIGN_SUBJECT
    from harness.subject.profile import resolve_subject

    small = parse_scenario(_POWER_LOSS_TOML)
    scenario = load_scenario(bundled_scenario_dir() / f"{scenario_name}.toml")
    rows, details = [], {}
    with Runner() as runner:
        ref = runner.reference(small)
        trace = ref.history.legs[0].trace
        jpath = next(ev["path"] for ev in trace if str(ev.get("path") or "").endswith(".json"))
        home = str(Path(jpath).parents[2])
        rates, states = [], 0
        for _ in range(rounds):
            t = time.perf_counter()
            n = 0
            for point in crash_points(trace, {}, {home, str(Path(home).parent)}, seed=1):
                for state in point.states:
                    lost_acknowledged(CrashStateFacts.of(state))  # as I4 judges it: on the facts recorded
                    n += 1
            rates.append(n / (time.perf_counter() - t))
            states = n
    rate = median(rates)
    details["crash_states"] = {"trace_events": len(trace), "states": states, "built_checked_per_s": rate}
    rows.append(row("campaign", "power-loss crash states built + I4-checked/s", rate, None, unit="states/s",
                    target=">= 1,000/s", met=rate >= 1000,
                    note=f"{states} states of a {len(trace)}-event trace, pure (harness.families.power_loss.crashstates)"))
    root = Path(__file__).resolve().parents[1]
    wanted = CRASH_STATE_MODES if modes is None else modes
    unknown = [m for m in wanted if m not in CRASH_STATE_MODES]
    if unknown:
        raise ValueError(f"unknown crash-state bench mode(s) {unknown}; known: {', '.join(CRASH_STATE_MODES)}")
    if CRASH_STATE_MODES[2] in wanted and not shutil.which("node"):
        details["crash_states"]["skipped"] = "foreign subject: node is not installed"
        wanted = tuple(m for m in wanted if m != CRASH_STATE_MODES[2])
    makers = {CRASH_STATE_MODES[0]: lambda: Runner(observe=False), CRASH_STATE_MODES[1]: lambda: Runner(observe=True),
              CRASH_STATE_MODES[2]: lambda: Runner(resolve_subject(FOREIGN_SUBJECT.replace("subjects/",
                                                                                           f"{root}/subjects/"))),
              CRASH_STATE_MODES[3]: lambda: Runner(subject_for("no-fsync"))}
    runners: dict[str, Runner] = {m: makers[m]() for m in wanted}
    # every distinct state judged cheaply in one batch (one trial), as the cheap tier's rate has always been taken
    scenario = _with_faults(scenario, max_states=explore, resumes=explore, batch_states=1 << 30)
    got: dict[str, dict[str, list[Any]]] = {m: {"judged": [], "resumed": [], "report": []} for m in runners}
    try:
        for r in runners.values():
            r.reference(scenario)  # outside the timed runs
        for _ in range(max(1, rounds)):
            for mode, r in runners.items():
                data = _power_loss_tiers(scenario, r)
                got[mode]["judged"].append(data["judged_per_s"] or 0.0)
                got[mode]["resumed"].append(data["explored_per_s"] or 0.0)
                got[mode]["report"].append(data)
    finally:
        for r in runners.values():
            r.close()
    targets = {CRASH_STATE_MODES[0]: 1000.0, CRASH_STATE_MODES[3]: 1000.0}
    for mode, g in got.items():
        last = g["report"][-1]
        judged, resumed = median(g["judged"]), median(g["resumed"])
        floor = targets.get(mode, 200.0)
        rows.append(row("campaign", f"{scenario_name}: crash states judged/s (cheap tier), {mode}", judged, None,
                        unit="states/s", target=f">= {floor:,.0f}/s", met=judged >= floor,
                        note=f"{last['judged']} distinct states, {last['journals_asked']} distinct journals asked "
                             f"({last['cheap_mode']}); median of {len(g['judged'])}"))
        rows.append(row("campaign", f"{scenario_name}: full resumes/s (a recovery leg each), {mode}", resumed, None,
                        unit="states/s", ratio=judged / resumed if resumed else None,
                        note=f"{last['explored']} resumed ({last['outcomes']} distinct recovery outcomes); "
                             f"ratio = cheap / full"))
    details["crash_states"]["tiers"] = {m: {"judged_per_s": g["judged"], "resumed_per_s": g["resumed"],
                                            "report": g["report"][-1]} for m, g in got.items()}
    details["crash_states"]["states"] = states
    return rows, details


def bench_modes(*, trials: int = 12, rounds: int = 2, scenario_name: str = "kill-every-event",
                jobs: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Section 3c: campaign trials/s in each mode, side by side, interleaved over ``rounds``: the reference
    with its IO seam (fast path), the reference observed from outside (black-box), and the foreign Node.js
    subject (observed); returns (rows, details).  The foreign subject is left out, loudly, without node."""
    from harness.campaign.campaign import Campaign
    from harness.runner.trial import Runner
    from harness.scenario.parse import bundled_scenario_dir, load_scenario
    from harness.selftest.targets import FOREIGN_SUBJECT
    from harness.subject.profile import resolve_subject

    scenario = load_scenario(bundled_scenario_dir() / f"{scenario_name}.toml")
    root = Path(__file__).resolve().parents[1]
    modes: dict[str, Runner] = {"reference, IO seam": Runner(observe=False),
                                "reference, observed (black-box)": Runner(observe=True)}
    details: dict[str, Any] = {}
    if shutil.which("node"):
        modes["foreign subject (Node.js), observed"] = Runner(
            resolve_subject(FOREIGN_SUBJECT.replace("subjects/", f"{root}/subjects/")))
    else:
        details["skipped"] = "foreign subject: node is not installed"
    rates: dict[str, list[float]] = {m: [] for m in modes}
    try:
        for runner in modes.values():
            runner.reference(scenario)  # outside the timed campaigns
        for _ in range(max(1, rounds)):
            for mode, runner in modes.items():
                t = time.perf_counter()
                result = Campaign([scenario], trials=trials, jobs=jobs, runner=runner, shrink_budget=0).run()
                if result.errors:
                    raise RuntimeError(f"{mode}: campaign errors: {result.errors}")
                rates[mode].append(len(result.trials) / (time.perf_counter() - t))
    finally:
        for runner in modes.values():
            runner.close()
    targets = {"reference, IO seam": (">= 50/s", 50.0), "reference, observed (black-box)": (">= 15/s", 15.0),
               "foreign subject (Node.js), observed": (">= 10/s", 10.0)}
    rows = [row("campaign", f"{scenario_name}: trials/s, {mode}", median(r), unit="trials/s",
                target=targets[mode][0], met=median(r) >= targets[mode][1],
                note=f"median of {len(r)} campaign(s) interleaved with the other modes")
            for mode, r in rates.items()]
    details["rates"] = rates
    foreign = modes.get("foreign subject (Node.js), observed")
    if foreign is not None:
        # The floor under the foreign subject's rate: a trial is at least one whole run of the agent (the
        # faulted leg and the resume share its work) plus one more start, and two readings (status
        # command starts), whatever the harness does.
        env = foreign.subject.env(base_url="http://127.0.0.1:9", api_key="k", state_home=tempfile.gettempdir(),
                                  ledger="/dev/null", leg=0, trace=None)
        start_s = _time_cmd([*foreign.subject.argv, "status", "no-such-run"], 9, env=env)
        run_s = foreign.reference(scenario).duration_ms / 1e3
        jobs_n = max(1, jobs or os.cpu_count() or 1)
        ceiling = jobs_n / (run_s + 3 * start_s)
        rows.append(row("campaign", "foreign subject: one `node agent.mjs` start (its status command)",
                        start_s * 1e3, unit="ms", note="median of 9"))
        rows.append(row("campaign", f"{scenario_name}: foreign subject's ceiling (one run + 3 starts a trial)",
                        median(rates["foreign subject (Node.js), observed"]), ceiling, unit="trials/s",
                        note=f"ceiling {ceiling:.1f} trials/s on {jobs_n} core(s): its uninterrupted run takes "
                             f"{run_s * 1e3:.0f} ms; ratio = achieved / ceiling"))
        details["foreign_start_ms"] = start_s * 1e3
        details["foreign_run_ms"] = run_s * 1e3
        details["foreign_ceiling_trials_per_s"] = ceiling
    return rows, details


