"""Violations grouped by cause (harness/report/groups.py) and shown as groups in every rendering."""

import xml.etree.ElementTree as ET

from synth import Engine

from harness.checkers import check_all
from harness.report.groups import fault_kinds, group_key, group_rows, involved, minimal_note, sentence
from harness.report.html import render_html
from harness.report.report import build_report, merge_reports, render_markdown, render_summary, write_junit


def _rerun_trial(seed, kills=(5,), scenario="kill-batch", trial=None):
    """A trial of an engine that re-runs an answered tool on resume (I2), after ``len(kills)`` kills."""
    eng = Engine()
    for k in kills:
        eng.leg(kill_after=k)
    eng.leg(rerun_answered=True)
    h = eng.finish()
    h.scenario, h.seed = scenario, seed
    out = {"scenario": scenario, "seed": seed, "schedule": [{"kind": "kill", "n": k} for k in kills],
           "history": h, "verdicts": check_all(h), "duration_s": 0.1, "family": "signals"}
    if trial is not None:
        out["trial"] = trial
    return out


def _unsynced_trial(seed):
    """A trial of an engine that never fsyncs (I4 append_not_synced, no fault)."""
    eng = Engine()
    eng.leg(fsync=False)
    h = eng.finish()
    return {"scenario": "noop", "seed": seed, "schedule": [], "history": h, "verdicts": check_all(h),
            "duration_s": 0.1, "family": "signals"}


def test_the_same_rule_broken_in_many_trials_is_one_group_whose_reproducer_has_the_fewest_faults_then_seed():
    trials = [_rerun_trial(9, kills=(2, 6)), _rerun_trial(7), _rerun_trial(3, kills=(6,)), _rerun_trial(5, kills=(7,)),
              _unsynced_trial(1), _unsynced_trial(2)]
    report = build_report(trials, report_path="r.json")
    assert len(report["violations"]) == 6
    titles = {g["title"]: g for g in report["groups"]}
    assert set(titles) == {"I2 unattributed_rerun [kill]", "I4 append_not_synced [any fault]"}
    rerun = titles["I2 unattributed_rerun [kill]"]
    assert rerun["count"] == 4 and rerun["trials"] == [0, 1, 2, 3] and rerun["scenarios"] == ["kill-batch"]
    rep = rerun["reproducer"]
    assert (rep["trial"], rep["seed"], rep["faults"], rep["legs"]) == (2, 3, 1, 2)     # one kill, then seed 3
    assert rep["reproduce"] == "fiskj-harness replay r.json --trial 2"
    assert rep["minimal"].startswith("not shrunk (1 fault(s)): a campaign shrinks") and "from" not in rep["minimal"]
    assert rerun["example"]["trial"] == 2 and rerun["example"]["evidence"]["violations"][0]["kind"] == \
        "unattributed_rerun"
    unsynced = titles["I4 append_not_synced [any fault]"]      # a rule no fault causes: one group whatever the fault
    assert unsynced["count"] == 2 and unsynced["reproducer"]["minimal"] == "fails with no fault injected"
    assert report["groups"][0] is rerun                          # most rows first


