"""The deterministic scripted model (fiskj.scripted)."""

from __future__ import annotations

import pytest

from fiskj.errors import UsageError
from fiskj.model import check_response
from fiskj.scripted import ScriptedModel
from fiskj.tools import builtin_tools

TOOLS = [t.definition() for t in builtin_tools()]


def request(messages, tools=TOOLS):
    return {"model": "scripted:0", "max_tokens": 100, "messages": messages, "tools": tools}


def user(value):
    return {"role": "user", "content": [{"type": "text", "text": value}]}


def advance(model, messages):
    """Append the model's reply and fake results for its tool calls; return the reply."""
    body = model.complete(request(messages))
    messages.append({"role": "assistant", "content": body["content"]})
    ids = [b["id"] for b in body["content"] if b["type"] == "tool_use"]
    if ids:
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": i, "content": "ok", "is_error": False} for i in ids]})
    return body


def test_the_spec_parses_seed_and_turns_with_three_turns_by_default():
    assert (ScriptedModel.from_spec("scripted:7").seed, ScriptedModel.from_spec("scripted:7").turns) == (7, 3)
    assert ScriptedModel.from_spec("scripted:7:5").turns == 5
    for bad in ("scripted:", "scripted:x", "scripted:1:2:3", "scripted:-1", "other:1"):
        with pytest.raises(UsageError):
            ScriptedModel.from_spec(bad)


def test_it_calls_one_to_three_registered_tools_for_turns_turns_then_answers():
    model = ScriptedModel(3, turns=4)
    messages = [user("go")]
    for turn in range(4):
        body = check_response(advance(model, messages))
        calls = [b for b in body["content"] if b["type"] == "tool_use"]
        assert body["stop_reason"] == "tool_use" and 1 <= len(calls) <= 3
        assert [c["id"] for c in calls] == [f"toolu_3_{turn}_{k}" for k in range(len(calls))]
        assert all(c["name"] in {"echo", "sleep", "append_line"} for c in calls)
    final = advance(model, messages)
    assert final["stop_reason"] == "end_turn"
    assert [b["type"] for b in final["content"]] == ["text"]


def test_the_reply_depends_only_on_the_conversation_state():
    messages = [user("go")]
    first = ScriptedModel(5).complete(request(messages))
    again = ScriptedModel(5).complete(request(list(messages)))
    assert first == again
    advance(ScriptedModel(5), messages)
    assert ScriptedModel(5).complete(request(messages)) == ScriptedModel(5).complete(request(messages))
    assert ScriptedModel(5).complete(request(messages)) != first


def test_inputs_follow_the_schemas_and_keep_sleeps_short_and_paths_relative():
    for seed in range(30):
        body = ScriptedModel(seed).complete(request([user("go")]))
        for call in (b for b in body["content"] if b["type"] == "tool_use"):
            if call["name"] == "sleep":
                assert 0 <= call["input"]["ms"] <= 20
            if call["name"] == "append_line":
                assert call["input"]["path"] == f"fiskj-scripted-{seed}.log"
                assert isinstance(call["input"]["line"], str)


def test_no_tools_or_zero_turns_gives_the_answer_at_once():
    assert ScriptedModel(1, turns=0).complete(request([user("go")]))["stop_reason"] == "end_turn"
    assert ScriptedModel(1).complete(request([user("go")], tools=[]))["stop_reason"] == "end_turn"


def test_a_chat_follow_up_gets_an_answer_that_quotes_it():
    model = ScriptedModel(2, turns=0)
    messages = [user("go")]
    advance(model, messages)
    messages.append(user("and then?"))
    body = model.complete(request(messages))
    assert "and then?" in body["content"][0]["text"]
