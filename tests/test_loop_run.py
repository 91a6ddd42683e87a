"""The agent loop from start to completion: the journal's order and lines, chat follow-ups, a run in memory
(fiskj.loop; issue 4 item 1)."""

from __future__ import annotations

import io
import json
import os
import re
import sys
import time

import pytest

from fake_anthropic import reply, text, tool_use, turns
from fiskj.loop import MemoryJournal, make_meta, rfc3339_now, start_run
from fiskj.records import tool_result_text
from fiskj.tools import CommandTool, Tool, ToolRegistry
from loop_helpers import CONFIG, Recorder, effect, fx, journal_bytes, kinds, resume, run, store  # noqa: F401

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


def test_a_pause_turn_is_sent_back_to_the_model(store, fx):
    answers = [reply([text("thinking...")], stop="pause_turn"), reply([text("done")])]
    result, model = run(store, fx, lambda req: answers.pop(0))
    assert result.reason == "completed" and result.answer == "done"
    assert model.requests[1]["messages"][-1] == {"role": "assistant", "content": [text("thinking...")]}


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


def test_a_run_without_a_store_lives_in_memory(fx):
    result = start_run("hi", config=CONFIG, model=Recorder(turns([effect("a")])), tools=fx.registry())
    assert result.reason == "completed" and result.state.records == 5
    assert isinstance(MemoryJournal(make_meta("m", "p", CONFIG.fingerprint(fx.registry()))).state.messages, list)
