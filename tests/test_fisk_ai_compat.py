"""fisk-ai v2 compatibility in both directions, against journals shaped byte for byte as fisk-ai writes them.

The golden journals in ``data/fisk-ai/`` are hand-written from fisk-ai's format notes and
their "More facts about the Go implementation", restated in docs/spec.md sections 3, 4, 8, 12, 16
(docs/spec.md "Sources"):

* ``format-example.json``: the format notes' example journal, byte for byte (shortened hashes and all):
  a tool_result whose ``content`` is a list of text blocks (the Go SDK's ``NewToolResultBlock``).
* ``legs-after-every-end.json``: one run in four legs, ended by ``error`` (a model error),
  ``budget`` (with its batch pending), ``max_iterations`` and ``completed``; each leg
  appends after the last one's terminal record, as fisk-ai resumes every run that is not
  completed.  Go's escapes (``\\u003c``, ``\\u003e``, ``\\u0026``, ``\\u2028``), ``created``
  with a trimmed nanosecond fraction and a numeric offset, a remote result, cache tokens.
* ``chat-empty-prompt.json``: a chat run with no prompt (Go's ``omitempty`` leaves
  ``prompt`` out), user records (chat follow-ups), a thinking block, ``\\u2029``, legs
  ended by ``suspended`` and ``error``.

Reading: every line decodes, every journal folds to the conversation fisk-ai folds
(spelled out below), including every prefix that ends at a terminal record.  Writing:
every golden line re-encodes to its exact bytes; each payload kind built the way
fiskj's writer builds it encodes to the golden line; and fiskj itself resumes a
fisk-ai journal after its ``budget`` end and appends exactly the lines fisk-ai wrote.
"""

from __future__ import annotations

import calendar
import datetime
import json
import os
import time
from pathlib import Path

import pytest

from fiskj.cli import main as fiskj_main
from fiskj.codec import decode_record, encode_record
from fiskj.fingerprint import Fingerprint
import fiskj.loop as loop
from fiskj.loop import RunConfig, resume_run, rfc3339_now
from fiskj.reader import read_records, read_state
from fiskj.records import (AssistantRecord, MetaRecord, TerminalRecord, ToolResultRecord, UserRecord, go_block,
                           text_block, tool_result_block, tool_result_text)
from fiskj.store import FileStore
from fiskj.tools import Tool, ToolOutcome, ToolRegistry

DATA = Path(__file__).parent / "data" / "fisk-ai"
GOLDEN = sorted(p.name for p in DATA.glob("*.json"))


def golden_lines(name: str) -> list[bytes]:
    data = (DATA / name).read_bytes()
    assert data.endswith(b"\n")
    return data.splitlines(keepends=True)


def payload(line: bytes) -> dict:
    obj = json.loads(line)
    return obj[next(k for k in obj if k not in ("seq", "protocol"))]


def prefix(name: str, records: int) -> bytes:
    return b"".join(golden_lines(name)[:records])


def tr(tid: str, text: str, is_error: bool = False) -> dict:
    return {"content": [{"text": text, "type": "text"}], "is_error": is_error, "tool_use_id": tid, "type": "tool_result"}


def test_the_golden_set_is_the_one_this_module_describes():
    assert GOLDEN == ["chat-empty-prompt.json", "format-example.json", "legs-after-every-end.json"]


# --- writing: fiskj's encoder writes what Go writes -------------------------------------------------


@pytest.mark.parametrize("name", GOLDEN)
def test_every_golden_line_re_encodes_to_exactly_the_bytes_fisk_ai_wrote(name):
    # Field order (Go struct declaration order), omitempty, Go's escapes, the nanosecond time kept as
    # its string: decoding and encoding again gives the same bytes, line by line.
    for line in golden_lines(name):
        assert encode_record(decode_record(line)) == line


def test_the_golden_lines_cover_every_payload_kind_and_optional_field():
    # So the byte-for-byte test above cannot pass on a thinner set of lines.
    seen = set()
    for name in GOLDEN:
        for line in golden_lines(name):
            obj = json.loads(line)
            kind = obj["protocol"].rsplit(".", 1)[1]
            seen.add(kind)
            seen.update(f"{kind}.{field}" for field in payload(line))
            if kind == "tool_result":
                seen.add("tool_result.content." + type(payload(line)["result"]["content"]).__name__)
    assert seen >= {"meta", "assistant", "user", "tool_result", "terminal", "meta.prompt", "meta.interactive",
                    "assistant.stop_reason", "assistant.cache_read_tokens", "assistant.cache_create_tokens",
                    "tool_result.remote", "terminal.message", "tool_result.content.list"}
    # and lines without them: a meta without prompt, a terminal without message, a result without remote
    lines = [line for name in GOLDEN for line in golden_lines(name)]
    assert any(b'"interactive":true}}' in ln and b'"prompt"' not in ln for ln in lines)
    assert any(ln.endswith(b'{"reason":"completed"}}\n') for ln in lines)
    assert any(b'"tool_result"}}}\n' in ln for ln in lines)


