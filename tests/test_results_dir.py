"""The results folder (harness/report/results_dir.py) and `fiskj-harness check`, on histories built in memory."""

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
from synth import Engine

from harness.campaign.result import CampaignResult, ScenarioRun, TrialResult
from harness.checkers import check_all
from harness.cli.main import main
from harness.errors import ResultsError
from harness.history.model import CrashStateFacts
from harness.names import INVARIANTS
from harness.history.faults import fault_counts
from harness.report.report import campaign_report, render_summary
from harness.report.results_dir import (default_root, load_history, load_stored, make_results_dir, recheck,
                                        results_name, write_results)
from harness.subject.contract import default_subject


def _trial(index, broken, seed=1):
    eng = Engine()
    eng.leg(kill_after=5)
    eng.leg(rerun_answered=broken)
    h = eng.finish()
    h.scenario, h.seed = "kill-batch", seed
    return TrialResult(index=index, scenario="kill-batch", scenario_path=None, seed=seed,
                       schedule=[{"kind": "kill", "n": 5}], origin="hypothesis", verdicts=check_all(h), history=h,
                       elapsed_s=0.2, reproduce="fiskj-harness run kill-batch --seed 1", invariants=INVARIANTS,
                       faults=fault_counts(h), family="signals")


def _result(trials):
    run = ScenarioRun(scenario=SimpleNamespace(name="kill-batch", path=None), seed=1)
    return CampaignResult(trials=trials, errors=[], scenarios=[run], elapsed_s=1.0, jobs=1, subject=default_subject())


def _folder(root, keep="failures", trials=None):
    result = _result(trials if trials is not None else [_trial(0, False), _trial(1, True, seed=4), _trial(2, False)])
    folder = make_results_dir(root, results_name(["kill-batch"]))
    report = campaign_report(result, str(folder / "report.json"))
    return folder, write_results(folder, report, result, keep=keep, summary=render_summary(report),
                                 command=["fiskj-harness", "run", "kill-batch"])


def test_a_results_folder_holds_the_reports_and_every_piece_of_a_failing_trials_evidence(tmp_path):
    folder, written = _folder(tmp_path)
    assert folder.parent == tmp_path / "kill-batch" and folder.name.endswith("Z")
    assert os.readlink(tmp_path / "kill-batch" / "latest") == folder.name and written["latest"]
    assert {p.name for p in folder.iterdir()} == {"report.json", "junit.xml", "summary.md", "summary.txt", "report.html",
                                                  "command.txt", "trials"}
    (trial,) = written["trials"]                                   # only the failing one (--keep failures)
    assert trial.name == "0001-kill-batch"
    info = json.loads((trial / "trial.json").read_text())
    assert info["failed"] == ["I2"] and info["seed"] == 4 and info["invariants"] == list(INVARIANTS)
    assert info["replay"] == f"fiskj-harness replay {folder / 'report.json'} --trial 1"
    history = json.loads((trial / "history.json").read_text())
    assert [leg["kind"] for leg in history["legs"]] == ["start", "resume"]
    legs = sorted(p.name for p in (trial / "legs").iterdir())
    assert legs == ["0-start", "1-resume"]
    leg0 = trial / "legs" / "0-start"
    assert (leg0 / "journal.jsonl").read_bytes() == history["legs"][0]["journal"].encode("latin-1")
    trace = [json.loads(x) for x in (leg0 / "trace.jsonl").read_text().splitlines()]
    assert trace == history["legs"][0]["trace"] and trace
    assert json.loads((leg0 / "leg.json").read_text())["fault"]["kind"] == "kill"
    assert (leg0 / "stdout.txt").exists() and (leg0 / "stderr.txt").exists()
    effects = [json.loads(x) for x in (trial / "effects.jsonl").read_text().splitlines()]
    assert effects == history["effects"] and [e["attempt"] for e in effects].count(2) == 1   # the re-run
    calls = (trial / "model_calls.jsonl").read_text().splitlines()
    assert len(calls) == len(history["model_calls"]) > 0
    report = json.loads((folder / "report.json").read_text())
    assert report["groups"][0]["title"] == "I2 unattributed_rerun [kill]" and len(report["runs"]) == 3


