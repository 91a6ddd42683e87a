"""The fake Messages API faithful to what real clients send (issue 24 item 5), driven by the official ``anthropic``
SDK: thinking enabled and adaptive (signed blocks given, echoed back over several turns, never demanded when not
given), ``count_tokens``, ``tool_choice``, unknown fields and betas, and a state key that grows with the
conversation past the script (harness/workload/server.py, requests.py, script.py)."""

from __future__ import annotations

import json
import urllib.request

import pytest

anthropic = pytest.importorskip("anthropic")

from harness.workload.requests import RequestError, parse_request  # noqa: E402
from harness.workload.script import EXHAUSTED, opaque_fields, opaque_valid  # noqa: E402
from harness.workload.server import ModelServer, Script, ToolCall, Turn, api_key  # noqa: E402

SCRIPT = Script(seed=11, turns=(
    Turn(tools=(ToolCall("effect_a", n=1), ToolCall("effect_b", n=2))),
    Turn(tools=(ToolCall("effect_c", n=3),), thinking="Scripted: check the ledger first."),
    Turn(text="all done"),
))
TOOLS = [{"name": n, "description": f"tool {n}", "input_schema": {"type": "object"}}
         for n in ("effect_a", "effect_b", "effect_c")]
GO = [{"role": "user", "content": "go"}]
MODES = {"adaptive": {"type": "adaptive"}, "enabled": {"type": "enabled", "budget_tokens": 2048},
         "omitted": {"type": "adaptive", "display": "omitted"}}


@pytest.fixture
def server():
    with ModelServer() as srv:
        yield srv


def client_for(server, session, leg: int = 0) -> "anthropic.Anthropic":
    return anthropic.Anthropic(base_url=server.base_url, api_key=api_key(session.token, leg), max_retries=0)


def create(client, messages, stream: bool, **kw):
    """One model call, non-streaming or streamed (the SDK's stream helper assembles the final message)."""
    kw = {"model": "claude-x", "max_tokens": 4096, "messages": messages, "tools": TOOLS, **kw}
    if not stream:
        return client.messages.create(**kw)
    with client.messages.stream(**kw) as events:
        return events.get_final_message()


def echoed(message) -> list[dict]:
    """A reply as a client sends it back: every block as the SDK parsed it (thinking signatures included)."""
    return [b.model_dump(exclude_none=True) for b in message.content]


def results(message) -> dict:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id, "content": f"ran {b.name}"}
                                        for b in message.content if b.type == "tool_use"]}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_with_thinking_on_every_reply_thinks_signed_and_the_echo_round_trips_over_every_turn(server, mode, stream):
    s = server.open_session(SCRIPT)
    client = client_for(server, s)
    history, replies = list(GO), []
    for _ in range(3):
        msg = create(client, history, stream, thinking=MODES[mode])
        replies.append(msg)
        history += [{"role": "assistant", "content": echoed(msg)}]
        if msg.stop_reason == "tool_use":
            history.append(results(msg))
    assert [m.stop_reason for m in replies] == ["tool_use", "tool_use", "end_turn"]
    for turn, msg in enumerate(replies):
        think = msg.content[0]
        assert think.type == "thinking" and opaque_fields(think.signature) == ("thinking", turn, 0)
        assert opaque_valid(SCRIPT.seed, "thinking", think.signature, think.thinking)
        want = "" if mode == "omitted" else SCRIPT.thinking_text(turn)
        assert think.thinking == want
    assert replies[1].content[0].thinking in ("", "Scripted: check the ledger first.")  # the scripted text
    assert [c.turn for c in server.close_session(s.token)] == [0, 1, 2] and s.log == []  # nothing refused


