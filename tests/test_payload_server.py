"""The fake Messages API server's payloads (issue 15, class 2): thinking, redacted thinking, server tools,
pause_turn, stop_sequence and cache tokens, streamed and not, read by the official SDK and by fiskj's client;
reasoning blocks sent back altered are refused as the API refuses them.

harness/workload/server.py, harness/workload/sse.py; the workload side is tests/test_payloads.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
import urllib.error
import urllib.request

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fiskj.model import AnthropicClient
from harness.workload import sse
from harness.workload.server import (STOP_SEQUENCE, ModelServer, RequestError, Script, ToolCall, Turn, api_key,
                                     check_reasoning, opaque, opaque_valid)

SCRIPT = Script(seed=9, model="claude-fiskj-fake", cache_tokens=1000, turns=(
    Turn(tools=(ToolCall("effect_a", n=1, out=json.dumps({"text": "nul \x00 nel \u0085 ls \u2028"})),),
         thinking="Think: ü \u0085 then act.", redacted=True, web_search=True),
    Turn(pause=True, thinking="Searching first."),
    Turn(text="done", stop="stop_sequence", redacted=True),
))
GO = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]


@pytest.fixture
def server():
    with ModelServer() as srv:
        yield srv


def post(srv: ModelServer, key: str, messages, stream: bool = False):
    """POST a request; returns ``(status, body)``: the parsed JSON, or the SSE events ``[(name, data)]``."""
    body = json.dumps({"model": "m", "max_tokens": 100, "messages": messages, "stream": stream}).encode()
    req = urllib.request.Request(srv.base_url + "/v1/messages", data=body, method="POST",
                                 headers={"content-type": "application/json", "x-api-key": key})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            data = resp.read().decode()
            if not stream:
                return resp.status, json.loads(data)
            return resp.status, [(f.split("\n")[0][len("event: "):], json.loads(f.split("\n")[1][len("data: "):]))
                                 for f in data.split("\n\n") if f.strip()]
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def rebuild(events) -> dict:
    """The message a stream of ``(name, data)`` events delivers, from its starts and deltas alone."""
    message: dict = {}
    partial: dict[int, str] = {}
    for name, data in events:
        assert name == data["type"]
        if name == "message_start":
            message = {**data["message"], "content": []}
        elif name == "content_block_start":
            assert data["index"] == len(message["content"])
            message["content"].append(dict(data["content_block"]))
        elif name == "content_block_delta":
            block, delta = message["content"][data["index"]], data["delta"]
            if delta["type"] == "input_json_delta":
                partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
            else:
                field = {"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "signature"}[delta["type"]]
                block[field] = block[field] + delta[field] if field != "signature" else delta[field]
        elif name == "content_block_stop" and data["index"] in partial:
            message["content"][data["index"]]["input"] = json.loads(partial.pop(data["index"]))
        elif name == "message_delta":
            message.update(data["delta"])
            message["usage"] = {**message["usage"], **data["usage"]}
    return message


def turn_messages(blocks, results: bool = True):
    """The assistant message of ``blocks`` and, when it has tool_use blocks, the user message answering them."""
    out = [{"role": "assistant", "content": blocks}]
    uses = [b for b in blocks if b["type"] == "tool_use"]
    if results and uses:
        out.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": b["id"], "content": "ok"}
                                                for b in uses]})
    return out


def test_a_reply_carries_signed_thinking_redacted_thinking_server_tools_and_cache_tokens(server):
    s = server.open_session(SCRIPT)
    status, body = post(server, api_key(s.token, 0), GO)
    assert status == 200 and body["stop_reason"] == "tool_use" and body["stop_sequence"] is None
    assert [b["type"] for b in body["content"]] == ["thinking", "redacted_thinking", "text", "server_tool_use",
                                                    "web_search_tool_result", "tool_use"]
    thinking, redacted, _, use, result, tool = body["content"]
    assert thinking["thinking"] == "Think: ü \u0085 then act." and opaque_valid(9, "thinking", thinking["signature"],
                                                                                 thinking["thinking"])
    assert opaque_valid(9, "redacted", redacted["data"]) and not opaque_valid(9, "thinking", redacted["data"])
    assert use["id"] == "srvtoolu_9_0_0" and use["name"] == "web_search" and result["tool_use_id"] == use["id"]
    assert result["content"][0]["type"] == "web_search_result"
    assert tool["input"] == {"tool_use_id": "toolu_9_0_0", "n": 1, "out": {"text": "nul \x00 nel \u0085 ls \u2028"}}
    assert body["usage"] == {"input_tokens": 100, "output_tokens": 27, "cache_creation_input_tokens": 100,
                             "cache_read_input_tokens": 1000, "server_tool_use": {"web_search_requests": 1}}


def test_a_pause_turn_is_answered_again_until_it_is_sent_back_then_the_answer_stops_on_its_sequence(server):
    s = server.open_session(SCRIPT)
    key = api_key(s.token, 0)
    _, first = post(server, key, GO)
    history = GO + turn_messages(first["content"])
    _, paused = post(server, key, history)
    assert paused["stop_reason"] == "pause_turn" and "tool_use" not in [b["type"] for b in paused["content"]]
    assert [b["id"] for b in paused["content"] if b["type"] == "server_tool_use"] == ["srvtoolu_9_1_0"]
    _, again = post(server, key, history)
    assert again == paused                                   # not sent back yet: the same turn
    status, answer = post(server, key, history + turn_messages(paused["content"]))  # ends with the paused turn
    assert status == 200 and answer["stop_reason"] == "stop_sequence" and answer["stop_sequence"] == STOP_SEQUENCE
    assert [b["type"] for b in answer["content"]] == ["redacted_thinking", "text"]
    calls = server.close_session(s.token)
    assert [c.turn for c in calls] == [0, 1, 1, 2] and calls[1].key == calls[2].key != calls[3].key


def test_a_streamed_reply_delivers_every_new_block_and_a_lone_surrogate_as_an_escape(server):
    script = Script(seed=9, turns=(replace(SCRIPT.turns[0], tools=(ToolCall("effect_a", n=1, out=json.dumps(
        {"text": "lone \ud800 nel \u0085"})),)),))
    s = server.open_session(script)
    key = api_key(s.token, 0)
    _, plain = post(server, key, GO)
    _, events = post(server, key, GO, stream=True)
    assert rebuild(events) == plain and plain["content"][5]["input"]["out"]["text"] == "lone \ud800 nel \u0085"
    starts = {d["content_block"]["type"]: d["content_block"] for n, d in events if n == "content_block_start"}
    assert starts["redacted_thinking"] == plain["content"][1]          # sent whole, no delta
    assert starts["web_search_tool_result"] == plain["content"][4]
    assert starts["server_tool_use"]["input"] == {} and starts["thinking"]["signature"] == ""
    deltas = {d["delta"]["type"] for n, d in events if n == "content_block_delta"}
    assert deltas == {"thinking_delta", "signature_delta", "text_delta", "input_json_delta"}
    partial = "".join(d["delta"]["partial_json"] for n, d in events if n == "content_block_delta"
                      and d["index"] == 5)
    assert "\\ud800" in partial and partial.isascii() is False   # the escape, around raw UTF-8


def test_reasoning_sent_back_verbatim_is_accepted_and_altered_or_unsigned_is_refused_with_400(server):
    s = server.open_session(SCRIPT)
    key = api_key(s.token, 0)
    _, first = post(server, key, GO)
    good = GO + turn_messages(first["content"])
    assert post(server, key, good)[0] == 200
    other = server.open_session(SCRIPT)            # another trial, e.g. resuming a journal laid out from this one
    assert post(server, api_key(other.token, 0), good)[0] == 200

    def altered(index, change):
        blocks = [dict(b) for b in first["content"]]
        change(blocks[index])
        return GO + turn_messages(blocks)

    cases = [
        (altered(0, lambda b: b.pop("signature")), "messages.1.content.0.thinking.signature: Field required"),
        (altered(0, lambda b: b.update(signature=b["signature"][:-4] + "AAA=")), "Invalid `signature`"),
        (altered(0, lambda b: b.update(thinking=b["thinking"] + " (edited)")), "Invalid `signature`"),
        (altered(1, lambda b: b.update(data=opaque(9, "redacted", 5, 0))), "messages.1.content.1.redacted_thinking.data"),
        (altered(1, lambda b: b.update(data=opaque(8, "redacted", 0, 0))), "Invalid `data`"),     # another seed
    ]
    for messages, says in cases:
        status, body = post(server, key, messages)
        assert status == 400 and body["error"]["type"] == "invalid_request_error", body
        assert says in body["error"]["message"]
    dropped = GO + turn_messages([b for b in first["content"] if b["type"] not in ("thinking", "redacted_thinking")])
    assert post(server, key, dropped)[0] == 200     # leaving reasoning out is allowed (the API drops it anyway)
    assert [c.turn for c in server.close_session(s.token)] == [0, 1, 1]   # a refused request is no model call


def test_check_reasoning_names_the_message_as_the_request_numbered_it_and_knows_what_the_script_issued():
    blocks = [{"type": "thinking", "thinking": "t"}]
    with pytest.raises(RequestError) as info:
        check_reasoning(SCRIPT, [GO[0], {"role": "assistant", "content": blocks}], positions=(1, 3))
    assert info.value.field == "messages.3.content.0.thinking.signature"
    assert not opaque_valid(1, "thinking", "not base64!") and not opaque_valid(1, "thinking", None)
    text = SCRIPT.turns[1].thinking
    for turn, rep, ok in ((1, 0, True), (2, 0, False), (1, 1, False), (7, 0, False)):  # turn 2 has no thinking
        sent = [{"type": "thinking", "thinking": text, "signature": opaque(9, "thinking", turn, rep, text)}]
        if ok:
            check_reasoning(SCRIPT, [GO[0], {"role": "assistant", "content": sent}])
        else:
            with pytest.raises(RequestError, match="Invalid `signature`"):
                check_reasoning(SCRIPT, [GO[0], {"role": "assistant", "content": sent}])
    check_reasoning(replace(SCRIPT, vary_on_repeat=True), [GO[0], {"role": "assistant", "content": [
        {"type": "thinking", "thinking": text, "signature": opaque(9, "thinking", 1, 1, text)}]}])


def test_fiskj_s_client_and_the_official_sdk_read_every_reply_streamed_and_not(server):
    anthropic = pytest.importorskip("anthropic")
    s = server.open_session(SCRIPT)
    fiskj = AnthropicClient(server.base_url, api_key(s.token, 0))
    sdk = anthropic.Anthropic(base_url=server.base_url, api_key=api_key(s.token, 1), max_retries=0)
    history = list(GO)
    for turn in range(3):
        mine = fiskj.complete({"model": "m", "max_tokens": 100, "messages": history})
        plain = sdk.messages.create(model="m", max_tokens=100, messages=history)
        with sdk.messages.stream(model="m", max_tokens=100, messages=history) as stream:
            streamed = stream.get_final_message()
        assert streamed.model_dump() == plain.model_dump()
        assert [b.model_dump(exclude_none=True) for b in plain.content] == mine["content"]
        assert (plain.stop_reason, plain.stop_sequence) == (mine["stop_reason"], mine["stop_sequence"])
        assert plain.usage.cache_read_input_tokens == 1000 + 10 * turn
        history += turn_messages(mine["content"])
    assert [b.type for b in streamed.content] == ["redacted_thinking", "text"]
    assert streamed.stop_reason == "stop_sequence" and streamed.stop_sequence == STOP_SEQUENCE


_text = st.text(st.characters(blacklist_categories=()), max_size=60)  # any code point, lone surrogates too


@settings(max_examples=80, deadline=None)
@given(text=_text, thinking=_text, inp=st.dictionaries(_text, _text, max_size=3))
def test_any_text_streams_back_to_the_same_message(text, thinking, inp):
    message = {"id": "msg", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
               "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 2},
               "content": [{"type": "thinking", "thinking": thinking, "signature": "sig"},
                           {"type": "redacted_thinking", "data": text},
                           {"type": "text", "text": text},
                           {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": inp},
                           {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [text]},
                           {"type": "tool_use", "id": "toolu_1", "name": "t", "input": inp}]}
    wire = b"".join(sse.encode(e) for e in sse.message_events(message))
    wire.decode("utf-8")                                            # always UTF-8, whatever the text
    events = [(f.split("\n")[0][len("event: "):], json.loads(f.split("\n", 1)[1][len("data: "):]))
              for f in wire.decode("utf-8").split("\n\n") if f.strip()]
    assert rebuild(events) == message
