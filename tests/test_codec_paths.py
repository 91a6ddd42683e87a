"""The codec's fast paths give the answers of its checked paths (fiskj/codec.py; docs/spec.md sections 3, 4 and 7).

Two properties, over lines of every payload kind (meta, assistant, user, tool_result,
terminal) with odd content (thinking with a signature, redacted_thinking,
server_tool_use, unknown blocks, non-ASCII text, U+2028/U+2029/U+0085, lone-surrogate
escapes), written compact, spaced, ASCII-escaped or Go-escaped, and then damaged
(a field dropped, nulled, retyped or added; the envelope broken; the text cut, padded
or holding ``NaN``):

* fast path == checked path: :func:`decode_record` (one C-scanner call and a one-check-
  per-field fast path per payload) and ``codec._decode_record_checked`` (the full JSON
  decoder, every field checked one by one) give equal records or equal errors (type,
  message, field);
* batch parse == line by line: ``codec._parse_lines`` (one scanner call for many lines,
  as the reader batches them) either declines (``None``) or yields, for each line,
  the value whose record or error equals :func:`decode_record`'s of that line alone; and
  it does not decline a batch of lines as encode_record writes them.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fiskj import codec
from fiskj.codec import decode_record, encode_record
from fiskj.errors import FiskjError
from fiskj.records import AssistantRecord, MetaRecord, TerminalRecord, ToolResultRecord, UserRecord

from budget import examples
from builders import FP

# The single-field edits below are exhaustive in every suite; the drawn lines are 100 in the default suite and
# 400 under --long (tests/budget.py).
path_settings = settings(max_examples=examples(100, 400), deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- values ---------------------------------------------------------------------------------

#: Characters that break naive readers and writers: separators, controls, quotes, escapes, astral.
ODD = list("aZ09 {}[],:\"\\/\n\r\t\x00\x1f\x7f<>&\u0085\u00e9\u2028\u2029\ufeff\U0001f600") + ["\ud800", "\udfff"]
texts = st.text(alphabet=st.sampled_from(ODD), max_size=10)
scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False, allow_infinity=False) | texts
json_values = st.recursive(scalars, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(texts, kids, max_size=3),
                           max_leaves=8)
ids = st.sampled_from(["toolu_01", "srvtoolu_9", "x", "", "\u2028id"])


@st.composite
def blocks(draw) -> dict[str, Any]:
    kind = draw(st.sampled_from(["text", "tool_use", "thinking", "redacted_thinking", "server_tool_use",
                                 "web_search_tool_result", "image", "brand_new", "none"]))
    if kind == "text":
        return {"type": "text", "text": draw(texts)}
    if kind == "tool_use":
        return {"type": "tool_use", "id": draw(ids), "name": "t", "input": draw(json_values)}
    if kind == "thinking":
        return {"type": "thinking", "thinking": draw(texts), "signature": draw(st.sampled_from(["c2ln", "", "EqQBCkYIA=="]))}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": draw(texts)}
    if kind == "server_tool_use":
        return {"type": "server_tool_use", "id": draw(ids), "name": "web_search", "input": {"query": draw(texts)}}
    if kind == "web_search_tool_result":
        return {"type": "web_search_tool_result", "tool_use_id": draw(ids),
                "content": [{"type": "web_search_result", "url": "https://e.x/", "title": draw(texts)}]}
    if kind == "image":
        return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    if kind == "brand_new":
        return {"type": "brand_new", **draw(st.dictionaries(texts, json_values, max_size=2))}
    return draw(st.dictionaries(texts, json_values, max_size=2))  # no type at all


contents = st.lists(blocks(), max_size=4) | texts
maybe_int = st.none() | st.integers(0, 10**6)


@st.composite
def records(draw):
    kind = draw(st.sampled_from(["meta", "assistant", "user", "tool_result", "terminal"]))
    seq = draw(st.integers(1, 2**40))
    extra = draw(st.dictionaries(st.sampled_from(["x_future", "zz"]), json_values, max_size=1))
    if kind == "meta":
        return MetaRecord(version=draw(st.sampled_from([1, 2])), run_id=draw(texts), created=draw(texts),
                          fingerprint=FP, prompt=draw(st.none() | texts), interactive=draw(st.none() | st.booleans()),
                          extra=extra, seq=seq)
    if kind == "assistant":
        return AssistantRecord(iteration=draw(st.integers(0, 99)), message={"role": "assistant", "content": draw(contents)},
                               in_tokens=draw(st.integers(0, 10**9)), out_tokens=draw(st.integers(0, 10**9)),
                               stop_reason=draw(st.none() | st.sampled_from(["end_turn", "tool_use", "pause_turn"]) | texts),
                               cache_read_tokens=draw(maybe_int), cache_create_tokens=draw(maybe_int), extra=extra, seq=seq)
    if kind == "user":
        return UserRecord(message={"role": "user", "content": draw(contents)}, extra=extra, seq=seq)
    if kind == "tool_result":
        tid = draw(ids | texts)
        return ToolResultRecord(tool_use_id=tid, result={"type": "tool_result", "tool_use_id": tid,
                                                         "content": draw(contents), "is_error": draw(st.booleans())},
                                remote=draw(st.none() | st.booleans()), extra=extra, seq=seq)
    return TerminalRecord(reason=draw(st.sampled_from(["completed", "suspended", "error", "budget", "max_iterations"])),
                          message=draw(st.none() | texts), extra=extra, seq=seq)


# --- damage ------------------------------------------------------------------------------------

#: Values a field may be replaced with: wrong types, null, bounds; the "__...__" strings become bare
#: ``NaN``, ``Infinity``, ``1e400`` and ``-0`` in the line's text.
ODD_VALUES = [None, -1, 0, 1, 3, 1.0, True, False, 2**70, "", "x", "1", "user", "assistant", "tool_result",
              "toolu_01", [], {}, "__NaN__", "__Infinity__", "__1e400__", "__-0__"]
odd_values = st.sampled_from(ODD_VALUES)
BARE = {'"__NaN__"': "NaN", '"__Infinity__"': "Infinity", '"__1e400__"': "1e400", '"__-0__"': "-0"}

#: The fields each payload's decoders check (paths inside the payload).
FIELDS = {
    "meta": [("version",), ("run_id",), ("created",), ("fingerprint",), ("prompt",), ("interactive",)]
    + [("fingerprint", f) for f in ("model", "system_hash", "tools_hash", "thinking_mode", "max_tokens",
                                    "max_iterations")],
    "assistant": [("iteration",), ("message",), ("message", "role"), ("message", "content"), ("stop_reason",),
                  ("in_tokens",), ("out_tokens",), ("cache_read_tokens",), ("cache_create_tokens",)],
    "user": [("message",), ("message", "role"), ("message", "content")],
    "tool_result": [("tool_use_id",), ("result",), ("result", "type"), ("result", "tool_use_id"), ("remote",)],
    "terminal": [("reason",), ("message",)],
}


@st.composite
def damaged(draw, obj: dict[str, Any], key: str) -> dict[str, Any]:
    """The envelope ``obj`` (payload ``key``) with 1-2 edits: a field dropped, replaced or added."""
    obj = json.loads(json.dumps(obj))
    for _ in range(draw(st.integers(1, 2))):
        where = draw(st.sampled_from(["envelope", "payload", "payload", "payload", "payload"]))
        if where == "envelope":
            parent, name = obj, draw(st.sampled_from(["seq", "protocol", key, "user", "extra"]))
        else:
            path = draw(st.sampled_from(FIELDS[key] + [("x_unknown",)]))
            parent = obj
            for step in (key,) + path[:-1]:
                parent = parent.get(step) if isinstance(parent, dict) else None
            if not isinstance(parent, dict):
                continue
            name = path[-1]
        if draw(st.integers(0, 3)) == 0:
            parent.pop(name, None)
        else:
            parent[name] = copy.deepcopy(draw(odd_values))  # a copy: a shared value set twice makes no cycle
    return obj


def render(obj: Any, ascii_: bool = False, spaced: bool = False) -> bytes:
    """``obj`` as one line of JSON, its "__...__" markers made bare (a lone surrogate as its escape)."""
    text = json.dumps(obj, ensure_ascii=ascii_, separators=(", ", ": ") if spaced else (",", ":"))
    for marker, bare in BARE.items():
        text = text.replace(marker, bare)
    return text.encode("utf-8", "backslashreplace") + b"\n"


def _go_escape(text: str) -> str:
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


@st.composite
def lines(draw) -> bytes:
    """One journal line (ending in one ``\\n``, none inside): a record's line, maybe re-rendered and damaged."""
    record = draw(records())
    line = encode_record(record)
    style = draw(st.sampled_from(["as written", "rendered", "damaged", "damaged", "damaged", "text"]))
    if style == "as written":
        return line
    obj = json.loads(line)
    if style == "damaged":
        obj = draw(damaged(obj, record.key))
    ascii_ = draw(st.booleans()) or style == "rendered"
    text = json.dumps(obj, ensure_ascii=ascii_, separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])))
    for marker, bare in BARE.items():
        text = text.replace(marker, bare)
    if draw(st.booleans()):
        text = _go_escape(text)
    data = text.encode("utf-8", "surrogatepass" if not ascii_ else "strict")
    if style == "text":  # damage the text itself
        cut = draw(st.integers(0, len(data)))
        data = draw(st.sampled_from([
            data[:cut], b" " + data, data + b" \t", data + b"\r", data[:cut] + b"NaN" + data[cut:],
            data + b"{}", b"\xef\xbb\xbf" + data, data[:cut] + b"7310585136524867391" + data[cut:],
            data.replace(b"1", b"1.5", 1), data.replace(b":", b":-", 1)]))
    return data.replace(b"\n", b"") + b"\n"


