"""I2 at most one tool re-run per crash, and only the one in flight."""

from synth import Engine

from harness.checkers import i2_tool_reruns
from harness.checkers.journal_view import split_journal
from harness.history.model import Effect


def test_the_tool_in_flight_at_a_kill_is_rerun_once_and_attributed_to_that_kill():
    eng = Engine([["a", "b", "c"], []])
    eng.leg(kill_after=8)           # M, call, A, a, R(a), b, R(b), c -> killed after c ran (F16)
    v = i2_tool_reruns.check(eng.finish())
    assert v.status == "valid", v.evidence
    assert v.evidence["rerun_ids"] == {"c": 2}
    assert v.evidence["attributed"] == [{"tool_use_id": "c", "rerun_leg": 1, "crash_leg": 0, "fault": "kill"}]


def test_a_tool_killed_in_flight_twice_runs_three_times_validly():
    eng = Engine([["a"], []])
    eng.leg(kill_after=4)           # M, call, A, a -> killed
    eng.leg(kill_after=1)           # re-runs a -> killed again
    v = i2_tool_reruns.check(eng.finish())
    assert v.status == "valid", v.evidence
    assert v.evidence["rerun_ids"] == {"a": 3}


def test_a_resume_that_reruns_answered_tools_after_one_crash_is_caught():
    eng = Engine([["a", "b", "c"], []])
    eng.leg(kill_after=8)
    eng.leg(rerun_answered=True)    # broken: runs a, b and c again
    v = i2_tool_reruns.check(eng.finish())
    assert v.status == "invalid"
    bad = {x["tool_use_id"]: x for x in v.evidence["violations"]}
    assert set(bad) == {"a", "b"}
    assert bad["a"]["kind"] == "unattributed_rerun"
    assert bad["a"]["refused_candidates"][0] == {"leg": 0, "why": "its journal holds the tool_result for a"}
    assert bad["a"]["rerun"]["leg"] == 1 and bad["a"]["previous"]["leg"] == 0


def test_two_reruns_charged_to_one_crash_are_caught():
    eng = Engine([["a", "b"], []])
    eng.leg(kill_after=4)           # M, call, A, a -> a ran, no result
    h = eng.finish()
    h.effects.append(Effect("b", 0, 9, h.legs[0].t_end - 1, 0))   # parallel tools: b also ran in leg 0
    h.effects.sort(key=lambda e: (e.tool_use_id, e.attempt))
    v = i2_tool_reruns.check(h)
    assert v.status == "invalid"
    (row,) = v.evidence["violations"]
    assert row["tool_use_id"] == "b"
    assert "already used by a" in row["refused_candidates"][0]["why"]


def test_a_rerun_after_a_clean_exit_is_not_accounted_for():
    eng = Engine([["a"], []])
    eng.leg(suspend_at=1)
    h = eng.finish()
    h.effects.append(Effect("a", 2, 77, h.legs[1].t_start + 1, 1))
    v = i2_tool_reruns.check(h)
    (row,) = v.evidence["violations"]
    assert row["kind"] == "unattributed_rerun" and "not killed" in row["refused_candidates"][0]["why"]


def test_a_tool_run_twice_within_one_leg_is_caught():
    eng = Engine([["a"], []])
    h = eng.finish()
    h.effects.append(Effect("a", 2, 78, h.effects[0].t + 1, 0))
    (row,) = i2_tool_reruns.check(h).evidence["violations"]
    assert row["kind"] == "rerun_within_leg"


def test_a_rerun_of_a_result_the_nemesis_cut_away_is_attributed_to_the_tail_fault():
    eng = Engine([["a", "b"], ["c"], []])
    eng.leg(suspend_at=1)               # turn 0 done, T(suspended) written, clean exit 3
    lines = split_journal(eng.file).lines
    eng.cut_tail(lines[-2].offset + 5)  # the nemesis cuts inside R(b): R(b) and T are gone
    v = i2_tool_reruns.check(eng.finish())
    assert v.status == "valid", v.evidence
    assert v.evidence["attributed"][0]["fault"] == "tail"
