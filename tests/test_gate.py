"""fiskj-harness gate: scenarios within a time budget, trials spread across them, JUnit and Markdown out."""

from __future__ import annotations

import collections
import json
import sys
from xml.etree import ElementTree as ET

import pytest

from harness.cli.main import _gate_scenarios, main
from harness.campaign.gate import _round_size, _Track, fixed_plan, run_gate
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


def test_rounds_double_per_shard_count_and_a_fixed_plan_runs_once_in_round_zero():
    kill = _Track(parse_scenario(KILL))
    assert [_round_size(kill, r, 1) for r in range(4)] == [1, 2, 4, 8]
    assert [_round_size(kill, r, 3) for r in range(2)] == [3, 6]
    kill.planned = 10
    assert _round_size(kill, 3, 1) == 2                 # never beyond trials.count
    events = _Track(parse_scenario(EVENTS))
    assert fixed_plan(events.scenario) and not fixed_plan(kill.scenario)
    assert [_round_size(events, r, 2) for r in range(3)] == [40, 0, 0]
    regression = parse_scenario('name = "r"\npurpose = "p"\n[faults]\nfamily = "kill"\n'
                                'schedule = [{kind = "kill", event = 3}]\n[trials]\ncount = 2\n')
    assert fixed_plan(regression)


def test_the_gate_spreads_trials_over_every_scenario_and_writes_junit_and_a_markdown_summary(
        scenario_dir, tmp_path, monkeypatch, capsys):
    step = tmp_path / "step-summary.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    junit, summary, report = tmp_path / "gate.xml", tmp_path / "gate.md", tmp_path / "gate.json"
    status = main(["gate", str(scenario_dir), "--budget", "8", "--jobs", "2", "--junit", str(junit),
                   "--summary", str(summary), "--report-json", str(report)])
    assert status == 0, capsys.readouterr().err
    data = json.loads(report.read_text())
    assert data["verdict"] == "valid"
    per = collections.Counter(r["scenario"] for r in data["runs"])
    assert set(per) == {"gate-kill", "gate-events", "gate-suspend"}        # every scenario got trials
    events = json.loads(report.read_text())["campaign"]["references"]["gate-events"]["events"]
    assert per["gate-events"] == events + 1                                 # its whole exhaustive plan, once
    assert data["gate"]["budget_s"] == 8 and data["gate"]["rounds"] >= 2
    assert data["elapsed_s"] < 8 * 2.5
    # JUnit: one test case per scenario and checked invariant
    suite = ET.parse(junit).getroot().find("testsuite")
    cases = {(c.get("classname"), c.get("name").split()[0]) for c in suite.findall("testcase")}
    expected = {(f"fiskj-harness.{s.name}", inv) for s in (load_scenario(p) for p in scenario_dir.glob("*.toml"))
                for inv in s.check.invariants}
    assert cases == expected and suite.get("failures") == "0"
    # Markdown: written, and appended to $GITHUB_STEP_SUMMARY after what was there
    text = summary.read_text()
    assert "fiskj-harness: ✅ valid" in text and "| gate-kill |" in text and "Budget 8 s" in text
    assert step.read_text().startswith("earlier step\n") and "| gate-suspend |" in step.read_text()


def test_a_violation_fails_the_gate_with_exit_1_and_a_junit_failure(scenario_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("FISKJ_MUTANT", "resume-reruns-answered")   # applied by the mutant subject's legs only
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    junit = tmp_path / "gate.xml"
    status = main(["gate", str(scenario_dir / "gate-events.toml"), "--budget", "6", "--jobs", "2", "-q",
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
    scenarios = [parse_scenario(EVENTS.replace("count = 40", "count = 4")),
                 parse_scenario(EVENTS.replace("gate-events", "gate-events-2").replace("count = 40", "count = 7")
                                .replace('kill_points = "events"', 'kill_points = "events"\nlegs = 2\nmax_events = 3'))]
    # Rounds are planned for the number of shards: an unsharded gate planned for 2 is their union.
    whole = run_gate(scenarios, budget_s=60, jobs=2, shrink_budget=0, round_unit=2)
    parts = [run_gate(scenarios, budget_s=60, jobs=2, shrink_budget=0, shard=(i, 2)) for i in range(2)]
    key = lambda t: (t.scenario, t.seed, json.dumps(t.schedule, sort_keys=True))  # noqa: E731
    assert all(p["complete"] for p in whole.plan)
    assert collections.Counter(key(t) for t in whole.result.trials) == \
        sum((collections.Counter(key(t) for t in p.result.trials) for p in parts), collections.Counter())
