"""Fuzzing the reader and the fold over mutated journals (issue 9 item 2).

Every example is a valid journal (generated, or one of the golden files)
damaged by a few mutations: byte flips, byte overwrites, inserted bytes,
deleted ranges, cuts, splices of two journals, line drops/duplicates/swaps,
and edits of one line's JSON tree.  The only outcomes allowed are:

* a typed fiskj error (a :class:`FiskjError` subclass) of exactly the class,
  line and byte offset that the reference model below predicts, which
  survives pickling, or
* a fold equal to the model's, whose ``to_json()`` is strict JSON, whose
  ``final_answer()`` works, and each of whose records re-encodes to the same
  JSON object as its line on disk (a decode followed by an encode keeps
  every field).

Any other exception fails the test, and hypothesis shrinks the journal.

The reference model reads the whole journal into memory and splits it on
``\\n`` (docs/spec.md "Reading"); the reader streams in bounded memory.  The
two must agree on every input.

Budget: ``FISKJ_FUZZ_EXAMPLES`` examples in total over the fuzz tests
(default 300, deterministic, about a second).  ``make fuzz`` sets a large
budget with random generation for a long run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import pickle
import re
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, given, note, settings
from hypothesis.control import currently_in_test_context
from hypothesis import strategies as st

import fiskj.codec
import fiskj.reader
from fiskj.codec import decode_record, encode_record
from fiskj.errors import CorruptJournal, FiskjError, JournalError, RecordTooLarge, UnsupportedVersion
from fiskj.fold import Folder
from fiskj.reader import TornTail, read_state
from fiskj.records import AssistantRecord, MetaRecord, TerminalRecord, ToolResultRecord, UserRecord

from builders import FP, numbered

DATA = Path(__file__).parent / "data"
GOLDEN = [p.read_bytes() for p in sorted(DATA.glob("*.json")) + sorted((DATA / "fisk-ai").glob("*.json"))]

# --- budget ---------------------------------------------------------------------------------

_ENV = os.environ.get("FISKJ_FUZZ_EXAMPLES")
TOTAL = int(_ENV) if _ENV else 300
FUZZ_TESTS = 3
fuzz_settings = settings(
    max_examples=max(1, TOTAL // FUZZ_TESTS),
    deadline=None,
    derandomize=_ENV is None,  # CI: the same examples every run; long mode: random
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

# --- valid journals -------------------------------------------------------------------------

# Text with the characters that break naive readers: newlines, CR, NUL, U+2028/9, U+0085,
# multi-byte UTF-8, astral characters.
texts = st.text(alphabet=st.sampled_from(list("ab z{}\"\\\n\r\x00\u2028\u2029\u0085\u00e9\u20ac\U0001f600<&")),
                max_size=12)


@st.composite
def valid_journals(draw) -> bytes:
    """A journal fiskj could have written: turns of 0-3 tools, suspends, follow-ups, a pending tail."""
    version = draw(st.sampled_from([1, 2]))
    interactive = version == 2 and draw(st.booleans())
    records: list = [MetaRecord(version=version, run_id=f"fz-{draw(st.integers(0, 9))}",
                                created="2026-05-30T10:11:12.123456789+03:00", fingerprint=FP,
                                prompt=draw(st.none() | texts), interactive=interactive or None)]
    turns = draw(st.integers(0, 4))
    for it in range(turns):
        ids = [f"toolu_{it}{j}" for j in range(draw(st.integers(0, 3)))]
        content: list[dict] = []
        if draw(st.booleans()):
            content.append({"type": "thinking", "thinking": draw(texts), "signature": "c2ln"})
        if draw(st.booleans()) or not ids:
            content.append({"type": "text", "text": draw(texts)})
        for i in ids:
            content.append({"type": "tool_use", "id": i, "name": "t",
                            "input": {"n": draw(st.integers(-5, 10**6)), "f": 0.5, "s": draw(texts)}})
        records.append(AssistantRecord(
            iteration=it, message={"role": "assistant", "content": content},
            stop_reason="tool_use" if ids else "end_turn", in_tokens=draw(st.integers(0, 5000)),
            out_tokens=draw(st.integers(0, 500)),
            cache_read_tokens=draw(st.none() | st.integers(0, 99)),
            cache_create_tokens=draw(st.none() | st.integers(0, 99))))
        last = it == turns - 1
        answered = draw(st.permutations(ids))
        if last and ids and draw(st.booleans()):  # killed mid-batch: a pending turn
            answered = answered[: draw(st.integers(0, len(ids) - 1))]
        for tid in answered:
            body = draw(texts | st.just([{"type": "text", "text": "r"}]))
            records.append(ToolResultRecord(tool_use_id=tid, result={
                "type": "tool_result", "tool_use_id": tid, "content": body, "is_error": draw(st.booleans())},
                remote=draw(st.none() | st.booleans())))
            if draw(st.integers(0, 7)) == 0:  # a leg ends mid-batch (fisk-ai resumes all but completed)
                reason = draw(st.sampled_from(["suspended", "error", "budget", "max_iterations"]))
                records.append(TerminalRecord(reason=reason, message=f"{reason} mid-batch"))
        if not ids and not last:  # a text answer ends the run unless a follow-up continues it
            if version == 1:
                break
            records.append(UserRecord(message={"role": "user", "content": [{"type": "text", "text": draw(texts)}]}))
    if draw(st.booleans()):
        records.append(TerminalRecord(reason=draw(st.sampled_from(["completed", "suspended", "error", "budget"])),
                                      message=draw(st.none() | texts)))
    return b"".join(encode_record(r) for r in numbered(*records))


journals = valid_journals() | st.sampled_from(GOLDEN)

# --- mutations ------------------------------------------------------------------------------

INTERESTING = [b"\n", b"\r\n", b"\x00", b'"', b"\\", b"{", b"}", b"[", b",", b":", b"\xff", b"\xc3", b"\xe2\x80\xa8",
               b"\xef\xbb\xbf", b"e400", b"NaN", b"null", b"-1", b"0", b"1.5", b'"x"', b'{"seq":',
               b"\\ud800", b"\\u0000", b" "]
NUMBERS = [b"1e400", b"-1e400", b"1e-400", b"1.0", b"2.5", b"-0", b"-1", b"0", b"1E2", b"99999999999999999999999",
           b"9" * 5000, b"NaN", b"Infinity", b'"7"', b"true", b"null"]
_NUMBER = re.compile(rb"(?<=[:\[,])-?[0-9][0-9.eE+-]*")
chunks = st.sampled_from(INTERESTING) | st.binary(min_size=1, max_size=6)


@st.composite
def byte_mutated(draw) -> bytes:
    """A journal damaged by 1-4 byte-level mutations (flip, set, insert, delete, cut, splice)."""
    data = draw(journals)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "cut", "splice", "repeat", "number"]))
        n = len(data)
        pos = draw(st.integers(0, n))
        numbers = list(_NUMBER.finditer(data))
        if op == "number" and numbers:  # a damaged number: out of range, retyped, float for int
            m = numbers[draw(st.integers(0, len(numbers) - 1))]
            data = data[:m.start()] + draw(st.sampled_from(NUMBERS)) + data[m.end():]
        elif op == "flip" and n:
            pos = min(pos, n - 1)
            data = data[:pos] + bytes([data[pos] ^ draw(st.integers(1, 255))]) + data[pos + 1:]
        elif op == "set" and n:
            pos = min(pos, n - 1)
            data = data[:pos] + draw(st.sampled_from(INTERESTING))[:1] + data[pos + 1:]
        elif op == "insert":
            data = data[:pos] + draw(chunks) + data[pos:]
        elif op == "delete":
            data = data[:pos] + data[pos + draw(st.integers(1, 40)):]
        elif op == "cut":
            data = data[:pos]
        elif op == "splice":
            other = draw(journals)
            data = data[:pos] + other[draw(st.integers(0, len(other))):]
        elif op == "repeat":
            end = draw(st.integers(pos, n))
            data = data[:end] + data[pos:end] + data[end:]
    return data


def _split_lines(data: bytes) -> list[bytes]:
    parts = data.split(b"\n")
    out = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


json_leaves = (st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats(allow_nan=False, allow_infinity=False)
               | texts)
json_values = st.recursive(json_leaves, lambda kids: st.lists(kids, max_size=3)
                           | st.dictionaries(st.sampled_from(["type", "id", "text", "content", "role", "x"]), kids,
                                             max_size=3), max_leaves=6)


#: Keys the random walk prefers, so that edits reach messages, blocks and results.
_DEEP_KEYS = frozenset(["meta", "assistant", "user", "tool_result", "terminal", "message", "content", "result",
                        "fingerprint", "input"])


def _edit_json(draw, value):
    """Return ``value`` with one node replaced, deleted, retyped or added (a random walk picks it)."""
    if isinstance(value, (dict, list)) and value and draw(st.integers(0, 5)) > 0:
        if isinstance(value, dict):
            keys = sorted(value)
            key = draw(st.sampled_from(keys + [k for k in keys if k in _DEEP_KEYS] * 3))
            action = draw(st.sampled_from(["descend", "descend", "delete", "add"]))
            out = dict(value)
            if action == "delete":
                del out[key]
            elif action == "add":
                out[draw(st.sampled_from(["seq", "meta", "user", "extra", "id", "type", key]))] = draw(json_values)
            else:
                out[key] = _edit_json(draw, value[key])
            return out
        i = draw(st.integers(0, len(value) - 1))
        out_list = list(value)
        if draw(st.integers(0, 4)) == 0:
            del out_list[i]
        else:
            out_list[i] = _edit_json(draw, value[i])
        return out_list
    if isinstance(value, bool):
        return draw(st.sampled_from([not value, None, 0, "true"]))
    if isinstance(value, int):
        return draw(st.sampled_from([value + 1, value - 1, -value, 0, float(value), str(value), None, 2**70]))
    if isinstance(value, str):
        return draw(st.sampled_from(["", value + "x", None, 7, "completed", "toolu_00", "tool_use", "assistant"]))
    return draw(json_values)


@st.composite
def structure_mutated(draw) -> bytes:
    """A journal with lines dropped, duplicated, swapped or moved, and JSON trees edited."""
    lines = _split_lines(draw(journals))
    for _ in range(draw(st.integers(1, 3))):
        if not lines:
            break
        op = draw(st.sampled_from(["drop", "duplicate", "swap", "move", "edit", "edit", "edit"]))
        i = draw(st.integers(0, len(lines) - 1))
        j = draw(st.integers(0, len(lines) - 1))
        if op == "drop":
            del lines[i]
        elif op == "duplicate":
            lines.insert(j, lines[i])
        elif op == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "move":
            lines.insert(j, lines.pop(i))
        else:
            line = lines[i]
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            edited = json.dumps(_edit_json(draw, obj), ensure_ascii=draw(st.booleans()), separators=(",", ":"))
            lines[i] = edited.encode("utf-8", "surrogatepass") + (b"\n" if line.endswith(b"\n") else b"")
    for k, line in enumerate(lines[:-1]):  # only the last line may lack its newline
        if not line.endswith(b"\n"):
            lines[k] = line + b"\n"
    return b"".join(lines)


# --- the reference model --------------------------------------------------------------------


class Expected(Exception):
    """The model's prediction of an error: class, 1-based line, byte offset."""

    def __init__(self, cls: type, line: int, offset: int) -> None:
        super().__init__(cls, line, offset)
        self.cls, self.line, self.offset = cls, line, offset


