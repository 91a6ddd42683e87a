"""I6 the result equals the uninterrupted reference run's."""

from synth import Engine, reference

from harness.checkers import i6_reference
from harness.history.promises import FISK_AI, Promises


def test_a_run_resumed_after_crashes_and_a_suspend_equals_the_reference():
    eng = Engine()
    eng.leg(kill_after=2)
    eng.leg(suspend_at=1)
    eng.leg(kill_after=3, torn=True)
    v = i6_reference.check(eng.finish())
    assert v.status == "valid", v.evidence
    assert v.evidence["source"] == "journal after leg 3"


def test_a_different_final_answer_is_caught_with_a_compact_diff():
    eng = Engine(answer="there are 4 files")
    eng.leg(kill_after=3)
    h = eng.finish(with_reference=False)
    h.reference = reference(eng.turns)
    v = i6_reference.check(h)
    assert v.status == "invalid"
    (row,) = v.evidence["violations"]
    assert row["diff"][0] == {"path": "messages[5].content[0].text", "got": "there are 4 files",
                              "want": "there are 3 files"}
    assert {"path": "final_answer", "got": "there are 4 files", "want": "there are 3 files"} in row["diff"]
    assert v.evidence["got_answer"] == "there are 4 files"


def test_different_counters_are_caught():
    eng = Engine()
    h = eng.finish()
    h.reference.state["counters"]["llm_calls"] += 1
    (row,) = i6_reference.check(h).evidence["violations"]
    assert row["diff"] == [{"path": "counters.llm_calls", "got": 3, "want": 4}]


def test_a_final_journal_that_cannot_be_read_is_invalid():
    eng = Engine()
    h = eng.finish()
    h.legs[-1].journal = b"{not json}\n" + h.legs[-1].journal
    v = i6_reference.check(h)
    assert v.status == "invalid" and v.evidence["violations"][0]["kind"] == "final_unreadable"


def test_no_reference_is_unknown():
    h = Engine().finish(with_reference=False)
    assert i6_reference.check(h).status == "unknown"


def test_a_varying_server_with_a_repeated_call_makes_the_comparison_unknown():
    eng = Engine()
    eng.leg(kill_after=2)                     # the first call is repeated
    h = eng.finish()
    h.options["vary_on_repeat"] = True
    v = i6_reference.check(h)
    assert v.status == "unknown" and "vary_on_repeat" in v.evidence["reason"]


def test_a_varying_server_with_no_repeated_call_is_still_compared():
    h = Engine().finish()
    h.options["vary_on_repeat"] = True
    assert i6_reference.check(h).status == "valid"


def test_the_final_state_is_used_when_no_leg_left_a_journal():
    h = Engine().finish()
    h.final_state = h.reference.state
    for leg in h.legs:
        leg.journal = None
    v = i6_reference.check(h)
    assert v.status == "valid" and v.evidence["source"] == "history.final_state"


def test_a_journaled_tool_result_whose_tool_never_ran_is_a_missing_effect():
    eng = Engine([["a", "b"], []])
    eng.leg(kill_after=3)
    h = eng.finish()
    h.effects = [e for e in h.effects if e.tool_use_id != "b"]   # b's result is journaled, b never ran
    v = i6_reference.check(h)
    assert v.status == "invalid"
    (row,) = v.evidence["violations"]
    assert row == {"kind": "effect_missing", "tool_use_ids": ["b"], "executions": len(h.effects)}
    assert "never ran: b" in v.summary


def test_effects_are_not_judged_when_the_reference_ran_no_ledger_tool():
    eng = Engine([["a"], []])
    h = eng.finish()
    h.effects = []
    h.reference.effects = 0
    assert i6_reference.check(h).status == "valid"


