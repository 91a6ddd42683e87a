"""fiskj-harness gate: scenarios within a time budget, trials spread across them, JUnit and Markdown out."""

from __future__ import annotations

import collections
import json
import sys
from xml.etree import ElementTree as ET

import pytest

from harness.cli.main import main
from harness.cli.resolve import _gate_scenarios, subject_of
from harness.campaign.gate import gate_report, render_gate_markdown, run_gate
from harness.cli.resolve import resolve_scenarios
from harness.campaign.result import ScenarioRun
from harness.campaign.stream import TrialStream
from harness.families.base import Planned
from harness.families.registry import by_mode
from harness.runner.trial import Runner
from harness.report.results_dir import write_json
from harness.scenario.parse import bundled_scenarios, load_scenario, parse_scenario, regression_scenarios

KILL = """\
name = "gate-kill"
purpose = "timed kills"

[workload]
seed = 7
turns = 1
tools_per_turn = 2
tool_ms = 1

[faults]
family = "kill"
kill_points = "both"
legs = 2

[trials]
count = 12
"""

EVENTS = """\
name = "gate-events"
purpose = "every crash point"

[workload]
seed = 7
turns = 1
tools_per_turn = 2
tool_ms = 1

[faults]
family = "kill"
kill_points = "events"
startup_points = true   # every crash point from the first event (the plans these tests were written on)

[trials]
count = 40
"""

SUSPEND = """\
name = "gate-suspend"
purpose = "suspends"

[workload]
seed = 11
turns = 1
tools_per_turn = 2
tool_ms = 2

[faults]
family = "suspend"
legs = 2

[trials]
count = 6

[check]
invariants = ["I1", "I2", "I6", "I9"]
"""


@pytest.fixture
def scenario_dir(tmp_path):
    d = tmp_path / "scenarios"
    d.mkdir()
    for name, text in (("gate-kill", KILL), ("gate-events", EVENTS), ("gate-suspend", SUSPEND)):
        (d / f"{name}.toml").write_text(text, encoding="utf-8")
    return d


def test_by_default_the_gate_runs_every_bundled_and_every_regression_scenario():
    names = {s.path for s in _gate_scenarios([])}
    assert names == {str(p) for p in bundled_scenarios() + regression_scenarios()}
    assert regression_scenarios()


def _stream(plans, **kwargs):
    """A trial stream over fake scenarios: ``plans`` maps a name to ``draw(seed) -> schedules``."""
    runs = [ScenarioRun(scenario=parse_scenario(f'name = "{name}"\npurpose = "p"\n'), seed=1) for name in plans]
    calls = []

    def draw(run, seed):
        calls.append((run.scenario.name, seed))
        return [Planned(s, "explicit", seed) for s in plans[run.scenario.name](seed)]
    return runs, TrialStream(runs, draw, **kwargs), calls


def _drain(stream, limit=200):
    out = []
    while len(out) < limit and (nxt := stream.next()) is not None:
        out.append((nxt.run.scenario.name, nxt.round, nxt.planned.seed, nxt.planned.schedule))
    return out