def _is_json_object(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line.decode("utf-8"), parse_constant=_no_constant), dict)
    except (ValueError, RecursionError):
        return False


def _no_constant(name: str):
    raise ValueError(name)


def model_read_state(data: bytes, limit: int):
    """Predict ``read_state(data)``: ``(state, decoded (line, record) pairs)`` or raise :class:`Expected`."""
    folder = Folder()
    pos = line_no = 0
    torn = None
    decoded = []
    while pos < len(data):
        nl = data.find(b"\n", pos)
        end = len(data) if nl < 0 else nl + 1
        line = data[pos:end]
        line_no += 1
        last = end == len(data)
        if nl < 0:
            torn = TornTail(pos, len(line))
            break
        if len(line) > limit:
            if last:
                torn = TornTail(pos, len(line))
                break
            raise Expected(RecordTooLarge, line_no, pos)
        try:
            record = decode_record(line)
        except UnsupportedVersion:
            raise Expected(UnsupportedVersion, line_no, pos) from None
        except JournalError as exc:
            if last and not _is_json_object(line):
                torn = TornTail(pos, len(line))
                break
            raise Expected(type(exc), line_no, pos) from None
        try:
            folder.add(record)
        except JournalError as exc:
            raise Expected(type(exc), exc.line, pos) from None
        decoded.append((line, record))
        pos = end
    if not decoded:
        raise Expected(CorruptJournal, 1, 0)
    return folder.state(torn_tail=torn, good_size=pos), decoded


