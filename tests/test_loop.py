"""The agent loop in-process: ordering, ends, suspend, resume (fiskj.loop; issue 4 items 1-4)."""

from __future__ import annotations

import copy
import io
import json
import os
import re
import signal
import sys
import threading
import time

import pytest

from fake_anthropic import reply, text, tool_use, turns
from fiskj.errors import FingerprintMismatch, ModelError, ResumeRefused, RunLocked
from fiskj.loop import (MemoryJournal, RunConfig, SuspendFlag, handle_signals, make_meta, resume_run, rfc3339_now,
                        start_run)
from fiskj.model import RetryPolicy
from fiskj.reader import read_records, read_state
from fiskj.records import AssistantRecord, TerminalRecord, ToolResultRecord, UserRecord, tool_result_text
from fiskj.scripted import ScriptedModel
from fiskj.store import FileStore
from fiskj.tools import CommandTool, Tool, ToolOutcome, ToolRegistry, builtin_tools

CONFIG = RunConfig(model="fake-1", system="be brief", max_tokens=10_000, max_iterations=10)


class Killed(BaseException):
    """Stands for a SIGKILL landing inside a tool: nothing after it runs."""


class Recorder:
    """A model double: answers with ``handler`` and records each request and the journal length then."""

    def __init__(self, handler, journal_path=None):
        self.handler, self.journal_path = handler, journal_path
        self.requests, self.lines_at_call = [], []

    def complete(self, request):
        self.requests.append(copy.deepcopy(request))
        if self.journal_path is not None:
            self.lines_at_call.append(open(self.journal_path, "rb").read().count(b"\n"))
        answer = self.handler(request)
        if isinstance(answer, Exception):
            raise answer
        return answer


class Effects:
    """Tools ``effect`` (append its ``id`` to a file; die after the effect when told) and ``flag_suspend``."""

    def __init__(self, path, flag=None):
        self.path, self.flag, self.die_on = str(path), flag, set()

    def effect(self, tool_input, call):
        with open(self.path, "a") as fh:
            fh.write(tool_input["id"] + "\n")
        if tool_input["id"] in self.die_on:
            raise Killed()
        return ToolOutcome(f"did {tool_input['id']}")

    def suspend(self, tool_input, call):
        self.flag.request()  # what a SIGINT mid-tool does
        return ToolOutcome("asked to suspend")

    def registry(self):
        return ToolRegistry(builtin_tools() + [
            Tool("effect", "side effect", {"type": "object", "properties": {"id": {"type": "string"}}}, self.effect),
            Tool("flag_suspend", "suspend request", {"type": "object"}, self.suspend)])

    def counts(self):
        lines = open(self.path).read().split() if os.path.exists(self.path) else []
        return {i: lines.count(i) for i in sorted(set(lines))}


def effect(tid):
    return tool_use(tid, "effect", {"id": tid})


@pytest.fixture
def store(tmp_path):
    return FileStore(str(tmp_path / "store"))


@pytest.fixture
def fx(tmp_path):
    return Effects(tmp_path / "effects.log", SuspendFlag())


def kinds(store, run_id):
    records, torn = read_records(os.path.join(store.directory, f"{run_id}.json"))
    assert torn is None
    out = []
    for r in records:
        if isinstance(r, TerminalRecord):
            out.append(f"T({r.reason})")
        elif isinstance(r, AssistantRecord):
            out.append("A")
        elif isinstance(r, ToolResultRecord):
            out.append(f"R({r.tool_use_id})")
        elif isinstance(r, UserRecord):
            out.append("U")
        else:
            out.append("M")
    return out


def journal_bytes(store, run_id):
    return open(os.path.join(store.directory, f"{run_id}.json"), "rb").read()


def run(store, fx, handler, run_id="r1", config=CONFIG, **kw):
    model = Recorder(handler, os.path.join(store.directory, f"{run_id}.json"))
    result = start_run("do it", config=config, model=model, tools=fx.registry(), store=store, run_id=run_id,
                       suspend=fx.flag, **kw)
    return result, model


