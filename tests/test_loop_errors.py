"""How the agent loop ends short of completing and survives failures: the budget and iteration cap, cut-off replies
and model errors, retries, out of memory, an oversize tool output (fiskj.loop; issue 4 item 2, issue 15)."""

from __future__ import annotations

import copy
import os

import pytest

from fake_anthropic import reply, text, tool_use, turns
from fiskj.errors import ModelError
from fiskj.loop import RunConfig, start_run
from fiskj.model import RetryPolicy
from fiskj.reader import read_records
from fiskj.records import tool_result_text
from fiskj.tools import Tool, ToolOutcome, ToolRegistry
from loop_helpers import CONFIG, Recorder, effect, fx, journal_bytes, kinds, resume, run, store  # noqa: F401

def test_the_budget_is_checked_before_a_turns_tools_run(store, fx):
    config = RunConfig(model="fake-1", max_tokens=20)  # each turn costs 15 tokens
    result, _ = run(store, fx, turns([effect("a")], [effect("b")]), config=config)
    assert (result.reason, result.exit_code) == ("budget", 1)
    assert "30 tokens" in result.message and fx.counts() == {"a": 1}
    assert kinds(store, "r1") == ["M", "A", "R(a)", "A", "T(budget)"]


def test_the_iteration_cap_ends_the_run_with_max_iterations(store, fx):
    result, model = run(store, fx, lambda req: reply([effect(f"t{len(req['messages'])}")]),
                        config=RunConfig(model="fake-1", max_iterations=2))
    assert (result.reason, result.exit_code) == ("max_iterations", 1)
    assert kinds(store, "r1") == ["M", "A", "R(t1)", "A", "R(t3)", "T(max_iterations)"]


@pytest.mark.parametrize("answer, message", [
    (reply([effect("a")], stop="max_tokens"), "max_tokens"),
    (reply([text("no")], stop="refusal"), "refused"),
    (ModelError("model server answered HTTP 500"), "HTTP 500"),
])
def test_a_cut_off_reply_a_refusal_or_a_model_error_ends_the_run_with_error(store, fx, answer, message):
    result, _ = run(store, fx, lambda req: answer)
    assert result.reason == "error" and message in result.message and fx.counts() == {}
    assert kinds(store, "r1")[-1] == "T(error)"


class Sleeps(list):
    """A RetryPolicy's sleep that records the waits instead of sleeping."""

    def __call__(self, seconds):
        self.append(seconds)


def no_wait(max_retries=2):
    sleeps = Sleeps()
    return RetryPolicy(max_retries=max_retries, sleep=sleeps, random=lambda: 0.0), sleeps


def overloaded():
    return ModelError("model server answered HTTP 529: overloaded", status=529, retryable=True)


def test_a_transient_model_failure_is_retried_and_journals_nothing(store, fx):
    # Issue 15 item 1: one 529 used to end the run with error.
    answers = turns([effect("a")])
    calls = {"n": 0}

    def flaky(request):
        calls["n"] += 1
        return overloaded() if calls["n"] in (1, 3) else answers(request)

    retry, sleeps = no_wait()
    result, model = run(store, fx, flaky, retry=retry)
    assert result.reason == "completed" and len(model.requests) == 4 and sleeps == [0.25, 0.25] * 2
    assert kinds(store, "r1") == ["M", "A", "R(a)", "A", "T(completed)"]  # no record of the failed calls
    assert model.requests[0] == model.requests[1] and model.requests[2] == model.requests[3]


def test_a_model_that_still_fails_after_its_retries_ends_the_leg_with_error_and_a_resume_continues_it(store, fx):
    answers = turns([effect("a")], [effect("b")])
    calls = {"n": 0}

    def down_after_one(request):
        calls["n"] += 1
        return answers(request) if calls["n"] == 1 else overloaded()

    retry, sleeps = no_wait()
    result, model = run(store, fx, down_after_one, retry=retry)
    assert (result.reason, result.exit_code) == ("error", 1) and len(model.requests) == 4
    assert "gave up after 2 retries" in result.message and sum(sleeps) == 0.5 + 1.0
    assert kinds(store, "r1") == ["M", "A", "R(a)", "T(error)"] and result.state.status == "error"
    result, model = resume(store, fx, answers)  # the server answers again: the run goes on where it stopped
    assert result.reason == "completed" and fx.counts() == {"a": 1, "b": 1}
    assert kinds(store, "r1") == ["M", "A", "R(a)", "T(error)", "A", "R(b)", "A", "T(completed)"]