def check(data: bytes, *, limit: int | None = None, source: str = "bytes") -> None:
    """Run the reader+fold on ``data`` and hold it to the model (see the module docstring)."""
    limit = fiskj.codec.MAX_RECORD_BYTES if limit is None else limit
    if currently_in_test_context():
        note(f"journal: {data!r}")
    try:
        expected, decoded = model_read_state(data, limit)
    except Expected as exp:
        expected, decoded = exp, []
    try:
        state = read_state(data if source == "bytes" else io.BytesIO(data))
    except FiskjError as exc:
        assert isinstance(expected, Expected), f"read_state raised {exc!r}, the model folded: {expected}"
        assert (type(exc), exc.line, exc.offset) == (expected.cls, expected.line, expected.offset), exc
        assert exc.message and str(exc)
        again = pickle.loads(pickle.dumps(exc))  # errors cross process boundaries in the harness
        assert (type(again), again.line, again.offset, again.field, str(again)) == \
            (type(exc), exc.line, exc.offset, exc.field, str(exc))
        return
    assert not isinstance(expected, Expected), \
        f"read_state folded, the model expected {expected.cls.__name__} at line {expected.line}"
    assert state == expected
    assert state.torn_tail is None or state.torn_tail.offset + state.torn_tail.length == len(data)
    assert state.good_size == (len(data) if state.torn_tail is None else state.torn_tail.offset)
    json.dumps(state.to_json(), allow_nan=False)
    answer = state.final_answer()
    assert answer is None or isinstance(answer, str)
    for line, record in decoded:  # decode then encode keeps every field
        assert json.loads(encode_record(record)) == json.loads(line)


