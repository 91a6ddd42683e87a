"""The Anthropic Messages API client against a local fake server (fiskj.model)."""

from __future__ import annotations

import json
import threading

import pytest

from fake_anthropic import FakeAnthropic, reply, text
from fiskj.errors import ModelError, UsageError
from fiskj.model import (ANTHROPIC_VERSION, DEFAULT_RETRY, AnthropicClient, Model, RetryPolicy, check_response,
                         complete_with_retries, is_retryable_status, make_model, retry_after_seconds, thinking_param)
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
    assert info.value.status == 529 and info.value.retryable
    assert len(server.requests) == 1  # the client makes one attempt; complete_with_retries retries


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
            with pytest.raises(ModelError, match="timed out") as info:
                AnthropicClient(server.url, timeout=0.2).complete(REQUEST)
            assert info.value.retryable
        finally:
            release.set()


def test_a_refused_connection_is_a_model_error():
    with FakeAnthropic(lambda body: reply([])) as server:
        url = server.url
    with pytest.raises(ModelError, match="cannot reach") as info:
        AnthropicClient(url, timeout=2).complete(REQUEST)
    assert info.value.retryable and info.value.status is None


def test_check_response_rejects_bad_shapes():
    good = reply([text("x")])
    assert check_response(good) is good
    for bad in ([], {"type": "error", "error": {"message": "bad"}}, {**good, "content": "x"},
                {**good, "stop_reason": ""},
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


# --- retries (docs/spec.md section 17; issue 15 items 1 and 5) -------------------------------------


class Sleeps:
    """A RetryPolicy's sleep that records instead of sleeping."""

    def __init__(self):
        self.calls = []

    def __call__(self, seconds):
        self.calls.append(seconds)

    @property
    def total(self):
        return sum(self.calls)


def policy(max_retries=2, jitter=0.0):
    sleeps = Sleeps()
    return RetryPolicy(max_retries=max_retries, sleep=sleeps, random=lambda: jitter), sleeps


def failing_then(failures, good=None):
    """Handler: the answers in ``failures`` in turn, then ``good`` (a reply) for every later request."""
    answers = list(failures)

    def handler(body):
        return answers.pop(0) if answers else (good or reply([text("ok")]))
    return handler


@pytest.mark.parametrize("status, retryable", [(400, False), (401, False), (403, False), (404, False), (413, False),
                                               (408, True), (409, True), (429, True), (500, True), (502, True),
                                               (503, True), (504, True), (529, True)])
def test_408_409_429_and_every_5xx_are_retryable_other_errors_are_not(status, retryable):
    assert is_retryable_status(status) is retryable
    assert is_retryable_status(status, {"x-should-retry": "true"}) is True
    assert is_retryable_status(status, {"X-Should-Retry": "false"}) is False


def test_retry_after_ms_wins_over_retry_after_which_may_be_seconds_or_an_http_date():
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"Retry-After": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert retry_after_seconds({"retry-after": "soon"}) is None and retry_after_seconds({}) is None


def test_the_backoff_doubles_from_half_a_second_to_8_s_less_up_to_a_quarter_jitter_and_honours_retry_after():
    assert DEFAULT_RETRY.max_retries == 2
    exact, _ = policy(jitter=0.0)
    assert [exact.delay(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    most, _ = policy(jitter=0.999999)
    assert 0.375 <= most.delay(0) < 0.3751 and 6.0 <= most.delay(9) < 6.0001
    assert exact.delay(0, retry_after=30.0) == 30.0
    assert exact.delay(1, retry_after=61.0) == 1.0 and exact.delay(1, retry_after=0) == 1.0  # out of range: backoff
    with pytest.raises(UsageError):
        RetryPolicy(max_retries=-1)


def test_an_overloaded_server_is_retried_with_backoff_and_the_good_reply_is_returned():
    answers = [(529, b'{"type":"error","error":{"type":"overloaded_error"}}'), (503, b"busy")]
    with FakeAnthropic(failing_then(answers, reply([text("finally")]))) as server:
        retry, sleeps = policy()
        body = complete_with_retries(AnthropicClient(server.url, timeout=5), REQUEST, retry)
    assert body["content"] == [text("finally")] and len(server.requests) == 3
    assert sleeps.total == pytest.approx(0.5 + 1.0)  # no real sleep


def test_the_servers_retry_after_is_waited_instead_of_the_backoff():
    answers = [(429, b"slow down", {"retry-after-ms": "1250"})]
    with FakeAnthropic(failing_then(answers)) as server:
        retry, sleeps = policy()
        complete_with_retries(AnthropicClient(server.url, timeout=5), REQUEST, retry)
    assert sleeps.total == pytest.approx(1.25) and len(server.requests) == 2


def test_x_should_retry_false_is_not_retried_and_a_400_is_not_retried():
    for answer in [(503, b"no", {"x-should-retry": "false"}), (400, b'{"type":"error"}')]:
        with FakeAnthropic(failing_then([answer])) as server:
            retry, sleeps = policy()
            with pytest.raises(ModelError) as info:
                complete_with_retries(AnthropicClient(server.url, timeout=5), REQUEST, retry)
        assert len(server.requests) == 1 and sleeps.calls == [] and info.value.retries == 0


def test_retries_give_up_after_max_retries_with_an_error_saying_so():
    with FakeAnthropic(lambda body: (500, b"boom")) as server:
        retry, sleeps = policy(max_retries=2)
        with pytest.raises(ModelError, match=r"HTTP 500.*gave up after 2 retries") as info:
            complete_with_retries(AnthropicClient(server.url, timeout=5), REQUEST, retry, log=sleeps.calls.append)
    assert len(server.requests) == 3 and info.value.retries == 2 and info.value.status == 500
    assert [c for c in sleeps.calls if isinstance(c, str)][0].startswith("model call failed (")  # one log line a retry


def test_a_refused_connection_is_retried_then_given_up():
    with FakeAnthropic(lambda body: reply([])) as server:
        url = server.url
    retry, sleeps = policy(max_retries=1)
    with pytest.raises(ModelError, match="cannot reach.*gave up after 1 retry"):
        complete_with_retries(AnthropicClient(url, timeout=2), REQUEST, retry)
    assert sleeps.total == 0.5


def test_a_reply_without_a_final_stop_reason_is_retried_and_never_returned():
    # Issue 15 item 5: a reply cut short (null stop_reason) used to be returned, and journaled as a turn.
    cut = reply([text("half an ans")])
    cut["stop_reason"] = None
    with FakeAnthropic(failing_then([cut], reply([text("whole answer")]))) as server:
        retry, sleeps = policy()
        body = complete_with_retries(AnthropicClient(server.url, timeout=5), REQUEST, retry)
    assert body["content"] == [text("whole answer")] and len(server.requests) == 2
    with pytest.raises(ModelError) as info:
        check_response(cut)
    assert info.value.retryable and info.value.field == "stop_reason"


def test_a_reply_whose_body_is_cut_short_is_a_retryable_model_error():
    answers = [(200, b'{"content": [', {"content-length": "400"})]
    with FakeAnthropic(failing_then(answers)) as server:
        with pytest.raises(ModelError, match="cut short") as info:
            AnthropicClient(server.url, timeout=5).complete(REQUEST)
        assert info.value.retryable
        retry, _ = policy()
        assert complete_with_retries(AnthropicClient(server.url, timeout=5), REQUEST, retry)["content"] == [text("ok")]


def test_a_suspend_request_while_waiting_to_retry_abandons_the_call():
    asked = []
    with FakeAnthropic(lambda body: (529, b"overloaded")) as server:
        retry = RetryPolicy(max_retries=2, sleep=asked.append, random=lambda: 0.0)
        with pytest.raises(ModelError, match="retry abandoned") as info:
            complete_with_retries(AnthropicClient(server.url, timeout=5), REQUEST, retry,
                                  interrupted=lambda: len(asked) >= 1)
    assert info.value.interrupted and len(server.requests) == 1 and asked == [0.25]  # slices of at most 0.25 s


def test_a_lone_surrogate_in_the_request_is_sent_as_its_json_escape_not_as_bytes_that_are_not_utf8():
    request = {**REQUEST, "messages": [{"role": "user", "content": [text("bad \ud800 half")]}]}
    with FakeAnthropic(lambda body: reply([text("ok")])) as server:
        AnthropicClient(server.url, timeout=5).complete(request)
    assert server.requests == [request]  # the server decoded UTF-8 JSON back to the same string
