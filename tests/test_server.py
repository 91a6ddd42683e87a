"""harness.workload.server: the fake Messages API server answers from the script, keyed by the conversation."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request

import pytest

from fiskj.model import AnthropicClient
from harness.workload.server import ModelServer, Script, ToolCall, Turn, api_key, request_key

SCRIPT = Script(seed=7, turns=(
    Turn(tools=(ToolCall("effect_a", sleep_ms=3, n=11), ToolCall("effect_b", n=12))),
    Turn(tools=(ToolCall("effect_c", n=13),)),
    Turn(text="all done"),
))


@pytest.fixture
def server():
    with ModelServer() as srv:
        yield srv


def post(srv: ModelServer, messages, key: str | None, path: str = "/v1/messages", raw: dict | None = None,
         headers: dict | None = None, **fields):
    """POST a request (``raw``: the whole body instead); returns ``(status, parsed JSON body)``."""
    body = json.dumps(raw if raw is not None else {"model": "m", "max_tokens": 100, "messages": messages, **fields})
    headers = {"content-type": "application/json", **(headers or {})}
    if key is not None:
        headers["x-api-key"] = key
    req = urllib.request.Request(srv.base_url + path, data=body.encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def parse_sse(text: str) -> list[tuple[str, dict]]:
    """``(event name, data)`` of each server-sent event in ``text``."""
    out = []
    for frame in text.split("\n\n"):
        if not frame.strip():
            continue
        fields = dict(line.split(": ", 1) for line in frame.split("\n"))
        out.append((fields["event"], json.loads(fields["data"])))
    return out


def stream(srv: ModelServer, messages, key: str):
    """POST a streaming request; returns ``(response headers, events)``."""
    body = json.dumps({"model": "m", "max_tokens": 100, "messages": messages, "stream": True}).encode()
    req = urllib.request.Request(srv.base_url + "/v1/messages", data=body, method="POST",
                                 headers={"content-type": "application/json", "x-api-key": key})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers, parse_sse(resp.read().decode())


def tool_ids(body) -> list[str]:
    return [b["id"] for b in body["content"] if b["type"] == "tool_use"]


def answered(blocks, content: str = "ok"):
    """The user message answering every tool_use of ``blocks``."""
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": b["id"], "content": content}
                                        for b in blocks if b["type"] == "tool_use"]}


def user(text: str):
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def conversation(turns: int):
    """The conversation after ``turns`` scripted replies, with every tool answered."""
    messages = [user("go")]
    for turn in range(turns):
        blocks, _, _ = SCRIPT.reply(turn)
        messages.append({"role": "assistant", "content": blocks})
        results = [{"type": "tool_result", "tool_use_id": b["id"], "content": "ok"} for b in blocks
                   if b["type"] == "tool_use"]
        messages.append({"role": "user", "content": results})
    return messages


def test_the_reply_is_a_function_of_the_conversation(server):
    s = server.open_session(SCRIPT)
    key = api_key(s.token, 0)
    first = post(server, conversation(0), key)
    again = post(server, conversation(0), key)
    assert first == again
    status, body = first
    assert status == 200
    assert body["type"] == "message" and body["role"] == "assistant" and body["stop_reason"] == "tool_use"
    ids = [b["id"] for b in body["content"] if b["type"] == "tool_use"]
    assert ids == ["toolu_7_0_0", "toolu_7_0_1"]
    status, body = post(server, conversation(1), key)
    assert [b["id"] for b in body["content"] if b["type"] == "tool_use"] == ["toolu_7_1_0"]
    status, body = post(server, conversation(2), key)
    assert body["stop_reason"] == "end_turn" and body["content"] == [{"type": "text", "text": "all done"}]


def test_tool_inputs_carry_their_own_tool_use_id_and_the_scripted_sleep(server):
    s = server.open_session(SCRIPT)
    _, body = post(server, conversation(0), api_key(s.token, 0))
    uses = [b for b in body["content"] if b["type"] == "tool_use"]
    assert [u["input"]["tool_use_id"] for u in uses] == [u["id"] for u in uses]
    assert uses[0]["input"]["sleep_ms"] == 3 and "sleep_ms" not in uses[1]["input"]
    assert [u["name"] for u in uses] == ["effect_a", "effect_b"]


def test_usage_numbers_are_deterministic(server):
    s = server.open_session(SCRIPT)
    usages = [post(server, conversation(t), api_key(s.token, 0))[1]["usage"] for t in (0, 1, 0)]
    assert usages[0] == usages[2]
    assert usages[0] == {"input_tokens": 100, "output_tokens": 34, "cache_creation_input_tokens": 0,
                         "cache_read_input_tokens": 0}
    assert usages[1]["input_tokens"] == 110


def test_every_call_is_recorded_with_its_key_turn_and_leg(server):
    s = server.open_session(SCRIPT)
    post(server, conversation(0), api_key(s.token, 0))
    post(server, conversation(1), api_key(s.token, 3))
    calls = server.close_session(s.token)
    assert [(c.index, c.turn, c.leg) for c in calls] == [(0, 0, 0), (1, 1, 3)]
    assert calls[0].key == request_key(SCRIPT, conversation(0)) != request_key(SCRIPT, conversation(1))
    assert calls[1].messages == conversation(1)
    assert calls[0].reply == SCRIPT.reply(0)[0]
    assert calls[0].t < calls[1].t


def test_a_repeated_request_gets_a_different_reply_when_the_model_varies():
    script = Script(seed=7, turns=SCRIPT.turns, vary_on_repeat=True)
    with ModelServer() as srv:
        s = srv.open_session(script)
        key = api_key(s.token, 0)
        _, first = post(srv, conversation(0), key)
        _, second = post(srv, conversation(0), key)
    assert first["content"] != second["content"]
    ids = [b["id"] for b in second["content"] if b["type"] == "tool_use"]
    assert ids == ["toolu_7_0_0_r1", "toolu_7_0_1_r1"]
    assert first["content"][0]["text"] != second["content"][0]["text"]


def test_a_request_past_the_script_gets_a_final_answer(server):
    s = server.open_session(SCRIPT)
    _, body = post(server, conversation(3), api_key(s.token, 0))
    assert body["stop_reason"] == "end_turn" and "exhausted" in body["content"][0]["text"]


def test_sessions_partition_the_calls_of_concurrent_trials(server):
    a, b = server.open_session(SCRIPT), server.open_session(Script(seed=9, turns=SCRIPT.turns))
    results = {}

    def run(session, name):
        results[name] = post(server, conversation(0), api_key(session.token, 0))[1]

    threads = [threading.Thread(target=run, args=(x, n)) for x, n in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["a"]["content"][1]["id"] == "toolu_7_0_0"
    assert results["b"]["content"][1]["id"] == "toolu_9_0_0"
    assert len(server.close_session(a.token)) == 1 and len(server.close_session(b.token)) == 1


def test_an_unknown_api_key_is_refused_with_401_in_the_anthropic_error_shape(server):
    status, body = post(server, conversation(0), "not-a-harness-key")
    assert status == 401 and body["type"] == "error" and body["error"]["type"] == "authentication_error"
    s = server.open_session(SCRIPT)
    server.close_session(s.token)
    assert post(server, conversation(0), api_key(s.token, 0))[0] == 401


def test_bad_requests_and_other_paths_are_refused(server):
    s = server.open_session(SCRIPT)
    assert post(server, conversation(0), api_key(s.token, 0), path="/v1/other")[0] == 404
    req = urllib.request.Request(server.base_url + "/v1/messages", data=b"{not json", method="POST",
                                 headers={"x-api-key": api_key(s.token, 0)})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=10)
    assert info.value.code == 400


def test_fiskj_s_anthropic_client_accepts_the_replies(server):
    s = server.open_session(SCRIPT)
    client = AnthropicClient(server.base_url, api_key(s.token, 0), timeout=10)
    reply = client.complete({"model": "m", "max_tokens": 100, "messages": conversation(0)})
    assert reply["stop_reason"] == "tool_use"
    assert server.close_session(s.token)[0].leg == 0


def test_the_server_shuts_down_cleanly_and_frees_its_port():
    srv = ModelServer().start()
    port = srv.port
    srv.close()
    srv.close()  # idempotent
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0


# --- the reply follows the conversation's state ---------------------------------------------------

def test_a_synthetic_assistant_message_on_resume_still_gets_the_next_turn(server):
    # A resumed agent that notes the interruption (assistant + user text) is still at turn 1: the turn
    # follows the answered tool ids, not the number of assistant messages (which would say turn 2).
    s = server.open_session(SCRIPT)
    key = api_key(s.token, 0)
    note = {"role": "assistant", "content": [{"type": "text", "text": "interrupted, no response"}]}
    resumed = conversation(1) + [note, user("continue where you left off")]
    _, body = post(server, resumed, key)
    assert tool_ids(body) == ["toolu_7_1_0"] and body["usage"]["input_tokens"] == 110
    _, plain = post(server, conversation(1), key)
    assert plain == body
    calls = server.close_session(s.token)
    assert [c.turn for c in calls] == [1, 1]
    assert calls[0].key == calls[1].key  # the same state asked twice: a repeat, for I3


def test_a_replayed_or_annotated_conversation_gets_the_same_reply(server):
    s = server.open_session(SCRIPT)
    key = api_key(s.token, 0)
    blocks0 = SCRIPT.reply(0)[0]
    # string content, annotated results (text blocks next to the tool_results), the turn-0 reply sent twice
    annotated = [{"role": "user", "content": "go"},
                 {"role": "assistant", "content": blocks0},
                 {"role": "user", "content": answered(blocks0)["content"] + [{"type": "text", "text": "<note>"}]},
                 {"role": "assistant", "content": blocks0},
                 answered(blocks0, "again")]
    assert tool_ids(post(server, annotated, key)[1]) == ["toolu_7_1_0"]


def test_a_turn_with_an_unanswered_tool_id_is_asked_again(server):
    s = server.open_session(SCRIPT)
    blocks0 = SCRIPT.reply(0)[0]
    partial = [user("go"), {"role": "assistant", "content": blocks0},
               {"role": "user", "content": answered(blocks0)["content"][:1]}]
    assert tool_ids(post(server, partial, api_key(s.token, 0))[1]) == ["toolu_7_0_0", "toolu_7_0_1"]
    # a tool_result naming another seed's id, or no scripted id at all, answers nothing
    foreign = partial[:2] + [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_9_0_1", "content": "x"},
        {"type": "tool_result", "tool_use_id": "toolu_7_0_0", "content": "x"},
        {"type": "tool_result", "tool_use_id": "other", "content": "x"}]}]
    assert tool_ids(post(server, foreign, api_key(s.token, 0))[1]) == ["toolu_7_0_0", "toolu_7_0_1"]


CHAT = Script(seed=5, turns=(Turn(tools=(ToolCall("effect_a", n=1),)), Turn(text="first done"),
                             Turn(tools=(ToolCall("effect_b", n=2),)), Turn(text="second done")))


def test_follow_ups_open_the_next_segment_and_other_user_text_does_not(server):
    s = server.open_session(CHAT)
    key = api_key(s.token, 0)
    r0, _, _ = CHAT.reply(0)
    r1, _, _ = CHAT.reply(1)
    seg0 = [user("go"), {"role": "assistant", "content": r0}, answered(r0)]
    assert post(server, seg0, key)[1]["content"] == [{"type": "text", "text": "first done"}]
    done0 = seg0 + [{"role": "assistant", "content": r1}]
    # the segment is closed and nothing new was asked: nothing left to answer
    _, body = post(server, done0 + [{"role": "user", "content": []}], key)
    assert body["content"][0]["text"] == "(script exhausted)" and body["stop_reason"] == "end_turn"
    # a follow-up opens segment 1, even with an agent's note around it
    asked = post(server, done0 + [user("follow-up 1: do the next batch")], key)[1]
    assert tool_ids(asked) == ["toolu_5_2_0"]
    noted = done0 + [{"role": "assistant", "content": [{"type": "text", "text": "(resumed)"}]},
                     user("[note: resumed]"), {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
                     user("follow-up 1: do the next batch")]
    assert post(server, noted, key)[1] == asked
    # user text inside a segment (before its final answer) is no follow-up
    chatter = seg0[:2] + [{"role": "user", "content": answered(r0)["content"] + [{"type": "text", "text": "hurry"}]}]
    assert post(server, chatter, key)[1]["content"][0]["text"] == "first done"
    r2, _, _ = CHAT.reply(2)
    r3, _, _ = CHAT.reply(3)
    seg1 = done0 + [user("more"), {"role": "assistant", "content": r2}, answered(r2)]
    assert post(server, seg1, key)[1]["content"][0]["text"] == "second done"
    # a follow-up past the last segment: nothing left (another state than segment 0's end)
    past = seg1 + [{"role": "assistant", "content": r3}, user("and another")]
    assert post(server, past, key)[1]["content"][0]["text"] == "(script exhausted)"
    calls = server.close_session(s.token)
    assert [c.turn for c in calls] == [1, 4, 2, 2, 1, 3, 4]
    assert len({calls[1].key, calls[6].key}) == 2 and calls[2].key == calls[3].key


def test_a_script_ending_inside_a_segment_is_exhausted_once_its_tools_are_answered(server):
    script = Script(seed=3, turns=(Turn(tools=(ToolCall("effect_a"),)),))
    s = server.open_session(script)
    r0 = script.reply(0)[0]
    _, body = post(server, [user("go"), {"role": "assistant", "content": r0}, answered(r0)], api_key(s.token, 0))
    assert body["content"][0]["text"] == "(script exhausted)"
    assert server.close_session(s.token)[0].turn == 1


def test_under_vary_on_repeat_a_resumed_agent_gets_fresh_ids_and_its_results_count():
    script = Script(seed=7, turns=SCRIPT.turns, vary_on_repeat=True)
    with ModelServer() as srv:
        s = srv.open_session(script)
        key = api_key(s.token, 0)
        post(srv, conversation(1), key)  # turn 1, then the agent dies before journaling the reply
        resumed = conversation(1) + [{"role": "assistant", "content": "interrupted, no response"}, user("go on")]
        _, again = post(srv, resumed, key)
        assert tool_ids(again) == ["toolu_7_1_0_r1"] and "(asked again: 1)" in again["content"][0]["text"]
        # the agent answers the fresh ids: turn 2 next
        _, last = post(srv, resumed + [{"role": "assistant", "content": again["content"]}, answered(again["content"])],
                       key)
        assert last["content"][0]["text"] == "all done"


# --- the request: system prompts, query strings, bad input ----------------------------------------

def test_system_prompts_either_way_and_beta_query_strings_are_tolerated_and_ignored(server):
    s = server.open_session(SCRIPT)
    key = api_key(s.token, 0)
    _, plain = post(server, conversation(1), key)
    variants = [
        post(server, conversation(1), key, system="be brief"),
        post(server, conversation(1), key, system=[{"type": "text", "text": "be brief",
                                                    "cache_control": {"type": "ephemeral"}}]),
        post(server, [{"role": "system", "content": "be brief"}] + conversation(1), key),
        post(server, conversation(1), key, path="/v1/messages?beta=true",
             headers={"anthropic-beta": "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14",
                      "anthropic-version": "2023-06-01"}),
    ]
    assert [status for status, _ in variants] == [200] * 4
    assert all(body["content"] == plain["content"] and tool_ids(body) == ["toolu_7_1_0"] for _, body in variants)
    calls = server.close_session(s.token)
    assert calls[3].messages == conversation(1)  # the system message is not part of the conversation


@pytest.mark.parametrize("body, field", [
    ({"max_tokens": 5}, "messages"),
    ({"messages": {"role": "user"}}, "messages"),
    ({"messages": ["hi"]}, "messages.0"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0.role"),
    ({"messages": [{"role": "user", "content": "x"}, {"role": "user", "content": 5}]}, "messages.1.content"),
    ({"messages": [{"role": "user", "content": [{"text": "no type"}]}]}, "messages.0.content.0"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]},
     "messages.0.content.0.tool_use_id"),
    ({"messages": [], "system": 5}, "system"),
    ({"messages": [], "stream": "yes"}, "stream"),
    ({"messages": [], "max_tokens": 0}, "max_tokens"),
    ({"messages": [], "model": 3}, "model"),
    ([1, 2], "body"),
])
def test_a_bad_field_gets_400_in_the_anthropic_shape_naming_it(server, body, field):
    s = server.open_session(SCRIPT)
    status, reply = post(server, None, api_key(s.token, 0), raw=body)
    assert status == 400 and reply["type"] == "error"
    assert reply["error"]["type"] == "invalid_request_error"
    assert reply["error"]["message"].startswith(field + ": ")
    assert server.close_session(s.token) == []  # nothing recorded


def test_a_keep_alive_connection_survives_refusals_and_streams(server):
    # One connection, as an SDK's pool uses it: a 404 with a body, a stream, a plain reply.
    s = server.open_session(SCRIPT)
    headers = {"content-type": "application/json", "x-api-key": api_key(s.token, 0)}
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("POST", "/v1/elsewhere", body=json.dumps({"messages": conversation(0)}), headers=headers)
        assert conn.getresponse().read() and True
        conn.request("POST", "/v1/messages", body=json.dumps({"messages": conversation(0), "stream": True}),
                     headers=headers)
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("transfer-encoding") == "chunked"
        events = parse_sse(resp.read().decode())
        assert events[-1][0] == "message_stop"
        conn.request("POST", "/v1/messages", body=json.dumps({"messages": conversation(1)}), headers=headers)
        resp = conn.getresponse()
        assert resp.status == 200 and tool_ids(json.loads(resp.read())) == ["toolu_7_1_0"]
    finally:
        conn.close()
    assert [c.turn for c in server.close_session(s.token)] == [0, 1]


# --- streaming ------------------------------------------------------------------------------------

def rebuild(events) -> dict:
    """The message a stream of ``(name, data)`` events delivers, from its deltas alone."""
    message = None
    buffers: dict[int, str] = {}
    for name, data in events:
        assert name == data["type"]
        if name == "message_start":
            message = dict(data["message"])
            message["content"] = []
        elif name == "content_block_start":
            assert data["index"] == len(message["content"])
            message["content"].append(dict(data["content_block"]))
        elif name == "content_block_delta":
            block, delta = message["content"][data["index"]], data["delta"]
            kind = delta["type"]
            if kind == "text_delta":
                block["text"] += delta["text"]
            elif kind == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif kind == "signature_delta":
                block["signature"] = delta["signature"]
            elif kind == "input_json_delta":
                buffers[data["index"]] = buffers.get(data["index"], "") + delta["partial_json"]
        elif name == "content_block_stop":
            if data["index"] in buffers:
                message["content"][data["index"]]["input"] = json.loads(buffers[data["index"]])
        elif name == "message_delta":
            message.update(data["delta"])
            message["usage"] = {**message["usage"], **data["usage"]}
    return message


def test_a_streamed_reply_is_the_messages_api_event_sequence_of_the_same_message(server):
    s = server.open_session(SCRIPT)
    key = api_key(s.token, 0)
    _, plain = post(server, conversation(0), key)
    headers, events = stream(server, conversation(0), key)
    assert headers["content-type"].startswith("text/event-stream")
    names = [n for n, _ in events]
    # message_start; text block 0 (with the ping); two tool_use blocks; message_delta; message_stop
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    blocks = [[d for n, d in events if d.get("index") == i] for i in range(3)]
    for i, block in enumerate(blocks):
        kinds = [d["type"] for d in block]
        assert kinds[0] == "content_block_start" and kinds[-1] == "content_block_stop"
        assert set(kinds[1:-1]) == {"content_block_delta"} and len(kinds) > 2
    assert {d["delta"]["type"] for d in blocks[0][1:-1]} == {"text_delta"}
    assert {d["delta"]["type"] for d in blocks[1][1:-1]} == {"input_json_delta"}
    assert len(blocks[1]) > 4  # the input JSON arrives in several chunks
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and start["usage"]["input_tokens"] == 100
    assert blocks[1][0]["content_block"] == {"type": "tool_use", "id": "toolu_7_0_0", "name": "effect_a", "input": {}}
    delta = events[-2][1]
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert delta["usage"]["output_tokens"] == 34
    assert rebuild(events) == plain
    calls = server.close_session(s.token)
    assert len(calls) == 2 and calls[0].key == calls[1].key  # streamed or not, the same call


def test_a_thinking_turn_streams_thinking_and_signature_deltas(server):
    script = Script(seed=4, turns=(Turn(thinking="Let me think about the ledger. " * 3, text="thought it over"),))
    s = server.open_session(script)
    _, plain = post(server, [user("go")], api_key(s.token, 0))
    thinking = plain["content"][0]
    assert thinking["type"] == "thinking" and thinking["signature"] and plain["content"][1]["text"] == "thought it over"
    _, events = stream(server, [user("go")], api_key(s.token, 0))
    kinds = [d["delta"]["type"] for n, d in events if n == "content_block_delta" and d["index"] == 0]
    assert kinds.count("thinking_delta") > 1 and kinds[-1] == "signature_delta" and kinds.count("signature_delta") == 1
    assert rebuild(events) == plain


def test_a_slow_stream_starts_at_once_and_finishes_after_the_delay():
    script = Script(seed=7, turns=SCRIPT.turns, delay_ms=1000)
    with ModelServer() as srv:
        s = srv.open_session(script)
        body = json.dumps({"messages": conversation(0), "stream": True}).encode()
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
            sock.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                         + f"x-api-key: {api_key(s.token, 0)}\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body)
            t0 = time.monotonic()
            first = sock.recv(65536)
            t_first = time.monotonic() - t0
            rest = b""
            while not rest.endswith(b"0\r\n\r\n"):
                data = sock.recv(65536)
                assert data
                rest += data
            t_all = time.monotonic() - t0
    assert b"event: message_start" in first and b"event: ping" in first and b"message_stop" not in first
    assert t_first < 0.9 <= t_all
    assert b"event: message_stop" in rest


# --- killed clients -------------------------------------------------------------------------------

KILLED_CLIENT = textwrap.dedent("""
    import json, select, socket, sys
    port, key, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    body = json.dumps({"messages": [{"role": "user", "content": "go"}], "stream": mode == "stream"}).encode()
    head = ("POST /v1/messages HTTP/1.1\\r\\nhost: x\\r\\ncontent-type: application/json\\r\\n"
            f"x-api-key: {key}\\r\\ncontent-length: {len(body)}\\r\\n\\r\\n").encode()
    sock = socket.create_connection(("127.0.0.1", port))
    if mode == "half":
        sock.sendall(head + body[:5])  # dies in the middle of its request
    else:
        sock.sendall(head + body)
        if mode == "stream":
            sock.recv(1)  # the stream started; dies before the rest arrives
        else:
            select.select([sock], [], [])  # the reply arrived; dies without reading it
    print("sent", flush=True)
    sys.stdin.read()  # wait to be killed