# --- the fuzz tests -------------------------------------------------------------------------


@fuzz_settings
@given(byte_mutated(), st.sampled_from(["bytes", "file object without peek"]))
def test_a_byte_mutated_journal_folds_correctly_or_raises_a_typed_error(data, source):
    check(data, source=source)


@fuzz_settings
@given(structure_mutated())
def test_a_journal_with_lines_moved_or_json_edited_folds_correctly_or_raises_a_typed_error(data):
    check(data)


@fuzz_settings
@given(byte_mutated() | structure_mutated(), st.integers(40, 1500), st.integers(1, 64), st.integers(1, 4),
       st.integers(1, 3000))
def test_oversized_lines_are_handled_alike_at_any_record_limit_and_chunk_size(data, limit, chunk, lines, size):
    # A small limit, chunk size and read-ahead batch exercise the reader's skip-in-chunks path and
    # its batch boundaries on small inputs.
    with contextlib.ExitStack() as stack:
        for module, name, value in [(fiskj.reader, "MAX_RECORD_BYTES", limit), (fiskj.codec, "MAX_RECORD_BYTES", limit),
                                    (fiskj.reader, "_CHUNK", chunk), (fiskj.reader, "_BATCH_LINES", lines),
                                    (fiskj.reader, "_BATCH_BYTES", size)]:
            if hasattr(module, name):  # the read-ahead batch is optional in the reader
                stack.enter_context(mock.patch.object(module, name, value))
        check(data, limit=limit)


# --- the generators themselves --------------------------------------------------------------


@settings(max_examples=30, deadline=None, derandomize=True)
@given(valid_journals())
def test_the_generated_base_journals_are_valid(data):
    state = read_state(data)
    assert state.torn_tail is None and state.records == len(_split_lines(data))


def test_the_model_and_the_check_reject_a_reader_that_drops_a_complete_final_record():
    # The oracle must be able to fail: a reader that loses the last record is caught.
    data = b"".join(encode_record(r) for r in numbered(
        MetaRecord(version=2, run_id="x", created="c", fingerprint=FP),
        TerminalRecord(reason="completed")))
    state, _ = model_read_state(data, fiskj.codec.MAX_RECORD_BYTES)
    lossy = dataclasses.replace(read_state(data[: data.index(b"\n") + 1]), good_size=len(data))
    assert lossy != state
    with mock.patch.object(fiskj.reader, "Folder") as broken:
        broken.return_value.state.return_value = lossy
        try:
            check(data)
        except AssertionError:
            pass
        else:
            raise AssertionError("check() accepted a reader that dropped the final record")


# --- regressions the fuzz found -------------------------------------------------------------


def test_regression_a_final_line_holding_nan_is_a_torn_tail_not_corruption():
    # The reader's "is the last line JSON at all?" check accepted NaN (Python's lenient parse).
    ok = b"".join(encode_record(r) for r in numbered(MetaRecord(version=2, run_id="x", created="c", fingerprint=FP)))
    state = read_state(ok + b'{"seq":NaN,"protocol":"io.choria.fisk-ai.v1.session.terminal"}\n')
    assert state.records == 1 and state.torn_tail.offset == len(ok)
    check(ok + b'{"seq":2,"x":Infinity}\n')


def test_regression_final_answer_skips_a_text_block_whose_text_is_not_a_string():
    records = numbered(MetaRecord(version=2, run_id="x", created="c", fingerprint=FP),
                       AssistantRecord(iteration=0, message={"role": "assistant", "content": [
                           {"type": "text", "text": None}, {"type": "text", "text": "ok"}, {"type": "text"}]},
                           in_tokens=1, out_tokens=1))
    data = b"".join(encode_record(r) for r in records)
    assert read_state(data).final_answer() == "ok"
    check(data)
