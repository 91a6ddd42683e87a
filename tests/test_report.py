"""The campaign report: aggregation, renderings, JUnit, shard merge and the exit status."""

import json
import xml.etree.ElementTree as ET

from synth import Engine

from harness.checkers import check_all
from harness.checkers.verdict import INVALID, UNKNOWN, VALID
from harness.history.model import history_to_json
from harness.report.report import (build_report, exit_status, merge_reports, render_markdown, render_summary,
                            write_junit)


def _trial(scenario="kill-batch", seed=1, broken=False, faults=None, as_json=False):
    eng = Engine()
    eng.leg(kill_after=4)
    eng.leg(suspend_at=1)
    eng.leg(rerun_answered=broken)
    h = eng.finish()
    h.scenario, h.seed = scenario, seed
    out = {"scenario": scenario, "seed": seed, "schedule": [{"kill": {"after": 4}}, {"suspend": 1}],
           "history": history_to_json(h) if as_json else h, "verdicts": check_all(h), "duration_s": 0.5}
    if faults is not None:
        out["faults"] = faults
    return out


def test_a_campaign_of_valid_trials_is_valid_and_exits_0():
    report = build_report([_trial(seed=1), _trial(seed=2, as_json=True)], report_path="out.json", elapsed_s=0.5)
    assert report["trials"] == 2 and report["verdict"] == "valid" and exit_status(report) == 0
    assert report["faults"] == {"kill": 2, "suspend": 2, "tail": 0, "power_loss": 0, "race": 0, "crash_states": 0}
    assert report["invariants"]["I1"] == {"name": "exactly-once after a clean suspend", "checked": 2, "valid": 2,
                                          "vacuous": 0, "invalid": 0, "unknown": 0}
    assert list(report["invariants"]) == [f"I{i}" for i in range(1, 12)]
    assert report["trials_per_s"] == 4.0 and report["violations"] == []
    assert report["scenarios"]["kill-batch"]["trials"] == 2
    assert report["runs"][1] == {"trial": 1, "scenario": "kill-batch", "seed": 2, "schedule": _trial()["schedule"],
                                 "status": "valid", "duration_s": 0.5, "faults": {"kill": 1, "suspend": 1}}
    json.dumps(report)


def test_a_violation_carries_scenario_seed_schedule_evidence_and_a_replay_command():
    report = build_report([_trial(seed=1), _trial(scenario="suspend", seed=9, broken=True)], report_path="r.json")
    assert report["verdict"] == "invalid" and exit_status(report) == 1
    (i1,) = [v for v in report["violations"] if v["invariant"] == "I1"]
    assert i1["scenario"] == "suspend" and i1["seed"] == 9 and i1["trial"] == 1
    assert i1["reproduce"] == "fiskj-harness replay r.json --trial 1"
    assert i1["evidence"]["violations"][0]["kind"] == "tool_rerun"
    assert report["scenarios"]["suspend"]["invalid_trials"] == 1
    assert report["scenarios"]["kill-batch"]["invalid_trials"] == 0


def test_faults_given_by_the_runner_win_and_crash_states_are_counted_with_their_rate():
    pl = dict(_trial(faults={"power_loss": 3, "crash_states": 120}), duration_s=0.5)
    other = dict(_trial(faults={"kill": 1}), duration_s=1.5)
    report = build_report([pl, other], elapsed_s=2.0)
    assert report["faults"]["power_loss"] == 3 and report["faults"]["crash_states"] == 120
    # the rate is over the power-loss trials' own time (0.5 s), not over the whole campaign's (2 s)
    assert report["faults"]["kill"] == 1 and report["power_loss_s"] == 0.5 and report["crash_states_per_s"] == 240.0
    assert "120 crash states judged in 0.5 s of power-loss trials" in render_summary(report)