def test_the_key_names_the_operation_or_record_kind_where_the_evidence_has_one():
    assert involved({"kind": "write_without_lock", "op": "write", "leg": 1}) == "op write"
    assert involved({"kind": "io_error_swallowed", "failed": {"op": "fsync", "n": 4}}) == "op fsync"
    line = '{"seq":2,"protocol":"io.choria.fisk-ai.v1.session.tool_result","tool_result":{}}'
    assert involved({"kind": "lost", "seq": 2, "ack": {"excerpt": line}}) == "record tool_result"
    assert involved({"kind": "lost", "detail": "runs/x.json: record seq 2 (assistant) bytes 507..850 ..."}) == \
        "record assistant"
    assert involved({"kind": "reader_answer", "mutation": {"id": "m3", "kind": "cut"}}) == "mutation cut"
    row = {"schedule": [{"kind": "hold", "at": 3}], "faults": {"race": 1}, "family": "race"}   # a race trial
    assert involved({"kind": "waited_for_lock", "op": "flock"}, row) == "op flock" and fault_kinds(row) == "race"
    assert involved({"kind": "unattributed_rerun", "tool_use_id": "t1"}) == ""
    base = {"invariant": "I8", "faults": {"kill": 1, "crash_states": 9}}
    a = dict(base, evidence={"violations": [{"kind": "write_without_lock", "op": "write"}]})
    b = dict(base, evidence={"violations": [{"kind": "write_without_lock", "op": "ftruncate"}]})
    assert group_key(a) == ("I8", "write_without_lock", "kill", "op write") != group_key(b)
    assert len(group_rows([dict(a, trial=0), dict(b, trial=1), dict(a, trial=2)])) == 2
    unsynced = {"invariant": "I4", "evidence": {"violations": [{"kind": "append_not_synced"}]}}
    killed, lost_power = dict(unsynced, faults={"kill": 1}), dict(unsynced, faults={"power_loss": 1})
    assert group_key(killed) == group_key(lost_power) == ("I4", "append_not_synced", "any fault", "")
    assert len(group_rows([dict(killed, trial=0), dict(lost_power, trial=1)])) == 1
    unknown = {"invariant": "I4", "evidence": {"reason": "unobserved change"}, "faults": {"power_loss": 1}}
    assert group_key(unknown) == ("I4", "unobserved change", "power_loss", "")


def test_a_shrunk_reproducer_says_what_got_smaller_and_one_not_shrunk_says_why_never_claiming_a_shrink():
    runs = {4: {"trial": 4, "faults": {"kill": 2}, "origin": "hypothesis"},
            9: {"trial": 9, "faults": {"kill": 1}, "origin": "shrink", "shrunk_from": 4,
                "shrink": "kill at event 9 + kill at write #4 -> kill at write #2"},
            5: {"trial": 5, "faults": {"power_loss": 1}, "origin": "crash-state",
                "shrink": "not shrunk: none of the 3 smaller trial(s) tried failed I4 the same way; it stays at 2 "
                          "dropped write sector(s)"},
            6: {"trial": 6, "faults": {"kill": 1}, "origin": "exhaustive"},
            7: {"trial": 7, "faults": {"kill": 1}, "origin": "explicit"}}
    assert minimal_note({"trial": 9, "faults": {"kill": 1}}, runs) == \
        "shrunk from trial 4: kill at event 9 + kill at write #4 -> kill at write #2"
    assert minimal_note({"trial": 5}, runs).startswith("not shrunk: none of the 3 smaller trial(s) tried failed I4")
    # its shrink result fell in another group (its faults differ): said so, not "not shrunk"
    assert minimal_note({"trial": 4, "faults": {"kill": 2}}, runs, {4}) == \
        "trial 4 shrank to trial 9 (kill at event 9 + kill at write #4 -> kill at write #2), grouped apart: its faults differ"
    for trial in (6, 7):  # never shrunk: said so, and why
        note = minimal_note({"trial": trial, "faults": {"kill": 1}}, runs, {trial})
        assert "shrunk from" not in note and "shrank" not in note and "not shrunk" in note
    # the shrink's result is its group's smallest reproducer, before another trial with as few faults
    rows = [{"trial": t, "invariant": "I2", "faults": {"kill": 1}, "origin": o, "seed": 1, "legs": 2,
             "evidence": {"violations": [{"kind": "unattributed_rerun"}]}} for t, o in ((3, "hypothesis"), (9, "shrink"))]
    assert group_rows(rows, list(runs.values()))[0]["reproducer"]["trial"] == 9