@pytest.fixture
def berlin_clock(monkeypatch):
    """``set(when, ns)``: make ``fiskj.loop.rfc3339_now()`` give ``when`` (UTC, ``%Y-%m-%dT%H:%M:%S``) plus ``ns``
    nanoseconds, in the zone Europe/Berlin (UTC+2 in June).  The zone is put back afterwards."""
    if not os.path.exists("/usr/share/zoneinfo/Europe/Berlin"):
        pytest.skip("no zoneinfo for Europe/Berlin")

    def set_clock(when: str, ns: int) -> None:
        epoch = calendar.timegm(datetime.datetime.strptime(when, "%Y-%m-%dT%H:%M:%S").timetuple())
        monkeypatch.setenv("TZ", "Europe/Berlin")
        time.tzset()
        monkeypatch.setattr(loop, "rfc3339_now", lambda: rfc3339_now(epoch * 1_000_000_000 + ns))

    yield set_clock
    monkeypatch.undo()
    time.tzset()


def test_each_payload_kind_built_as_fiskj_builds_it_encodes_to_the_go_shaped_golden_line(berlin_clock):
    golden = golden_lines("legs-after-every-end.json")
    fp = Fingerprint(model="claude-sonnet-4-5",
                     system_hash="518b67e652531c5fe7e25d6b2c3b4ef6224e7d90da2091967dd47eb082b26a19",
                     tools_hash="f9d35d43770d39092a663e665e82ae1d84a9e0da3d0d10c407acada6a40cd281",
                     thinking_mode="off", max_tokens=4000, max_iterations=2)
    berlin_clock("2026-06-02T07:15:30", 500_000_000)
    meta = loop.make_meta("legs-1", "fix <main.go> & test", fp)  # created: Go's RFC3339Nano, .5 and +02:00
    assert encode_record(meta, 1) == golden[0]
    # An assistant turn as the Messages API returns it (type first): the loop stores it with the keys in
    # the order Go's SDK writes them, content before role.
    api_blocks = [{"type": "text", "text": "I'll run the tests."},
                  {"type": "tool_use", "id": "toolu_01", "name": "sh", "input": {"cmd": "go test ./... && echo ok"}}]
    turn = AssistantRecord(iteration=0, message={"content": [go_block(b) for b in api_blocks], "role": "assistant"},
                           stop_reason="tool_use", in_tokens=900, out_tokens=80, cache_read_tokens=None,
                           cache_create_tokens=300)
    assert encode_record(turn, 2) == golden[1]
    result = ToolResultRecord(tool_use_id="toolu_01",
                              result=tool_result_block("toolu_01", "--- FAIL: TestSum (got 3 > want 2)\n", True))
    assert encode_record(result, 3) == golden[2]
    assert encode_record(TerminalRecord(reason="error", message="model error: 529 overloaded_error"), 4) == golden[3]
    remote = ToolResultRecord(tool_use_id="toolu_02", result=tool_result_block("toolu_02", "edited main.go", False),
                              remote=True)
    assert encode_record(remote, 7) == golden[6]
    assert encode_record(TerminalRecord(reason="completed"), 11) == golden[10]
    chat = golden_lines("chat-empty-prompt.json")
    user = UserRecord(message={"content": [text_block("hello <world>")], "role": "user"})
    assert encode_record(user, 3) == chat[2]
    chat_fp = Fingerprint(**{**{f: getattr(fp, f) for f in ("model", "system_hash", "tools_hash")},
                             "thinking_mode": "enabled", "max_tokens": 200000, "max_iterations": 25})
    empty = MetaRecord(version=2, run_id="chat-1", created="2026-06-02T09:15:30.000000001-07:00",
                       fingerprint=chat_fp, prompt="", interactive=True)
    assert encode_record(empty, 1) == chat[0]  # an empty prompt is not written (omitempty)


# --- reading: fiskj folds what fisk-ai wrote to the conversation fisk-ai folds ------------------------


