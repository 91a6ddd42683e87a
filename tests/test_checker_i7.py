"""I7 the conversation is well-formed at every model call."""

import copy

from synth import Engine

from harness.checkers import i7_conversation
from harness.checkers.i7_conversation import problems


def _user(*blocks):
    return {"role": "user", "content": list(blocks)}


def _asst(*ids):
    return {"role": "assistant", "content": [{"type": "text", "text": "x"}]
            + [{"type": "tool_use", "id": i, "name": "t", "input": {}} for i in ids]}


def _res(i):
    return {"type": "tool_result", "tool_use_id": i, "content": "ok"}


TEXT = {"type": "text", "text": "hi"}


def test_every_call_of_a_correct_engine_is_well_formed_even_across_crashes():
    eng = Engine()
    eng.leg(kill_after=6)
    eng.leg(suspend_at=1)
    v = i7_conversation.check(eng.finish())
    assert v.status == "valid", v.evidence
    assert v.evidence["checked"] == len(eng.h.model_calls)


def test_a_model_call_with_a_tool_use_left_unanswered_is_caught():
    h = Engine([["a", "b"], []]).finish()
    call = h.model_calls[1]
    call.messages = copy.deepcopy(call.messages)
    call.messages[-1]["content"] = [_res("a")]          # the resume forgot b's result
    v = i7_conversation.check(h)
    assert v.status == "invalid"
    (row,) = v.evidence["violations"]
    assert row["kind"] == "unanswered_tool_use" and row["tool_use_ids"] == ["b"]
    assert row["call"] == 1 and row["message"] == 1 and row["turn"] == 1


def test_a_call_made_while_the_last_message_still_asks_for_tools_is_caught():
    (row,) = problems([_user(TEXT), _asst("a")])
    assert row["kind"] == "unanswered_tool_use" and "called right after it" in row["detail"]


def test_an_orphan_tool_result_is_caught():
    kinds = [p["kind"] for p in problems([_user(TEXT), _asst("a"), _user(_res("a"), _res("z"))])]
    assert kinds == ["orphan_tool_result"]


def test_a_duplicated_tool_result_is_caught():
    (row,) = problems([_user(TEXT), _asst("a"), _user(_res("a"), _res("a"))])
    assert row["kind"] == "duplicate_tool_result" and row["count"] == 2


def test_roles_must_alternate_and_start_with_the_user():
    kinds = [p["kind"] for p in problems([_asst(), _user(TEXT), _user(TEXT)])]
    assert kinds == ["first_not_user", "roles_not_alternating"]


def test_a_tool_result_in_the_first_user_message_is_an_orphan():
    (row,) = problems([_user(_res("a"))])
    assert row["kind"] == "orphan_tool_result" and row["message"] == 0


def test_an_empty_request_and_a_malformed_message_are_caught():
    assert problems([])[0]["kind"] == "empty"
    assert problems([_user(TEXT), "nope"])[0]["kind"] == "bad_message"


def test_a_well_formed_conversation_has_no_problems():
    assert problems([_user(TEXT), _asst("a", "b"), _user(_res("b"), _res("a")), _asst(), _user(TEXT)]) == []


def test_a_paused_turn_and_its_continuation_may_be_two_assistant_messages_and_nothing_else_may():
    from harness.checkers.i7_conversation import problems
    paused = {"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}]}
    cont = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "a", "input": {}}]}
    results = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}
    user = {"role": "user", "content": "go"}
    assert problems([user, paused, cont, results]) == []
    text = {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}
    assert [p["kind"] for p in problems([user, text, cont, results])] == ["roles_not_alternating"]
    # a "paused" turn that also asked for a tool is no pause: its tool_use is unanswered as well
    both = {"role": "assistant", "content": paused["content"] + [{"type": "tool_use", "id": "t0", "name": "a",
                                                                  "input": {}}]}
    kinds = [p["kind"] for p in problems([user, both, cont, results])]
    assert "roles_not_alternating" in kinds
    assert [p["kind"] for p in problems([user, {"role": "user", "content": "x"}])] == ["roles_not_alternating"]