""")


def test_a_killed_client_leaves_no_traceback_on_stderr(capfd):
    # SIGKILLed agents mid-connection: one with an unread reply (its socket is reset, the server's
    # keep-alive read fails), one in a slow stream (the server's next write fails), one mid-request.
    script = Script(seed=7, turns=SCRIPT.turns, delay_ms=300)
    with ModelServer() as srv:
        s = srv.open_session(script)
        for mode in ("unread", "stream", "half", "unread"):
            proc = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, str(srv.port), api_key(s.token, 0), mode],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert proc.stdout.readline() == b"sent\n"
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            proc.stdin.close()
            proc.stdout.close()
        time.sleep(0.6)  # the stream's writes after its delay, and the resets, reach the server
        status, body = post(srv, conversation(1), api_key(s.token, 1))
        assert status == 200 and tool_ids(body) == ["toolu_7_1_0"]
        assert len(srv.close_session(s.token)) == 4  # three answered requests and this one
    out, err = capfd.readouterr()
    assert err == ""


def test_with_thinking_on_a_tool_loop_must_go_on_with_its_thinking_block_first():
    from harness.workload.server import RequestError, check_thinking_loop, parse_request
    user = {"role": "user", "content": "go"}
    think = {"type": "thinking", "thinking": "t", "signature": "s"}
    call = {"type": "tool_use", "id": "t1", "name": "a", "input": {}}
    results = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}
    check_thinking_loop([user, {"role": "assistant", "content": [think, call]}, results])
    with pytest.raises(RequestError) as err:
        check_thinking_loop([user, {"role": "assistant", "content": [call]}, results], (0, 2, 3))
    assert err.value.field == "messages.2.content.0.type" and "must start with a thinking block" in str(err.value)
    # an earlier turn without its reasoning is fine (the API drops it), and so is a request that is no tool loop
    check_thinking_loop([user, {"role": "assistant", "content": [call]}, results,
                         {"role": "assistant", "content": [think, {**call, "id": "t2"}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "ok"}]}])
    check_thinking_loop([user, {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}, user])
    body = json.dumps({"messages": [user], "max_tokens": 5, "thinking": {"type": "adaptive"}}).encode()
    assert parse_request(body).thinking and not parse_request(json.dumps({"messages": [user]}).encode()).thinking