def outcome(decode, arg) -> tuple:
    """What ``decode(arg)`` answers: ``("record", record)`` or ``("error", type, message, field)``."""
    try:
        return ("record", decode(arg))
    except FiskjError as exc:
        return ("error", type(exc), exc.message, exc.field)


#: Records of every kind with odd content, the bases of the exhaustive single-edit test.
BASES = [
    MetaRecord(version=2, run_id="r\u2028", created="2026-05-30T10:11:12.123456789+03:00", fingerprint=FP,
               prompt="count \u2029 files", interactive=True, seq=1),
    MetaRecord(version=1, run_id="r", created="c", fingerprint=FP, seq=1),
    AssistantRecord(iteration=3, message={"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hm\u0085", "signature": "EqQBCkYIA=="},
        {"type": "redacted_thinking", "data": "\ud800xyz"},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "<&>"}},
        {"type": "text", "text": "\U0001f600 \u2028"}, {"type": "tool_use", "id": "toolu_01", "name": "ls", "input": {}}]},
        in_tokens=5, out_tokens=6, stop_reason="tool_use", cache_read_tokens=7, cache_create_tokens=0, seq=2),
    AssistantRecord(iteration=0, message={"role": "assistant", "content": "plain"}, in_tokens=0, out_tokens=0, seq=2),
    UserRecord(message={"role": "user", "content": [{"type": "text", "text": "more\u2029"}]}, seq=4),
    UserRecord(message={"role": "user", "content": "a string"}, seq=4),
    ToolResultRecord(tool_use_id="toolu_01", result={"type": "tool_result", "tool_use_id": "toolu_01",
                                                     "content": [{"type": "text", "text": "a\nb\udfff"}],
                                                     "is_error": False}, remote=True, seq=3),
    ToolResultRecord(tool_use_id="t", result={"type": "tool_result", "tool_use_id": "t", "content": ""}, seq=3),
    TerminalRecord(reason="completed", message="done \u0085", seq=5),
    TerminalRecord(reason="suspended", seq=5),
]