def test_the_stream_gives_every_scenario_its_kth_trial_before_any_gets_its_next_and_redraws_from_fresh_seeds():
    plans = {"grows": lambda seed: [[{"kind": "kill", "event": seed + i}] for i in range(3)],  # new with each seed
             "fixed": lambda seed: [[{"kind": "kill", "event": e}] for e in (1, 2)],             # an exhaustive plan
             "one": lambda seed: [[{"kind": "kill", "event": seed}]]}
    fixed = lambda run: run.scenario.name == "fixed"  # noqa: E731
    runs, stream, calls = _stream(plans, seed_stream=True, fixed=fixed)
    got = _drain(stream, 30)
    rounds = [k for _, k, _, _ in got]
    assert rounds == sorted(rounds)                                          # round k whole before round k + 1
    assert [name for name, k, _, _ in got if k == 0] == ["grows", "fixed", "one"]   # the campaign's order
    per = collections.Counter(name for name, _, _, _ in got)
    assert per["fixed"] == 2 and runs[1].ended == "spent"                   # nothing new in 3 fresh draws: spent
    assert runs[1].seeds == [1 + 1000 * j for j in range(4)]
    assert per["grows"] == per["one"] == 14                                  # the others share the rounds
    assert [seed for name, _, seed, _ in got if name == "one"] == [1 + 1000 * j for j in range(14)]
    assert [seed for name, _, seed, _ in got if name == "grows"][:7] == [1, 1, 1, 1001, 1001, 1001, 2001]
    # a draw is a function of its scenario and j alone (so the shards of a gate are disjoint)
    for name in plans:
        seeds = [seed for n, seed in calls if n == name]
        assert seeds == [1 + 1000 * j for j in range(len(seeds))]
    # without a seed stream a scenario leaves the stream when its plan is spent: a campaign runs its plans once
    runs, stream, _ = _stream(plans)
    once = _drain(stream)
    assert [(name, k) for name, k, _, _ in once] == [("grows", 0), ("fixed", 0), ("one", 0), ("grows", 1),
                                                     ("fixed", 1), ("grows", 2)]
    assert [r.ended for r in runs] == ["plan", "plan", "plan"]
    # shards keep positions i, i + n, ... of every draw: disjoint, together the whole stream
    whole = collections.Counter((n, s, json.dumps(x)) for n, _, s, x in
                                _drain(_stream(plans, seed_stream=True, max_draws=3, fixed=fixed)[1]))
    parts = [collections.Counter((n, s, json.dumps(x)) for n, _, s, x in
                                 _drain(_stream(plans, seed_stream=True, max_draws=3, shard=(i, 2), fixed=fixed)[1]))
             for i in range(2)]
    assert not (parts[0] & parts[1]) and parts[0] + parts[1] == whole
    # a shard's positions run on across the draws: one-trial draws alternate between the shards
    odd = _drain(_stream({"one": plans["one"]}, seed_stream=True, shard=(1, 2))[1], 3)
    assert [seed for _, _, seed, _ in odd] == [1001, 3001, 5001]


def test_a_draw_0_trial_left_is_told_until_the_first_draw_is_handed_out():
    runs, stream, _ = _stream({"a": lambda seed: [[{"kind": "kill", "event": seed + i}] for i in range(2)],
                               "b": lambda seed: [[{"kind": "kill", "event": seed}]]}, seed_stream=True)
    left = []
    for _ in range(4):
        left.append(stream.first_draw_left())
        stream.next()
    assert left == [True, True, True, False]       # a0, b0, a1 are draw 0; then b's draw 1


def test_with_whole_first_draw_a_spent_budget_still_runs_the_first_draw_whole_and_no_more():
    from harness.campaign.campaign import Campaign

    scenario = parse_scenario(KILL)
    ran = {whole: Campaign([scenario], trials=3, jobs=1, shrink_budget=0, seed_stream=True, budget_s=0.0,
                           whole_first_draw=whole).run() for whole in (False, True)}
    assert len(ran[False].trials) == 1                                       # round 0 only
    assert len(ran[True].trials) == 3 and {t.draw for t in ran[True].trials} == {0}
    assert ran[True].scenarios[0].seeds == [scenario.trials.seed]


def fixed_plan(scenario):
    return by_mode(scenario.faults.family).fixed_plan(scenario)


def test_an_exhaustive_plan_and_a_regression_schedule_draw_nothing_new_from_a_fresh_seed_and_a_random_plan_does():
    regression = parse_scenario('name = "r"\npurpose = "p"\n[faults]\nfamily = "kill"\n'
                                'schedule = [{kind = "kill", event = 3}]\n[trials]\ncount = 2\n')
    scenarios = [parse_scenario(KILL), parse_scenario(EVENTS), regression]
    assert fixed_plan(scenarios[1]) and not fixed_plan(scenarios[0])
    assert fixed_plan(regression)
    with Runner() as runner:
        runs = [ScenarioRun(scenario=s, seed=1, family=by_mode(s.faults.family), reference=runner.reference(s))
                for s in scenarios]
    stream = TrialStream(runs, lambda run, seed: run.family.plan(run.scenario, run.reference,
                                                                   run.scenario.trials.count, seed, None),
                         seed_stream=True, max_draws=6, fixed=lambda run: fixed_plan(run.scenario))
    got = _drain(stream, 1000)
    per = collections.Counter(name for name, _, _, _ in got)
    kill, events, again = runs
    assert events.ended == "spent" and again.ended == "spent"             # the same trials whatever the seed
    assert per["gate-events"] == len(events.plan) == events.reference.events + 1   # its whole plan, once
    assert per["r"] == 2 and again.seeds == [1, 1001, 2001, 3001]           # its count, once; then 3 empty draws
    assert kill.ended == "draws" and len(kill.seeds) == 6 and per["gate-kill"] == 6 * 12  # a growing plan: redrawn
    assert len({json.dumps(x) for name, _, _, x in got if name == "gate-kill"}) > 12         # with new trials