def resume(store, fx, handler, run_id="r1", config=CONFIG, **kw):
    fx.flag = kw.pop("suspend", SuspendFlag())
    model = Recorder(handler, os.path.join(store.directory, f"{run_id}.json"))
    result = resume_run(run_id, config=config, model=model, tools=fx.registry(), store=store, suspend=fx.flag, **kw)
    return result, model


def test_a_command_tool_sees_its_own_assistant_record_but_not_yet_its_result(store, tmp_path):
    peek = ("import json,sys; p=sys.argv[1]; recs=[json.loads(l) for l in open(p,'rb').read().splitlines()];"
            "print(json.dumps([[r['protocol'].rsplit('.',1)[1], r.get('tool_result',{}).get('tool_use_id')]"
            " for r in recs]), end='')")
    path = os.path.join(store.directory, "r1.json")
    tools = ToolRegistry([Tool("peek", "read the journal", {"type": "object"},
                               CommandTool("peek", (sys.executable, "-c", peek, path)))])
    model = Recorder(turns([tool_use("p1", "peek"), tool_use("p2", "peek")]))
    result = start_run("look", config=CONFIG, model=model, tools=tools, store=store, run_id="r1")
    assert result.reason == "completed"
    seen = [json.loads(tool_result_text(b)) for b in model.requests[1]["messages"][-1]["content"]]
    assert seen[0] == [["meta", None], ["assistant", None]]
    assert seen[1] == [["meta", None], ["assistant", None], ["tool_result", "p1"]]


def test_a_run_journals_each_turn_before_its_tools_and_completes(store, fx):
    result, model = run(store, fx, turns([effect("a"), effect("b")], [effect("c")]))
    assert (result.reason, result.exit_code, result.message) == ("completed", 0, None)
    assert kinds(store, "r1") == ["M", "A", "R(a)", "R(b)", "A", "R(c)", "A", "T(completed)"]
    assert model.lines_at_call == [1, 4, 6]  # each call sees every earlier result journaled
    assert result.answer == "done after 2 turns" and fx.counts() == {"a": 1, "b": 1, "c": 1}
    assert result.state.counters.llm_calls == 3 and result.state.counters.tool_calls == 3
    sent = model.requests[1]
    assert sent["system"] == "be brief" and [t["name"] for t in sent["tools"]][-2:] == ["effect", "flag_suspend"]
    assert sent["messages"][-1] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": i, "content": [{"type": "text", "text": f"did {i}"}], "is_error": False}
        for i in "ab"]}


def test_the_journal_holds_the_lines_fisk_ai_writes_byte_for_byte(store, fx):
    # docs/spec.md section 4 (fisk-ai's "More facts"): a tool_result's content is a list of text blocks (the Go SDK's
    # NewToolResultBlock); messages and blocks have their keys in the order Go's SDK writes them
    # (sorted); payload fields in declaration order; Go's escapes of <, > and &.
    result, _ = run(store, fx, turns([text("Using <effect> & co."), effect("a")]))
    assert result.reason == "completed"
    lines = journal_bytes(store, "r1").splitlines(keepends=True)
    assert lines[1] == (
        b'{"seq":2,"protocol":"io.choria.fisk-ai.v1.session.assistant","assistant":{"iteration":0,"message":'
        b'{"content":[{"text":"Using \\u003ceffect\\u003e \\u0026 co.","type":"text"},'
        b'{"id":"a","input":{"id":"a"},"name":"effect","type":"tool_use"}],"role":"assistant"},'
        b'"stop_reason":"tool_use","in_tokens":10,"out_tokens":5}}\n')
    assert lines[2] == (
        b'{"seq":3,"protocol":"io.choria.fisk-ai.v1.session.tool_result","tool_result":{"tool_use_id":"a","result":'
        b'{"content":[{"text":"did a","type":"text"}],"is_error":false,"tool_use_id":"a","type":"tool_result"}}}\n')
    assert lines[4] == (b'{"seq":5,"protocol":"io.choria.fisk-ai.v1.session.terminal",'
                        b'"terminal":{"reason":"completed"}}\n')
    meta = json.loads(lines[0])["meta"]
    assert list(meta) == ["version", "run_id", "created", "fingerprint", "prompt"]  # no interactive: false
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)", meta["created"])