def test_thinking_is_never_demanded_back_from_a_reply_that_had_none_and_still_is_from_one_that_had(server):
    s = server.open_session(SCRIPT)
    client = client_for(server, s)
    plain = create(client, GO, False)  # thinking off: turn 0 scripts no thinking, so the reply has none
    assert [b.type for b in plain.content] == ["text", "tool_use", "tool_use"]
    loop = GO + [{"role": "assistant", "content": echoed(plain)}, results(plain)]
    on = create(client, loop, False, thinking=MODES["adaptive"])  # switched on mid-loop: nothing to demand
    assert on.content[0].type == "thinking" and on.stop_reason == "tool_use"
    # the turn just given started with thinking: dropping it from the loop is refused (the API's rule)
    dropped = [b for b in echoed(on) if b["type"] != "thinking"]
    with pytest.raises(anthropic.BadRequestError) as info:
        create(client, loop + [{"role": "assistant", "content": dropped}, results(on)], False,
               thinking=MODES["adaptive"])
    assert "messages.3.content.0.type: Expected `thinking` or `redacted_thinking`" in info.value.message
    # echoed unsigned or altered is refused too (what the mutant thinking-signature-dropped trips over)
    unsigned = [{k: v for k, v in b.items() if k != "signature"} for b in echoed(on)]
    edited = [{**b, "thinking": b["thinking"] + "!"} if b["type"] == "thinking" else b for b in echoed(on)]
    for blocks, says in ((unsigned, "thinking.signature: Field required"), (edited, "Invalid `signature`")):
        with pytest.raises(anthropic.BadRequestError, match=says):
            create(client, loop + [{"role": "assistant", "content": blocks}, results(on)], False,
                   thinking=MODES["adaptive"])
    # another session (a journal laid out from another trial) knows nothing it gave: the API's rule applies
    other = server.open_session(SCRIPT)
    with pytest.raises(anthropic.BadRequestError, match="Expected `thinking`"):
        create(client_for(server, other), loop, False, thinking=MODES["enabled"])
    assert [c.turn for c in server.close_session(s.token)] == [0, 1]  # a refused request is no model call
    assert sum(line.startswith("refused 400") for line in s.log) == 3


def test_count_tokens_answers_a_deterministic_count_that_grows_with_the_input_and_is_no_model_call(server):
    s = server.open_session(SCRIPT)
    client = client_for(server, s)
    short = client.messages.count_tokens(model="claude-x", messages=GO)
    again = client.messages.count_tokens(model="claude-x", messages=GO)
    longer = client.messages.count_tokens(model="claude-x", messages=GO, tools=TOOLS, system="be brief " * 50,
                                          thinking=MODES["adaptive"])
    assert short.input_tokens == again.input_tokens >= 1 and longer.input_tokens > short.input_tokens + 100
    assert client.beta.messages.count_tokens(model="claude-x", messages=GO,
                                             betas=["token-counting-2024-11-01"]).input_tokens == short.input_tokens
    with pytest.raises(anthropic.BadRequestError, match="messages.0.role"):
        client.messages.count_tokens(model="claude-x", messages=[{"role": "robot", "content": "x"}])
    assert server.close_session(s.token) == []
    assert s.log[:3] == [f"count_tokens: {short.input_tokens} input tokens"] * 2 + [
        f"count_tokens: {longer.input_tokens} input tokens"]


def test_tool_choice_is_checked_and_honoured_where_the_script_allows(server):
    s = server.open_session(SCRIPT)
    client = client_for(server, s)
    auto = create(client, GO, False, tool_choice={"type": "auto"})
    forced = create(client, GO, True, tool_choice={"type": "any", "disable_parallel_tool_use": False})
    named = create(client, GO, False, tool_choice={"type": "tool", "name": "effect_a"})
    assert echoed(auto) == echoed(forced) == echoed(named) and auto.stop_reason == "tool_use"
    none = create(client, GO, True, tool_choice={"type": "none"})
    assert [b.type for b in none.content] == ["text"] and none.stop_reason == "end_turn"
    loop = GO + [{"role": "assistant", "content": echoed(auto)}, results(auto)]
    second = create(client, loop, False)
    final = loop + [{"role": "assistant", "content": echoed(second)}, results(second)]
    assert create(client, final, False, tool_choice={"type": "any"}).content[0].text == "all done"
    create(client, GO, False, tool_choice={"type": "tool", "name": "effect_c"})
    for choice, says in (({"type": "sometimes"}, "tool_choice.type"), ({"type": "tool"}, "tool_choice.name")):
        with pytest.raises(anthropic.BadRequestError, match=says):
            create(client, GO, False, tool_choice=choice)
    with pytest.raises(anthropic.BadRequestError, match="tool_choice forces tool use"):
        create(client, GO, False, tool_choice={"type": "any"}, thinking=MODES["enabled"])
    calls = server.close_session(s.token)
    assert [c.turn for c in calls] == [0, 0, 0, 0, 1, 2, 0]
    assert all(b["type"] != "tool_use" for b in calls[3].reply) and calls[3].stop == "end_turn"
    assert s.log[-5:-3] == ["call 5: tool_choice any not honoured: turn 2 scripts no tool call",
                            "call 6: tool_choice tool 'effect_c' not honoured: turn 0 scripts no call of it"]