def single_edits(record) -> list[bytes]:
    """The lines of ``record`` with one field dropped or replaced by each odd value, rendered two ways."""
    key = record.key
    base = json.loads(encode_record(record))
    envelope = [(("seq",), base), (("protocol",), base), ((key,), base), (("user",), base), (("extra",), base)]
    out = []
    for path in [p for p, _ in envelope] + [(key,) + p for p in FIELDS[key]] + [(key, "x_unknown")]:
        for value in ODD_VALUES + ["__drop__"]:
            obj = json.loads(json.dumps(base))
            parent = obj
            for step in path[:-1]:
                parent = parent[step]
            if value == "__drop__":
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = value
            out += [render(obj), render(obj, ascii_=True, spaced=True)]
    return out


# --- the properties -----------------------------------------------------------------------------


@pytest.mark.parametrize("record", BASES, ids=lambda r: r.key)
def test_every_single_field_edit_gets_the_same_record_or_error_from_both_paths(record):
    edits = single_edits(record)
    assert len(edits) > 200
    answers = [outcome(decode_record, line) for line in edits]
    assert answers == [outcome(codec._decode_record_checked, line) for line in edits]
    assert {a[0] for a in answers} == {"record", "error"}  # both kinds of answer are exercised
    batched = 0
    for i in range(0, len(edits), 3):  # batch parse == line by line, for the same edits
        values = codec._parse_lines(edits[i:i + 3])
        if values is not None:
            batched += 1
            assert [outcome(codec._decode_value, v) for v in values] == answers[i:i + 3]
    assert batched > len(edits) // 12  # a quarter of the batches, at least, hold no NaN and friends