@pytest.mark.parametrize("tz, ns, want", [
    ("UTC", 1780125072_123456789, "2026-05-30T07:11:12.123456789Z"),
    ("UTC", 1780125072_120000000, "2026-05-30T07:11:12.12Z"),
    ("UTC", 1780125072_000000000, "2026-05-30T07:11:12Z"),
    ("Europe/Helsinki", 1780125072_123456789, "2026-05-30T10:11:12.123456789+03:00"),
    ("America/St_Johns", 1780125072_000000001, "2026-05-30T04:41:12.000000001-02:30"),
])
def test_created_is_written_as_go_marshals_a_time(monkeypatch, tz, ns, want):
    # Go's time.Time marshals as RFC3339Nano: nanoseconds with trailing zeros trimmed, a numeric
    # offset, Z when the offset is zero.
    if not os.path.exists(f"/usr/share/zoneinfo/{tz}"):
        pytest.skip(f"no zoneinfo for {tz}")
    monkeypatch.setenv("TZ", tz)
    time.tzset()
    try:
        assert rfc3339_now(ns) == want
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_suspend_requested_mid_tool_is_honoured_only_after_the_batch(store, fx):
    result, model = run(store, fx, turns([tool_use("s", "flag_suspend"), effect("a")], [effect("b")]))
    assert (result.reason, result.exit_code) == ("suspended", 3)
    assert kinds(store, "r1") == ["M", "A", "R(s)", "R(a)", "T(suspended)"]
    assert len(model.requests) == 1
    resumed, model2 = resume(store, fx, turns([tool_use("s", "flag_suspend"), effect("a")], [effect("b")]))
    assert resumed.reason == "completed" and fx.counts() == {"a": 1, "b": 1}
    assert [len(r["messages"]) for r in model2.requests] == [3, 5]  # no model call repeated (I1)


def test_a_second_signal_while_suspending_changes_nothing(store, fx):
    def twice(tool_input, call):
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)
        return ToolOutcome("signalled")

    tools = ToolRegistry([Tool("sig", "signal self", {"type": "object"}, twice)])
    flag = SuspendFlag()
    before = signal.getsignal(signal.SIGINT)  # default_int_handler, or SIG_IGN in a background job
    with handle_signals(flag):
        result = start_run("x", config=CONFIG, model=Recorder(turns([tool_use("a", "sig"), tool_use("b", "sig")])),
                           tools=tools, store=store, run_id="r1", suspend=flag)
    assert result.reason == "suspended" and flag.signals == 4
    assert kinds(store, "r1") == ["M", "A", "R(a)", "R(b)", "T(suspended)"]
    assert signal.getsignal(signal.SIGINT) is before  # the handler it replaced is put back


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


