"""fiskj-harness gate: scenarios within a time budget, trials spread across them, JUnit and Markdown out."""

from __future__ import annotations

import collections
import json
import sys
from xml.etree import ElementTree as ET

import pytest

from harness.cli.main import _gate_scenarios, main, subject_of
from harness.campaign.gate import gate_report, run_gate
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


def test_counted_rounds_double_per_shard_count_then_fresh_rounds_draw_the_count_again():
    kill = _Track(parse_scenario(KILL))                  # count 12
    assert counted_rounds([kill.scenario], 1) == 3 and counted_rounds([kill.scenario], 3) == 2
    assert [_round_size(kill, r, 1) for r in range(5)] == [1, 2, 4, 5, 0]          # counts only: 12 in all
    assert [_round_size(kill, r, 1, 3) for r in range(6)] == [1, 2, 4, 5, 12, 12]  # then fresh rounds
    assert [_round_size(kill, r, 3, 2) for r in range(4)] == [3, 6, 3, 12]
    kill.planned, kill.trials = 10, 7                   # a function of the round alone, never of the past
    assert _round_size(kill, 3, 1) == 5
    events = _Track(parse_scenario(EVENTS))
    assert fixed_plan(events.scenario) and not fixed_plan(kill.scenario)
    assert counted_rounds([events.scenario], 2) == 0
    assert [_round_size(events, r, 2) for r in range(3)] == [40, 0, 0]
    assert [_round_size(events, r, 2, 1) for r in range(4)] == [40, 0, 40, 40]  # fresh: whole, new trials only
    regression = parse_scenario('name = "r"\npurpose = "p"\n[faults]\nfamily = "kill"\n'
                                'schedule = [{kind = "kill", event = 3}]\n[trials]\ncount = 2\n')
    assert fixed_plan(regression)


def test_the_gate_spreads_trials_over_every_scenario_and_writes_junit_and_a_markdown_summary(
        scenario_dir, tmp_path, monkeypatch, capsys):
    step = tmp_path / "step-summary.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    junit, summary, report = tmp_path / "gate.xml", tmp_path / "gate.md", tmp_path / "gate.json"
    status = main(["gate", str(scenario_dir), "--budget", "5", "--jobs", "2", "--junit", str(junit),
                   "--summary", str(summary), "--report-json", str(report)])
    assert status == 0, capsys.readouterr().err
    data = json.loads(report.read_text())
    assert data["verdict"] == "valid"
    per = collections.Counter(r["scenario"] for r in data["runs"])
    assert set(per) == {"gate-kill", "gate-events", "gate-suspend"}        # every scenario got trials (round 0)
    events = json.loads(report.read_text())["campaign"]["references"]["gate-events"]["events"]
    assert per["gate-events"] == events + 1                                 # its whole exhaustive plan, once
    log = data["gate"]["round_log"]
    assert data["gate"]["budget_s"] == 5 and data["gate"]["rounds"] == len(log) >= 1
    assert [row["round"] for row in log] == list(range(len(log)))
    assert sum(row["trials"] for row in log) == len(data["runs"]) == data["trials"]
    assert all(run["round"] in range(len(log)) for run in data["runs"])
    # the budget holds (under any load): the gate ends at the end of round 0 or within about a trial of it
    longest = max(run["duration_s"] for run in data["runs"])
    assert data["elapsed_s"] <= max(5, log[0]["seconds"]) + 3 * longest + 2.0  # (slack for a loaded CI machine)
    assert "round(s) in" in capsys.readouterr().out                         # the terminal says what it bought
    # JUnit: one test case per scenario and checked invariant
    suite = ET.parse(junit).getroot().find("testsuite")
    cases = {(c.get("classname"), c.get("name").split()[0]) for c in suite.findall("testcase")}
    expected = {(f"fiskj-harness.{s.name}", inv) for s in (load_scenario(p) for p in scenario_dir.glob("*.toml"))
                for inv in s.check.invariants}
    assert cases == expected and suite.get("failures") == "0"
    # Markdown: written, and appended to $GITHUB_STEP_SUMMARY after what was there
    text = summary.read_text()
    assert "fiskj-harness: ✅ valid" in text and "| gate-kill |" in text and "Budget 5 s" in text
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
    # Rounds are planned for the number of shards: an unsharded gate planned for 2 is their union, counted
    # rounds (0..R) and fresh ones alike (the budget, not reached here, is where they may part).
    rounds = counted_rounds(scenarios, 2) + 2                                   # one fresh round
    whole = run_gate(scenarios, budget_s=60, jobs=2, shrink_budget=0, round_unit=2, max_rounds=rounds)
    parts = [run_gate(scenarios, budget_s=60, jobs=2, shrink_budget=0, shard=(i, 2), max_rounds=rounds)
             for i in range(2)]
    key = lambda t: (t.scenario, t.seed, json.dumps(t.schedule, sort_keys=True))  # noqa: E731
    assert all(p["complete"] for p in whole.plan) and whole.rounds == rounds
    assert whole.round_log[-1]["kind"] == "fresh" and whole.round_log[-1]["trials"] > 0
    assert collections.Counter(key(t) for t in whole.result.trials) == \
        sum((collections.Counter(key(t) for t in p.result.trials) for p in parts), collections.Counter())