def test_the_gate_spreads_trials_over_every_scenario_and_writes_junit_and_a_markdown_summary(
        scenario_dir, tmp_path, monkeypatch, capsys):
    step = tmp_path / "step-summary.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    junit, summary, report = tmp_path / "gate.xml", tmp_path / "gate.md", tmp_path / "gate.json"
    # 3 s: about 50 rounds of these three scenarios on an idle machine, the exhaustive one spent within them
    status = main(["gate", str(scenario_dir), "--budget", "3", "--jobs", "2", "--junit", str(junit),
                   "--summary", str(summary), "--report-json", str(report)])
    assert status == 0, capsys.readouterr().err
    data = json.loads(report.read_text())
    assert data["verdict"] == "valid"
    per = collections.Counter(r["scenario"] for r in data["runs"])
    assert set(per) == {"gate-kill", "gate-events", "gate-suspend"}        # every scenario got trials (round 0)
    events = json.loads(report.read_text())["campaign"]["references"]["gate-events"]["events"]
    rows = {row["scenario"]: row for row in data["gate"]["plan"]}
    if rows["gate-events"]["ended"] == "spent":                             # its whole exhaustive plan, once
        assert per["gate-events"] == events + 1  # a kill before event 1 and after each (startup_points = true)
    else:                                                                   # interleaved with the others
        assert per["gate-events"] <= events + 1
        assert max(per.values()) - per["gate-events"] <= 1
    assert all(max(per.values()) - per[n] <= 1 for n in per if rows[n]["ended"] == "budget")
    log = data["gate"]["round_log"]
    assert data["gate"]["budget_s"] == 3 and data["gate"]["rounds"] == len(log) >= 1
    assert [row["round"] for row in log] == list(range(len(log)))
    assert sum(row["trials"] for row in log) == len(data["runs"]) == data["trials"]
    assert all(run["round"] in range(len(log)) for run in data["runs"])
    # the budget holds (under any load): the gate ends at the end of round 0 or within about a trial of it
    longest = max(run["duration_s"] for run in data["runs"])
    round0 = log[0]["started_s"] + log[0]["seconds"]                        # until round 1 started
    assert data["elapsed_s"] <= max(3, round0) + 3 * longest + 2.0          # (slack for a loaded CI machine)
    assert "round(s) in" in capsys.readouterr().out                         # the terminal says what it bought
    # JUnit: one test case per scenario and checked invariant
    suite = ET.parse(junit).getroot().find("testsuite")
    cases = {(c.get("classname"), c.get("name").split()[0]) for c in suite.findall("testcase")}
    expected = {(f"fiskj-harness.{s.name}", inv) for s in (load_scenario(p) for p in scenario_dir.glob("*.toml"))
                for inv in s.check.invariants}
    assert cases == expected and suite.get("failures") == "0"
    # Markdown: written, and appended to $GITHUB_STEP_SUMMARY after what was there
    text = summary.read_text()
    assert "fiskj-harness: ✅ valid" in text and "| gate-kill |" in text and "Budget 3 s" in text
    assert "| round | kind | seeds |" in text and "| 0 | counted | " in text
    assert step.read_text().startswith("earlier step\n") and "| gate-suspend |" in step.read_text()