def test_keep_all_keeps_every_trial_and_time_folders_never_collide(tmp_path):
    folder, written = _folder(tmp_path, keep="all")
    assert [p.name for p in written["trials"]] == ["0000-kill-batch", "0001-kill-batch", "0002-kill-batch"]
    at = datetime(2026, 3, 14, 10, 15, 2, 123456, tzinfo=timezone.utc)
    first, second = make_results_dir(tmp_path, "x", at), make_results_dir(tmp_path, "x", at)
    assert (first.name, second.name) == ("20260314T101502.123Z", "20260314T101502.123Z-1")
    assert results_name(["a", "b"]) == "campaign" and results_name(["a/../b"]) == "a_.._b"
    assert default_root({}) == "fiskj-results" and default_root({"FISKJ_HARNESS_RESULTS": "/r"}) == "/r"
    with pytest.raises(ValueError):
        write_results(first, {}, _result([]), keep="some", summary="")


def test_check_judges_the_stored_histories_again_and_says_which_verdicts_changed(tmp_path, capsys):
    folder, written = _folder(tmp_path)
    assert main(["check", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "trial 1 kill-batch seed=4: I2 invalid" in out and "violations: 1 in 1 group(s) by cause" in out
    assert "judged 1 stored trial(s) of the campaign's 3" in out and "0 verdict set(s) changed" in out
    assert main(["check", str(tmp_path / "kill-batch")]) == 1      # the name's folder: its latest
    out = capsys.readouterr().out
    assert str(folder.resolve()) in out and "latest" not in out     # reproducers name the folder, not the link
    # a verdict stored as valid that the checkers now find invalid is said to have changed
    info_path = written["trials"][0] / "trial.json"
    info = json.loads(info_path.read_text())
    for v in info["verdicts"]:
        v["status"] = "valid"
    info_path.write_text(json.dumps(info))
    report = tmp_path / "again.json"
    assert main(["check", str(written["trials"][0]), "--report-json", str(report)]) == 1
    out = capsys.readouterr().out
    assert "I2 invalid (stored: valid)" in out and "1 verdict set(s) changed" in out
    assert json.loads(report.read_text())["check"]["changed"] == 1
    # only the invariants the campaign judged are judged again
    info["invariants"] = ["I4"]
    info_path.write_text(json.dumps(info))
    assert main(["check", str(written["trials"][0])]) == 0
    assert "all 1 valid" in capsys.readouterr().out


def test_check_of_a_passing_campaign_exits_0_whether_it_kept_its_trials_or_none(tmp_path, capsys):
    folder, _ = _folder(tmp_path / "a", keep="all", trials=[_trial(0, False), _trial(1, False)])
    assert main(["check", str(folder), "-q"]) == 0
    empty, written = _folder(tmp_path / "b", trials=[_trial(0, False)])
    assert written["trials"] == []
    capsys.readouterr()
    assert main(["check", str(empty)]) == 0                        # like run: it passed (issue 26)
    assert "every invariant held" in capsys.readouterr().out
    report = json.loads((empty / "report.json").read_text())
    report["violations"] = [{"trial": 0}]                          # a failing campaign whose trials are gone
    (empty / "report.json").write_text(json.dumps(report))
    assert main(["check", str(empty)]) == 2
    assert "holds no trial history" in capsys.readouterr().err


def test_a_folder_that_is_not_a_results_folder_and_a_corrupt_history_are_typed_errors_naming_file_and_field(
        tmp_path, capsys):
    assert main(["check", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"fiskj-harness: {tmp_path}: not a results folder" in err and "Traceback" not in err
    assert main(["check", str(tmp_path / "nothing")]) == 2
    _, written = _folder(tmp_path / "r")
    history = written["trials"][0] / "history.json"
    good = json.loads(history.read_text())
    cases = [
        ('{"scenario": "x",\n  "seed": ', "line 2", None),
        (json.dumps({**good, "legs": [{**good["legs"][0], "fault": {**good["legs"][0]["fault"], "kind": 3}}]}),
         None, "legs[0].fault.kind"),
        (json.dumps({**good, "legs": [{**good["legs"][0], "colour": "red"}]}), None, "legs[0].colour"),
        (json.dumps({k: v for k, v in good.items() if k != "run_id"}), None, "run_id"),
        (json.dumps({**good, "legs": [{**good["legs"][0], "journal": "\u20ac"}]}), None, "legs[0].journal"),
        (json.dumps({**good, "model_calls": [{**good["model_calls"][0], "messages": "hi"}]}), None,
         "model_calls[0].messages"),
        (json.dumps([1, 2]), None, None),
    ]
    for text, line, field in cases:
        history.write_text(text)
        with pytest.raises(ResultsError) as caught:
            load_history(history)
        assert caught.value.path == str(history) and caught.value.field == field, text[:80]
        assert str(caught.value).startswith(f"{history}:" + ("2:" if line else "")), str(caught.value)
        assert main(["check", str(history.parent)]) == 2
        err = capsys.readouterr().err
        assert str(history) in err and "Traceback" not in err
        if field:
            assert f"field {field!r}" in err


def test_a_power_loss_trials_crash_state_is_stored_as_files_and_its_history_reads_back(tmp_path):
    t = _trial(0, True)
    t.history.crash_state = CrashStateFacts(id="p3.1", prefix_n=3, files={"/s/runs/r1.json": b"\x00\xffab",
                                                                          "/s/runs/r1.lock": b""},
                                            dirs=["/s/runs"])
    folder, written = _folder(tmp_path, trials=[t])
    state = written["trials"][0] / "crash_state"
    assert json.loads((state / "state.json").read_text())["files"] == ["/s/runs/r1.json", "/s/runs/r1.lock"]
    assert (state / "file-0-r1.json").read_bytes() == b"\x00\xffab"
    _, _, (stored,) = load_stored(folder)
    assert stored.history.crash_state.files == t.history.crash_state.files
    assert stored.history == t.history
    (again,) = recheck([stored])
    assert [v.status for v in again["verdicts"]] == [v.status for v in t.verdicts]


def test_an_unknown_verdict_is_kept_like_a_failure_and_judged_unknown_again(tmp_path):
    from harness.checkers import Verdict

    undecided = _trial(1, False)
    undecided.verdicts = [v if v.invariant != "I4" else Verdict("I4", v.name, "unknown", {"summary": "?"}, v.checker)
                          for v in undecided.verdicts]
    assert undecided.unknown == ["I4"] and not undecided.failed
    folder, written = _folder(tmp_path, trials=[_trial(0, False), undecided])
    assert [p.name for p in written["trials"]] == ["0001-kill-batch"]
    info = json.loads((written["trials"][0] / "trial.json").read_text())
    assert info["status"] == "unknown" and info["unknown"] == ["I4"]
    (again,) = recheck(load_stored(folder)[2])
    assert again["stored"]["I4"] == "unknown" and {v.status for v in again["verdicts"]} == {"valid"}


def test_a_campaign_keeps_the_history_of_a_trial_judged_unknown_for_its_results_folder(monkeypatch):
    from harness.campaign import campaign as module
    from harness.checkers import Verdict
    from harness.families.base import Planned

    eng = Engine()
    eng.leg()
    h = eng.finish()
    verdict = {"status": "unknown"}
    monkeypatch.setattr(module, "check_all", lambda history, invariants: [
        Verdict("I4", "n", verdict["status"], {"summary": "?"}, "c")])
    campaign = module.Campaign([], subject=default_subject())
    run = ScenarioRun(scenario=SimpleNamespace(name="s", path=None, check=SimpleNamespace(invariants=("I4",))),
                      seed=1, family=SimpleNamespace(name="signals"))
    campaign._executors[id(run)] = SimpleNamespace(run=lambda planned: SimpleNamespace(history=h, schedule=[],
                                                                                        faults={}))
    runner = SimpleNamespace(subject=default_subject())
    judged = campaign._judge(run, Planned([], "noop", 1), runner, 0)
    assert judged.unknown == ["I4"] and judged.history is h
    verdict["status"] = "valid"                                  # a valid trial's history is still dropped
    assert campaign._judge(run, Planned([], "noop", 1), runner, 0).history is None


def test_check_says_what_the_campaign_said_of_a_group_s_smallest_reproducer(tmp_path, capsys):
    """A campaign's shrink (or why it did not shrink) is stored with the trial; `check` of the folder says the
    same smallest reproducer and the same words (it said "not shrunk: a campaign shrinks one failure..." of a
    trial the campaign had tried to shrink)."""
    node = Path(__file__).resolve().parents[1] / "subjects" / "node" / "profile.toml"
    subject = f"FISKJ_FOREIGN_BUG=resume-reruns-answered {node}"
    assert main(["run", "kill-every-event", "--subject", subject, "--results", str(tmp_path), "--trials", "12"]) == 1
    ran = [line.strip() for line in capsys.readouterr().out.splitlines() if "smallest reproducer:" in line]
    (folder,) = (tmp_path / "kill-every-event").glob("2*Z")
    assert main(["check", str(folder)]) == 1
    checked = [line.strip() for line in capsys.readouterr().out.splitlines() if "smallest reproducer:" in line]
    assert ran and checked == ran, (ran, checked)
