import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dataclasses

from fiskj.codec import MAX_RECORD_BYTES, decode_record, encode_record, with_seq
from fiskj.errors import CorruptJournal, InvalidRecord, RecordTooLarge, UnsupportedVersion
from fiskj.records import AssistantRecord, MetaRecord, TerminalRecord, ToolResultRecord, UserRecord

from builders import FP, A, M, R, T, U, numbered

# --- strategies -------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=12,
)
blocks = st.dictionaries(st.text(max_size=10), json_values, max_size=4).map(lambda d: {"type": "opaque", **d})
texts = st.text()  # arbitrary strings, including \n, \r, U+2028, NUL, lone surrogates


@st.composite
def records(draw):
    kind = draw(st.sampled_from(["meta", "assistant", "user", "tool_result", "terminal"]))
    seq = draw(st.integers(1, 2**40))
    extra = draw(st.dictionaries(st.sampled_from(["x_future", "y_future"]), json_values, max_size=2))
    if kind == "meta":
        return MetaRecord(version=draw(st.sampled_from([1, 2])), run_id=draw(texts), created=draw(texts),
                          fingerprint=FP, prompt=draw(st.none() | texts), interactive=draw(st.none() | st.booleans()),
                          extra=extra, seq=seq)
    if kind == "assistant":
        content = draw(st.lists(blocks | texts.map(lambda t: {"type": "text", "text": t}), max_size=4))
        return AssistantRecord(iteration=draw(st.integers(0, 1000)), message={"role": "assistant", "content": content},
                               in_tokens=draw(st.integers(0, 10**9)), out_tokens=draw(st.integers(0, 10**9)),
                               stop_reason=draw(st.none() | texts), cache_read_tokens=draw(st.none() | st.integers(0, 99)),
                               cache_create_tokens=draw(st.none() | st.integers(0, 99)), extra=extra, seq=seq)
    if kind == "user":
        return UserRecord(message={"role": "user", "content": draw(st.lists(blocks, max_size=3))}, extra=extra, seq=seq)
    if kind == "tool_result":
        tid = draw(texts)
        content = draw(texts | st.lists(blocks, max_size=3))
        return ToolResultRecord(tool_use_id=tid, result={"type": "tool_result", "tool_use_id": tid, "content": content,
                                                         "is_error": draw(st.booleans())},
                                remote=draw(st.none() | st.booleans()), extra=extra, seq=seq)
    return TerminalRecord(reason=draw(st.sampled_from(["completed", "suspended", "error"])),
                          message=draw(st.none() | texts), extra=extra, seq=seq)


#: Optional payload fields: Go's ``omitempty`` leaves them out at their zero value (docs/spec.md section 3).
OPTIONAL = {MetaRecord: ("prompt", "interactive"), AssistantRecord: ("stop_reason", "cache_read_tokens",
                                                                     "cache_create_tokens"),
            ToolResultRecord: ("remote",), TerminalRecord: ("message",), UserRecord: ()}


def zero_as_absent(record):
    """``record`` with every optional field at its zero value (False, 0, "") made absent (None), as it reads back."""
    return dataclasses.replace(record, **{f: None for f in OPTIONAL[type(record)]
                                          if getattr(record, f) is not None and not getattr(record, f)})


@given(records())
def test_decode_of_encode_is_the_same_record(record):
    line = encode_record(record)
    assert decode_record(line) == zero_as_absent(record)
    assert encode_record(decode_record(line)) == line  # and the bytes are stable


@pytest.mark.parametrize("record, absent", [
    (numbered(M(prompt="", interactive=False))[0], (b'"prompt"', b'"interactive"')),
    (dataclasses.replace(numbered(A("a", cache_read_tokens=0, cache_create_tokens=0))[0], stop_reason=""),
     (b'"cache_read_tokens"', b'"cache_create_tokens"', b'"stop_reason"')),
    (numbered(R("a", remote=False))[0], (b'"remote"',)),
    (numbered(T("error", message=""))[0], (b'"message"',)),
])
def test_an_optional_field_at_its_zero_value_is_left_out_as_go_omitempty_does(record, absent):
    line = encode_record(record)
    for key in absent:
        assert key not in line
    assert decode_record(line) == zero_as_absent(record)
    # A required field at its zero value is written: iteration 0, is_error false, in_tokens 0.
    zero = encode_record(numbered(A("a", in_tokens=0))[0])
    assert b'"iteration":0' in zero and b'"in_tokens":0' in zero


