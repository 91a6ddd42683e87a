"""The power-loss and tail families as campaign executors (harness/families.py)."""

import pytest

from harness.families.legacy import power_loss, tail
from harness.selftest.mutants import subject_for
from harness.runner.trial import Runner
from harness.scenario.parse import bundled_scenario_dir, load_scenario


def scenario(name):
    return load_scenario(bundled_scenario_dir() / f"{name}.toml")


@pytest.fixture(scope="module")
def runner():
    r = Runner()
    yield r
    r.close()


@pytest.fixture(scope="module")
def reference_states(runner):
    return power_loss(scenario("power-loss-basic"), 1, 12, runner)


def test_power_loss_trials_on_the_reference_are_all_valid_and_count_crash_states(reference_states):
    trials = reference_states
    assert trials and all(not t.failed and not t.unknown for t in trials)
    assert sum(t.faults["crash_states"] for t in trials) == len(trials)
    assert all(t.schedule[0]["kind"] == "power_loss" and t.schedule[0]["state"] for t in trials)
    assert "I4" in trials[0].invariants


def test_power_loss_catches_a_store_that_never_fsyncs():
    mutant = Runner(subject_for("no-fsync"))
    try:
        trials = power_loss(scenario("power-loss-basic"), 1, 12, mutant)
    finally:
        mutant.close()
    failed = [t for t in trials if "I4" in t.failed]
    assert failed, "no trial caught the missing fsync"
    assert "--subject" in failed[0].reproduce and "--seed 1" in failed[0].reproduce


def test_a_shard_of_the_power_loss_family_runs_every_nth_state(runner, reference_states):
    whole = reference_states
    part = power_loss(scenario("power-loss-basic"), 1, 12, runner, shard=(1, 3))
    assert [t.schedule for t in part] == [t.schedule for t in whole[1::3]]


def test_tail_trials_on_the_reference_are_all_valid(runner):
    trials = tail(scenario("tails-basic"), 1, 4, runner)
    assert len(trials) > 50 and all(not t.failed and not t.unknown for t in trials)
    assert {v.invariant for t in trials for v in t.verdicts} == {"I4", "I5"}


@pytest.mark.parametrize("name, invariant", [("reader-tolerates-corruption", "I5"),
                                             ("reader-drops-final-record", "I5"),
                                             ("torn-tail-not-cut", "I4")])
def test_tail_catches_a_broken_reader_or_writer(name, invariant):
    mutant = Runner(subject_for(name))
    try:
        trials = tail(scenario("tails-basic"), 1, 4, mutant)
    finally:
        mutant.close()
    assert any(invariant in t.failed for t in trials), f"{name} was not caught by {invariant}"
