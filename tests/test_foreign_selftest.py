"""The foreign subject through the path a third party uses: `fiskj-harness run --subject "node ..."`.

An engine in another language, with none of our code inside it: its legs
run under the outside observer, so event kills, power loss and I4/I8 come
from outside.  The correct agent passes a short campaign of every family
that applies to it (CI runs this); each bug variant of
harness.selftest.targets.FOREIGN_TARGETS is caught by its bundled scenario.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest

from harness.cli.main import main
from harness.selftest.targets import (FOREIGN_NOT_CAUGHT, FOREIGN_SUBJECT, FOREIGN_TARGETS, JSONL_NOT_CAUGHT,
                                      JSONL_SAME_PATH, JSONL_SUBJECT, JSONL_TARGETS, OPAQUE_NOT_CAUGHT, OPAQUE_SUBJECT,
                                      OPAQUE_TARGETS, TEXT_READING_SUBJECT, TEXT_READING_TARGETS)

ROOT = Path(__file__).resolve().parent.parent
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed: the foreign subject cannot run "
                                                     "(every machine here has Node.js 20; install nodejs)")


@dataclass
class Ran:
    """What a `fiskj-harness run` said: its exit status and its output."""

    returncode: int
    stdout: str
    stderr: str


def campaign(tmp_path, scenarios, trials, bug=None, profile=FOREIGN_SUBJECT, readings=True):
    """`fiskj-harness run` of ``scenarios`` against ``profile`` (``bug``: a variant, its catch campaign), as a
    third party runs it: its command line through :func:`harness.cli.main.main`, in this process (a Python start
    and the harness's imports spared), in ``tmp_path`` with none of this process's FISKJ_ variables."""
    subject = (f"FISKJ_FOREIGN_BUG={bug} " if bug else "") + profile.replace("subjects/", f"{ROOT}/subjects/")
    report = tmp_path / "report.json"
    argv = ["run", *[str(ROOT / "scenarios" / f"{s}.toml") for s in scenarios],
            "--subject", subject, "--trials", str(trials), "--seed", "1", "--report-json", str(report), "--quiet", "--keep", "none",
            # caught? not how often, not how small; one trial at a time: one in flight beside the catch is spent
            *(["--first-violation", "--shrink-budget", "0", "--jobs", "1"] if bug else []),
            *([] if readings else ["--no-readings"])]
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, {k: v for k, v in os.environ.items() if not k.startswith("FISKJ_")}, clear=True), \
            contextlib.chdir(tmp_path), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return Ran(code, out.getvalue(), err.getvalue()), (json.loads(report.read_text()) if report.exists() else None)


def test_the_correct_foreign_subject_passes_every_family_that_applies_observed_from_outside(tmp_path):
    proc, report = campaign(tmp_path, ["kill-every-event", "power-loss-basic", "suspend-clean"], 5)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert report["verdict"] == "valid"
    i4 = report["invariants"]["I4"]
    assert i4["checked"] > 0 and i4["unknown"] == 0 and i4["valid"] > i4.get("vacuous", 0)
    assert report["faults"]["kill"] >= 5 and report["faults"]["power_loss"] >= 5 and report["faults"]["suspend"] > 0
    # code probes are fiskj's: for another engine the report says they do not apply, never "0 of N reached"
    assert report["probes"]["applies"] is False and report["probes"]["unreached"] == []
    assert "not fiskj-based" in report["probes"]["note"]


@pytest.mark.parametrize("bug", sorted(FOREIGN_TARGETS))
def test_each_bug_variant_of_the_foreign_subject_is_caught_by_its_bundled_scenario(tmp_path, bug):
    target = FOREIGN_TARGETS[bug]
    # the agent's own reading (a node start after every leg) only where it is what catches the bug: I10, and
    # the tail family's reader checks, which ask the status command (the reader-* variants)
    readings = "I10" in target.expect or bug.startswith(("reader-", "status-"))
    proc, report = campaign(tmp_path, [target.scenario], target.trials, bug=bug, readings=readings)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    caught = {row["invariant"] for row in report["violations"]}
    assert caught & set(target.expect), (bug, caught)


@pytest.mark.parametrize("profile, scenario, trials, declared", [
    ("sigterm-aborts", "suspend-clean", 12, "resume of a completed run: refuse; suspend on SIGINT, abort like a kill on SIGTERM"),
    ("new-turn", "kill-every-event", 40, "resume of a completed run: new-turn;")])
def test_a_variant_whose_behaviour_its_profile_declares_is_judged_by_its_promise_and_passes(tmp_path, profile, scenario,
                                                                                           trials, declared):
    # the variant (caught through profile.toml and envelope.toml, above) declares its behaviour in its own profile
    proc, report = campaign(tmp_path, [scenario], trials, profile=f"subjects/node/{profile}.toml", readings=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert sum(report["faults"].get(k, 0) for k in ("kill", "suspend")) >= trials // 2
    assert all(c["invalid"] == 0 and c["unknown"] == 0 for c in report["invariants"].values())
    assert report["campaign"]["promises"].startswith(declared)


@pytest.mark.parametrize("bug", sorted(TEXT_READING_TARGETS))
def test_a_variant_whose_own_reading_is_wrong_is_caught_through_a_text_reading_read_by_pattern(tmp_path, bug):
    # fisk-ai's `session show` prints text only: the fisk-ai-style profile reads its Status line by pattern
    target = TEXT_READING_TARGETS[bug]
    proc, report = campaign(tmp_path, [target.scenario], target.trials, bug=bug, profile=TEXT_READING_SUBJECT)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert {row["invariant"] for row in report["violations"]} & set(target.expect), report["violations"]


def test_the_correct_agent_s_text_reading_agrees_with_the_journal_where_the_variants_are_caught(tmp_path):
    scenarios = sorted({t.scenario for t in TEXT_READING_TARGETS.values()})
    proc, report = campaign(tmp_path, scenarios, 6, profile=TEXT_READING_SUBJECT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    i10 = report["invariants"]["I10"]
    assert report["verdict"] == "valid" and i10["valid"] == i10["checked"] > i10["vacuous"]


def test_the_variants_not_caught_yet_are_every_other_variant_the_subject_has():
    source = (ROOT / "subjects" / "node" / "lib" / "bugs.mjs").read_text()
    for name in list(FOREIGN_TARGETS) + list(FOREIGN_NOT_CAUGHT):
        assert f"'{name}'" in source or f'"{name}"' in source, name
    assert not set(FOREIGN_TARGETS) & set(FOREIGN_NOT_CAUGHT)


def test_the_correct_agent_writing_its_own_journal_format_passes_judged_without_decoding_a_record(tmp_path):
    proc, report = campaign(tmp_path, ["kill-every-event", "power-loss-basic"], 4, profile=JSONL_SUBJECT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    for inv in ("I2", "I4", "I5", "I6"):
        assert report["invariants"][inv]["valid"] > 0 and report["invariants"][inv]["unknown"] == 0, inv
    assert "journal format jsonl" in proc.stdout + proc.stderr        # what is judged how, said up front


@pytest.mark.parametrize("bug", sorted(set(JSONL_TARGETS) - JSONL_SAME_PATH))
def test_each_bug_variant_is_caught_in_a_journal_format_the_harness_does_not_decode(tmp_path, bug):
    target = JSONL_TARGETS[bug]
    proc, report = campaign(tmp_path, [target.scenario], target.trials, bug=bug, profile=JSONL_SUBJECT)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    caught = {row["invariant"] for row in report["violations"]}
    assert caught & set(target.expect), (bug, caught)


def test_the_correct_agent_with_an_opaque_store_passes_judged_from_outside_and_from_its_reading(tmp_path):
    proc, report = campaign(tmp_path, ["kill-every-event", "power-loss-basic", "race-two-resumers"], 4,
                            profile=OPAQUE_SUBJECT, readings=False)     # an opaque store is read all the same
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    for inv in ("I2", "I4", "I5", "I6", "I8"):
        row = report["invariants"][inv]
        assert row["valid"] > row.get("vacuous", 0) and row["unknown"] == 0, (inv, row)
    assert report["faults"]["race"] >= 4 and report["faults"]["power_loss"] >= 4
    assert "journal format opaque" in proc.stdout + proc.stderr       # what is judged how, said up front


@pytest.mark.parametrize("bug", sorted(OPAQUE_TARGETS))
def test_each_bug_variant_is_caught_through_an_opaque_store(tmp_path, bug):
    target = OPAQUE_TARGETS[bug]
    proc, report = campaign(tmp_path, [target.scenario], target.trials, bug=bug, profile=OPAQUE_SUBJECT)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    caught = {row["invariant"] for row in report["violations"]}
    assert caught & set(target.expect), (bug, caught)
    assert not set(OPAQUE_TARGETS) & set(OPAQUE_NOT_CAUGHT)
    assert set(OPAQUE_TARGETS) | set(OPAQUE_NOT_CAUGHT) <= set(FOREIGN_TARGETS)


def test_every_variant_is_a_jsonl_target_or_says_why_it_cannot_be_one():
    assert set(JSONL_TARGETS) | set(JSONL_NOT_CAUGHT) == set(FOREIGN_TARGETS) | set(FOREIGN_NOT_CAUGHT)
    assert not set(JSONL_TARGETS) & set(JSONL_NOT_CAUGHT)
    # a variant whose jsonl catch is not run here is caught the same way in fisk-ai v2 (FOREIGN_TARGETS)
    for bug in JSONL_SAME_PATH:
        same, fisk = JSONL_TARGETS[bug], FOREIGN_TARGETS[bug]
        assert same.scenario == fisk.scenario and set(same.expect) <= set(fisk.expect) | {"I8"}, bug


def test_a_bundled_scenario_that_cannot_apply_is_not_run_and_said_in_the_default_set_and_an_error_when_named():
    from harness.campaign.campaign import Campaign
    from harness.scenario.parse import load_scenario
    from harness.subject.profile import load_profile

    subject = load_profile(ROOT / JSONL_SUBJECT)   # its profile gives no reading command
    readers = load_scenario(ROOT / "scenarios" / "race-readers-during-appends.toml")   # reads the run mid-append
    quiet = Campaign([readers], subject=subject, skip_unsupported=True).run()            # the bundled set
    assert quiet.errors == [] and quiet.trials == []
    assert any("race-readers-during-appends: NOT RUN for this subject" in line for line in quiet.limits)
    named = Campaign([readers], subject=subject).run()                                  # asked for by name
    assert len(named.errors) == 1 and "reading command" in named.errors[0]


@pytest.mark.parametrize("who", ["reference", "foreign"])
def test_a_recovery_that_cuts_an_acknowledged_line_after_a_power_loss_is_caught_as_lost_by_recovery(tmp_path, who):
    # torn-tail-overcut: the power-loss family's own I4 rule must name it, for fiskj's mutant and for the Node agent
    if who == "foreign":
        # caught on the first full resume (trial 3); the agent's own reading, which the cheap tier would ask about
        # every crash state's journal (a node start each), is not what catches it (as for FOREIGN_TARGETS above)
        proc, report = campaign(tmp_path, ["power-loss-basic"], 4, bug="torn-tail-overcut", readings=False)
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
        rows = report["violations"]
    else:
        from harness.campaign.campaign import Campaign
        from harness.report.report import campaign_report
        from harness.scenario.parse import load_scenario
        from harness.selftest.mutants import subject_for

        result = Campaign([load_scenario(ROOT / "scenarios" / "power-loss-basic.toml")], trials=4, shrink_budget=0,
                          subject=subject_for("torn-tail-overcut")).run()
        rows = campaign_report(result, None)["violations"]
    kinds = {v["evidence"]["violations"][0]["kind"] for v in rows if v["invariant"] == "I4"}
    assert "lost_by_recovery" in kinds, sorted({(v["invariant"], v["summary"][:80]) for v in rows})
