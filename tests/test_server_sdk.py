"""harness.workload.server driven by the official ``anthropic`` Python SDK: a real client none of us wrote.

Streaming (``messages.stream`` and ``create(stream=True)``), non-streaming,
the beta endpoint (``?beta=true`` and ``anthropic-beta``), a whole tool loop,
system prompts and a resumed conversation, each judged on what the SDK
parsed out of the server's replies.
"""

from __future__ import annotations

import asyncio

import pytest

anthropic = pytest.importorskip("anthropic")

from harness.workload.build import tool_definitions  # noqa: E402
from harness.workload.server import ModelServer, Script, ToolCall, Turn, api_key  # noqa: E402

SCRIPT = Script(seed=7, model="claude-fiskj-fake", turns=(
    Turn(tools=(ToolCall("effect_a", sleep_ms=3, n=11), ToolCall("effect_b", n=12))),
    Turn(tools=(ToolCall("effect_c", n=13),), text="One more tool, then the answer; with a longer text to chunk."),
    Turn(text="all done"),
))
TOOLS = [{k: v for k, v in t.items() if k != "command"} for t in tool_definitions()]
MODEL = "claude-fiskj-fake"
GO = [{"role": "user", "content": "go"}]


@pytest.fixture
def server():
    with ModelServer() as srv:
        yield srv


def client_for(server: ModelServer, session, leg: int = 0, **kw) -> "anthropic.Anthropic":
    return anthropic.Anthropic(base_url=server.base_url, api_key=api_key(session.token, leg), max_retries=0, **kw)


def ask(client, messages, **kw):
    return client.messages.create(model=MODEL, max_tokens=1024, messages=messages, tools=TOOLS, **kw)


def dumped(message) -> list[dict]:
    """A message's content as plain dicts, without the SDK's absent optional fields."""
    return [b.model_dump(exclude_none=True) for b in message.content]


def results(message) -> dict:
    """The user message answering every tool_use of ``message`` (what a tool loop sends next)."""
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id, "content": f"ran {b.name}"}
                                        for b in message.content if b.type == "tool_use"]}


def test_a_non_streaming_reply_parses_into_the_scripted_blocks(server):
    s = server.open_session(SCRIPT)
    msg = ask(client_for(server, s), GO)
    assert msg.type == "message" and msg.role == "assistant" and msg.model == SCRIPT.model
    assert msg.stop_reason == "tool_use" and msg.stop_sequence is None
    assert [b.type for b in msg.content] == ["text", "tool_use", "tool_use"]
    assert dumped(msg) == SCRIPT.reply(0)[0]
    use = msg.content[1]
    assert (use.id, use.name, use.input) == ("toolu_7_0_0", "effect_a", {"tool_use_id": "toolu_7_0_0", "n": 11,
                                                                          "sleep_ms": 3})
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (100, 34)
    assert (msg.usage.cache_creation_input_tokens, msg.usage.cache_read_input_tokens) == (0, 0)
    assert msg._request_id == f"req_{s.token}_0"


def test_the_stream_helper_accumulates_the_same_message(server):
    s = server.open_session(SCRIPT)
    client = client_for(server, s)
    plain = ask(client, GO)
    with client.messages.stream(model=MODEL, max_tokens=1024, messages=GO, tools=TOOLS) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert final.model_dump() == plain.model_dump()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert kinds.count("text") >= 1 and kinds.count("input_json") > 4 and kinds.count("content_block_stop") == 3
    # the text arrives in pieces that add up to the scripted text
    with client.messages.stream(model=MODEL, max_tokens=1024, messages=GO + [
            {"role": "assistant", "content": plain.content}, results(plain)], tools=TOOLS) as stream:
        pieces = list(stream.text_stream)
        second = stream.get_final_message()
    assert len(pieces) > 1 and "".join(pieces) == SCRIPT.reply(1)[0][0]["text"] == second.content[0].text
    assert [b.id for b in second.content if b.type == "tool_use"] == ["toolu_7_1_0"]