def test_chat_follow_ups_are_journaled_and_folded_and_end_of_input_suspends(store, fx):
    out = io.StringIO()
    handler = turns([effect("a")], [text("first answer")])
    result, model = run(store, fx, handler, interactive=True, input_stream=io.StringIO("more please\n\n  \nagain\n"),
                        output=out)
    assert (result.reason, result.message) == ("suspended", "end of input")
    assert kinds(store, "r1") == ["M", "A", "R(a)", "A", "U", "A", "U", "A", "T(suspended)"]
    assert out.getvalue().splitlines() == ["first answer", "done after 2 turns", "done after 3 turns"]
    state = result.state
    assert state.interactive and state.meta.interactive is True
    users = [m["content"][0]["text"] for m in state.messages if m["role"] == "user" and m["content"][0]["type"] == "text"]
    assert users == ["do it", "more please", "again"]
    user_line = journal_bytes(store, "r1").splitlines(keepends=True)[4]
    assert user_line == (b'{"seq":5,"protocol":"io.choria.fisk-ai.v1.session.user","user":{"message":'
                         b'{"content":[{"text":"more please","type":"text"}],"role":"user"}}}\n')  # as fisk-ai writes it
    assert b'"interactive":true}}\n' in journal_bytes(store, "r1").splitlines(keepends=True)[0]
    resumed, model2 = resume(store, fx, handler, input_stream=io.StringIO("one more\n"), output=out)
    assert resumed.reason == "suspended" and len(model2.requests) == 1
    assert model2.requests[0]["messages"][-1] == {"role": "user", "content": [text("one more")]}
    assert fx.counts() == {"a": 1}


def test_a_signal_while_waiting_for_chat_input_suspends_at_once(store, fx):
    r, w = os.pipe()
    waiting = threading.Event()

    class Input:
        def __init__(self):
            self.stream = os.fdopen(r, "r")

        def readline(self):
            waiting.set()
            return self.stream.readline()

    main = threading.main_thread()

    def kill_when_blocked():
        # Sequence point: the main thread is asleep in read(2).  A signal that lands before the read
        # blocks would only be seen when the read returns (CPython runs handlers between bytecodes).
        waiting.wait(10)
        stat = f"/proc/self/task/{main.native_id}/stat"
        for _ in range(10_000):
            if open(stat).read().rsplit(")", 1)[1].split()[0] == "S":
                break
            time.sleep(0.001)
        signal.pthread_kill(main.ident, signal.SIGINT)  # to the main thread, not to any thread

    killer = threading.Thread(target=kill_when_blocked)
    killer.start()
    flag = SuspendFlag()
    try:
        with handle_signals(flag):
            result = start_run("hi", config=CONFIG, model=Recorder(turns()), tools=fx.registry(), store=store,
                               run_id="r1", interactive=True, suspend=flag, input_stream=Input())
    finally:
        killer.join()
        os.close(w)
    assert result.reason == "suspended" and kinds(store, "r1") == ["M", "A", "T(suspended)"]


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


def test_a_pause_turn_is_sent_back_to_the_model(store, fx):
    answers = [reply([text("thinking...")], stop="pause_turn"), reply([text("done")])]
    result, model = run(store, fx, lambda req: answers.pop(0))
    assert result.reason == "completed" and result.answer == "done"
    assert model.requests[1]["messages"][-1] == {"role": "assistant", "content": [text("thinking...")]}


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


def test_a_suspended_and_resumed_run_ends_like_an_uninterrupted_one(tmp_path, monkeypatch, fx):
    monkeypatch.chdir(tmp_path)  # the scripted model's append_line writes here
    config = RunConfig(model="scripted:3:4")
    whole = start_run("go", config=config, model=ScriptedModel(3, 4), tools=fx.registry(), store=None)
    store = FileStore(str(tmp_path / "store"))
    flag = SuspendFlag()
    legs = [start_run("go", config=config, model=ScriptedModel(3, 4), tools=fx.registry(), store=store, run_id="r1",
                      suspend=flag, log=lambda line: line.startswith("iteration 1") and flag.request())]
    while legs[-1].reason == "suspended":
        flag = SuspendFlag()
        legs.append(resume_run("r1", config=config, model=ScriptedModel(3, 4), tools=fx.registry(), store=store,
                               suspend=flag, log=lambda line: line.startswith("iteration 2") and flag.request()))
    assert [leg.reason for leg in legs] == ["suspended", "suspended", "completed"]
    final = legs[-1]
    assert final.answer == whole.answer and final.state.messages == whole.state.messages
    assert final.state.counters == whole.state.counters


