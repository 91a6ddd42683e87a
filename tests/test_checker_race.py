"""race: the race family's facts (History.race) judged into the ``race`` verdict (harness.checkers.race).

Each broken variant of the store shows in the facts a race records the way
its race would see it (tests/test_races.py runs the races for real).
"""

from __future__ import annotations

import json

import pytest
from builders import M, T, U, journal

from harness.checkers import check_all
from harness.checkers import race as race_checker
from harness.history.model import Effect, History, RaceFacts, history_from_json, history_to_json

STEPS = [{"t_ms": 0.1 * i, "leg": 1, "role": "A", "step": "send"} for i in range(6)]
DIGEST = {"bytes": 300, "sha256": "ab" * 32}


def history(*facts: dict, setup_error: str | None = None, effects: list[Effect] | None = None) -> History:
    return History(scenario="race-test", seed=3, schedule=list(STEPS), run_id="race-3", effects=effects or [],
                   race=RaceFacts(race="two-writers", schedule="holder-idle", expectations=list(facts),
                                  setup_error=setup_error))


def fact(name: str, expected, observed, **context) -> dict:
    return {"name": name, "expected": expected, "observed": observed, **context}


def answered(ok: bool = True) -> dict:
    return fact("answered", {"within_s": 2.0}, {"answered": ok, "error": None if ok else "agent pid 9 gave no answer"},
                leg=2, op="open", holder=1, what="A holds the run, idle")


def refused(answer: dict) -> dict:
    return fact("refused", {"error": "RunLocked"}, {"answer": answer}, leg=2, holder=1, what="A holds the run, idle")


LOCKED = {"ok": False, "error": {"kind": "RunLocked", "message": "run race-3 is held by another writer"}}
SESSIONS = journal(M(), U("A:0"), U("A:1"), T("suspended", message="A"), U("B:0"), T("suspended", message="B"))
INTERLEAVED = journal(M(), U("A:0"), U("B:0"), U("A:1"), T("suspended", message="A"))

#: A run of a correct store: every expectation met.
GOOD = [
    answered(), refused(LOCKED),
    fact("at_once", {"max_ms": 100.0}, {"ms": 0.8}, leg=2, role="B", what="refusal_ms"),
    fact("journal_unchanged", "unchanged", {"before": DIGEST, "after": DIGEST}, leg=2, op="open", what="w"),
    fact("one_winner", 1, {"outcomes": [{"leg": 1, "role": "A", "outcome": "ok"},
                                        {"leg": 2, "role": "B", "outcome": "refused"}]},
         what="creates succeeded", rule="exactly one must win"),
    fact("no_error", ["ok", "refused"], {"outcome": "refused", "error": {"kind": "RunExists"}}, leg=2),
    fact("winner_records", "journal_lines == acknowledged", {"journal_lines": 4, "acknowledged": 4}, leg=1),
    fact("taken_over", {"ok": True}, {"answer": {"ok": True, "last_seq": 5}}, leg=2, after="after leg 1 was killed"),
    fact("acked_kept", "last_seq >= every acked seq", {"last_seq": 5, "acked": [3, 4, 5]}, leg=2, holder=1),
    fact("holder_step", {"ok": True}, {"answer": {"ok": True}}, leg=1, op="load"),
    fact("mid_write_snapshot", "...", {"load": {"torn": [10, 4], "last_seq": 5}, "list": {"runs": 1}, "acked": [5]},
         leg=1, writer=2, at="torn-3"),
    fact("poll", "...", {"errors": [], "error_count": 0, "regressions": []}, leg=1),
    fact("tool_runs", {"toolu_race_0": 0, "toolu_race_1": 1}, "history.effects", answered_before=["toolu_race_0"]),
    fact("released_open", {"outcome": "ok"}, {"outcome": "ok", "error": None}, leg=2, holder=1),
    fact("session_ok", {"ok": True}, {"answer": {"ok": True}}, leg=1),
    fact("sessions_contiguous", "...", {"journal": SESSIONS.decode("latin-1")}),
]
RAN_ONCE = [Effect(tool_use_id="toolu_race_1", attempt=1, pid=10, t=5, leg=1)]


def test_a_race_whose_every_expectation_is_met_is_valid():
    v = race_checker.check(history(*GOOD, effects=RAN_ONCE))
    assert v.status == "valid", v.evidence
    assert v.invariant == "race" and v.checker == "harness.checkers.race"
    assert v.evidence == {"summary": "holder-idle: as expected", "checked": len(STEPS)}


