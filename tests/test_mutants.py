"""The mutant self-test: every deliberately broken variant of fiskj is caught by the campaign that targets it.

One test per mutant (xdist spreads them); each runs that mutant's target
campaign with the mutant applied in the agent processes only.
"""

from __future__ import annotations

import json

import pytest

from fiskj import fingerprint, loop, store
from harness.cli.main import main
from harness.selftest.mutants import MODULES, mutants
from harness.selftest.targets import TARGETS, Target
from harness.selftest.race_mutants import MUTANTS as RACE_MUTANTS
from harness.selftest.run import all_mutants, render_table, run_mutant

#: The bug classes of issue 7 item 4, each with the mutant that reintroduces it.
BUG_CLASSES = {
    "no fsync": "no-fsync",
    "fsync before write": "fsync-before-write",
    "no directory fsync on first append": "no-dir-fsync",
    "new store directory not made durable": "store-dir-not-durable",
    "torn tail not cut before appending": "torn-tail-not-cut",
    "fold before lock": "fold-before-lock",
    "create without O_EXCL": "create-no-excl",
    "tool result journaled before the tool runs": "result-before-tool",
    "assistant record journaled after its tools": "assistant-after-tools",
    "suspend honoured mid-batch": "suspend-mid-batch",
    "resume re-runs answered tools": "resume-reruns-answered",
    "reader tolerates interior corruption": "reader-tolerates-corruption",
    "reader drops a complete final record": "reader-drops-final-record",
    "counters kept in memory instead of folded": "counters-in-memory",
    "a fingerprint field ignored": "fingerprint-ignores-model",
    "lock released before the last append": "release-before-last-append",
}


def test_there_are_at_least_14_mutants_one_per_bug_class_and_each_has_a_target():
    names = all_mutants()
    assert len(names) >= 14
    assert set(BUG_CLASSES.values()) <= set(names)
    assert len({defect for defect, _ in names.values()}) == len(names), "two mutants share a bug class"
    assert set(TARGETS) == set(names), "harness/mutants/targets.py must name a campaign for every mutant"
    assert not set(RACE_MUTANTS) & {m.name for m in mutants()}
    assert len(MODULES) == len(mutants())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_each_mutant_is_caught_by_the_campaign_that_targets_it(name):
    result = run_mutant(name, budget_s=45.0, jobs=2)
    assert not result.errors, result.errors
    assert result.caught, f"{name} was not caught by {result.scenario} in {result.trials} trial(s)"
    assert result.invariants and result.first_detection_s is not None and result.shrunk_length >= 1
    if name not in RACE_MUTANTS:
        assert f"FISKJ_MUTANT={name}" in result.reproduce


def test_a_mutant_its_campaign_cannot_catch_is_reported_not_caught_and_the_command_exits_1(monkeypatch, capsys):
    # A model-ignoring resume guard is invisible without fingerprint drift: the no-op scenario cannot see it.
    monkeypatch.setitem(TARGETS, "fingerprint-ignores-model",
                        Target("fingerprint-ignores-model", "noop-baseline", 1, ("I9",), shrink=0))
    result = run_mutant("fingerprint-ignores-model", budget_s=0.0, jobs=2)
    assert not result.caught and result.trials == 1 and result.first_detection_s is None
    table = render_table([result])
    assert "fingerprint-ignores-model" in table and " NO " in table and "NOT caught: fingerprint-ignores-model" in table
    assert main(["mutants", "fingerprint-ignores-model", "--budget", "0.01", "-q"]) == 1
    assert "NOT caught" in capsys.readouterr().out


def test_the_mutants_command_prints_json_with_caught_invariant_detection_time_and_shrunk_length(capsys):
    assert main(["mutants", "fingerprint-ignores-model", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (row,) = data["mutants"]
    assert data["caught"] == data["total"] == 1
    assert row["caught"] is True and row["invariants"] == ["I9"] and row["scenario"] == "drift-refused"
    assert row["first_detection_s"] > 0 and row["shrunk_length"] == 1
    assert main(["mutants", "no-such-mutant"]) == 2


def test_mutants_are_applied_in_the_agent_processes_only():
    before = (loop._Run._run_batch, loop._Run.__init__, loop._Run._call_model, fingerprint.diff, loop.diff,
              store._never_created)
    for name in ("resume-reruns-answered", "create-not-reclaimed"):
        assert run_mutant(name, budget_s=0.0, jobs=2).caught
    assert before == (loop._Run._run_batch, loop._Run.__init__, loop._Run._call_model, fingerprint.diff,
                      loop.diff, store._never_created)