def test_an_unknown_verdict_makes_the_campaign_unknown_and_exit_1():
    trial = _trial()
    trial["verdicts"][3] = {"invariant": "I4", "name": "n", "status": "unknown",
                            "evidence": {"summary": "no trace", "reason": "no trace"}, "checker": "c"}
    report = build_report([trial])
    assert report["verdict"] == "unknown" and exit_status(report) == 1
    assert report["unknowns"][0]["summary"] == "no trace" and report["violations"] == []


def test_a_campaign_with_no_trials_is_not_a_pass():
    report = build_report([])
    assert report["verdict"] == "unknown" and exit_status(report) == 1 and report["trials_per_s"] is None


def test_the_summary_is_a_fixed_width_table_with_faults_invariants_and_reproducers():
    text = render_summary(build_report([_trial(), _trial(seed=4, broken=True)], report_path="rep.json"))
    assert "verdict: INVALID" in text
    assert "faults: kill 2  suspend 2  tail 0  power_loss 0  race 0" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("I")]
    assert len(rows) == 11 and len({len(r) for r in rows}) == 1
    assert rows[0].split()[-5:] == ["2", "1", "0", "1", "0"]
    assert "reproduce: fiskj-harness replay rep.json --trial 1" in text


def test_junit_has_a_testcase_per_scenario_invariant_that_held_and_one_failure_per_group_with_its_evidence(tmp_path):
    report = build_report([_trial(), _trial(scenario="suspend", broken=True), _trial(scenario="suspend", seed=2,
                                                                                       broken=True)])
    path = tmp_path / "junit.xml"
    write_junit(report, str(path))
    suite = ET.parse(path).getroot().find("testsuite")
    cases = suite.findall("testcase")
    failed = [c for c in cases if c.find("failure") is not None]
    assert {c.get("name") for c in failed} == {g["title"] for g in report["groups"]} == \
        {"I1 tool_rerun [kill+suspend]", "I2 unattributed_rerun [kill+suspend]"}    # 2 groups of 2 trials each
    assert {c.get("classname") for c in failed} == {"fiskj-harness.suspend"}
    assert int(suite.get("failures")) == 2 and suite.get("tests") == str(len(cases)) == "22"   # 11 + 9 held + 2
    i1 = next(c for c in failed if c.get("name").startswith("I1 "))
    assert "2 trial(s) invalid in suspend" in i1.find("failure").get("message")
    assert "tool_rerun" in i1.find("failure").text and "fiskj-harness replay" in i1.find("failure").text


def test_junit_marks_an_unknown_as_an_error(tmp_path):
    trial = _trial()
    trial["verdicts"][0] = {"invariant": "I1", "name": "x", "status": "unknown", "evidence": "boom", "checker": "c"}
    path = tmp_path / "j.xml"
    write_junit(build_report([trial]), str(path))
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite.get("errors") == "1" and suite.find("testcase/error").get("type") == "unknown"


def test_markdown_names_the_verdict_counts_and_violations():
    md = render_markdown(build_report([_trial(broken=True)], report_path="r.json"))
    assert md.startswith("## fiskj-harness: ❌ invalid")
    assert "| I1 | exactly-once after a clean suspend | 1 | 0 | 0 | 1 | 0 |" in md
    assert "`fiskj-harness replay r.json --trial 0`" in md


def test_merging_shards_sums_counts_renumbers_trials_and_keeps_one_verdict():
    a = build_report([_trial(seed=1), _trial(seed=2)], report_path="a.json", elapsed_s=1.0)
    b = build_report([_trial(seed=3, broken=True)], report_path="b.json", elapsed_s=2.0)
    merged = merge_reports([a, b], report_path="all.json")
    assert merged["trials"] == 3 and merged["verdict"] == "invalid" and merged["shards"] == 2
    assert merged["faults"]["kill"] == 3 and merged["invariants"]["I1"]["checked"] == 3
    assert merged["elapsed_s"] == 2.0 and merged["trials_per_s"] == 1.5
    assert [r["trial"] for r in merged["runs"]] == [0, 1, 2]
    assert (merged["runs"][2]["shard"], merged["runs"][2]["shard_trial"]) == (1, 0)
    assert {v["trial"] for v in merged["violations"]} == {2}
    assert merged["violations"][0]["reproduce"] == "fiskj-harness replay all.json --trial 2"
    assert merged["scenarios"]["kill-batch"]["trials"] == 3
    assert merge_reports([a, a])["verdict"] == "valid"
    assert merge_reports([])["verdict"] == "unknown"