def test_a_reply_without_a_final_stop_reason_is_not_journaled_as_a_turn(store, fx):
    # Issue 15 item 5: it used to be journaled (and, holding no tool call, taken for the answer).
    cut = reply([text("the answer is 4")])
    cut["stop_reason"] = None
    retry, sleeps = no_wait(max_retries=1)
    result, model = run(store, fx, lambda request: copy.deepcopy(cut), retry=retry)
    assert result.reason == "error" and "no final stop_reason" in result.message and len(model.requests) == 2
    assert kinds(store, "r1") == ["M", "T(error)"] and result.answer is None
    result, _ = resume(store, fx, turns())
    assert result.reason == "completed" and kinds(store, "r1") == ["M", "T(error)", "A", "T(completed)"]


def test_a_suspend_requested_while_waiting_to_retry_suspends_the_run(store, fx):
    sleeps = Sleeps()
    flag = fx.flag
    retry = RetryPolicy(sleep=lambda s: (sleeps(s), flag.request()), random=lambda: 0.0)
    result, model = run(store, fx, lambda request: overloaded(), retry=retry)
    assert (result.reason, result.exit_code) == ("suspended", 3) and len(model.requests) == 1 and len(sleeps) == 1
    assert kinds(store, "r1") == ["M", "T(suspended)"]


def test_running_out_of_memory_mid_run_ends_the_leg_with_error_and_a_resume_continues_it(store, fx):
    answers = turns([effect("a")], [effect("b")])

    def exhausted(request):
        if len(request["messages"]) == 3:
            raise MemoryError()
        return answers(request)

    model = Recorder(exhausted)
    with pytest.raises(MemoryError):
        start_run("do it", config=CONFIG, model=model, tools=fx.registry(), store=store, run_id="r1")
    records = read_records(os.path.join(store.directory, "r1.json"))[0]
    assert kinds(store, "r1") == ["M", "A", "R(a)", "T(error)"]
    assert records[-1].message == "out of memory (MemoryError)"
    result, _ = resume(store, fx, answers)
    assert result.reason == "completed" and fx.counts() == {"a": 1, "b": 1}


def test_running_out_of_memory_while_folding_on_resume_changes_nothing_and_a_later_resume_continues(
        store, fx, monkeypatch):
    import fiskj.fold

    run(store, fx, turns([tool_use("s", "flag_suspend")]))
    assert kinds(store, "r1") == ["M", "A", "R(s)", "T(suspended)"]
    before = journal_bytes(store, "r1")
    real = fiskj.fold.Folder.add
    state = {"n": 0}

    def add(self, record):
        state["n"] += 1
        if state["n"] == 3:
            raise MemoryError()
        return real(self, record)

    monkeypatch.setattr(fiskj.fold.Folder, "add", add)
    with pytest.raises(MemoryError):
        resume(store, fx, turns([tool_use("s", "flag_suspend")]))
    assert state["n"] == 3 and journal_bytes(store, "r1") == before  # nothing written, and the lock was let go:
    monkeypatch.setattr(fiskj.fold.Folder, "add", real)
    result, _ = resume(store, fx, turns([tool_use("s", "flag_suspend")]))
    assert result.reason == "completed" and kinds(store, "r1")[-2:] == ["A", "T(completed)"]


def test_a_tool_output_over_the_record_limit_becomes_a_truncated_error_result_and_the_run_goes_on(store, fx):
    # Issue 15 item 6: the append used to raise RecordTooLarge, ending the run (and every resume) for good.
    from fiskj.encode import MAX_RECORD_BYTES, TOOL_OUTPUT_KEEP_BYTES

    huge = "é" * (MAX_RECORD_BYTES // 2) + "x"  # 2 bytes a character: 16 MiB + 1 byte of UTF-8
    tools = ToolRegistry([Tool("dump", "a lot of output", {"type": "object"}, lambda i, c: ToolOutcome(huge))])
    model = Recorder(turns([tool_use("d", "dump")]))
    result = start_run("go", config=CONFIG, model=model, tools=tools, store=store, run_id="r1")
    assert result.reason == "completed"
    records, _ = read_records(os.path.join(store.directory, "r1.json"))
    block = records[2].result
    kept = tool_result_text(block)
    assert block["is_error"] is True and kept.startswith("é" * 1000)
    assert len(kept.split("\n[fiskj:")[0].encode()) == TOOL_OUTPUT_KEEP_BYTES  # a character boundary
    assert f"{len(huge.encode()) - TOOL_OUTPUT_KEEP_BYTES} of {len(huge.encode())} bytes dropped" in kept
    assert model.requests[1]["messages"][-1]["content"] == [block]  # the model sees what the journal holds