def test_the_summary_markdown_and_junit_show_one_entry_per_group_not_per_row(tmp_path):
    trials = [_rerun_trial(s, kills=(k,)) for s, k in ((1, 5), (2, 6), (3, 7), (4, 8), (5, 11))]
    trials.append(_unsynced_trial(9))
    report = build_report(trials, report_path="r.json")
    assert len(report["violations"]) == 6 and len(report["groups"]) == 2
    text = render_summary(report)
    assert "violations: 6 in 2 group(s) by cause (every row: r.json):" in text
    assert text.count("reproduce: ") == 2 and "[1] I2 unattributed_rerun [kill]: 5 trial(s) in kill-batch" in text
    assert "smallest reproducer: trial 0 (1 fault(s), 2 leg(s), seed 1), not shrunk (1 fault(s))" in text
    md = render_markdown(report)
    assert "### Violations: 6 in 2 group(s) by cause" in md
    assert md.count("fiskj-harness replay r.json") == 2 and "| **I2 unattributed_rerun [kill]** | 5 |" in md
    path = tmp_path / "j.xml"
    write_junit(report, str(path))
    suite = ET.parse(path).getroot().find("testsuite")
    failures = [c for c in suite.findall("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failures] == ["I2 unattributed_rerun [kill]", "I4 append_not_synced [any fault]"]
    assert suite.get("failures") == "2" and suite.get("tests") == str(len(suite.findall("testcase")))
    assert "5 trial(s) invalid in kill-batch" in failures[0].find("failure").get("message")
    assert "reproduce: fiskj-harness replay r.json --trial 0" in failures[0].find("failure").text
    # the scenario x invariant cases that held are still there; the violated ones are their groups
    names = [(c.get("classname"), c.get("name")) for c in suite.findall("testcase")]
    assert ("fiskj-harness.kill-batch", "I3 at most one model call repeated per crash") in names
    assert [n for c, n in names if c == "fiskj-harness.kill-batch" and n.startswith("I2 ")] == \
        ["I2 unattributed_rerun [kill]"]


def test_merged_shards_group_their_rows_together():
    a = build_report([_rerun_trial(1), _rerun_trial(2, kills=(6,))], report_path="a.json")
    b = build_report([_rerun_trial(3, kills=(7,))], report_path="b.json")
    merged = merge_reports([a, b], report_path="m.json")
    (group,) = merged["groups"]
    assert group["count"] == 3 and group["trials"] == [0, 1, 2]
    assert group["reproducer"]["reproduce"] == "fiskj-harness replay m.json --trial 0"


def test_an_older_report_without_groups_is_still_rendered_in_groups():
    report = build_report([_rerun_trial(1), _rerun_trial(2, kills=(6,))], report_path="r.json")
    del report["groups"], report["unknown_groups"]
    assert "violations: 2 in 1 group(s) by cause" in render_summary(report)


def test_a_fault_that_never_fired_is_neither_a_kind_nor_counted_in_a_group_or_a_reproducer_s_size():
    from harness.report.groups import fault_kinds, fault_total

    row = {"faults": {"suspend": 2, "not_injected": 1, "crash_states": 9}, "family": "signals"}
    assert fault_kinds(row) == "suspend" and fault_total(row) == 2
    assert fault_kinds({"faults": {"not_injected": 1}, "family": "signals"}) == "signals"


def test_each_group_opens_with_one_plain_sentence_in_the_agent_s_terms():
    report = build_report([_rerun_trial(1), _unsynced_trial(2)], report_path="r.json")
    rerun, unsynced = report["groups"]
    assert rerun["sentence"] == ("Tool call a ran again in leg 1 (it first ran in leg 0), and no crash accounts for "
                                 "the re-run (leg 0: its journal holds the tool_result for a).")  # why not that crash
    assert unsynced["sentence"] == ("The journal line written at byte 0 (type meta) by leg 0 was never fsynced "
                                    "before the agent went on (write n=5).")
    text = render_summary({**report, "campaign": {"promises": "resume of a completed run: new-turn"}})
    assert f"kill-batch\n      {rerun['sentence']}\n" in text
    assert "\npromises: resume of a completed run: new-turn\n" in text
    assert f"<p><b>{rerun['sentence']}</b></p>" in render_html(report, [])
    # a Claude Code transcript line is named by its own type; a rule with no template says its detail
    row = {"invariant": "I4", "evidence": {"violations": [{"kind": "append_not_synced", "offset": 5123, "leg": 2,
                                                           "record_type": "assistant", "before": "write n=40"}]}}
    assert sentence(row).startswith('The journal line written at byte 5123 (type assistant) by leg 2 was never')
    row["evidence"]["violations"][0] = {"kind": "lock_overlap", "detail": "legs 1 and 2 held the lock at once"}
    assert sentence(row) == "legs 1 and 2 held the lock at once"
    assert sentence({"invariant": "I2", "evidence": {"summary": "s", "violations": [{"kind": "unattributed_rerun"}]}}) \
        == "s"   # a template whose fields the evidence lacks falls back to the summary