@path_settings
@given(lines())
def test_the_fast_path_and_the_checked_path_give_the_same_record_or_error(line):
    assert outcome(decode_record, line) == outcome(codec._decode_record_checked, line)


@settings(path_settings, max_examples=examples(50, 150))
@given(st.lists(lines(), min_size=2, max_size=4))
def test_a_batch_parses_to_the_records_and_errors_of_its_lines_parsed_one_by_one(batch):
    values = codec._parse_lines(batch)
    if values is None:
        return
    assert len(values) == len(batch)
    for value, line in zip(values, batch):
        assert outcome(codec._decode_value, value) == outcome(decode_record, line)


@settings(max_examples=examples(50, 100), deadline=None)
@given(st.lists(records(), min_size=2, max_size=6))
def test_a_batch_of_written_lines_takes_the_batch_path(batch):
    written = [encode_record(r) for r in batch]
    values = codec._parse_lines(written)
    if any(codec._DIGITS in line for line in written):  # the separator's digits in a line: declined
        assert values is None
        return
    assert values is not None
    assert [codec._decode_value(v) for v in values] == [decode_record(line) for line in written]


@settings(max_examples=examples(50, 100), deadline=None)
@given(records())
def test_a_line_as_encode_record_writes_it_takes_the_fast_paths(record):
    # The fast paths are not dead code: with the checked payload decoders broken, a written line
    # (no unknown field) still decodes, alone and in a batch.
    record = dataclasses.replace(record, extra={})
    line = encode_record(record)
    # (Not always == record: a lone high surrogate then a lone low one are written as two escapes,
    # which JSON reads as one astral character.  The checked path says what the line holds.)
    expected = codec._decode_record_checked(line)
    with contextlib.ExitStack() as stack:
        for name in ("_decode_assistant_checked", "_decode_user_checked", "_decode_tool_result_checked"):
            stack.enter_context(mock.patch.object(codec, name, side_effect=AssertionError(f"{name} was called")))
        assert decode_record(line) == expected
        assert [codec._decode_value(v) for v in codec._parse_lines([line, line])] == [expected, expected]