def test_the_format_md_example_folds_exactly():
    raw = [json.loads(line) for line in golden_lines("format-example.json")]
    state = read_state(DATA / "format-example.json")
    assert state.to_json() == {
        "run_id": "demo-1", "version": 2, "status": "completed",
        "terminal": {"reason": "completed", "message": None, "seq": 5},
        "fingerprint": {"model": "claude-sonnet-4-5", "system_hash": "3b1f...", "tools_hash": "9c2e...",
                        "thinking_mode": "off", "max_tokens": 200000, "max_iterations": 25},
        "prompt": "count the files", "interactive": False, "created": "2026-05-30T10:11:12.123456789+03:00",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "count the files"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Listing."},
                                              {"type": "tool_use", "id": "toolu_01", "name": "ls",
                                               "input": {"path": "."}}]},
            {"role": "user", "content": [tr("toolu_01", "a\nb\n")]},
            {"role": "assistant", "content": [{"type": "text", "text": "2 files."}]},
        ],
        "counters": {"llm_calls": 2, "tool_calls": 1, "remote_tool_calls": 0, "in_tokens": 300, "out_tokens": 49,
                     "cache_read_tokens": 0, "cache_create_tokens": 0},
        "next_iteration": 2, "last_stop_reason": "end_turn", "pending": None, "torn_tail": None,
        "records": 5, "last_seq": 5,
    }
    assert state.messages[1] == raw[1]["assistant"]["message"]
    assert tool_result_text(state.messages[2]["content"][0]) == "a\nb\n"
    assert state.final_answer() == "2 files." and not state.resumable


def test_a_run_continued_after_error_budget_and_max_iterations_terminals_folds_leg_by_leg():
    name = "legs-after-every-end.json"
    state = read_state(DATA / name)
    assert state.prompt == "fix <main.go> & test"  # Go's \u003c, \u003e, \u0026
    assert state.meta.created == "2026-06-02T09:15:30.5+02:00"
    a1 = {"role": "assistant", "content": [
        {"type": "text", "text": "I'll run the tests."},
        {"type": "tool_use", "id": "toolu_01", "name": "sh", "input": {"cmd": "go test ./... && echo ok"}}]}
    a2 = {"role": "assistant", "content": [
        {"type": "text", "text": "Fixing the sum."},
        {"type": "tool_use", "id": "toolu_02", "name": "edit", "input": {"path": "main.go"}},
        {"type": "tool_use", "id": "toolu_03", "name": "sh", "input": {"cmd": "go test ./..."}}]}
    r1 = tr("toolu_01", "--- FAIL: TestSum (got 3 > want 2)\n", is_error=True)
    assert state.messages == [
        {"role": "user", "content": [{"type": "text", "text": "fix <main.go> & test"}]},
        a1, {"role": "user", "content": [r1]},
        a2, {"role": "user", "content": [tr("toolu_02", "edited main.go"), tr("toolu_03", "ok\n")]},
        {"role": "assistant", "content": [{"type": "text", "text": "All tests pass.\u2028Done & dusted."}]},
    ]
    assert state.counters.to_json() == {"llm_calls": 3, "tool_calls": 3, "remote_tool_calls": 1, "in_tokens": 5500,
                                        "out_tokens": 310, "cache_read_tokens": 300, "cache_create_tokens": 300}
    assert (state.status, state.terminal.seq, state.next_iteration, state.pending) == ("completed", 11, 3, None)
    assert state.final_answer() == "All tests pass.\u2028Done & dusted." and not state.resumable
    # Each leg's end, as the next leg found it: the status is the last record's reason, and resumable.
    legs = {n: read_state(prefix(name, n)) for n in (4, 5, 6, 7, 9)}
    assert [(n, s.status, s.resumable) for n, s in legs.items()] == [
        (4, "error", True), (5, "open", True), (6, "budget", True), (7, "open", True), (9, "max_iterations", True)]
    assert legs[4].messages == state.messages[:3] and legs[4].pending is None and legs[4].next_iteration == 1
    budget = legs[6]  # the budget ended the leg before its batch ran: the batch is pending across the terminal
    assert (budget.pending.unanswered, budget.pending.answered, budget.pending.assistant) == (
        ["toolu_02", "toolu_03"], [], a2)
    assert legs[7].pending.unanswered == ["toolu_03"] and legs[7].terminal.reason == "budget"
    assert legs[9].pending is None and legs[9].messages == state.messages[:5]