def test_a_budget_is_spent_in_fresh_rounds_with_new_seeds_once_the_counts_are_spent():
    one = parse_scenario(KILL.replace("count = 12", "count = 1"))               # its count is spent in round 0
    gate = run_gate([one], budget_s=3, jobs=2, shrink_budget=0)
    log, trials = gate.round_log, gate.result.trials
    longest = max(t.elapsed_s for t in trials)
    assert gate.result.elapsed_s >= 3 - 2 * longest                             # spent, not left idle
    assert gate.result.elapsed_s <= max(3, log[0]["seconds"]) + 2 * longest + 1.0
    assert gate.rounds >= 2 or log[0]["seconds"] >= 3 - 2 * longest
    assert [row["seeds"] for row in log] == [[1 + 1000 * r] for r in range(len(log))]    # a new seed each round
    assert [row["kind"] for row in log] == ["counted"] + ["fresh"] * (len(log) - 1)
    assert {t.seed for t in trials} == {1 + 1000 * r for r in range(len(log)) if log[r]["trials"]}
    assert gate.plan[0]["fresh_trials"] == len(trials) - 1


def test_a_violation_found_by_a_fresh_round_replays_from_the_report(tmp_path, monkeypatch):
    monkeypatch.setenv("FISKJ_MUTANT", "resume-reruns-answered")   # applied by the mutant subject's legs only
    path = tmp_path / "gate-sampled.toml"  # 3 of the run's crash points, sampled from the seed
    path.write_text(EVENTS.replace("gate-events", "gate-sampled").replace("count = 40", "count = 3")
                    .replace('kill_points = "events"', 'kill_points = "events"\nmax_events = 3'), encoding="utf-8")
    subject = subject_of(f"{sys.executable} -m harness.selftest.subject")
    gate = run_gate([load_scenario(path)], budget_s=60, jobs=2, shrink_budget=0, subject=subject, max_rounds=3)
    assert [row["kind"] for row in gate.round_log] == ["counted", "fresh", "fresh"]
    report = gate_report(gate, str(tmp_path / "gate.json"))
    write_json(tmp_path / "gate.json", report)
    rounds = {run["trial"]: run["round"] for run in report["runs"]}
    assert not any(run["status"] == "invalid" for run in report["runs"] if run["round"] == 0)  # seed 1 misses it
    late = [v for v in report["violations"] if rounds[v["trial"]] == 2]
    assert late and late[0]["seed"] == 2001 and "--seed 2001" in late[0]["reproduce_run"]
    assert main(["replay", str(tmp_path / "gate.json"), "--trial", str(late[0]["trial"]), "-q",
                 "--report-json", str(tmp_path / "replay.json")]) == 1
    again = json.loads((tmp_path / "replay.json").read_text())             # the same trial, the same violation
    assert [(r["seed"], r["schedule"]) for r in again["runs"]] == [(2001, late[0]["schedule"])]
    assert {v["invariant"] for v in again["violations"]} == {v["invariant"] for v in late if v["trial"] ==
                                                             late[0]["trial"]}