def test_a_valid_verdict_with_nothing_to_judge_is_counted_as_vacuous():
    from harness.checkers import Verdict

    trial = _trial()
    trial["verdicts"] = [Verdict("I9", "a refused resume appends nothing", "valid",
                                 {"summary": "no refused leg", "checked": 0}, "t"),
                         Verdict("I4", "no acknowledged record lost", "valid", {"summary": "ok", "checked": 3}, "t")]
    report = build_report([trial], report_path="r.json")
    assert report["invariants"]["I9"]["vacuous"] == 1 and report["invariants"]["I4"]["vacuous"] == 0
    assert "vacuous" in render_summary(report)


def test_a_trial_with_executions_and_no_rerun_is_a_real_i2_check_not_a_vacuous_one():
    from harness.checkers import Verdict

    trial = _trial()
    trial["verdicts"] = [Verdict("I2", "at most one tool re-run per crash", "valid",
                                 {"summary": "no re-run", "checked": 0, "executions": 4}, "t")]
    assert build_report([trial], report_path="r.json")["invariants"]["I2"]["vacuous"] == 0
    trial["verdicts"] = [Verdict("I2", "at most one tool re-run per crash", "valid",
                                 {"summary": "no re-run", "checked": 0, "executions": 0}, "t")]
    assert build_report([trial], report_path="r.json")["invariants"]["I2"]["vacuous"] == 1


def test_the_fault_counts_of_a_history_are_its_faulted_legs_by_kind():
    from harness.history.faults import fault_counts

    h = Engine()
    h.leg(kill_after=4)
    h.leg(kill_after=2)
    h.leg(suspend_at=1)
    h.leg()
    assert fault_counts(h.finish()) == {"kill": 2, "suspend": 1}
    trial = _trial()
    assert build_report([trial])["runs"][0]["faults"] == fault_counts(trial["history"])


def test_one_function_writes_every_reproducer_and_one_every_replay_command():
    import shlex
    from types import SimpleNamespace

    from harness.report.reproduce import replay_command, reproduce_command
    from harness.selftest.mutants import subject_for
    from harness.subject.contract import default_subject, parse_subject

    from harness.scenario.parse import bundled_scenario_dir

    scenario = SimpleNamespace(path=str(bundled_scenario_dir() / "kill-random.toml"), name="kill-random")
    signals = reproduce_command(scenario, 7, [{"kind": "kill", "event": 3}], default_subject())
    assert signals == """fiskj-harness run kill-random --seed 7 --schedule '[{"kind":"kill","event":3}]'"""
    mine = SimpleNamespace(path="/elsewhere/kill-random.toml", name="kill-random")   # not bundled: its file
    assert reproduce_command(mine, 7, [], default_subject()).startswith("fiskj-harness run /elsewhere/kill-random.toml ")
    whole = reproduce_command(SimpleNamespace(path=None, name="tails-basic"), 1, None, subject_for("no-fsync"))
    argv = shlex.split(whole)
    assert argv[:5] == ["fiskj-harness", "run", "tails-basic", "--seed", "1"] and argv[5] == "--subject"
    assert parse_subject(argv[6]) == subject_for("no-fsync")           # the subject replays, variables and all
    assert "--subject" in reproduce_command(scenario, 1, [], parse_subject("A=1 python -m fiskj"))
    assert replay_command("r.json", 3) == "fiskj-harness replay r.json --trial 3"


