"""harness.scenario.parse: scenario TOML files, checked key by key, with errors naming file, line and key."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from harness.tomlwhere import find_line
from harness.scenario.parse import (INVARIANTS, Scenario, ScenarioError, bundled_scenario_dir, bundled_scenarios, load_scenario,
                              parse_scenario)

GOOD = """\
name = "demo"
purpose = "a demo"

[workload]
turns = 2
tools_per_turn = 3
tool_ms = [1, 5]

[faults]
family = "kill"
kill_points = "events"
legs = 2

[trials]
count = 7
seed = 42

[check]
invariants = ["I2", "I4"]
"""


def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_a_good_scenario_loads_into_typed_sections(tmp_path):
    s = load_scenario(write(tmp_path, GOOD))
    assert isinstance(s, Scenario)
    assert (s.name, s.purpose) == ("demo", "a demo")
    assert s.workload.turns == 2 and s.workload.tools_per_turn == 3 and s.workload.tool_ms == (1.0, 5.0)
    assert s.faults.family == "kill" and s.faults.params.kill_points == "events" and s.faults.params.legs == 2
    assert s.trials.count == 7 and s.trials.seed == 42
    assert s.check.invariants == ("I2", "I4")
    assert s.path == str(tmp_path / "s.toml")


def test_defaults_fill_every_omitted_key():
    s = parse_scenario('name = "x"\npurpose = "y"\n')
    assert s.faults.family == "none"
    assert s.check.invariants == INVARIANTS
    assert s.workload.tool_ms == (0.0, 0.0)


def test_an_unknown_key_error_names_file_line_and_key(tmp_path):
    text = GOOD.replace("legs = 2", "legs = 2\nlegz = 3")
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    err = info.value
    assert err.path == str(path)
    assert err.key == "faults.legz"
    assert err.line == text.splitlines().index("legz = 3") + 1
    message = str(err)
    assert str(path) in message and f":{err.line}" in message and "legz" in message


def test_an_unknown_top_level_key_or_table_is_named(tmp_path):
    with pytest.raises(ScenarioError) as info:
        parse_scenario(GOOD + "\n[nemesis]\nx = 1\n", "f.toml")
    assert info.value.key == "nemesis" and info.value.line == GOOD.count("\n") + 2


def test_a_value_of_the_wrong_type_names_the_key_and_its_line(tmp_path):
    text = GOOD.replace("turns = 2", 'turns = "two"')
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, text))
    assert info.value.key == "workload.turns"
    assert info.value.line == 5
    assert "integer" in str(info.value)


@pytest.mark.parametrize("old,new,key", [
    ("legs = 2", "legs = 0", "faults.legs"),
    ('family = "kill"', 'family = "flood"', "faults.family"),
    ('invariants = ["I2", "I4"]', 'invariants = ["I12"]', "check.invariants"),
    ("tool_ms = [1, 5]", "tool_ms = [5, 1]", "workload.tool_ms"),
    ("tool_ms = [1, 5]", "tool_ms = [1, 5]\nvary_on_repeat = 1", "workload.vary_on_repeat"),
])
def test_out_of_range_values_and_bad_choices_are_refused(old, new, key):
    with pytest.raises(ScenarioError) as info:
        parse_scenario(GOOD.replace(old, new), "f.toml")
    assert info.value.key == key
    assert info.value.line is not None


def test_a_toml_syntax_error_names_its_line():
    with pytest.raises(ScenarioError) as info:
        parse_scenario('name = "x"\npurpose = "y"\n[workload\n', "broken.toml")
    assert info.value.line == 3
    assert "broken.toml:3" in str(info.value)


def test_a_missing_name_or_purpose_is_an_error():
    with pytest.raises(ScenarioError) as info:
        parse_scenario('name = "x"\n', "f.toml")
    assert info.value.key == "purpose"


def test_a_chain_needs_its_list_of_kinds():
    with pytest.raises(ScenarioError) as info:
        parse_scenario('name = "x"\npurpose = "y"\n[faults]\nfamily = "chain"\n', "f.toml")
    assert info.value.key == "faults.family" and info.value.line == 4
    s = parse_scenario('name = "x"\npurpose = "y"\n[faults]\nfamily = "chain"\nchain = ["suspend", "kill-event"]\n')
    assert s.faults.params.chain == ("suspend", "kill-event")


def test_scenario_errors_survive_pickling():
    err = ScenarioError("bad", path="f.toml", line=3, key="workload.turns")
    back = pickle.loads(pickle.dumps(err))
    assert (back.path, back.line, back.key, str(back)) == ("f.toml", 3, "workload.turns", str(err))
    assert isinstance(back, ValueError)


def test_find_line_knows_tables_and_dotted_keys():
    text = 'name = "x"\nworkload.turns = 3\n[faults]\nlegs = 1\n'
    assert find_line(text, "workload", "turns") == 2
    assert find_line(text, "faults", "legs") == 4
    assert find_line(text, "faults", None) == 3
    assert find_line(text, "trials", "count") is None


def test_every_bundled_scenario_loads_and_states_its_purpose_in_one_line():
    paths = bundled_scenarios()
    assert len(paths) >= 5
    names = set()
    for path in paths:
        s = load_scenario(path)
        assert s.purpose.strip() and "\n" not in s.purpose, path
        names.add(s.name)
        assert path.stem == s.name, f"{path}: file name and scenario name differ"
    assert {"noop-baseline", "kill-random", "kill-every-event", "suspend-clean"} <= names


# --- issue 7: every key of docs/scenarios.md, errors naming file, line and key ----------------------


@pytest.mark.parametrize("text,key,line", [
    ('name = "x"\npurpose = "y"\n[workload]\nturns = 1\ndrift = ["model", "colour"]\n', "workload.drift", 5),
    ('name = "x"\npurpose = "y"\n[faults]\nfamily = "kill"\nmax_states = 3\n', "faults.max_states", 5),
    ('name = "x"\npurpose = "y"\n[faults]\nfamily = "power_loss"\nmax_states = -1\n', "faults.max_states", 5),
    ('name = "x"\npurpose = "y"\n[faults]\nfamily = "tail"\n\nflips = "many"\n', "faults.flips", 6),
    ('name = "x"\npurpose = "y"\n[faults]\nfamily = "race"\nraces = ["two-cooks"]\n', "faults.races", 5),
    ('name = "x"\npurpose = "y"\n[faults]\nfamily = "kill"\nraces = ["two-writers"]\n', "faults.races", 5),
    ('name = "x"\npurpose = "y"\n[faults]\nfamily = "kill"\nschedule = [{kind = "explode"}]\n', "faults.schedule", 5),
    ('name = "x"\npurpose = "y"\n[faults]\nfamily = "kill"\nschedule = "kill at 7"\n', "faults.schedule", 5),
    ('name = "x"\npurpose = "y"\n[workload]\ndrift = ["model"]\n[faults]\nfamily = "race"\n', "workload.drift", 4),
    ('name = "x"\npurpose = "y"\n[trials]\ncount = 2\ntimeout = 5\n', "trials.timeout", 5),
    ('name = "x"\npurpose = "y"\n[check]\ninvariants = []\n', "check.invariants", 4),
])
def test_a_bad_key_of_the_issue_7_format_is_named_with_its_file_and_line(tmp_path, text, key, line):
    path = write(tmp_path, text, "bad.toml")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    err = info.value
    assert (err.path, err.key, err.line) == (str(path), key, line)
    assert str(err).startswith(f"{path}:{line}: key {key!r}: ")


def test_a_toml_syntax_error_in_a_value_names_the_file_the_line_and_the_key(tmp_path):
    path = write(tmp_path, 'name = "x"\npurpose = "y"\n\n[faults]\nfamily = kill\n', "syntax.toml")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert (info.value.path, info.value.line, info.value.key) == (str(path), 5, "faults.family")
    assert str(info.value).startswith(f"{path}:5: key 'faults.family': TOML syntax error")
    with pytest.raises(ScenarioError) as info:
        parse_scenario('name = "x"\npurpose = "y"\nworkload . "turns" = 3x\n', "dotted.toml")
    assert (info.value.line, info.value.key) == (3, "workload.turns")


def test_an_unknown_faults_key_lists_the_family_keys_among_the_known_ones():
    with pytest.raises(ScenarioError) as info:
        parse_scenario('name = "x"\npurpose = "y"\n[faults]\nfamily = "kill"\nlegss = 2\n', "f.toml")
    assert info.value.key == "faults.legss" and "max_states" in str(info.value) and "legs" in str(info.value)


def test_drift_schedule_races_and_family_parameters_are_parsed_into_the_fault_spec():
    s = parse_scenario('name = "x"\npurpose = "y"\n[workload]\ndrift = ["model", "tools"]\n'
                       '[faults]\nfamily = "kill"\nschedule = [{kind = "kill", event = 7}, {kind = "suspend", after_ms = 5}]\n')
    assert s.workload.drift == ("model", "tools")
    assert s.faults.schedule == ({"kind": "kill", "event": 7, "when": "after"},
                                 {"kind": "suspend", "signal": "SIGINT", "after_ms": 5.0})
    p = parse_scenario('name = "x"\npurpose = "y"\n[faults]\nfamily = "power_loss"\nmax_states = 5\nzero_fill = false\n')
    assert dict(p.faults.given)["max_states"] == 5 and dict(p.faults.given)["zero_fill"] is False
    assert dict(p.faults.given).get("samples", 64) == 64
    r = parse_scenario('name = "x"\npurpose = "y"\n[faults]\nfamily = "race"\nraces = ["two-writers"]\n')
    assert r.faults.params.races == ("two-writers",)


def test_the_family_keys_are_exactly_the_parameters_their_families_read():
    from dataclasses import fields

    from harness.families.power_loss.params import Params as PowerLossParams
    from harness.families.race.params import RACES
    from harness.families.race.params import Params as RaceParams
    from harness.families.registry import FAMILIES
    from harness.scenario.parse import FAMILY_KEYS

    not_from_a_file = {"seed", "jobs"}  # trials.seed and --jobs
    assert set(FAMILY_KEYS["power_loss"]) == {f.name for f in fields(PowerLossParams)} - not_from_a_file
    for family in FAMILIES:  # each family's Params is its TOML schema
        assert set(FAMILY_KEYS[family.name]) == {f.name for f in fields(family.Params)} - not_from_a_file
    assert set(FAMILY_KEYS["signals"]) == {"kill_points", "suspend_points", "signals", "legs", "chain", "max_events",
                                          "startup_points"}
    # the races a scenario may name are the race catalog's, one definition
    assert parse_scenario('name = "x"\npurpose = "y"\n[faults]\nfamily = "race"\nraces = ' + str(list(RACES))
                          .replace("'", '"') + "\n").faults.params.races == RACES
    assert fields(RaceParams)[0].name == "races"


def test_the_bundled_scenarios_cover_every_invariant_and_every_fault_family():
    from harness.families.registry import MODES

    scenarios = [load_scenario(p) for p in bundled_scenarios()]
    assert len(scenarios) >= 12
    jetstream = [load_scenario(p) for p in sorted((bundled_scenario_dir() / "jetstream").glob("*.toml"))]
    assert {s.faults.family for s in scenarios + jetstream} == set(MODES)   # (jetstream's: for a JetStream store)
    assert {i for s in scenarios for i in s.check.invariants} == set(INVARIANTS)
    workloads = [s.workload for s in scenarios]
    assert any(w.drift for w in workloads) and any(w.vary_on_repeat for w in workloads)
    assert any(w.chat_followups for w in workloads)
    assert any(w.max_iterations for w in workloads) and any(w.max_tokens < 10_000 for w in workloads)


def test_every_regression_scenario_loads_replays_one_schedule_and_is_named_after_its_file():
    from harness.scenario.parse import regression_scenarios

    paths = regression_scenarios()
    assert paths, "scenarios/regressions/ holds the bug the suite found"
    for path in paths:
        s = load_scenario(path)
        assert path.stem == s.name and s.name.startswith("regression-")
        assert s.faults.schedule, f"{path}: a regression scenario replays its shrunk schedule"
        assert "\n" not in s.purpose


def test_docs_scenarios_md_documents_every_key_and_every_bundled_scenario():
    from harness.scenario.parse import FAMILY_KEYS, SCHEMA

    doc = (Path(__file__).resolve().parent.parent / "docs" / "scenarios.md").read_text(encoding="utf-8")
    for section, keys in SCHEMA.items():
        for key in keys:
            assert f"| `{key}` |" in doc, f"docs/scenarios.md has no row for {section or 'top-level'} key {key!r}"
    for keys in FAMILY_KEYS.values():
        for key in keys:
            assert f"| `{key}` |" in doc, f"docs/scenarios.md has no row for family key {key!r}"
    for path in bundled_scenarios():
        assert f"`{path.stem}`" in doc, f"docs/scenarios.md does not list the bundled scenario {path.stem}"


def test_family_params_are_the_defaults_then_the_faults_keys_then_the_overrides_that_are_set():
    from dataclasses import dataclass

    from harness.scenario.model import family_params

    @dataclass(frozen=True)
    class Params:
        max_states: int = 64
        zero_fill: bool = True
        seed: int = 1
        jobs: int = 0

    s = parse_scenario('name = "x"\npurpose = "y"\n[faults]\nfamily = "power_loss"\nmax_states = 5\n')
    assert family_params(Params, s, {"max_states": 9, "seed": 3}, {"seed": None, "jobs": 2}) == \
        Params(max_states=5, zero_fill=True, seed=3, jobs=2)
    assert family_params(Params, Scenario("x", "y"), {"seed": 3}, {}) == Params(seed=3)


def test_the_bundled_scenarios_are_found_in_an_installed_copy_without_the_repository(monkeypatch, tmp_path):
    import sys

    from harness.scenario import parse as mod

    installed = tmp_path / "share" / "fiskj" / "scenarios"
    installed.mkdir(parents=True)
    monkeypatch.setattr(mod, "__file__", str(tmp_path / "site" / "harness" / "scenario" / "parse.py"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert mod.bundled_scenario_dir() == installed
    installed.rmdir()
    with pytest.raises(mod.ScenarioError, match="missing"):
        mod.bundled_scenario_dir()


def test_final_stop_makes_the_last_reply_cut_short_and_is_refused_with_chat_followups():
    from harness.workload.build import build_workload

    text = 'name = "fs"\npurpose = "p"\n[workload]\nturns = 1\nfinal_stop = "max_tokens"\n'
    scenario = parse_scenario(text, "fs.toml")
    last = build_workload(scenario).script.turns[-1]
    assert last.stop == "max_tokens" and len(last.tools) == 1   # a cut-off reply with a tool call never to run
    blocks, stop, _ = build_workload(scenario).script.reply(len(build_workload(scenario).script.turns) - 1)
    assert stop == "max_tokens" and [b["type"] for b in blocks][-1] == "tool_use"
    refusal = build_workload(parse_scenario(text.replace("max_tokens", "refusal"), "fs.toml")).script.turns[-1]
    assert refusal.stop == "refusal" and not refusal.tools
    with pytest.raises(ScenarioError, match="final_stop"):
        parse_scenario(text + "chat_followups = 1\n", "fs.toml")
    with pytest.raises(ScenarioError, match="use final_stop"):
        parse_scenario(text.replace('final_stop = "max_tokens"', 'answer_stop_reasons = ["max_tokens"]'), "fs.toml")


def test_a_misspelt_key_is_refused_with_the_closest_known_key():
    with pytest.raises(ScenarioError, match=r"unknown key in \[workload\]; did you mean 'turns'\?"):
        parse_scenario('name = "x"\npurpose = "p"\n[workload]\nturnz = 2\n', "x.toml")
    with pytest.raises(ScenarioError, match=r"unknown key; did you mean 'purpose'\?"):
        parse_scenario('name = "x"\npurpos = "p"\n', "x.toml")