def test_go_html_escapes_are_written_and_only_inside_strings():
    (rec,) = numbered(R("a<&>", content="if a < b && c > d { \u2028 }\u2029"), start=3)
    line = encode_record(rec)
    assert line == (b'{"seq":3,"protocol":"io.choria.fisk-ai.v1.session.tool_result","tool_result":'
                    b'{"tool_use_id":"a\\u003c\\u0026\\u003e","result":{"type":"tool_result","tool_use_id":'
                    b'"a\\u003c\\u0026\\u003e","content":"if a \\u003c b \\u0026\\u0026 c \\u003e d { '
                    b'\\u2028 }\\u2029","is_error":false}}}\n')
    assert decode_record(line) == rec


def test_a_lone_surrogate_is_escaped_alone_and_other_text_stays_utf8():
    (rec,) = numbered(R("a", content="\ud800 é \U0001f600 <"), start=3)
    line = encode_record(rec)
    assert b'"content":"\\ud800 \xc3\xa9 \xf0\x9f\x98\x80 \\u003c"' in line
    assert decode_record(line) == rec


@given(records())
def test_every_encoded_record_is_exactly_one_physical_line(record):
    line = encode_record(record)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert b"\r" not in line and b"\x00" not in line


@given(texts)
def test_tool_result_content_round_trips_byte_for_byte_for_any_string(content):
    # Field case F04: raw newlines, CR, NUL and friends stay inside one line.
    (rec,) = numbered(R("a", content=content), start=2)
    line = encode_record(rec)
    assert line.count(b"\n") == 1
    again = decode_record(line)
    assert again.result["content"] == content
    assert encode_record(again) == line


def test_field_case_f04_newlines_in_content_stay_in_one_line():
    (rec,) = numbered(R("a", content="l1\nl2\r\nl3\rl4\u0000end"), start=3)
    line = encode_record(rec)
    assert line.count(b"\n") == 1
    assert decode_record(line).result["content"] == "l1\nl2\r\nl3\rl4\u0000end"


def test_unicode_line_separators_are_written_as_go_writes_them_and_read_back():
    # Field case F05.  Go escapes U+2028 and U+2029 (JavaScript line terminators) and writes
    # U+0085 raw; the other controls are JSON escapes, \f as its short form (Go 1.22+ too).
    content = "a\u2028b\u2029c\u0085d\x0be\x0cf\x1cg\x1dh\x1ei\x7fj"
    (rec,) = numbered(R("a", content=content), start=3)
    line = encode_record(rec)
    assert "\u2028".encode() not in line and "\u2029".encode() not in line
    assert b'"content":"a\\u2028b\\u2029c\xc2\x85d\\u000be\\ff\\u001cg\\u001dh\\u001ei\x7fj"' in line
    assert decode_record(line).result["content"] == content


def test_unknown_block_types_and_fields_survive_a_round_trip():
    raw = {"seq": 2, "protocol": "io.choria.fisk-ai.v1.session.assistant", "assistant": {
        "iteration": 0, "message": {"content": [
            {"type": "thinking", "thinking": "hm", "signature": "sig=="},
            {"type": "server_tool_use", "id": "srv1", "name": "web_search", "input": {"q": "x"}},
            {"type": "brand_new_block", "weird": [1, {"a": None}]}], "role": "assistant", "zz": 1},
        "stop_reason": "pause_turn", "in_tokens": 1, "out_tokens": 2, "unknown_payload_field": True}}
    rec = decode_record(json.dumps(raw).encode())
    assert json.loads(encode_record(rec)) == raw


def test_go_style_escapes_decode_to_the_same_text():
    line = (b'{"seq":3,"protocol":"io.choria.fisk-ai.v1.session.terminal","terminal":'
            b'{"reason":"error","message":"\\u003cbad\\u003e \\u0026 \\u2028"}}')
    assert decode_record(line).message == "<bad> & \u2028"
    # The unescaped form (what fiskj wrote before it wrote Go's bytes) reads as the same record,
    # and both re-encode to Go's form.
    raw = line.replace(b"\\u003c", b"<").replace(b"\\u003e", b">").replace(b"\\u0026", b"&") \
        .replace(b"\\u2028", "\u2028".encode())
    assert raw != line and decode_record(raw) == decode_record(line)
    assert encode_record(decode_record(raw)) == encode_record(decode_record(line)) == line + b"\n"


