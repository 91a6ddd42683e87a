"""Portable reports (harness/report/portable.py): scenarios and profiles found again wherever the report is."""

import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.campaign.result import CampaignResult, ScenarioRun
from harness.errors import ResultsError
from harness.report.portable import (bundled_profile_dir, portable, profile_ref, scenario_path, scenario_ref,
                                     subject_profile)
from harness.report.report import campaign_report
from harness.scenario.parse import bundled_scenario_dir
from harness.selftest.mutants import subject_for
from harness.subject.contract import default_subject, parse_subject


def test_a_bundled_scenario_is_recorded_by_name_and_another_file_relative_to_the_report(tmp_path):
    bundled = bundled_scenario_dir() / "kill-random.toml"
    assert scenario_ref(str(bundled), str(tmp_path / "r.json")) == {"bundled": "kill-random"}
    regression = next(iter(sorted((bundled_scenario_dir() / "regressions").glob("*.toml"))), None)
    if regression is not None:
        assert scenario_ref(str(regression), None) == {"bundled": f"regressions/{regression.stem}"}
    mine = tmp_path / "sc" / "mine.toml"
    assert scenario_ref(str(mine), str(tmp_path / "out" / "r.json")) == {"file": "../sc/mine.toml"}
    assert scenario_ref(None, "r.json") is None


def test_a_moved_report_finds_its_scenarios_by_their_references_not_the_paths_it_ran_from(tmp_path):
    (tmp_path / "a" / "sc").mkdir(parents=True)
    (tmp_path / "a" / "sc" / "mine.toml").write_text("x")
    report = {"campaign": {"scenarios": {"mine": str(tmp_path / "a" / "sc" / "mine.toml"),
                                         "kill-random": "/machine/that/ran/it/scenarios/kill-random.toml"}}}
    written = portable(report, str(tmp_path / "a" / "r.json"))
    assert "scenario_refs" not in report["campaign"]                          # the report itself is not changed
    refs = written["campaign"]["scenario_refs"]
    assert refs["mine"] == {"file": "sc/mine.toml"}
    assert (tmp_path / "a" / refs["kill-random"]["file"]).resolve() == \
        Path("/machine/that/ran/it/scenarios/kill-random.toml")             # not bundled: a file, relative
    written["campaign"]["scenarios"]["kill-random"] = str(bundled_scenario_dir() / "kill-random.toml")
    written = portable(written, str(tmp_path / "a" / "r.json"))
    assert written["campaign"]["scenario_refs"]["kill-random"] == {"bundled": "kill-random"}
    written["campaign"]["scenarios"]["kill-random"] = "/machine/that/ran/it/scenarios/kill-random.toml"
    shutil.move(tmp_path / "a", tmp_path / "b")                               # moved, with its scenario
    moved = str(tmp_path / "b" / "r.json")
    assert scenario_path(written, "mine", moved) == str(tmp_path / "b" / "sc" / "mine.toml")
    assert scenario_path(written, "kill-random", moved) == str(bundled_scenario_dir() / "kill-random.toml")
    with pytest.raises(ResultsError) as caught:
        scenario_path(written, "other", moved)
    assert caught.value.path == moved and caught.value.field == "campaign.scenarios"
    written["campaign"]["scenario_refs"]["mine"] = {"file": "gone.toml"}
    written["campaign"]["scenarios"]["mine"] = "/nowhere/mine.toml"
    with pytest.raises(ResultsError, match="not where the report says") as caught:
        scenario_path(written, "mine", moved)
    assert caught.value.field == "campaign.scenario_refs.mine"
    written["campaign"]["scenario_refs"]["mine"] = {"ftp": "x"}
    with pytest.raises(ResultsError, match="unknown reference 'ftp'"):
        scenario_path(written, "mine", moved)


def test_a_profile_subject_is_recorded_under_subjects_or_relative_to_the_report(tmp_path):
    node = bundled_profile_dir() / "node" / "profile.toml"
    assert profile_ref(str(node), str(tmp_path / "r.json")) == {"bundled": "node/profile.toml"}
    assert profile_ref(str(tmp_path / "p" / "me.toml"), str(tmp_path / "r" / "r.json")) == {"file": "../p/me.toml"}
    report = portable({"campaign": {"subject": "/old/machine/subjects/node/profile.toml",
                                    "scenarios": {}}}, str(tmp_path / "r.json"))
    report["campaign"]["subject_ref"] = {"bundled": "node/profile.toml"}
    assert subject_profile(report, str(tmp_path / "r.json")) == str(node)
    assert subject_profile({"campaign": {"subject": ["python", "-m", "fiskj"]}}, "r.json") is None


def _result(subject):
    run = ScenarioRun(scenario=SimpleNamespace(name="kill-random", path=str(bundled_scenario_dir() /
                                                                               "kill-random.toml")), seed=1)
    return CampaignResult(trials=[], errors=[], scenarios=[run], elapsed_s=1.0, jobs=1, subject=subject)


def test_a_report_records_the_subject_as_the_user_gave_it_never_this_machines_interpreter():
    reference = campaign_report(_result(default_subject()), "r.json")["campaign"]
    assert reference["subject"] is None and sys.executable not in json.dumps(reference)
    mutant = campaign_report(_result(subject_for("no-fsync")), "r.json")["campaign"]
    assert mutant["subject_env"]["FISKJ_MUTANT"] == "no-fsync"
    given = campaign_report(_result(parse_subject("FOO=1 python -m fiskj")), "r.json")["campaign"]
    assert given["subject"] == ["python", "-m", "fiskj"] and given["subject_env"] == {"FOO": "1"}


def test_a_variable_a_profile_reads_is_kept_and_a_replay_where_it_is_unset_sets_it(tmp_path, monkeypatch):
    """A profile whose command is ``{env:NAME}`` (Claude Code's ``FISKJ_CLAUDE_CODE``): the report keeps the
    variable as it was set (``subject_env_read``), and a replay in a shell where it is unset runs the same agent
    (it was a setup error: the report kept only the ``NAME=value`` words); where it is set, that value wins."""
    from harness.cli.main import main

    profile = tmp_path / "mine.toml"
    profile.write_text((Path(__file__).resolve().parents[1] / "subjects" / "reference.toml").read_text()
                       .replace('name = "fiskj-reference"', 'name = "mine"')
                       .replace('command = ["{python}", "-m", "fiskj"]',
                                'command = ["{env:MY_PYTHON}", "-m", "fiskj"]'))
    monkeypatch.setenv("MY_PYTHON", sys.executable)
    report = tmp_path / "r.json"
    assert main(["run", "noop-baseline", "-q", "--subject", str(profile), "--report-json", str(report),
                 "--results", str(tmp_path / "res")]) == 0
    campaign = json.loads(report.read_text())["campaign"]
    assert campaign["subject_env"] == {} and campaign["subject_env_read"] == {"MY_PYTHON": sys.executable}
    monkeypatch.delenv("MY_PYTHON")
    again = tmp_path / "again.json"
    assert main(["replay", str(report), "--trial", "0", "-q", "--report-json", str(again)]) == 0
    assert json.loads(again.read_text())["trials"] == 1
    monkeypatch.setenv("MY_PYTHON", "/no/such/python")  # this machine's own value wins: it cannot start
    assert main(["replay", str(report), "--trial", "0", "-q", "--report-json", str(again)]) == 2