#: (the fact a broken store leaves, the violation kind, a piece of its detail)
BROKEN = [
    (answered(False), "blocked", "A holds the run, idle: leg 2 did not answer within 2 s while leg 1 held the run "
                                 "(it waits instead of being refused)"),
    (refused({"ok": True}), "not_refused",
     "leg 2 was not refused with RunLocked while leg 1 held the run: it got the lock"),
    (fact("at_once", {"max_ms": 100.0}, {"ms": 250.04}, leg=2, role="B", what="refusal_ms"), "not_at_once",
     "leg 2 (B): refusal_ms took 250.0 ms, over 100 ms"),
    (fact("journal_unchanged", "unchanged", {"before": DIGEST, "after": {"bytes": 420, "sha256": "cd" * 32}}, leg=2,
          op="create", what=None), "refused_writer_changed_journal",
     "the journal changed across leg 2's refused create (300 -> 420 bytes)"),
    (fact("one_winner", 1, {"outcomes": [{"leg": 1, "role": "A", "outcome": "ok"},
                                         {"leg": 2, "role": "B", "outcome": "ok"}]},
          what="creates succeeded", rule="exactly one must win"), "not_exactly_one",
     "2 of the two creates succeeded (leg 1: ok, leg 2: ok); exactly one must win"),
    (fact("no_error", ["ok", "refused"], {"outcome": "error", "error": {"kind": "StoreIOError"}}, leg=2),
     "unexpected_error", "leg 2 failed: {'kind': 'StoreIOError'}"),
    (fact("winner_records", "journal_lines == acknowledged", {"journal_lines": 2, "acknowledged": 4}, leg=1),
     "winner_records", "the journal holds 2 line(s); the winner (leg 1) acknowledged 4"),
    (fact("taken_over", {"ok": True}, {"answer": LOCKED}, leg=2, after="after leg 1 was SIGKILLed and reaped"),
     "not_taken_over", "after leg 1 was SIGKILLed and reaped, leg 2 could not open the run"),
    (fact("acked_kept", "...", {"last_seq": 2, "acked": [3, 4, 5]}, leg=2, holder=1), "acked_missing",
     "leg 2 opened at seq 2, below the last seq 5 leg 1 acknowledged"),
    (fact("holder_step", {"ok": True}, {"answer": {"ok": False, "error": "EBADF"}}, leg=1, op="other_fd"),
     "holder_step_failed", "leg 1's other_fd failed: EBADF"),
    (fact("mid_write_snapshot", "...", {"load": {"error": "CorruptJournal"}, "list": {}, "acked": []}, leg=1, writer=2,
          at="torn-1"), "false_corruption", "load raised while leg 2 was mid-write: CorruptJournal"),
    (fact("mid_write_snapshot", "...", {"load": {"torn": None, "last_seq": 5}, "list": {}, "acked": [5]}, leg=1,
          writer=2, at="torn-1"), "torn_tail_not_reported", "load saw no torn tail while leg 2 had half a line"),
    (fact("poll", "...", {"errors": [{"op": "list"}], "error_count": 7, "regressions": []}, leg=1),
     "false_corruption", "load/list failed 7 time(s) during appends: {'op': 'list'}"),
    (fact("poll", "...", {"errors": [], "error_count": 0, "regressions": [[5, 4]]}, leg=1), "seq_went_back",
     "a load saw the seq go back: [[5, 4]]"),
    (fact("tool_runs", {"toolu_race_1": 1}, "history.effects"), "tool_runs",
     "tool toolu_race_1 ran 2 time(s), expected 1 (unanswered)"),
    (fact("released_open", {"outcome": "ok"}, {"outcome": "refused", "error": {"kind": "RunLocked"}}, leg=2, holder=1),
     "refused_after_release", "leg 2 was refused after leg 1 released the run"),
    (fact("session_ok", {"ok": True}, {"answer": {"ok": False, "error": "boom"}}, leg=2), "session_failed",
     "leg 2's sessions failed: boom"),
    (fact("sessions_contiguous", "...", {"journal": INTERLEAVED.decode("latin-1")}), "interleaved",
     "session 'A' is interleaved with another writer's lines (record 3)"),
    (fact("no_abort", "every agent answers", {"error": "agent pid 9 gave no answer", "stderr": {}}), "timeout",
     "an agent did not answer: agent pid 9 gave no answer"),
]


@pytest.mark.parametrize("broken, kind, detail", BROKEN, ids=[b[1] + "-" + b[0]["name"] for b in BROKEN])
def test_a_broken_store_s_fact_makes_the_race_verdict_invalid(broken, kind, detail):
    twice = RAN_ONCE + [Effect(tool_use_id="toolu_race_1", attempt=2, pid=11, t=6, leg=2)]
    v = race_checker.check(history(*GOOD[:3], broken, effects=twice))
    assert v.status == "invalid", v.evidence
    (row,) = v.evidence["violations"]
    assert row["kind"] == kind and detail in row["detail"], row
    assert v.summary == f"1 violation(s) ({kind}): {row['detail']}" and v.evidence["checked"] == len(STEPS)


def test_violations_keep_the_order_of_the_facts():
    v = race_checker.check(history(refused({"ok": True}), answered(False), GOOD[5]))
    assert [r["kind"] for r in v.evidence["violations"]] == ["not_refused", "blocked"]
    assert v.summary.startswith("2 violation(s) (blocked, not_refused): A holds the run, idle: leg 2 was not refused")


def test_an_abort_explained_by_a_blocked_call_adds_no_timeout():
    v = race_checker.check(history(answered(False), fact("no_abort", "", {"error": "e", "stderr": {}})))
    assert [r["kind"] for r in v.evidence["violations"]] == ["blocked"]


def test_a_race_that_could_not_be_set_up_is_unknown_never_valid():
    v = race_checker.check(history(setup_error="seeding the run failed: EIO"))
    assert v.status == "unknown" and v.evidence["reason"] == "seeding the run failed: EIO"
    assert race_checker.check(history(refused({"ok": True}), setup_error="x")).status == "invalid"


def test_a_history_without_race_facts_is_unknown():
    h = history()
    h.race = None
    assert race_checker.check(h).status == "unknown"


def test_a_fact_no_judge_knows_makes_the_verdict_unknown_through_check_all():
    (v,) = check_all(history(fact("telepathy", 1, 2)), ["race"])
    assert v.status == "unknown" and "telepathy" in v.evidence["error"]


def test_race_facts_round_trip_through_json_to_the_same_verdict():
    h = history(*GOOD, BROKEN[0][0], effects=RAN_ONCE)
    again = history_from_json(json.loads(json.dumps(history_to_json(h))))
    assert again.race == h.race
    assert check_all(again, ["race"])[0].to_json() == check_all(h, ["race"])[0].to_json()
