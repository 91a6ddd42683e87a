"""The pytest plugin: a team's pytest test runs a campaign on its own agent and fails with the reproducer."""

from __future__ import annotations

import json
import sys

import pytest

from drift_text import drift_scenario
from harness.cli.pytest_plugin import (DurabilityFailure, DurabilitySetupError, format_failure,
                                       run_durability_campaign)

pytest_plugins = ["pytester"]

#: A crash in the middle of the run, then resumes with another model: a correct agent refuses the
#: drifted resume; the mutant whose resume guard ignores the model does not (deterministic: an event kill).
DRIFT = drift_scenario("plugin-drift")

MUTANT_AGENT = f"{sys.executable} -m harness.selftest.subject"


@pytest.fixture
def drift_scenario(tmp_path):
    path = tmp_path / "plugin-drift.toml"
    path.write_text(DRIFT, encoding="utf-8")
    return str(path)


def test_the_plugin_is_registered_through_its_entry_point(pytestconfig):
    # A user's pytest autoloads it by its pytest11 entry point; this suite names it with -p instead
    # (pyproject.toml: autoload off, so the plugin's whole distribution is not assert-rewritten).
    import importlib.metadata

    points = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    assert points.get("fiskj_harness") == "harness.cli.pytest_plugin"
    assert pytestconfig.pluginmanager.has_plugin("harness.cli.pytest_plugin")


def test_a_campaign_on_a_correct_agent_passes_and_returns_its_report(drift_scenario, tmp_path):
    outcome = run_durability_campaign(drift_scenario, report_json=str(tmp_path / "r.json"))
    assert outcome.ok and not outcome.violations
    assert outcome.report["trials"] == 1 and (tmp_path / "r.json").exists()
    written = json.loads((tmp_path / "r.json").read_text())  # portable as `run --report-json`'s: replay finds it all
    assert written["campaign"]["scenario_refs"] == {"plugin-drift": {"file": "plugin-drift.toml"}}


def test_a_campaign_on_a_broken_agent_fails_with_the_reproducer_in_the_message(drift_scenario):
    with pytest.raises(DurabilityFailure) as info:
        run_durability_campaign(drift_scenario, subject=MUTANT_AGENT, env={"FISKJ_MUTANT": "fingerprint-ignores-model"})
    message = str(info.value)
    assert isinstance(info.value, AssertionError)
    assert "I9 violated in plugin-drift" in message
    assert "reproduce: fiskj-harness run " in message
    assert "--subject 'FISKJ_MUTANT=fingerprint-ignores-model " in message
    assert '--schedule \'[{"kind":"kill","event":12,"when":"after"}]\'' in message


def test_with_check_off_the_outcome_holds_the_violations_and_reproducers(drift_scenario):
    outcome = run_durability_campaign(drift_scenario, subject=MUTANT_AGENT, check=False,
                                      env={"FISKJ_MUTANT": "fingerprint-ignores-model"})
    assert not outcome.ok and outcome.violations[0]["invariant"] == "I9"
    assert outcome.reproducers and "'FISKJ_MUTANT=fingerprint-ignores-model " in outcome.reproducers[0]
    assert format_failure(outcome.report).startswith("durability campaign: 1 violation(s)")


def test_a_scenario_that_does_not_exist_is_a_setup_error_not_a_failure():
    with pytest.raises(DurabilitySetupError, match="no-such-scenario"):
        run_durability_campaign("no-such-scenario")


def test_a_team_writes_pytest_tests_with_the_fixture_and_the_marker(pytester, drift_scenario):
    pytester.makepyfile(test_agent=f"""
        import pytest

        SCENARIO = {drift_scenario!r}
        BROKEN = {MUTANT_AGENT!r}

        def test_reference_agent_survives(durability_campaign):
            outcome = durability_campaign(SCENARIO)
            assert outcome.ok

        def test_broken_agent(durability_campaign):
            durability_campaign(SCENARIO, subject=BROKEN, env={{"FISKJ_MUTANT": "fingerprint-ignores-model"}})

        @pytest.mark.durability(SCENARIO, subject=BROKEN, env={{"FISKJ_MUTANT": "fingerprint-ignores-model"}})
        def test_broken_agent_by_marker(durability_campaign):
            durability_campaign()
    """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*DurabilityFailure: durability campaign: 1 violation(s)*",
                                 "*reproduce: fiskj-harness run *--subject 'FISKJ_MUTANT=fingerprint-ignores-model *"])


def test_the_subject_option_applies_to_tests_that_name_none(pytester, drift_scenario, monkeypatch):
    monkeypatch.setenv("FISKJ_MUTANT", "fingerprint-ignores-model")   # read by the mutant agent only
    pytester.makepyfile(test_agent=f"""
        def test_agent_under_test(durability_campaign):
            durability_campaign({drift_scenario!r})
    """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", f"--durability-subject={MUTANT_AGENT}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*I9 violated in plugin-drift*"])


def test_the_seed_option_applies_to_tests_that_name_none(pytester, drift_scenario):
    pytester.makepyfile(test_agent=f"""
        def test_seeded(durability_campaign):
            outcome = durability_campaign({drift_scenario!r})
            assert outcome.report["campaign"]["seeds"] == {{"plugin-drift": 4242}}
    """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--durability-seed=4242")
    result.assert_outcomes(passed=1)


def test_a_seed_ini_value_that_is_not_an_integer_is_a_usage_error_naming_it(pytester):
    pytester.makeini("[pytest]\ndurability_seed = abc\n")
    pytester.makepyfile(test_agent="def test_x(durability_campaign):\n    durability_campaign('kill-random')\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*durability_seed: not an integer seed: 'abc'*"])


def test_a_failure_message_says_where_the_rows_it_does_not_show_are():
    rows = [{"invariant": "I2", "scenario": "s", "seed": 1, "trial": k, "summary": "x", "schedule": []}
            for k in range(12)]
    written = {"violations": rows, "unknowns": [], "trials": 12, "report_path": "/tmp/r.json"}
    assert "- ... 2 more in /tmp/r.json" in format_failure(written)
    unwritten = dict(written, report_path="REPORT")
    assert "2 more (not shown: pass report_json=FILE to keep them all)" in format_failure(unwritten)