@pytest.mark.parametrize("line, field", [
    (b'{"seq":"1","protocol":"io.choria.fisk-ai.v1.session.terminal","terminal":{"reason":"x"}}', "seq"),
    (b'{"seq":0,"protocol":"io.choria.fisk-ai.v1.session.terminal","terminal":{"reason":"x"}}', "seq"),
    (b'{"seq":-3,"protocol":"io.choria.fisk-ai.v1.session.terminal","terminal":{"reason":"x"}}', "seq"),
    (b'{"seq":1.0,"protocol":"io.choria.fisk-ai.v1.session.terminal","terminal":{"reason":"x"}}', "seq"),
    (b'{"seq":true,"protocol":"io.choria.fisk-ai.v1.session.terminal","terminal":{"reason":"x"}}', "seq"),
    (b'{"seq":2,"protocol":"io.choria.fisk-ai.v1.session.nope","nope":{}}', "protocol"),
    (b'{"seq":2,"protocol":"io.choria.fisk-ai.v1.session.terminal"}', "terminal"),
    (b'{"seq":2,"protocol":"io.choria.fisk-ai.v1.session.terminal","user":{}}', "terminal"),
    (b'{"seq":2,"protocol":"io.choria.fisk-ai.v1.session.terminal","terminal":{"reason":"x"},"user":{}}', "terminal"),
    (b'{"seq":2,"protocol":"io.choria.fisk-ai.v1.session.terminal","terminal":[]}', "terminal"),
    (b'{"seq":2,"protocol":"io.choria.fisk-ai.v1.session.assistant","assistant":{"iteration":0,'
     b'"message":{"role":"assistant","content":[]},"in_tokens":"1","out_tokens":1}}', "assistant.in_tokens"),
    (b'{"seq":2,"protocol":"io.choria.fisk-ai.v1.session.assistant","assistant":{"iteration":0,'
     b'"message":{"role":"user","content":[]},"in_tokens":1,"out_tokens":1}}', "assistant.message.role"),
    (b'{"seq":2,"protocol":"io.choria.fisk-ai.v1.session.tool_result","tool_result":{"tool_use_id":"a",'
     b'"result":{"type":"tool_result","tool_use_id":"b","content":""}}}', "tool_result.result.tool_use_id"),
    (b'{"seq":1,"protocol":"io.choria.fisk-ai.v1.session.meta","meta":{"version":"2","run_id":"r",'
     b'"created":"c","fingerprint":{}}}', "meta.version"),
])
def test_wrong_types_are_refused_naming_the_field(line, field):
    with pytest.raises(CorruptJournal) as info:
        decode_record(line)
    assert info.value.field == field
    assert field in str(info.value)


def test_a_newer_version_is_refused_naming_both_numbers():
    line = encode_record(numbered(M(version=2))[0]).replace(b'"version":2', b'"version":3')
    with pytest.raises(UnsupportedVersion) as info:
        decode_record(line)
    assert "3" in info.value.message and "2" in info.value.message


@pytest.mark.parametrize("line", [b"", b"\n", b"[1]\n", b"\xff\xfe{}\n", b"\xef\xbb\xbf{}\n", b"{\"seq\": NaN}\n",
                                  b"[" * 100_000 + b"]" * 100_000 + b"\n", b"\x00" * 10 + b"\n"])
def test_unparsable_lines_are_corrupt_journal_errors(line):
    with pytest.raises(CorruptJournal):
        decode_record(line)


def test_a_record_over_the_limit_is_refused_before_any_byte_is_written():
    (rec,) = numbered(R("a", content="x" * MAX_RECORD_BYTES), start=3)
    with pytest.raises(RecordTooLarge) as info:
        encode_record(rec)
    assert "limit" in str(info.value)


def test_a_5_mb_record_round_trips():
    (rec,) = numbered(R("a", content="y" * 5_000_000), start=3)
    assert decode_record(encode_record(rec)) == rec


def test_a_value_that_is_not_json_is_an_invalid_record():
    (rec,) = numbered(R("a", content={1, 2}), start=3)
    with pytest.raises(InvalidRecord):
        encode_record(rec)


def test_builders_make_valid_records():
    for rec in numbered(M(), A("a"), R("a"), U(), T()):
        assert decode_record(encode_record(rec)) == rec


@given(records(), st.integers(1, 2**40))
def test_with_seq_and_encode_with_a_seq_agree_with_dataclasses_replace(record, seq):
    replaced = dataclasses.replace(record, seq=seq)
    got = with_seq(record, seq)
    assert got == replaced and type(got) is type(replaced)
    assert encode_record(record, seq) == encode_record(replaced)