def test_a_chat_with_an_empty_prompt_folds_with_a_user_message_first():
    state = read_state(DATA / "chat-empty-prompt.json")
    assert (state.prompt, state.interactive) == (None, True)
    assert state.messages == [
        {"role": "user", "content": [{"type": "text", "text": ""}]},  # fisk-ai: one empty text block, not nothing
        {"role": "assistant", "content": [{"type": "text", "text": "How can I help?"}]},
        {"role": "user", "content": [{"type": "text", "text": "hello <world>"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "A greeting & a tag.", "signature": "EqQBCkgIARABGAIiQL5c"},
            {"type": "text", "text": "Hello!\u2029What next?"}]},
        {"role": "user", "content": [{"type": "text", "text": "is 1 < 2 && 2 > 1?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Yes."}]},
    ]
    assert (state.status, state.next_iteration, state.records) == ("suspended", 3, 9)
    assert state.counters.to_json()["llm_calls"] == 3 and state.resumable
    after_error = read_state(prefix("chat-empty-prompt.json", 7))
    assert (after_error.status, after_error.resumable, after_error.messages[-1]["role"]) == ("error", True, "user")


@pytest.mark.parametrize("name", GOLDEN)
def test_a_golden_journal_reads_whole_and_verifies(name, capsys):
    records, torn = read_records(DATA / name)
    assert torn is None and [r.seq for r in records] == list(range(1, len(golden_lines(name)) + 1))
    assert fiskj_main(["session", "verify", "--json", str(DATA / name)]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    assert (entry["ok"], entry["records"], entry["error"]) == (True, len(records), None)


def test_a_tool_result_content_reads_as_text_in_both_forms():
    assert tool_result_text(tr("a", "x\ny")) == "x\ny"
    assert tool_result_text({"type": "tool_result", "tool_use_id": "a", "content": "plain"}) == "plain"
    two = {"content": [{"text": "a", "type": "text"}, {"type": "image", "source": {}}, {"text": "b", "type": "text"}]}
    assert tool_result_text(two) == "ab"
    assert tool_result_text({"content": None}) == tool_result_text({}) == tool_result_text({"content": 7}) == ""


# --- both directions: fiskj resumes a fisk-ai journal and appends what fisk-ai appended -------------------


class Answers:
    """A model double that answers each request with the next reply and keeps the requests."""

    def __init__(self, *replies):
        self.replies, self.requests = list(replies), []

    def complete(self, request):
        self.requests.append(json.loads(json.dumps(request)))
        return self.replies.pop(0)


def test_fiskj_resumes_a_fisk_ai_journal_after_its_budget_end_and_appends_the_lines_fisk_ai_wrote(tmp_path):
    golden = golden_lines("legs-after-every-end.json")
    store = FileStore(str(tmp_path / "runs"))
    os.makedirs(store.directory, mode=0o700)
    path = Path(store.directory) / "legs-1.json"
    path.write_bytes(b"".join(golden[:6]))  # fisk-ai's first two legs: an error, then the budget
    path.chmod(0o600)
    outputs = {"toolu_02": "edited main.go", "toolu_03": "ok\n"}
    ran = []

    def tool(tool_input, call):
        ran.append(call.tool_use_id)
        return ToolOutcome(outputs[call.tool_use_id])

    tools = ToolRegistry([Tool("edit", "edit a file", {"type": "object"}, tool),
                          Tool("sh", "run a command", {"type": "object"}, tool)])
    # fiskj hashes the system prompt and tools its own way, so the fingerprint differs: --force, and a
    # larger budget, as a user of either program would do to go on after a budget end.
    config = RunConfig(model="claude-sonnet-4-5", max_tokens=100_000, max_iterations=2)
    model = Answers()
    leg3 = resume_run("legs-1", store=store, config=config, model=model, tools=tools, force=True)
    assert (leg3.reason, ran, model.requests) == ("max_iterations", ["toolu_02", "toolu_03"], [])
    written = path.read_bytes().splitlines(keepends=True)
    # What fiskj appended is what fisk-ai appended (fiskj's own tools are not remote).
    assert written[6] == golden[6].replace(b',"remote":true', b"")
    assert written[7:] == golden[7:9]
    model = Answers({"type": "message", "role": "assistant", "content": [
        {"type": "text", "text": "All tests pass.\u2028Done & dusted."}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 2100, "output_tokens": 30}})
    leg4 = resume_run("legs-1", store=store, config=RunConfig(model="claude-sonnet-4-5", max_tokens=100_000,
                                                              max_iterations=5),
                      model=model, tools=tools, force=True)
    assert leg4.reason == "completed" and ran == ["toolu_02", "toolu_03"]
    assert path.read_bytes().splitlines(keepends=True)[9:] == golden[9:]
    # The model saw the conversation fisk-ai's fold gives: the prompt first, every result as a text block list.
    (request,) = model.requests
    assert request["messages"][0] == {"role": "user", "content": [{"type": "text", "text": "fix <main.go> & test"}]}
    assert [m["role"] for m in request["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    assert [tool_result_text(b) for b in request["messages"][-1]["content"]] == ["edited main.go", "ok\n"]