def test_a_violation_fails_the_gate_with_exit_1_and_a_junit_failure(scenario_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("FISKJ_MUTANT", "resume-reruns-answered")   # applied by the mutant subject's legs only
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    junit = tmp_path / "gate.xml"
    status = main(["gate", str(scenario_dir / "gate-events.toml"), "--budget", "3", "--jobs", "2", "-q",
                   "--subject", f"{sys.executable} -m harness.selftest.subject", "--junit", str(junit)])
    assert status == 1
    failures = [c for c in ET.parse(junit).getroot().iter("testcase") if c.find("failure") is not None]
    assert {c.get("name").split()[0] for c in failures} == {"I2"}
    assert "reproduce" in failures[0].find("failure").text


def test_a_subject_that_cannot_start_is_a_setup_error_exit_2(scenario_dir, tmp_path, capsys):
    junit = tmp_path / "gate.xml"
    status = main(["gate", str(scenario_dir / "gate-kill.toml"), "--budget", "5", "-q",
                   "--subject", str(tmp_path / "no-such-agent"), "--junit", str(junit)])
    assert status == 2
    assert "setup error" in capsys.readouterr().err
    errors = [c for c in ET.parse(junit).getroot().iter("testcase") if c.find("error") is not None]
    assert errors, "a scenario that could not run is an error in the JUnit file, not a pass"


def test_a_budget_too_small_for_more_rounds_still_gives_every_scenario_its_first_trials(scenario_dir):
    scenarios = [load_scenario(p) for p in sorted(scenario_dir.glob("*.toml"))]
    gate = run_gate(scenarios, budget_s=0.1, jobs=2)
    assert gate.rounds == 1
    assert {t.scenario for t in gate.result.trials} == {s.name for s in scenarios}


def test_the_shards_of_a_gate_are_disjoint_and_cover_an_unsharded_gate(scenario_dir):
    scenarios = [parse_scenario(EVENTS.replace("count = 40", "count = 4")),   # 4 sampled crash points: seeded
                 parse_scenario(EVENTS.replace("gate-events", "gate-events-2").replace("count = 40", "count = 5")
                                .replace('kill_points = "events"', 'kill_points = "events"\nlegs = 2\nmax_events = 3'))]
    # A scenario's draws are a function of the scenario and j alone: the shards' draws are the unsharded
    # gate's, so the shards are its union, draw 0 and fresh draws alike (the budget, not reached here, is
    # where they may part).
    whole = run_gate(scenarios, budget_s=60, jobs=2, shrink_budget=0, max_draws=2)   # one fresh draw
    parts = [run_gate(scenarios, budget_s=60, jobs=2, shrink_budget=0, shard=(i, 2), max_draws=2)
             for i in range(2)]
    key = lambda t: (t.scenario, t.seed, json.dumps(t.schedule, sort_keys=True))  # noqa: E731
    assert all(p["complete"] for p in whole.plan) and all(p["draws"] == 2 for p in whole.plan)
    assert whole.round_log[-1]["kind"] == "fresh" and whole.round_log[-1]["trials"] > 0
    assert collections.Counter(key(t) for t in whole.result.trials) == \
        sum((collections.Counter(key(t) for t in p.result.trials) for p in parts), collections.Counter())


def test_a_budget_is_spent_on_fresh_draws_with_new_seeds_once_a_plan_is_spent():
    one = parse_scenario(KILL.replace("count = 12", "count = 1"))               # its count is spent in round 0
    budget = 1.5                                                                 # a dozen rounds or more
    gate = run_gate([one], budget_s=budget, jobs=2, shrink_budget=0)
    log, trials = gate.round_log, gate.result.trials
    longest = max(t.elapsed_s for t in trials)
    assert gate.result.elapsed_s >= budget - 2 * longest                        # spent, not left idle
    round0 = log[0]["started_s"] + log[0]["seconds"]
    assert gate.result.elapsed_s <= max(budget, round0) + 2 * longest + 1.0
    assert gate.rounds >= 2 or round0 >= budget - 2 * longest
    assert [row["seeds"] for row in log] == [[1 + 1000 * r] for r in range(len(log))]    # a new seed each round
    assert [row["kind"] for row in log] == ["counted"] + ["fresh"] * (len(log) - 1)
    assert {t.seed for t in trials} == {1 + 1000 * r for r in range(len(log)) if log[r]["trials"]}
    assert gate.plan[0]["fresh_trials"] == len(trials) - 1


def test_a_violation_found_by_a_fresh_draw_replays_from_the_report(tmp_path, monkeypatch):
    monkeypatch.setenv("FISKJ_MUTANT", "resume-reruns-answered")   # applied by the mutant subject's legs only
    path = tmp_path / "gate-sampled.toml"  # 3 of the run's crash points, sampled from the seed
    path.write_text(EVENTS.replace("gate-events", "gate-sampled").replace("count = 40", "count = 3")
                    .replace('kill_points = "events"', 'kill_points = "events"\nmax_events = 3'), encoding="utf-8")
    subject = subject_of(f"{sys.executable} -m harness.selftest.subject")
    # the mutant shows at crash points 13 and 14 of 22; of the points sampled after the journal folder's first
    # call (harness/families/signals/schedules.py), seed 6001 is the first to hold one
    gate = run_gate([load_scenario(path)], budget_s=60, jobs=2, shrink_budget=0, subject=subject, max_draws=7)
    assert gate.plan[0]["seeds"] == [1 + 1000 * k for k in range(7)]      # draw 0, then six fresh draws
    assert [row["kind"] for row in gate.round_log][:3] == ["counted"] * 3  # draw 0's 3 trials
    assert {row["kind"] for row in gate.round_log[3:]} == {"fresh"}
    report = gate_report(gate, str(tmp_path / "gate.json"))
    write_json(tmp_path / "gate.json", report)
    rounds = {run["trial"]: run["round"] for run in report["runs"]}
    assert not any(run["status"] == "invalid" for run in report["runs"] if run["seed"] == 1)  # seed 1 misses it
    late = [v for v in report["violations"] if v["seed"] == 6001 and rounds[v["trial"]] >= 3]
    assert late and late[0]["seed"] == 6001 and "--seed 6001" in late[0]["reproduce_run"]
    assert main(["replay", str(tmp_path / "gate.json"), "--trial", str(late[0]["trial"]), "-q",
                 "--report-json", str(tmp_path / "replay.json")]) == 1
    again = json.loads((tmp_path / "replay.json").read_text())             # the same trial, the same violation
    assert [(r["seed"], r["schedule"]) for r in again["runs"]] == [(6001, late[0]["schedule"])]
    assert {v["invariant"] for v in again["violations"]} == {v["invariant"] for v in late if v["trial"] ==
                                                             late[0]["trial"]}


class _TrialClock:
    """A fake clock for the gate's deadline that advances ``step`` seconds at each reading: the gate reads it
    at its start, as each round starts and before each trial it starts after round 0, so where the deadline
    comes is a count of trials, whatever the machine's speed."""

    def __init__(self, step):
        self.step, self.reads = step, 0

    def __call__(self):
        self.reads += 1
        return (self.reads - 1) * self.step


@pytest.mark.slow
def test_a_60_s_gate_over_the_bundled_scenarios_runs_every_one_twice_before_any_gets_a_tenth_trial(tmp_path):
    from harness.campaign.campaign import unsupported
    from harness.subject.contract import default_subject

    every = resolve_scenarios([str(p) for p in bundled_scenarios()])
    scenarios = [s for s in every if unsupported(default_subject(), s) is None]  # (every one applies)
    n = len(scenarios)
    clock = _TrialClock(60 / (n + 5))            # the deadline comes a few trials into round 2
    gate = run_gate(every, budget_s=60, jobs=2, clock=clock, skip_unsupported=True)
    report = gate_report(gate, None)
    assert not gate.result.errors
    per = {row["scenario"]: row["trials"] for row in report["gate"]["plan"]}
    assert {name for name, trials in per.items() if trials == 0} == {s.name for s in every} - {s.name for s in scenarios}
    per = {name: trials for name, trials in per.items() if trials}
    assert set(per) == {s.name for s in scenarios} and min(per.values()) >= 2, per
    assert max(per.values()) - min(per.values()) <= 1                      # no scenario ran ahead of the others
    runs = sorted(report["runs"], key=lambda r: r["trial"])                 # in the order they started
    second = {r["scenario"]: r["trial"] for r in runs if r["round"] == 1}
    tenth = min((r["trial"] for r in runs if r["round"] >= 9), default=len(runs))
    assert set(second) == set(per) and max(second.values()) < tenth
    for name in per:                                                        # each scenario's k-th trial in round k
        assert [r["round"] for r in runs if r["scenario"] == name] == list(range(per[name]))
    # the summary shows it: rounds 0 and 1 each gave every scenario a trial, the budget and the seeds
    log = report["gate"]["round_log"]
    assert [row["scenarios"] for row in log[:2]] == [n, n] and len(log) == 3 and log[2]["not_started"] > 0
    lines = render_gate_markdown(report).splitlines()
    rows = [line.split(" | ") for line in lines if line.startswith(("| 0 | counted |", "| 1 | counted |"))]
    assert [row[3:5] for row in rows] == [[str(n), str(n)]] * 2              # scenarios, trials of rounds 0, 1
    assert "Budget 60 s, 3 round(s)." in lines
    for name, trials in per.items():                                        # trials, rounds, draws per scenario
        assert any(line.startswith(f"| {name} | {trials} | {trials} | 1 | ") for line in lines), name
