"""harness.campaign.regressions: `run --save-regression DIR` writes one loadable scenario per violation from its shrunk schedule."""

from __future__ import annotations

import json
import sys
import tomllib

import pytest

from harness.cli.main import main
from harness.campaign.regressions import toml_value
from harness.scenario.parse import load_scenario, regression_scenarios

EVENTS = """\
name = "save-events"
purpose = "every crash point of a run with one two-tool batch"

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

[check]
invariants = ["I2", "I4", "I6"]
"""

SUSPENDS = """\
name = "save-suspends"
purpose = "suspends at random times, shrunk when they find something"

[workload]
seed = 11
turns = 3
tools_per_turn = 2
tool_ms = [5, 15]

[faults]
family = "suspend"
legs = 2

[trials]
count = 16
"""


@pytest.mark.parametrize("value,text", [
    ("a\"b\\\\c\n", '"a\\"b\\\\\\\\c\\n"'), (7, "7"), (1.5, "1.5"), (True, "true"),
    ([1, "x"], '[1, "x"]'), ({"kind": "kill", "event": 7}, '{kind = "kill", event = 7}'),
])
def test_values_are_written_as_toml_that_reads_back_the_same(value, text):
    assert toml_value(value) == text
    assert tomllib.loads(f"v = {text}")["v"] == value


def test_a_violation_is_saved_as_a_scenario_that_replays_it_and_passes_on_a_correct_agent(tmp_path, monkeypatch, capsys):
    src = tmp_path / "save-events.toml"
    src.write_text(EVENTS, encoding="utf-8")
    out = tmp_path / "regressions"
    mutant = f"FISKJ_MUTANT=resume-reruns-answered {sys.executable} -m harness.selftest.subject"
    assert main(["run", str(src), "-q", "--subject", mutant, "--save-regression", str(out)]) == 1
    (path,) = sorted(out.glob("*.toml"))                  # one file: all the failures are one violation (I2)
    assert f"regression scenario {path}" in capsys.readouterr().err
    s = load_scenario(path)
    assert s.name == path.stem and s.name.startswith("regression-save-events-i2-")
    assert len(s.faults.schedule) == 1 and s.faults.schedule[0]["kind"] == "kill"
    assert s.workload.seed == 7 and s.workload.tools_per_turn == 2 and s.check.invariants == ("I2", "I4", "I6")
    assert s.trials.count == 1 and "I2" in s.purpose
    text = path.read_text()
    assert "# Reproduced by: fiskj-harness run" in text and "FISKJ_MUTANT=resume-reruns-answered" in text
    assert main(["run", str(path), "-q", "--subject", mutant]) == 1      # it replays the bug
    assert main(["run", str(path), "-q"]) == 0                          # and passes on fiskj
    # a second save of the same violation keeps the file as it is
    before = path.read_bytes()
    assert main(["run", str(src), "-q", "--subject", mutant, "--save-regression", str(out)]) == 1
    assert sorted(out.glob("*.toml")) == [path] and path.read_bytes() == before


def test_a_timed_violation_is_saved_from_its_shrunk_schedule(tmp_path, monkeypatch):
    src = tmp_path / "save-suspends.toml"
    src.write_text(SUSPENDS, encoding="utf-8")
    out = tmp_path / "regressions"
    status = main(["run", str(src), "-q", "--subject",
                   f"FISKJ_MUTANT=suspend-mid-batch {sys.executable} -m harness.selftest.subject",
                   "--shrink-budget", "8", "--save-regression", str(out), "--report-json", str(tmp_path / "r.json"), "--keep", "none"])
    assert status == 1
    (path,) = sorted(out.glob("regression-save-suspends-i1-*.toml"))
    s = load_scenario(path)
    report = json.loads((tmp_path / "r.json").read_text())
    shrinks = [x["schedule"] for x in report["campaign"]["shrinks"]]
    failing = [r["schedule"] for r in report["runs"] if r["status"] == "invalid"]
    assert len(s.faults.schedule) == min(len(f) for f in failing)      # the smallest failing schedule
    if [dict(f) for f in s.faults.schedule] in shrinks:
        assert "origin shrink" in path.read_text()
    assert s.faults.schedule[0]["kind"] == "suspend" and s.trials.count == 3   # timed: replayed three times


def test_the_bug_the_suite_found_has_its_regression_scenario():
    (path,) = [p for p in regression_scenarios() if "kill-every-event" in p.name]
    s = load_scenario(path)
    assert s.faults.schedule == ({"kind": "kill", "event": 7, "when": "after"},)
    assert "O_EXCL" in s.purpose
    assert main(["run", str(path), "-q"]) == 0


def test_a_scenario_built_in_code_is_written_with_its_family_keys_that_differ_from_the_defaults(tmp_path):
    from types import SimpleNamespace

    from harness.campaign.regressions import regression_text
    from harness.families.signals.params import Params
    from harness.scenario.model import FaultSpec, Scenario

    scenario = Scenario(name="built", purpose="in code",
                        faults=FaultSpec(family="kill", params=Params(kill_points="events", legs=2)))
    trial = SimpleNamespace(failed=["I2"], verdicts=[], schedule=[{"kind": "kill", "event": 3}], index=0,
                            origin="hypothesis", shrunk_from=None, reproduce="", seed=5)
    path = tmp_path / "regression-built.toml"
    path.write_text(regression_text(scenario, trial, "regression-built"), encoding="utf-8")
    s = load_scenario(path)
    assert (s.faults.params.kill_points, s.faults.params.legs) == ("events", 2)
    assert s.faults.schedule == ({"kind": "kill", "event": 3, "when": "after"},) and s.trials.seed == 5
