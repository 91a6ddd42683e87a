"""The agent loop's suspend: a request or signal is honoured after the tool batch, once, also while chat input
waits, and a suspended run resumes to the uninterrupted result (fiskj.loop; issue 4 item 3)."""

from __future__ import annotations

import os
import signal
import threading
import time

from fake_anthropic import tool_use, turns
from fiskj.loop import RunConfig, SuspendFlag, handle_signals, resume_run, start_run
from fiskj.scripted import ScriptedModel
from fiskj.store import FileStore
from fiskj.tools import Tool, ToolOutcome, ToolRegistry
from loop_helpers import CONFIG, Recorder, effect, fx, kinds, resume, run, store  # noqa: F401

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
