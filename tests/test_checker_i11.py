"""I11 the run is faithful to its workload: usage as the model sent it, the end at the workload's turn."""

import dataclasses

from builders import FP
from fiskj.codec import encode_record
from fiskj.records import AssistantRecord, MetaRecord, TerminalRecord, ToolResultRecord
from harness.checkers import i11_workload
from harness.history.model import Effect, History, Leg, ModelCall
from harness.names import JSONL

USAGE = {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}


def reply(i, tools):
    return [{"type": "text", "text": f"turn {i}" if tools else "done"}] + \
        [{"type": "tool_use", "id": f"t{i}_{k}", "name": "ledger", "input": {}} for k in range(tools)]


def run(script, journaled, end, *, ran=None, usage=None, record_usage=None, max_tokens=1_000_000,
        max_iterations=0, stops=None, **options):
    """A one-leg history: ``script`` the tool count of each scripted reply (0: the answer), the first
    ``journaled`` of them journaled (each tool turn answered, but the results of the replies ``ran`` excludes),
    then terminal ``end``.  ``usage``: what the model sent (per reply index), ``record_usage`` what was journaled;
    ``stops``: a reply's stop reason (per reply index) where it is not ``tool_use``/``end_turn``."""
    usage, record_usage = usage or {}, record_usage or {}
    recs = [MetaRecord(version=2, run_id="r1", created="2026-01-01T00:00:00Z", fingerprint=FP, prompt="p")]
    calls, effects = [], []
    for i in range(journaled):
        sent = usage.get(i, USAGE)
        calls.append(ModelCall(index=i, t=i, key=f"k{i}", turn=i, messages=[], reply=reply(i, script[i]), leg=0,
                               stop=(stops or {}).get(i, "tool_use" if script[i] else "end_turn"), usage=sent))
        got = record_usage.get(i, sent)
        recs.append(AssistantRecord(iteration=i, message={"role": "assistant", "content": reply(i, script[i])},
                                    stop_reason=calls[-1].stop, in_tokens=got["input_tokens"],
                                    out_tokens=got["output_tokens"],
                                    cache_read_tokens=got.get("cache_read_input_tokens") or None,
                                    cache_create_tokens=got.get("cache_creation_input_tokens") or None))
        for k in range(script[i] if ran is None or i in ran else 0):
            effects.append(Effect(tool_use_id=f"t{i}_{k}", attempt=1, pid=1, t=i, leg=0))
            recs.append(ToolResultRecord(tool_use_id=f"t{i}_{k}", result={"type": "tool_result",
                                         "tool_use_id": f"t{i}_{k}", "content": "ok", "is_error": False}))
    recs.append(TerminalRecord(reason=end))
    data = b"".join(encode_record(dataclasses.replace(r, seq=n)) for n, r in enumerate(recs, 1))
    h = History(scenario="s", seed=1, schedule=[], run_id="r1", options={
        "workload": {"max_tokens": max_tokens, "max_iterations": max_iterations}, "script_turns": len(script),
        **options})
    h.legs = [Leg(index=0, kind="start", argv=["agent"], journal=data, exit_code=0)]
    h.model_calls, h.effects = calls, effects
    return h


def kinds(h):
    v = i11_workload.check(h)
    return v.status, [row["kind"] for row in v.evidence.get("violations", [])]


def test_a_run_journaled_as_the_model_sent_it_and_ended_by_its_answer_is_valid():
    v = i11_workload.check(run([2, 1, 0], 3, "completed"))
    assert v.status == "valid" and v.evidence["checked"] == 3, v.evidence


def test_usage_journaled_without_the_cache_counts_the_model_sent_is_caught():
    cached = {**USAGE, "cache_read_input_tokens": 2000, "cache_creation_input_tokens": 200}
    h = run([1, 0], 2, "completed", usage={0: cached, 1: cached}, record_usage={0: USAGE, 1: USAGE})
    status, found = kinds(h)
    assert status == "invalid" and found == ["usage_differs", "usage_differs"]
    assert i11_workload.check(h).evidence["violations"][0]["want"]["cache_read_tokens"] == 2000


def test_a_journaled_reply_no_model_call_sent_is_caught():
    h = run([1, 0], 2, "completed")
    h.model_calls[1].reply = [{"type": "text", "text": "another answer"}]
    assert kinds(h) == ("invalid", ["reply_not_sent"])


def test_a_run_that_ends_on_its_budget_at_the_reply_that_spends_it_is_valid():
    # 110 tokens a reply: 330 > 300 after reply 2, a tool turn whose tools never run
    assert kinds(run([1, 1, 1, 1, 0], 3, "budget", ran={0, 1}, max_tokens=300)) == ("valid", [])


def test_a_run_that_ends_on_its_budget_one_reply_late_is_caught():
    status, found = kinds(run([1, 1, 1, 1, 0], 4, "budget", ran={0, 1, 2}, max_tokens=300))
    assert status == "invalid" and found == ["ran_past_end", "tool_run_past_budget"]


