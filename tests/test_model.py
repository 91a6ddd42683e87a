"""The Anthropic Messages API client against a local fake server (fiskj.model)."""

from __future__ import annotations

import json
import threading

import pytest

from fake_anthropic import FakeAnthropic, reply, text
from fiskj.errors import ModelError, UsageError
from fiskj.model import ANTHROPIC_VERSION, AnthropicClient, Model, check_response, make_model, thinking_param
from fiskj.scripted import ScriptedModel

REQUEST = {"model": "m1", "max_tokens": 100, "messages": [{"role": "user", "content": [text("hi")]}]}


def test_a_good_reply_is_returned_and_the_key_travels_only_in_a_header():
    with FakeAnthropic(lambda body: reply([text("hello")], in_tokens=7, out_tokens=3)) as server:
        client = AnthropicClient(server.url + "/", "sk-secret", timeout=5)
        body = client.complete(REQUEST)
    assert body["content"] == [text("hello")]
    assert body["stop_reason"] == "end_turn"
    assert body["usage"]["input_tokens"] == 7
    assert server.paths == ["/v1/messages"]
    assert server.requests == [REQUEST]
    headers = server.headers[0]
    assert headers["x-api-key"] == "sk-secret"
    assert headers["anthropic-version"] == ANTHROPIC_VERSION
    assert "sk-secret" not in json.dumps(server.requests) and "sk-secret" not in repr(client)


def test_a_local_server_needs_no_key():
    with FakeAnthropic(lambda body: reply([text("ok")])) as server:
        AnthropicClient(server.url, None, timeout=5).complete(REQUEST)
    assert "x-api-key" not in server.headers[0]


def test_a_bad_status_is_a_model_error_naming_the_status_and_a_snippet_of_the_body():
    with FakeAnthropic(lambda body: (529, b'{"type":"error","error":{"type":"overloaded_error"}}')) as server:
        with pytest.raises(ModelError) as info:
            AnthropicClient(server.url, timeout=5).complete(REQUEST)
    assert "529" in str(info.value) and "overloaded_error" in str(info.value)
    assert info.value.status == 529


def test_a_body_that_is_not_json_is_a_model_error_with_a_snippet():
    with FakeAnthropic(lambda body: (200, b"<html>gateway says no</html>")) as server:
        with pytest.raises(ModelError, match="not JSON.*gateway says no"):
            AnthropicClient(server.url, timeout=5).complete(REQUEST)


def test_a_json_body_without_usage_is_a_model_error_naming_the_field():
    with FakeAnthropic(lambda body: {"content": [], "stop_reason": "end_turn"}) as server:
        with pytest.raises(ModelError) as info:
            AnthropicClient(server.url, timeout=5).complete(REQUEST)
    assert info.value.field == "usage"


def test_a_server_that_does_not_answer_in_time_is_a_timeout_model_error():
    release = threading.Event()

    def stall(body):
        release.wait(10)
        return reply([text("late")])

    with FakeAnthropic(stall) as server:
        try:
            with pytest.raises(ModelError, match="timed out"):
                AnthropicClient(server.url, timeout=0.2).complete(REQUEST)
        finally:
            release.set()


def test_a_refused_connection_is_a_model_error():
    with FakeAnthropic(lambda body: reply([])) as server:
        url = server.url
    with pytest.raises(ModelError, match="cannot reach"):
        AnthropicClient(url, timeout=2).complete(REQUEST)


def test_check_response_rejects_bad_shapes():
    good = reply([text("x")])
    assert check_response(good) is good
    for bad in ([], {"type": "error", "error": {"message": "bad"}}, {**good, "content": "x"},
                {**good, "stop_reason": 3}, {**good, "usage": {"input_tokens": -1, "output_tokens": 0}},
                {**good, "usage": {"input_tokens": 1, "output_tokens": 0, "cache_read_input_tokens": "2"}}):
        with pytest.raises(ModelError):
            check_response(bad)


def test_make_model_picks_the_scripted_model_or_the_http_client():
    assert isinstance(make_model("scripted:4:2", env={}), ScriptedModel)
    client = make_model("m1", base_url="http://127.0.0.1:9", env={})
    assert isinstance(client, AnthropicClient) and client.url == "http://127.0.0.1:9/v1/messages"
    env_client = make_model("m1", env={"ANTHROPIC_BASE_URL": "http://localhost:1", "ANTHROPIC_API_KEY": "k"})
    assert env_client.url == "http://localhost:1/v1/messages"
    assert isinstance(env_client, Model)


def test_the_public_api_without_a_key_is_a_usage_error_that_suggests_the_scripted_model():
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY.*scripted:0"):
        make_model("claude-x", env={})


def test_a_base_url_without_a_scheme_is_a_usage_error():
    with pytest.raises(UsageError):
        AnthropicClient("localhost:8080")


def test_thinking_modes_map_to_the_request_parameter():
    assert thinking_param("off") is None
    assert thinking_param("adaptive") == {"type": "adaptive"}
    assert thinking_param("enabled:2048") == {"type": "enabled", "budget_tokens": 2048}
    for bad in ("on", "enabled:10", "enabled:x", ""):
        with pytest.raises(UsageError):
            thinking_param(bad)
