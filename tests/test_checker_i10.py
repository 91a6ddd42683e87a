"""I10 the subject's own reading of its journal agrees with the journal (fisk-ai defect 5)."""

from builders import A, M, R, T, journal

from harness.checkers import i10_reading
from harness.history.model import History, Leg
from harness.history.readers import parse_reading

FIELDS = (("status", "status"), ("pending", "pending"), ("records", "records"))


def _reading(stdout: str, code: int = 0) -> dict:
    return parse_reading({"argv": ["agent", "status", "r1"], "exit_code": code, "stdout": stdout, "stderr": "",
                          "timed_out": False}, FIELDS)


def _history(data: bytes | None, stdout: str, code: int = 0) -> History:
    h = History(scenario="s", seed=1, schedule=[], run_id="r1")
    h.legs.append(Leg(index=0, kind="start", argv=["agent"], journal=data, reading=_reading(stdout, code)))
    return h


SUSPENDED_THEN_RESUMED = journal(M(), A("t1", stop="tool_use"), R("t1"), T("suspended"),
                                 A("t2", "t3", iteration=1, stop="tool_use"), R("t2"))


def test_a_reading_that_agrees_with_the_fold_is_valid():
    v = i10_reading.check(_history(SUSPENDED_THEN_RESUMED, '{"status": "open", "pending": ["t3"], "records": 6}'))
    assert v.status == "valid" and v.evidence["checked"] == 1, v.evidence


def test_a_status_that_stays_suspended_after_a_resume_is_caught_defect_5():
    v = i10_reading.check(_history(SUSPENDED_THEN_RESUMED, '{"status": "suspended", "pending": ["t3"]}'))
    assert v.status == "invalid"
    (row,) = v.evidence["violations"]
    assert row["kind"] == "status" and row["subject"] == "suspended" and row["expected"] == "open"
    assert "suspended" in v.summary and "open" in v.summary


def test_a_missed_pending_batch_and_a_wrong_record_count_are_caught():
    v = i10_reading.check(_history(SUSPENDED_THEN_RESUMED, '{"status": "open", "pending": null, "records": 5}'))
    assert v.status == "invalid"
    assert {row["kind"] for row in v.evidence["violations"]} == {"pending", "records"}


def test_a_subject_that_cannot_read_a_journal_fiskj_reads_is_caught():
    v = i10_reading.check(_history(SUSPENDED_THEN_RESUMED, "", code=1))
    assert v.status == "invalid" and v.evidence["violations"][0]["kind"] == "unreadable"
    v = i10_reading.check(_history(SUSPENDED_THEN_RESUMED, "not json"))
    assert v.status == "invalid" and "no JSON object" in v.evidence["violations"][0]["error"]


def test_a_torn_tail_is_not_a_record_and_only_given_fields_are_compared():
    torn = journal(M(), A("t1", stop="tool_use")) + b'{"seq":3,"proto'
    v = i10_reading.check(_history(torn, '{"status": "open", "records": 2}'))
    assert v.status == "valid", v.evidence
    v = i10_reading.check(_history(torn, '{"status": "open", "records": 3}'))
    assert v.status == "invalid"


def test_journals_fiskj_cannot_fold_are_left_to_i5_and_no_reading_is_vacuous():
    v = i10_reading.check(_history(b'garbage\n' + journal(M()), '{"status": "open"}'))
    assert v.status == "valid" and v.evidence["checked"] == 0 and v.evidence["not_judged"]
    h = History(scenario="s", seed=1, schedule=[], run_id="r1")
    h.legs.append(Leg(index=0, kind="start", argv=["agent"], journal=journal(M(), T("completed"))))
    assert i10_reading.check(h).evidence["checked"] == 0


def test_parse_reading_follows_dotted_paths_and_names_what_is_wrong():
    fields = (("status", "state.status"), ("pending", "pending.unanswered"))
    ok = parse_reading({"exit_code": 0, "stdout": '{\n "state": {"status": "open"},\n "pending": null\n}'}, fields)
    assert ok["error"] is None and ok["status"] == "open" and ok["pending"] is None and ok["given"] == ["status", "pending"]
    last_line = parse_reading({"exit_code": 0, "stdout": 'loading...\n{"state": {"status": "completed"}}'}, fields)
    assert last_line["status"] == "completed"
    missing = parse_reading({"exit_code": 0, "stdout": '{"status": "open"}'}, fields)
    assert "no field 'state.status'" in missing["error"]
    typed = parse_reading({"exit_code": 0, "stdout": '{"state": {"status": 3}}'}, fields)
    assert "is 3" in typed["error"]
    hung = parse_reading({"exit_code": None, "timed_out": True, "stdout": ""}, fields)
    assert "hung" in hung["error"]


SHOW = (("status", r"^Status:\s+(?P<value>\S+)"), ("pending", r"^Pending:\s+(?P<value>\S+)"),
        ("records", r"^Records:\s+(?P<value>\S+)"))


def _show(stdout: str, code: int = 0) -> dict:
    return parse_reading({"argv": ["agent", "session", "show", "r1"], "exit_code": code, "stdout": stdout}, SHOW, "text")


def test_a_text_reading_takes_each_field_from_its_pattern_s_value_group_and_names_what_is_wrong():
    ok = _show("Session r1\nStatus:  open\nPending: t2\nPending: t3\nRecords: 6\nPrompt: Status: no\n")
    assert ok["error"] is None and ok["given"] == ["status", "pending", "records"]
    assert (ok["status"], ok["pending"], ok["records"]) == ("open", ["t2", "t3"], 6)
    assert _show("Status: completed\n")["pending"] == []            # every match of a list field: none is none
    assert "no line matching '^Status:" in _show("Session r1\nState: open\n")["error"]
    assert "(records) is 'six'" in _show("Status: open\nRecords: six\n")["error"]
    assert _show("Status: open\n", code=1)["error"] == "the status command exited 1"


def test_defect_5_is_caught_through_a_text_reading():
    h = History(scenario="s", seed=1, schedule=[], run_id="r1")
    h.legs.append(Leg(index=0, kind="start", argv=["agent"], journal=SUSPENDED_THEN_RESUMED,
                      reading=_show("Session r1\nStatus: suspended\nPending: t3\nRecords: 6\n")))
    v = i10_reading.check(h)
    assert v.status == "invalid" and [(r["kind"], r["subject"]) for r in v.evidence["violations"]] == [
        ("status", "suspended")]
    h.legs[0].reading = _show("Session r1\nStatus: open\nPending: t3\nRecords: 6\n")
    assert i10_reading.check(h).status == "valid"
