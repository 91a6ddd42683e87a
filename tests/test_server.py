"""harness.workload.server: the fake Messages API server answers from the script, keyed by the conversation."""

from __future__ import annotations

import json
import socket
import threading
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


def post(srv: ModelServer, messages, key: str | None, path: str = "/v1/messages"):
    body = json.dumps({"model": "m", "max_tokens": 100, "messages": messages}).encode()
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["x-api-key"] = key
    req = urllib.request.Request(srv.base_url + path, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


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
    assert usages[0] == {"input_tokens": 100, "output_tokens": 34}


def test_every_call_is_recorded_with_its_key_turn_and_leg(server):
    s = server.open_session(SCRIPT)
    post(server, conversation(0), api_key(s.token, 0))
    post(server, conversation(1), api_key(s.token, 3))
    calls = server.close_session(s.token)
    assert [(c.index, c.turn, c.leg) for c in calls] == [(0, 0, 0), (1, 1, 3)]
    assert calls[0].key == request_key(conversation(0))
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