def test_a_long_example_is_clipped_between_words_and_clauses_never_joining_two_parts_into_one_claim():
    from harness.report.report import _clip

    text = " ".join(f"word{i:02d}" for i in range(60))  # 6-letter words: a space is always near a cut
    clipped = _clip(text, 100)
    assert len(clipped) <= 100 and clipped.startswith("word00 word01") and clipped.endswith(" ...")
    assert all(len(w) == 6 for w in clipped[:-4].split())  # no word cut in two
    assert _clip("short", 100) == "short"
    assert _clip("x" * 300, 100) == "x" * 96 + " ..."  # no space near the cut: cut where it falls
    # clauses: whole ones from the start, the last one (the cause), the middle said as "..."; never
    # "leg 0 write ... .. before close n=88", a leg 0 write joined to a leg 1 close
    clauses = [f"leg {i} write n={i}{i} not fsynced before close n={i}{i}{i}" for i in range(6)]
    clipped = _clip("; ".join(clauses), 150)
    kept = clipped.split("; ")
    assert len(clipped) <= 150 and kept[-1] == clauses[-1] and "..." in kept
    assert all(k in clauses for k in kept if k != "...")


def test_no_table_row_or_reproducer_line_of_the_summary_is_cut_inside_a_word():
    from harness.report.report import render_markdown, render_summary

    long_why = "the agent keeps its transcript in a database the harness does not decode, " * 3
    name = "every acknowledged record survives a crash its persistence model promises to survive, always"
    schedule = [{"kind": "kill", "event": k, "when": "after"} for k in range(40)]
    report = {"trials": 1, "elapsed_s": 1.0, "verdict": "invalid", "faults": {},
              "invariants": {"I4": {"name": name, "checked": 1, VALID: 0, INVALID: 1, UNKNOWN: 0}},
              "campaign": {"not_applicable": {"I10": long_why}},
              "violations": [{"trial": 0, "seed": 1, "scenario": "s", "invariant": "I4", "summary": "lost " * 100,
                              "schedule": schedule, "reproduce": "fiskj-harness replay r.json --trial 0"}]}
    text = render_summary(report)
    words = {w.strip(".,:;()") for w in name.split() + long_why.split()} | {"lost"}
    for line in text.splitlines():
        for word in line.replace("|", " ").split():
            word = word.strip(".,:;()")
            if word.isalpha() and word.islower() and len(word) > 3:
                assert word in words or not any(w.startswith(word) and w != word for w in words), (word, line)
    assert "survives a crash" in text and text.count("not applicable to this subject") == 1
    assert long_why.split()[-1].strip(",") in text                     # the reason is wrapped, not cut
    render_markdown(report)                                           # the Markdown table builds from the same


def test_invariants_a_scenario_lists_that_no_trial_judged_are_said_not_left_out_of_the_table(tmp_path):
    from harness.cli.main import main

    out = tmp_path / "r.json"
    assert main(["run", "power-loss-basic", "--trials", "1", "--results", str(tmp_path / "res"),
                 "--report-json", str(out)]) == 0
    report = json.loads(out.read_text())
    missed = report["campaign"]["unjudged"]["power-loss-basic"]
    assert {"I2", "I6"} <= set(missed) and not set(missed) & set(report["invariants"])   # one trial: no full resume
    assert "power-loss-basic: " + ", ".join(missed) in render_summary(report)
    assert main(["run", "power-loss-basic", "--trials", "4", "--results", str(tmp_path / "res"),
                 "--report-json", str(out)]) == 0
    assert "power-loss-basic" not in json.loads(out.read_text())["campaign"]["unjudged"]


def test_the_fault_line_puts_crash_resumes_beside_power_loss_or_beside_kills_judged_from_one_recording():
    from harness.report.report import fault_line

    power = fault_line({"faults": {"power_loss": 2, "crash_states": 40, "crash_resumes": 3}, "power_loss_s": 1.5})
    assert "power_loss 2 (40 crash states judged, 3 resumed in full in 1.5 s of power-loss trials)" in power
    kills = fault_line({"faults": {"kill": 3, "crash_resumes": 3}, "power_loss_s": 2.0})
    assert "kill 3 (3 resumed in full)" in kills and "power_loss 0  " in kills + "  " and "power-loss trials" not in kills