def test_an_uninterrupted_run_that_ends_without_its_terminal_record_is_a_violation_not_a_setup_error():
    from fiskj.reader import read_state
    from synth import Engine
    eng = Engine([["a"], []])
    eng.leg()
    h = eng.h
    h.options.update(uninterrupted=True, workload={"chat_followups": 0, "max_iterations": 0, "max_tokens": 1_000_000})
    h.final_state = read_state(eng.file).to_json()
    assert i6_reference.check(h).status == "valid"
    cut = eng.file[:eng.file.rstrip(b"\n").rfind(b"\n") + 1]      # the completed record never written
    h.final_state = read_state(cut).to_json()
    v = i6_reference.check(h)
    assert v.status == "invalid" and v.evidence["violations"][0]["kind"] == "uninterrupted_run_ended_wrong"
    assert "folded status 'open'" in v.summary
    h.options["workload"]["max_iterations"] = 2                      # exit 1 on a cap is a right end, exit 0 is not
    h.legs[-1].exit_code = 1
    assert i6_reference.check(h).status == "invalid"


def test_a_completing_leg_that_does_not_print_the_answer_the_uninterrupted_run_printed_is_caught():
    eng = Engine()
    eng.leg(kill_after=3)
    h = eng.finish()
    done = [leg for leg in h.legs if leg.exit_code == 0]
    assert done, "the synthetic run completes"
    h.reference.printed_answer = "there are 3 files"
    done[-1].stdout = "iteration 2: end_turn\n"                 # the resume settled the answer silently
    v = i6_reference.check(h)
    assert v.status == "invalid" and [r["kind"] for r in v.evidence["violations"]] == ["answer_not_printed"]
    assert "without printing its final answer" in v.evidence["summary"]
    done[-1].stdout = "there are 3 files\n"
    assert i6_reference.check(h).status == "valid"
    h.reference.printed_answer = ""                              # a subject that prints no answer: nothing to compare
    done[-1].stdout = ""
    assert i6_reference.check(h).status == "valid"


def test_a_tool_asked_for_by_a_reply_cut_off_by_max_tokens_must_never_run_whatever_the_reference_did():
    from harness.history.model import Effect, ModelCall
    eng = Engine()
    h = eng.finish()
    assert i6_reference.check(h).status == "valid"
    cut = ModelCall(index=len(h.model_calls), t=10**12, key="k-cut", turn=3, messages=[], leg=1, stop="max_tokens",
                    reply=[{"type": "text", "text": "Answer cut short"},
                           {"type": "tool_use", "id": "toolu_cut", "name": "effect_a", "input": {}}])
    h.model_calls.append(cut)
    assert i6_reference.check(h).status == "valid"                # asked for, never run: as it must be
    h.effects.append(Effect(tool_use_id="toolu_cut", attempt=1, pid=9, t=10**12 + 1, leg=1, tool="effect_a"))
    v = i6_reference.check(h)
    assert v.status == "invalid", v.evidence
    (row,) = v.evidence["violations"]
    assert (row["kind"], row["tool_use_id"], row["stop"], row["leg"]) == ("cut_off_tool_run", "toolu_cut",
                                                                           "max_tokens", 1)
    h.promises = Promises(cut_off_turn="continues")               # an agent that goes on past a cut-off turn
    assert i6_reference.check(h).status == "valid"
    h.promises = FISK_AI
    h.options.update(uninterrupted=True)                          # the uninterrupted run itself: judged the same
    assert i6_reference.check(h).evidence["violations"][0]["kind"] == "cut_off_tool_run"
    cut.stop = "tool_use"                                         # an ordinary tool turn: its tool runs
    h.options.pop("uninterrupted")
    assert i6_reference.check(h).status == "valid"


def test_an_uninterrupted_run_of_a_final_stop_workload_that_completes_ended_wrong():
    from fiskj.reader import read_state
    eng = Engine([["a"], []])
    eng.leg()
    h = eng.h
    h.options.update(uninterrupted=True, workload={"chat_followups": 0, "max_iterations": 0, "max_tokens": 1_000_000})
    h.final_state = read_state(eng.file).to_json()
    assert i6_reference.check(h).status == "valid"                # completed, exit 0: right for a plain workload
    h.options["workload"]["final_stop"] = "max_tokens"            # its last reply was cut off: it must end with error
    v = i6_reference.check(h)
    assert v.status == "invalid" and v.evidence["violations"][0]["kind"] == "uninterrupted_run_ended_wrong"
    h.promises = Promises(cut_off_turn="continues")               # unless it promises to go on and complete
    assert i6_reference.check(h).status == "valid"
