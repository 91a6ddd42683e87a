"""The agent loop's resume: only unanswered tools of a pending batch run, settled ends are written once, and a
resume that may not go on (changed configuration, completed, locked) appends nothing (fiskj.loop; issue 4 item 4)."""

from __future__ import annotations

import io
import os

import pytest

from fake_anthropic import text, turns
from fiskj.errors import FingerprintMismatch, ModelError, ResumeRefused, RunLocked
from fiskj.loop import RunConfig, SuspendFlag, make_meta, start_run
from fiskj.reader import read_records, read_state
from fiskj.records import AssistantRecord, ToolResultRecord
from fiskj.store import FileStore
from loop_helpers import (CONFIG, Effects, Killed, Recorder, effect, fx, journal_bytes, kinds, resume,  # noqa: F401
                          run, store)

def test_resume_after_a_kill_inside_the_third_tool_reruns_only_that_tool(store, fx):
    handler = turns([effect("a"), effect("b"), effect("c")])
    fx.die_on.add("c")
    with pytest.raises(Killed):
        run(store, fx, handler)
    assert kinds(store, "r1") == ["M", "A", "R(a)", "R(b)"]  # F16: killed while c runs
    fx.die_on.clear()
    result, model = resume(store, fx, handler)
    assert result.reason == "completed"
    assert fx.counts() == {"a": 1, "b": 1, "c": 2}
    assert kinds(store, "r1") == ["M", "A", "R(a)", "R(b)", "R(c)", "A", "T(completed)"]
    assert model.lines_at_call == [5]  # no model call while any id was unanswered
    last = model.requests[0]["messages"][-2:]
    assert last[0]["content"] == [effect("a"), effect("b"), effect("c")]
    assert [b["tool_use_id"] for b in last[1]["content"]] == ["a", "b", "c"]


def test_a_pending_batch_answered_out_of_order_is_sent_in_tool_use_order(store, fx):
    journal = store.create("r1", make_meta("r1", "do it", CONFIG.fingerprint(fx.registry())))
    journal.append(AssistantRecord(iteration=0, message={"role": "assistant", "content": [effect("a"), effect("b"),
                                   effect("c")]}, stop_reason="tool_use", in_tokens=1, out_tokens=1))
    journal.append(ToolResultRecord(tool_use_id="b", result={"type": "tool_result", "tool_use_id": "b",
                                                             "content": "did b", "is_error": False}))
    journal.close()
    result, model = resume(store, fx, turns())
    assert fx.counts() == {"a": 1, "c": 1}  # F10: only the unanswered ones run
    assert [b["tool_use_id"] for b in model.requests[0]["messages"][-1]["content"]] == ["a", "b", "c"]


def test_resume_after_a_crash_between_the_answer_and_its_terminal_writes_completed_only(store, fx):
    journal = store.create("r1", make_meta("r1", "do it", CONFIG.fingerprint(fx.registry())))
    journal.append(AssistantRecord(iteration=0, message={"role": "assistant", "content": [text("42")]},
                                   stop_reason="end_turn", in_tokens=1, out_tokens=1))
    journal.close()
    out = io.StringIO()
    result, model = resume(store, fx, turns(), output=out)
    assert result.reason == "completed" and model.requests == [] and out.getvalue() == "42\n"


def test_resume_of_a_cut_off_pending_turn_runs_none_of_its_tools(store, fx):
    journal = store.create("r1", make_meta("r1", "do it", CONFIG.fingerprint(fx.registry())))
    journal.append(AssistantRecord(iteration=0, message={"role": "assistant", "content": [effect("a")]},
                                   stop_reason="max_tokens", in_tokens=1, out_tokens=1))
    journal.close()
    result, model = resume(store, fx, turns())
    assert result.reason == "error" and fx.counts() == {} and model.requests == []


def test_open_for_resume_and_suspend_at_once_five_times_appends_one_terminal_each(store, fx):
    journal = store.create("r1", make_meta("r1", "do it", CONFIG.fingerprint(fx.registry())))
    for i in range(3):  # M + 3 x (A(x,y), R(x), R(y)) = 10 records, no terminal (F13)
        ids = [f"x{i}", f"y{i}"]
        journal.append(AssistantRecord(iteration=i, message={"role": "assistant", "content": [effect(t) for t in ids]},
                                       stop_reason="tool_use", in_tokens=1, out_tokens=1))
        for t in ids:
            journal.append(ToolResultRecord(tool_use_id=t, result={"type": "tool_result", "tool_use_id": t,
                                                                   "content": "ok", "is_error": False}))
    journal.close()
    for cycle in range(5):
        flag = SuspendFlag()
        flag.request()
        result, model = resume(store, fx, turns(), suspend=flag)
        assert result.reason == "suspended" and model.requests == []
        assert result.state.last_seq == 11 + cycle
    records, _ = read_records(os.path.join(store.directory, "r1.json"))
    assert [r.seq for r in records] == list(range(1, 16))
    assert kinds(store, "r1")[10:] == ["T(suspended)"] * 5 and fx.counts() == {}


