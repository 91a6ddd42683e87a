"""Every fault family shrinks a failure: a broken engine fails a bundled scenario, the campaign shrinks the failing
trial to a strictly smaller one that fails the same invariant the same way, the report's smallest reproducer is
that trial and says what got smaller, and ``replay`` of it shows the same violation (issue 26 item 5)."""

from __future__ import annotations

import json
import re

import pytest

from harness.cli.main import main
from harness.families.base import smaller_schedules
from harness.families.tail.family import damage
from harness.families.tail.mutations import mutation_by_id, mutations


def _faults(words: str) -> tuple[int, int]:
    """A fault schedule's words (``kill at event 9 + kill at write #1``): (faults, sum of their positions)."""
    return words.count(" + ") + 1, sum(map(int, re.findall(r"\d+", words)))


def _numbers(words: str) -> tuple[int, ...]:
    return tuple(map(int, re.findall(r"\d+", words)))


# family, scenario, mutant (harness/selftest/mutants.py), run options, how big a side of the shrink's words is
CASES = [
    ("power_loss", "power-loss-basic", "no-fsync", ["--trials", "2", "--jobs", "1"], _numbers),
    ("tail", "tails-basic", "torn-tail-is-corrupt", ["--trials", "4"], _numbers),
    ("io_error", "io-errors", "write-error-swallowed", ["--trials", "2"], _faults),
    ("race", "race-two-writers", "release-before-last-append", ["--trials", "1", "--shrink-budget", "2"], _faults),
    # seed 2: the chain's first draw (both kills at their first event) holds, its second fails and drops a kill
    ("chain", "chain-crash-in-pending-batch", "assistant-after-tools", ["--trials", "2", "--seed", "2"], _faults),
]


def _violations(report: dict, trial: int) -> set[tuple[str, str]]:
    return {(v["invariant"], (v.get("evidence") or {}).get("violations", [{}])[0].get("kind", ""))
            for v in report["violations"] if v["trial"] == trial}


@pytest.mark.parametrize("family, scenario, mutant, options, size", CASES, ids=[c[0] for c in CASES])
def test_a_failure_of_every_family_shrinks_to_a_smaller_trial_that_replays_the_same_violation(
        tmp_path, capsys, family, scenario, mutant, options, size):
    path, again = tmp_path / "report.json", tmp_path / "replay.json"
    subject = f"FISKJ_MUTANT={mutant} python -m harness.selftest.subject"
    assert main(["run", scenario, "--subject", subject, "--shrink-budget", "3", "--keep", "none",
                 "--report-json", str(path), *options]) == 1
    out = capsys.readouterr().out
    report = json.loads(path.read_text())
    (shrink,) = report["campaign"]["shrinks"]
    before, after = shrink["what"].split(" -> ")
    assert size(after) < size(before), shrink["what"]  # strictly smaller, by the family's own measure
    wanted = _violations(report, shrink["from_trial"]) & _violations(report, shrink["trial"])
    assert wanted, (shrink, report["violations"])  # the same invariant, the same first violation
    # the report's smallest reproducer is the shrunk trial, and says what got smaller
    assert f"smallest reproducer: trial {shrink['trial']} " in out
    assert f"shrunk from trial {shrink['from_trial']}: {shrink['what']}" in out
    assert f"shrunk: trial {shrink['from_trial']} -> trial {shrink['trial']}" in out
    assert main(["replay", str(path), "--trial", str(shrink["trial"]), "--report-json", str(again), "-q"]) == 1
    assert wanted & _violations(json.loads(again.read_text()), shrink["trial"])


def test_smaller_fault_schedules_drop_a_fault_then_move_each_one_earlier():
    chain = [{"kind": "suspend", "signal": "SIGINT", "event": 6}, {"kind": "kill", "event": 4, "op": "write"}]
    out = smaller_schedules(chain)
    assert out[:2] == [[chain[1]], [chain[0]]]  # the fewest faults first
    assert [s[0]["event"] for s in out[2:5]] == [1, 3, 5] and [s[1]["event"] for s in out[5:]] == [1, 2, 3]
    assert smaller_schedules([{"kind": "kill", "event": 1, "when": "before"}]) == []  # nothing smaller
    assert smaller_schedules([{"kind": "kill", "after_ms": 40.0}]) == [[{"kind": "kill", "after_ms": 20.0}]]


def test_a_tail_mutation_named_by_a_shrink_is_the_one_the_nemesis_makes_and_its_damage_is_measured():
    journal = b"".join(json.dumps({"seq": i, "x": "a" * (10 + i)}).encode() + b"\n" for i in range(1, 6))
    made = {m.id: m for m in mutations(journal, seed=3)}
    cut = next(m for m in made.values() if m.kind == "cut" and m.expect == "torn")
    again = mutation_by_id(journal, cut.id)
    assert (again.data, again.expect, again.torn, again.seqs) == (cut.data, cut.expect, cut.torn, cut.seqs)
    assert damage(journal, cut.data) == ((len(journal) - len(cut.data), 0), f"cut {len(journal) - len(cut.data)} byte(s)")
    zeroed = made["zeroed-last+nl"]
    last = len(journal) - journal.rfind(b"\n", 0, len(journal) - 1) - 2  # the last record without its newline
    assert damage(journal, zeroed.data)[0] == (last, 1)
    one = mutation_by_id(journal, f"flip@{len(journal) - 2}:00")  # one NUL byte, the last before the newline
    assert one.expect == zeroed.expect == "torn" and one.torn == zeroed.torn
    assert damage(journal, one.data)[0] == (1, 1) < damage(journal, zeroed.data)[0]
    with pytest.raises(ValueError, match="no tail mutation"):
        mutation_by_id(journal, "garbage0")
