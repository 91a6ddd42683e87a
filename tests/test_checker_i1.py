"""I1 exactly-once after a clean suspend: correct engines pass, broken ones are caught."""

from builders import A, M, R, T, journal
from synth import Engine, conversation, key_of

from harness.checkers import i1_suspend
from harness.history.model import Effect, History, Leg, ModelCall


def test_a_suspend_at_a_boundary_then_resume_repeats_nothing():
    eng = Engine()
    eng.leg(suspend_at=1)
    h = eng.finish()
    v = i1_suspend.check(h)
    assert v.status == "valid", v.evidence
    assert v.evidence["suspended_legs"] == [0]


def test_a_history_with_no_suspend_is_valid_with_nothing_checked():
    eng = Engine()
    eng.leg(kill_after=3)
    v = i1_suspend.check(eng.finish())
    assert v.status == "valid" and v.evidence["checked"] == 0


def test_a_suspend_after_a_crash_leaves_the_crash_s_in_flight_tool_to_i2():
    eng = Engine([["a", "b", "c"], []])
    eng.leg(kill_after=6)          # M, call, A, a, R(a), b -> killed after b ran, R(b) never written
    eng.leg(suspend_at=0)          # resume completes b first (the re-run), then suspends
    v = i1_suspend.check(eng.finish())
    assert v.status == "valid", v.evidence


def test_a_resume_that_reruns_tools_answered_before_the_suspend_is_caught():
    eng = Engine()
    eng.leg(suspend_at=1)                 # turn 0 (a, b) done, suspended
    eng.leg(rerun_answered=True)          # broken: re-runs a and b
    v = i1_suspend.check(eng.finish())
    assert v.status == "invalid"
    reruns = [x for x in v.evidence["violations"] if x["kind"] == "tool_rerun"]
    assert {x["tool_use_id"] for x in reruns} == {"a", "b"}
    assert reruns[0]["suspend_leg"] == 0 and reruns[0]["result_journaled"] is True
    assert reruns[0]["after"][0]["leg"] == 1


def test_a_resume_that_asks_the_model_again_for_a_journaled_turn_is_caught():
    eng = Engine()
    eng.leg(suspend_at=1)
    h = eng.finish()
    first = h.model_calls[0]
    h.model_calls.append(ModelCall(index=99, t=h.legs[1].t_start + 1, key=first.key, turn=0,
                                   messages=first.messages, reply=first.reply, leg=1))
    v = i1_suspend.check(h)
    assert v.status == "invalid"
    (row,) = [x for x in v.evidence["violations"] if x["kind"] == "model_call_repeated"]
    assert row["key"] == first.key and row["assistant_journaled"] is True
    assert row["after"] == [{"leg": 1, "index": 99, "t": h.legs[1].t_start + 1}]


def _mid_batch_history() -> History:
    turns = [["a", "b"], []]
    msgs = conversation(turns, 0)
    leg = Leg(index=0, kind="start", argv=["fiskj"], pid=10, t_start=1, t_end=9, exit_code=3,
              journal=journal(M(), A("a", "b"), R("a"), T("suspended")))
    return History(scenario="s", seed=1, schedule=[], run_id="r1", legs=[leg],
                   model_calls=[ModelCall(0, 2, key_of(msgs), 0, msgs, [], 0)],
                   effects=[Effect("a", 1, 50, 3, 0)])


def test_a_suspend_honoured_inside_a_batch_the_leg_started_is_caught():
    v = i1_suspend.check(_mid_batch_history())
    assert v.status == "invalid"
    (row,) = v.evidence["violations"]
    assert row["kind"] == "suspended_mid_batch" and row["unanswered"] == ["b"] and row["assistant_seq"] == 2


def test_exit_3_without_a_suspended_terminal_record_is_caught():
    h = _mid_batch_history()
    h.legs[0].journal = journal(M(), A("a", "b"), R("a"), R("b"))
    v = i1_suspend.check(h)
    assert [x["kind"] for x in v.evidence["violations"]] == ["suspend_not_journaled"]
    assert v.evidence["violations"][0]["last_line"]["seq"] == 4


def test_a_tool_executed_in_the_suspended_leg_without_its_result_then_rerun_is_caught():
    h = _mid_batch_history()
    h.effects.append(Effect("b", 1, 51, 4, 0))          # b ran in leg 0, result never journaled
    h.legs.append(Leg(index=1, kind="resume", argv=[], pid=11, t_start=10, t_end=20, exit_code=0,
                      journal=journal(M(), A("a", "b"), R("a"), T("suspended"), R("b"))))
    h.effects.append(Effect("b", 2, 52, 12, 1))
    kinds = {x["kind"] for x in i1_suspend.check(h).evidence["violations"]}
    assert "tool_rerun" in kinds