def test_create_with_stream_true_yields_the_raw_event_sequence(server):
    s = server.open_session(SCRIPT)
    events = list(ask(client_for(server, s), GO, stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert events[0].message.content == [] and events[0].message.usage.input_tokens == 100
    starts = [e.content_block for e in events if e.type == "content_block_start"]
    assert [(b.type, getattr(b, "id", None)) for b in starts] == [("text", None), ("tool_use", "toolu_7_0_0"),
                                                                   ("tool_use", "toolu_7_0_1")]
    partial = "".join(e.delta.partial_json for e in events
                      if e.type == "content_block_delta" and e.index == 2)
    assert partial == '{"tool_use_id":"toolu_7_0_1","n":12}'
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta")
    assert text == "Turn 0: calling 2 tools."
    assert events[-2].delta.stop_reason == "tool_use" and events[-2].usage.output_tokens == 34


def test_a_whole_tool_loop_driven_by_the_sdk_reaches_the_final_answer(server):
    s = server.open_session(SCRIPT)
    client = client_for(server, s)
    messages: list[dict] = [{"role": "user", "content": "Do the scripted ledger work."}]
    ran = []
    for _ in range(10):
        with client.messages.stream(model=MODEL, max_tokens=1024, system="You are a test agent.", messages=messages,
                                    tools=TOOLS) as stream:
            reply = stream.get_final_message()
        messages.append({"role": "assistant", "content": reply.content})
        if reply.stop_reason != "tool_use":
            break
        ran += [(b.id, b.input["tool_use_id"]) for b in reply.content if b.type == "tool_use"]
        messages.append(results(reply))
    assert reply.stop_reason == "end_turn" and reply.content[0].text == "all done"
    assert ran == [("toolu_7_0_0", "toolu_7_0_0"), ("toolu_7_0_1", "toolu_7_0_1"), ("toolu_7_1_0", "toolu_7_1_0")]
    calls = server.close_session(s.token)
    assert [c.turn for c in calls] == [0, 1, 2] and len({c.key for c in calls}) == 3


def test_a_system_prompt_either_way_does_not_change_the_reply(server):
    s = server.open_session(SCRIPT)
    client = client_for(server, s)
    plain = ask(client, GO)
    as_text = ask(client, GO, system="You are a test agent.")
    as_blocks = ask(client, GO, system=[{"type": "text", "text": "You are a test agent.",
                                         "cache_control": {"type": "ephemeral"}}])
    in_messages = ask(client, [{"role": "system", "content": "You are a test agent."}] + GO)
    assert dumped(as_text) == dumped(as_blocks) == dumped(in_messages) == dumped(plain)
    calls = server.close_session(s.token)
    assert calls[3].messages == GO  # recorded without the system message


def test_the_beta_endpoint_with_its_query_string_and_headers_is_served(server):
    # The TypeScript SDK's beta calls go to /v1/messages?beta=true; this Python SDK sends only the
    # anthropic-beta header, so the query string is added as such a client would send it.
    s = server.open_session(SCRIPT)
    seen = []
    http_client = anthropic.DefaultHttpxClient(event_hooks={"request": [lambda r: seen.append((r.url, r.headers))]})
    client = client_for(server, s, http_client=http_client)
    msg = client.beta.messages.create(model=MODEL, max_tokens=1024, messages=GO, tools=TOOLS,
                                      betas=["interleaved-thinking-2025-05-14"], extra_query={"beta": "true"})
    assert [b.id for b in msg.content if b.type == "tool_use"] == ["toolu_7_0_0", "toolu_7_0_1"]
    with client.beta.messages.stream(model=MODEL, max_tokens=1024, messages=GO, tools=TOOLS,
                                     betas=["fine-grained-tool-streaming-2025-05-14"],
                                     extra_query={"beta": "true"}) as stream:
        streamed = stream.get_final_message()
    assert dumped(streamed) == dumped(msg)
    assert [(url.path, str(url.query, "ascii") if isinstance(url.query, bytes) else url.query) for url, _ in seen] \
        == [("/v1/messages", "beta=true")] * 2
    assert [h["anthropic-beta"] for _, h in seen] == ["interleaved-thinking-2025-05-14",
                                                      "fine-grained-tool-streaming-2025-05-14"]
    http_client.close()


def test_a_resumed_conversation_with_a_synthetic_assistant_message_gets_the_right_reply(server):
    s = server.open_session(SCRIPT)
    client = client_for(server, s)
    first = ask(client, GO)
    history = GO + [{"role": "assistant", "content": first.content}, results(first)]
    second = ask(client, history)  # the agent is killed before it journals this reply
    resumed = client_for(server, s, leg=1)
    # the resumed agent marks the lost call in its conversation and asks again
    rebuilt = history + [{"role": "assistant", "content": [{"type": "text", "text": "interrupted, no response"}]},
                         {"role": "user", "content": "Continue."}]
    with resumed.messages.stream(model=MODEL, max_tokens=1024, messages=rebuilt, tools=TOOLS) as stream:
        again = stream.get_final_message()
    assert [b.id for b in again.content if b.type == "tool_use"] == ["toolu_7_1_0"]
    assert dumped(again) == dumped(second)
    last = ask(resumed, rebuilt + [{"role": "assistant", "content": again.content}, results(again)])
    assert last.content[0].text == "all done"
    calls = server.close_session(s.token)
    assert [(c.turn, c.leg) for c in calls] == [(0, 0), (1, 0), (1, 1), (2, 1)]
    assert calls[1].key == calls[2].key  # the repeat is visible to I3


def test_a_thinking_turn_streams_into_a_signed_thinking_block(server):
    script = Script(seed=4, turns=(Turn(thinking="I should record the effect first. " * 2,
                                        tools=(ToolCall("effect_a", n=1),)), Turn(text="done")))
    s = server.open_session(script)
    client = client_for(server, s)
    plain = ask(client, GO)
    with client.messages.stream(model=MODEL, max_tokens=2048, messages=GO, tools=TOOLS,
                                thinking={"type": "enabled", "budget_tokens": 1024}) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds.count("thinking") > 1 and kinds.count("signature") == 1
    assert final.content[0].type == "thinking" and final.content[0].signature == plain.content[0].signature
    assert final.content[0].thinking == script.turns[0].thinking
    assert dumped(final) == dumped(plain)
    # the signed block goes back with the tool results, as extended thinking requires
    last = ask(client, GO + [{"role": "assistant", "content": final.content}, results(final)])
    assert last.content[0].text == "done"


def test_the_async_client_streams_too(server):
    s = server.open_session(SCRIPT)

    async def run():
        async with anthropic.AsyncAnthropic(base_url=server.base_url, api_key=api_key(s.token, 0),
                                            max_retries=0) as client:
            async with client.messages.stream(model=MODEL, max_tokens=1024, messages=GO, tools=TOOLS) as stream:
                return await stream.get_final_message()

    msg = asyncio.run(run())
    assert [b.id for b in msg.content if b.type == "tool_use"] == ["toolu_7_0_0", "toolu_7_0_1"]


def test_refusals_surface_as_the_sdk_s_typed_errors(server):
    s = server.open_session(SCRIPT)
    with pytest.raises(anthropic.AuthenticationError) as auth:
        anthropic.Anthropic(base_url=server.base_url, api_key="sk-not-ours", max_retries=0).messages.create(
            model=MODEL, max_tokens=10, messages=GO)
    assert auth.value.status_code == 401 and auth.value.body["error"]["type"] == "authentication_error"
    with pytest.raises(anthropic.BadRequestError) as bad:
        ask(client_for(server, s), [{"role": "tool", "content": "go"}])
    assert bad.value.body["error"]["message"].startswith("messages.0.role: ")
    with pytest.raises(anthropic.BadRequestError) as streamed:  # refused before any event is sent
        client_for(server, s).messages.create(model=MODEL, max_tokens=0, messages=GO, stream=True)
    assert streamed.value.body["error"]["message"].startswith("max_tokens: ")
    assert server.close_session(s.token) == []
