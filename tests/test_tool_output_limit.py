"""A tool output too large for one record (fiskj.encode.fit_tool_result; docs/spec.md section 6, issue 15 item 6)."""

from __future__ import annotations

import pytest

from fiskj.encode import MAX_RECORD_BYTES, TOOL_OUTPUT_KEEP_BYTES, encode_record, fit_tool_result
from fiskj.records import ToolResultRecord, tool_result_block, tool_result_text


def record_size(tid, block):
    return len(encode_record(ToolResultRecord(tool_use_id=tid, result=block), 2 ** 53))


def test_an_output_whose_record_fits_is_kept_whole_and_unchanged():
    for text, is_error in [("small", False), ("a" * (MAX_RECORD_BYTES - 4096), False), ("failed", True)]:
        block, dropped = fit_tool_result("t1", text, is_error)
        assert (block, dropped) == (tool_result_block("t1", text, is_error), 0)


def test_an_output_that_escaping_makes_too_large_is_cut_to_the_budget_with_a_marker_and_is_an_error():
    text = "<" * (3 * 1024 * 1024)  # 3 MiB of text, 18 MiB as JSON (each < is written \u003c)
    block, dropped = fit_tool_result("t1", text, False)
    kept = tool_result_text(block)
    assert block["is_error"] is True
    assert kept.startswith("<" * TOOL_OUTPUT_KEEP_BYTES + "\n[fiskj: tool output truncated")
    assert dropped == len(text) - TOOL_OUTPUT_KEEP_BYTES
    assert kept.endswith(f"{dropped} of {len(text)} bytes dropped, the first {TOOL_OUTPUT_KEEP_BYTES} kept; the whole "
                         f"output would have made a tool_result record larger than the record limit of "
                         f"{MAX_RECORD_BYTES} bytes]")
    assert record_size("t1", block) < MAX_RECORD_BYTES


@pytest.mark.parametrize("char", ["é", "€", "😀", "\ud800"])
def test_the_cut_falls_on_a_character_boundary(char):
    width = len(char.encode("utf-8", "surrogatepass"))
    text = "a" + char * (MAX_RECORD_BYTES // width)  # over the limit; the budget ends inside a character
    block, dropped = fit_tool_result("t1", text, False)
    kept = tool_result_text(block).split("\n[fiskj:")[0]
    assert kept == "a" + char * ((TOOL_OUTPUT_KEEP_BYTES - 1) // width)
    assert dropped == len(text.encode("utf-8", "surrogatepass")) - len(kept.encode("utf-8", "surrogatepass"))