def test_unknown_fields_and_betas_are_tolerated_and_logged_once_per_session(server):
    s = server.open_session(SCRIPT)
    client = client_for(server, s)
    extra = {"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
             "output_config": {"effort": "medium"}}
    betas = ["interleaved-thinking-2025-05-14", "per-turn-control-2099-01-01"]
    first = client.beta.messages.create(model="claude-x", max_tokens=100, messages=GO, betas=betas, extra_body=extra,
                                        thinking=MODES["omitted"], metadata={"user_id": "u"})
    plain = create(client, GO, True, extra_body={"output_config": {"effort": "high"}, "brand_new": 1})
    assert first.stop_reason == plain.stop_reason == "tool_use"
    calls = server.close_session(s.token)
    assert [c.key for c in calls] == [calls[0].key] * 2  # the same state, asked twice
    assert s.log == ["call 0: unknown fields context_management, output_config",
                     "call 0: anthropic-beta interleaved-thinking-2025-05-14, per-turn-control-2099-01-01",
                     "call 1: unknown fields brand_new"]
    assert parse_request(json.dumps({"messages": GO, **extra}).encode()).unknown == tuple(sorted(extra))


def test_malformed_thinking_is_refused_naming_the_field():
    for thinking, field in (({"type": "sometimes"}, "thinking.type"), ({"type": "enabled"}, "thinking.budget_tokens"),
                            ({"type": "enabled", "budget_tokens": 10}, "thinking.budget_tokens"),
                            ({"type": "adaptive", "display": "loud"}, "thinking.display"), ("on", "thinking.type")):
        with pytest.raises(RequestError) as info:
            parse_request(json.dumps({"messages": GO, "thinking": thinking}).encode())
        assert info.value.field == field
    off = parse_request(json.dumps({"messages": GO, "thinking": {"type": "disabled"}}).encode())
    assert not off.thinking and not off.omit_thinking


def test_past_the_script_every_new_user_turn_is_a_new_state_and_asking_again_is_not(server):
    # Claude Code continues a completed session with a new turn (claude -p ... --resume): each is a new key
    s = server.open_session(SCRIPT)
    client = client_for(server, s)
    history = list(GO)
    while True:
        msg = create(client, history, False, thinking=MODES["adaptive"])
        history.append({"role": "assistant", "content": echoed(msg)})
        if msg.stop_reason != "tool_use":
            break
        history.append(results(msg))
    assert msg.content[-1].text == "all done"
    ids = []
    for n in range(4):
        history.append({"role": "user", "content": f"and now task {n}"})
        msg = create(client, history, n % 2 == 1, thinking=MODES["adaptive"])
        assert msg.content[-1].text == EXHAUSTED and msg.stop_reason == "end_turn"
        ids.append(msg.id)
        history.append({"role": "assistant", "content": echoed(msg)})
    again = create(client, history[:-1], False, thinking=MODES["adaptive"])  # the last turn asked again
    calls = server.close_session(s.token)
    assert len(calls) == 8 and [c.turn for c in calls[3:7]] == [3] * 4
    keys = [c.key for c in calls[:7]]
    assert len(set(keys)) == 7  # a new turn is never a repeat of an earlier request
    assert calls[7].key == calls[6].key and again.id == ids[-1]  # asking again without a new turn is one
    assert len(set(ids)) == 4  # each reply past the script has its own message id (clients merge by id)


def test_a_head_probe_is_answered_and_a_get_is_not_found(server):
    req = urllib.request.Request(server.base_url + "/api/hello", method="HEAD")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200 and resp.read() == b""
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(server.base_url + "/v1/models", timeout=10)
    assert info.value.code == 404


def test_a_script_that_does_not_think_unasked_for_gives_thinking_only_where_it_scripts_it(server):
    # build_workload's script for a scenario whose forced resume turns thinking on (drift "thinking")
    script = Script(seed=SCRIPT.seed, turns=SCRIPT.turns, thinks_when_asked=False)
    s = server.open_session(script)
    client = client_for(server, s)
    first = create(client, GO, False, thinking=MODES["adaptive"])
    assert [b.type for b in first.content] == ["text", "tool_use", "tool_use"]  # adaptive: chose not to think
    loop = GO + [{"role": "assistant", "content": echoed(first)}, results(first)]
    second = create(client, loop, True, thinking=MODES["adaptive"])  # nothing demanded back
    assert second.content[0].thinking == "Scripted: check the ledger first."
    # a default thinking block (what a thinking-when-asked script gives) is no block of this script
    given = SCRIPT.reply(0, thinking=True)[0]
    with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):
        create(client, GO + [{"role": "assistant", "content": given}, results(first)], False)
    assert [c.turn for c in server.close_session(s.token)] == [0, 1]
