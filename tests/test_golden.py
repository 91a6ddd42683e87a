"""Golden journals: fisk-ai's example journal and two hand-written fisk-ai journals, folded exactly.

* ``format-example.json``: the example journal of fisk-ai's format notes as it first stood
  (shortened hashes and all), with the tool_result's ``content`` as a string:
  the form fisk-ai does not write (it writes a list of text blocks, see
  ``data/fisk-ai/`` and tests/test_fisk_ai_compat.py) but a reader accepts.
* ``v2-every-block.json``: a v2 chat run with every block type (thinking,
  redacted_thinking, server tool blocks, cache_control, citations), Go's
  ``\\u003c`` escapes, nanosecond timestamps, unknown fields, a remote tool,
  an error result, a follow-up, a suspend and a resumed completion.
* ``v1-pending.json``: a v1 run killed mid-batch (pending turn).

For each: decoding and re-encoding gives every line back byte for byte
(fiskj writes Go's escapes, field order and ``omitempty``), and the fold's
status, counters, pending turn, final answer and messages are asserted exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fiskj.cli import main as fiskj_main
from fiskj.codec import decode_record, encode_record
from fiskj.reader import read_records, read_state

DATA = Path(__file__).parent / "data"
GOLDEN = ["format-example.json", "v2-every-block.json", "v1-pending.json"]


def raw_lines(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_bytes().splitlines(keepends=True)]


@pytest.mark.parametrize("name", GOLDEN)
def test_decoding_and_re_encoding_gives_every_line_back_byte_for_byte(name):
    data = (DATA / name).read_bytes()
    assert data.endswith(b"\n")
    for line in data.splitlines(keepends=True):
        record = decode_record(line)
        again = encode_record(record)
        assert again == line
        assert decode_record(again) == record


@pytest.mark.parametrize("name", GOLDEN)
def test_a_golden_journal_reads_whole_with_no_torn_tail(name):
    records, torn = read_records(DATA / name)
    assert torn is None and [r.seq for r in records] == list(range(1, len(records) + 1))
    state = read_state(DATA / name)
    assert state.good_size == (DATA / name).stat().st_size and state.torn_tail is None


def test_the_format_md_example_folds_exactly():
    raw = raw_lines("format-example.json")
    state = read_state(DATA / "format-example.json")
    assert state.to_json() == {
        "run_id": "demo-1",
        "version": 2,
        "status": "completed",
        "terminal": {"reason": "completed", "message": None, "seq": 5},
        "fingerprint": {"model": "claude-sonnet-4-5", "system_hash": "3b1f...", "tools_hash": "9c2e...",
                        "thinking_mode": "off", "max_tokens": 200000, "max_iterations": 25},
        "prompt": "count the files",
        "interactive": False,
        "created": "2026-05-30T10:11:12.123456789+03:00",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "count the files"}]},
            raw[1]["assistant"]["message"],
            {"role": "user", "content": [{"tool_use_id": "toolu_01", "content": "a\nb\n", "is_error": False,
                                          "type": "tool_result"}]},
            {"content": [{"text": "2 files.", "type": "text"}], "role": "assistant"},
        ],
        "counters": {"llm_calls": 2, "tool_calls": 1, "remote_tool_calls": 0, "in_tokens": 300, "out_tokens": 49,
                     "cache_read_tokens": 0, "cache_create_tokens": 0},
        "next_iteration": 2,
        "last_stop_reason": "end_turn",
        "pending": None,
        "torn_tail": None,
        "records": 5,
        "last_seq": 5,
    }
    assert raw[1]["assistant"]["message"]["content"][1] == {"id": "toolu_01", "input": {"path": "."}, "name": "ls",
                                                            "type": "tool_use"}
    assert state.final_answer() == "2 files."
    assert not state.resumable


def test_the_v2_journal_with_every_block_type_folds_exactly():
    raw = raw_lines("v2-every-block.json")
    state = read_state(DATA / "v2-every-block.json")
    assert (state.run_id, state.version, state.interactive) == ("golden-v2", 2, True)
    assert state.prompt == "compare <A> & <B>"  # Go's \u003c and \u0026 escapes
    assert state.meta.created == "2026-05-30T10:11:12.123456789+03:00"
    assert state.fingerprint.thinking_mode == "enabled"
    assert state.messages == [
        {"role": "user", "content": [{"type": "text", "text": "compare <A> & <B>"}]},
        raw[1]["assistant"]["message"],
        {"role": "user", "content": [raw[2]["tool_result"]["result"], raw[3]["tool_result"]["result"]]},
        raw[4]["assistant"]["message"],
        raw[5]["user"]["message"],
        raw[7]["assistant"]["message"],
    ]
    blocks = state.messages[1]["content"]
    assert [b["type"] for b in blocks] == ["thinking", "redacted_thinking", "text", "server_tool_use",
                                           "web_search_tool_result", "tool_use", "tool_use"]
    assert blocks[0]["signature"] == "EqQBCkgIARABGAIiQL5c" and blocks[6]["cache_control"] == {"type": "ephemeral"}
    assert state.messages[2]["content"][0]["tool_use_id"] == "toolu_02"  # results in journal order
    assert state.messages[3]["content"][0]["citations"] is None
    assert state.counters.to_json() == {"llm_calls": 3, "tool_calls": 2, "remote_tool_calls": 1, "in_tokens": 4900,
                                        "out_tokens": 465, "cache_read_tokens": 1000, "cache_create_tokens": 50}
    assert (state.status, state.next_iteration, state.last_stop_reason) == ("completed", 3, "end_turn")
    assert state.pending is None
    assert (state.terminal.reason, state.terminal.seq, state.terminal.message) == ("completed", 9, None)
    assert (state.records, state.last_seq) == (9, 9)
    assert state.final_answer() == "No C."
    records, _ = read_records(DATA / "v2-every-block.json")
    assert records[4].extra == {"future_field": {"x": 1}}


def test_a_suspended_then_resumed_journal_folds_to_the_status_of_its_last_record():
    # fisk-ai defect 5: the earlier `suspended` record must not stick.
    data = (DATA / "v2-every-block.json").read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    suspended = read_state(data[: ends[6]])
    resumed = read_state(data[: ends[7]])
    assert (suspended.status, suspended.resumable) == ("suspended", True)
    assert (resumed.status, resumed.terminal.reason, resumed.resumable) == ("open", "suspended", True)
    assert read_state(data).status == "completed"


def test_the_v1_journal_killed_mid_batch_folds_to_its_pending_turn():
    raw = raw_lines("v1-pending.json")
    state = read_state(DATA / "v1-pending.json")
    assert state.to_json() == {
        "run_id": "golden-v1",
        "version": 1,
        "status": "open",
        "terminal": None,
        "fingerprint": raw[0]["meta"]["fingerprint"],
        "prompt": "run a, b and c",
        "interactive": False,
        "created": "2025-12-01T08:00:00.000000001Z",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "run a, b and c"}]}],
        "counters": {"llm_calls": 1, "tool_calls": 2, "remote_tool_calls": 0, "in_tokens": 10, "out_tokens": 20,
                     "cache_read_tokens": 0, "cache_create_tokens": 0},
        "next_iteration": 1,
        "last_stop_reason": "tool_use",
        "pending": {
            "iteration": 0,
            "assistant": raw[1]["assistant"]["message"],
            "results": [raw[2]["tool_result"]["result"], raw[3]["tool_result"]["result"]],
            "answered": ["toolu_a", "toolu_b"],
            "unanswered": ["toolu_c"],
        },
        "torn_tail": None,
        "records": 4,
        "last_seq": 4,
    }
    assert state.pending.tool_use_ids == ["toolu_a", "toolu_b", "toolu_c"]
    assert state.final_answer() is None and state.resumable


def test_session_show_json_prints_the_fold_and_verify_accepts_every_golden_journal(capsys):
    for name in GOLDEN:
        assert fiskj_main(["session", "show", "--json", str(DATA / name)]) == 0
        assert json.loads(capsys.readouterr().out) == read_state(DATA / name).to_json()
    assert fiskj_main(["session", "verify", "--json", *(str(DATA / n) for n in GOLDEN)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(e["ok"], e["records"], e["torn_tail"], e["error"]) for e in report] == [
        (True, 5, None, None), (True, 9, None, None), (True, 4, None, None)]