def test_a_budget_turn_whose_tools_ran_is_caught():
    assert kinds(run([1, 1, 1, 1, 0], 3, "budget", max_tokens=300)) == ("invalid", ["tool_run_past_budget"])


def test_a_run_that_ends_on_its_budget_early_is_caught():
    assert kinds(run([1, 1, 1, 1, 0], 2, "budget", max_tokens=300)) == ("invalid", ["ended_early"])


def test_a_run_that_completes_where_its_budget_ends_it_is_caught():
    assert kinds(run([1, 1, 1, 1, 0], 3, "completed", ran={0, 1}, max_tokens=300)) == ("invalid", ["ended_wrong"])


def test_a_run_that_never_journals_the_cache_counts_runs_past_its_budget():
    cached = {**USAGE, "cache_read_input_tokens": 150}  # 260 a reply: over 500 at reply 1
    status, found = kinds(run([1, 1, 1, 0], 4, "completed", usage=dict.fromkeys(range(4), cached),
                              record_usage=dict.fromkeys(range(4), USAGE), max_tokens=500))
    assert status == "invalid" and found[:4] == ["usage_differs"] * 4 and "ran_past_end" in found


def test_the_iteration_cap_ends_a_run_after_its_last_reply_and_not_later():
    assert kinds(run([1, 1, 1, 0], 2, "max_iterations", max_iterations=2)) == ("valid", [])
    assert kinds(run([1, 1, 1, 0], 3, "max_iterations", max_iterations=2))[1] == ["ran_past_end"]
    assert kinds(run([1, 1, 1, 0], 1, "max_iterations", max_iterations=2))[1] == ["ended_early"]


def test_a_drifted_budget_accepts_the_forced_legs_end_too():
    # 330 tokens after reply 2: over a budget of 329, not over the forced legs' 330 -> either end holds
    assert kinds(run([1, 1, 1, 1, 0], 3, "budget", ran={0, 1}, max_tokens=329, drift=["max_tokens"]))[0] == "valid"
    assert kinds(run([1, 1, 1, 1, 0], 5, "completed", max_tokens=329, drift=["max_tokens"]))[0] == "invalid"


def test_a_chat_answer_does_not_end_the_run():
    assert kinds(run([1, 0, 1, 0], 4, "suspended", chat=True)) == ("valid", [])


def test_a_final_answer_that_is_not_the_script_s_last_turn_is_caught():
    h = run([1, 0], 2, "completed")
    h.options["script_turns"] = 1              # the reply to a conversation past the script
    assert kinds(h) == ("invalid", ["final_answer_not_scripted"])
    h.options["script_turns"] = 3              # a tool turn answered without tools (tool_choice none)
    assert kinds(h) == ("invalid", ["final_answer_not_scripted"])


def test_an_unfinished_run_is_not_judged_for_its_end():
    assert kinds(run([1, 1, 1, 1, 0], 2, "suspended", max_tokens=300)) == ("valid", [])


def test_a_journal_the_harness_does_not_decode_is_not_judged():
    h = run([1, 0], 2, "completed")
    h.journal_format = JSONL
    v = i11_workload.check(h)
    assert v.status == "valid" and v.evidence["checked"] == 0 and "not decoded" in v.evidence["not_judged"]



def test_a_cut_off_reply_ends_the_run_unless_the_subject_promises_it_goes_on():
    from harness.history.promises import Promises

    turns = [(10, "max_tokens", True), (10, "end_turn", False)]
    assert i11_workload.end_turn(turns, 1_000, 99, False)[:2] == ("error", 0)
    assert i11_workload.end_turn(turns, 1_000, 99, False, cut_ends=False)[:2] == ("completed", 1)
    h = run([1, 0], 2, "completed", stops={0: "max_tokens"})
    assert "ran_past_end" in kinds(h)[1]                           # fisk-ai's rule: the cut-off reply ends the run
    h.promises = Promises(cut_off_turn="continues")
    assert kinds(h) == ("valid", [])                               # a subject that promises it goes on: no violation


def test_a_new_turn_after_the_completed_run_is_judged_by_what_the_subject_promises():
    from harness.history.promises import Promises

    h = run([1, 0], 2, "completed")
    answer = [{"type": "text", "text": "a new turn's answer"}]
    more = [AssistantRecord(iteration=2, message={"role": "assistant", "content": answer},
                            stop_reason="end_turn", in_tokens=100, out_tokens=10), TerminalRecord(reason="completed")]
    tail = b"".join(encode_record(dataclasses.replace(r, seq=n)) for n, r in enumerate(more, 6))
    h.legs.append(Leg(index=1, kind="resume", argv=["agent"], journal=h.legs[0].journal + tail, exit_code=0))
    h.model_calls.append(ModelCall(index=2, t=2, key="k2", turn=2, messages=[], reply=answer, leg=1,
                                   stop="end_turn", usage=USAGE))
    assert kinds(h)[0] == "invalid"                  # fisk-ai's rule: a completed run takes no new turn
    h.promises = Promises(resume_completed="new-turn")
    assert kinds(h) == ("valid", [])                 # promised: the run is judged as it stood when it completed