def test_a_changed_configuration_is_refused_with_nothing_appended_unless_forced(store, fx):
    fx.flag.request()
    assert run(store, fx, turns([effect("a")]))[0].reason == "suspended"
    before = journal_bytes(store, "r1")
    changed = RunConfig(model="fake-2", system="be brief", max_tokens=10_000, max_iterations=3)
    with pytest.raises(FingerprintMismatch) as info:
        resume(store, fx, turns([effect("a")]), config=changed)
    assert [c.split(":")[0] for c in info.value.changes] == ["model", "max_iterations"]
    assert "fake-1" in str(info.value) and "fake-2" in str(info.value)
    assert journal_bytes(store, "r1") == before and fx.counts() == {}  # F17: zero bytes appended
    result, _ = resume(store, fx, turns([effect("a")]), config=changed, force=True)
    assert result.reason == "completed" and fx.counts() == {"a": 1}


def test_a_completed_run_cannot_be_resumed_and_nothing_is_appended(store, fx):
    run(store, fx, turns([effect("a")]))
    before = journal_bytes(store, "r1")
    with pytest.raises(ResumeRefused, match="'completed'; a completed run cannot be resumed"):
        resume(store, fx, turns([effect("a")]))
    assert journal_bytes(store, "r1") == before


def test_a_run_held_by_another_writer_is_refused_with_nothing_appended(store, fx):
    fx.flag.request()
    run(store, fx, turns())
    holder = store.open("r1")
    try:
        before = journal_bytes(store, "r1")
        with pytest.raises(RunLocked):
            resume(store, fx, turns())
        assert journal_bytes(store, "r1") == before
    finally:
        holder.close()


def test_a_run_that_hit_its_iteration_cap_resumes_and_ends_on_it_again_without_a_call(store, fx):
    # fisk-ai resumes every run that is not completed; the cap counts iterations from the journal.
    handler = turns([effect("a")], [effect("b")], [effect("c")])
    capped = RunConfig(model="fake-1", system="be brief", max_tokens=10_000, max_iterations=2)
    assert run(store, fx, handler, config=capped)[0].reason == "max_iterations"
    result, model = resume(store, fx, handler, config=capped)
    assert (result.reason, result.exit_code) == ("max_iterations", 1)
    assert model.requests == [] and fx.counts() == {"a": 1, "b": 1}
    assert kinds(store, "r1") == ["M", "A", "R(a)", "A", "R(b)", "T(max_iterations)", "T(max_iterations)"]
    # A forced resume with a higher cap goes on where the run stopped and completes it.
    result, model = resume(store, fx, handler, config=CONFIG, force=True)
    assert result.reason == "completed" and fx.counts() == {"a": 1, "b": 1, "c": 1}
    assert len(model.requests) == 2 and kinds(store, "r1")[-5:] == ["T(max_iterations)", "A", "R(c)", "A",
                                                                     "T(completed)"]


def test_a_run_that_ended_on_its_budget_resumes_and_ends_on_it_again_running_nothing(store, fx):
    tight = RunConfig(model="fake-1", system="be brief", max_tokens=20, max_iterations=10)  # each turn costs 15
    handler = turns([effect("a")], [effect("b")])
    assert run(store, fx, handler, config=tight)[0].reason == "budget"
    result, model = resume(store, fx, handler, config=tight)
    assert (result.reason, model.requests, fx.counts()) == ("budget", [], {"a": 1})
    assert kinds(store, "r1") == ["M", "A", "R(a)", "A", "T(budget)", "T(budget)"]
    result, _ = resume(store, fx, handler, config=CONFIG, force=True)  # a larger budget: the pending turn runs
    assert result.reason == "completed" and fx.counts() == {"a": 1, "b": 1}
    assert read_records(os.path.join(store.directory, "r1.json"))[0][-1].reason == "completed"


def test_a_run_that_ended_in_a_model_error_resumes_to_the_uninterrupted_result(store, fx, tmp_path):
    answers = turns([effect("a")], [effect("b")])
    failing = {"n": 0}

    def flaky(request):
        failing["n"] += 1
        return ModelError("model server answered HTTP 529") if failing["n"] == 2 else answers(request)

    assert run(store, fx, flaky)[0].reason == "error"
    result, model = resume(store, fx, answers)
    assert result.reason == "completed" and fx.counts() == {"a": 1, "b": 1} and len(model.requests) == 2
    assert kinds(store, "r1") == ["M", "A", "R(a)", "T(error)", "A", "R(b)", "A", "T(completed)"]
    whole = FileStore(str(tmp_path / "whole"))
    start_run("do it", config=CONFIG, model=Recorder(answers), tools=Effects(tmp_path / "w.log").registry(),
              store=whole, run_id="r1")
    assert read_state(os.path.join(store.directory, "r1.json")).messages == \
        read_state(os.path.join(whole.directory, "r1.json")).messages