def test_a_run_without_a_store_lives_in_memory(fx):
    result = start_run("hi", config=CONFIG, model=Recorder(turns([effect("a")])), tools=fx.registry())
    assert result.reason == "completed" and result.state.records == 5
    assert isinstance(MemoryJournal(make_meta("m", "p", CONFIG.fingerprint(fx.registry()))).state.messages, list)


# --- issue 15: the reference engine survives -------------------------------------------------------


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


def thinking_turn(sig, *blocks, stop=None):
    return reply([{"type": "thinking", "thinking": f"thoughts {sig}", "signature": sig}, *blocks], stop=stop)


def test_a_forced_resume_with_another_model_sends_no_thinking_block_of_the_earlier_model_and_rewrites_nothing(
        store, fx):
    # Issue 15 item 7 (docs/spec.md section 12, rule 8): signatures are bound to the model that made them.
    leg1 = [thinking_turn("sig-A", stop="pause_turn"), thinking_turn("sig-A2", tool_use("s", "flag_suspend"))]
    config = RunConfig(model="model-a", max_tokens=10_000, max_iterations=10, thinking="enabled:2048")
    result, _ = run(store, fx, lambda request: leg1.pop(0), config=config)
    assert result.reason == "suspended"
    before = journal_bytes(store, "r1")
    other = RunConfig(model="model-b", max_tokens=10_000, max_iterations=10, thinking="enabled:2048")
    leg2 = [thinking_turn("sig-B", effect("b")), reply([text("done")])]
    result, model = resume(store, fx, lambda request: leg2.pop(0), config=other, force=True)
    assert result.reason == "completed"
    assert journal_bytes(store, "r1").startswith(before)  # earlier records byte for byte, sig-A included
    assert b'"signature":"sig-A"' in before
    first, second = model.requests
    sent = json.dumps(first["messages"])
    assert "sig-A" not in sent and "thoughts" not in sent
    assert first["messages"][1]["content"] == [text("(reasoning of an earlier model omitted)")]  # was thinking only
    assert first["messages"][2]["content"] == [tool_use("s", "flag_suspend")]
    assert "thinking" not in first  # it continues a tool loop whose last turn has no thinking block left
    assert first["max_tokens"] == CONFIG.call_max_tokens
    assert second["messages"][4]["content"][0]["signature"] == "sig-B"  # this leg's own turn, kept
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 2048}


def test_a_forced_resume_with_the_same_model_sends_the_journaled_thinking_blocks_verbatim(store, fx):
    config = RunConfig(model="model-a", max_tokens=10_000, max_iterations=10, thinking="enabled:2048")
    leg1 = [thinking_turn("sig-A", tool_use("s", "flag_suspend"))]
    assert run(store, fx, lambda request: leg1.pop(0), config=config)[0].reason == "suspended"
    larger = RunConfig(model="model-a", max_tokens=20_000, max_iterations=10, thinking="enabled:4096")
    result, model = resume(store, fx, lambda request: reply([text("done")]), config=larger, force=True)
    assert result.reason == "completed"
    sent = model.requests[0]
    assert sent["messages"][1]["content"][0] == {"signature": "sig-A", "thinking": "thoughts sig-A",
                                                 "type": "thinking"}
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 4096}  # the turn starts with thinking


def test_a_forced_switch_to_thinking_in_the_middle_of_a_tool_loop_continues_the_loop_without_thinking(store, fx):
    leg1 = turns([tool_use("s", "flag_suspend")])
    assert run(store, fx, leg1)[0].reason == "suspended"
    thinking = RunConfig(model="fake-1", system="be brief", max_tokens=10_000, max_iterations=10,
                         thinking="enabled:2048")
    result, model = resume(store, fx, lambda request: reply([text("done")]), config=thinking, force=True)
    assert result.reason == "completed" and "thinking" not in model.requests[0]  # one configuration per loop
