"""Encode one journal record as the line fisk-ai writes (docs/spec.md sections 3 "Lines and the envelope",
4 "Payloads", 6 "Limits").

``encode_record(record) -> bytes`` writes exactly one physical line: compact
JSON, UTF-8, no raw newline or other control byte inside (JSON escapes every
code point below U+0020), ending in ``b"\\n"``.  The line is byte for byte
what fisk-ai's Go ``encoding/json`` writes for the same values: payload
fields in the Go structs' declaration order, an optional field at its zero
value (``None``, ``False``, ``0``, ``""``) left out (Go's ``omitempty``),
and ``<``, ``>``, ``&``, U+2028 and U+2029 written as ``\\u003c``,
``\\u003e``, ``\\u0026``, ``\\u2028``, ``\\u2029`` (Go's HTML-safe escaping).

The limits, :data:`MAX_RECORD_BYTES` and :data:`MAX_NESTING`, are the
reader's too (:mod:`fiskj.codec`): the writer refuses a larger or deeper
record before any byte is written (:class:`RecordTooLarge`,
:class:`InvalidRecord`; Python's parser is recursive and gives up near 1,000
levels, fewer when called deep in a stack), so the reader never meets a
valid record it cannot read.  Decoding is :mod:`fiskj.codec`, which also
re-exports these names.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from typing import Any

from .errors import InvalidRecord, RecordTooLarge
from .records import (AssistantRecord, MetaRecord, Record, TerminalRecord, ToolResultRecord, UserRecord,
                      tool_result_block)

__all__ = ["MAX_RECORD_BYTES", "MAX_NESTING", "TOOL_OUTPUT_KEEP_BYTES", "encode_record", "record_to_json", "with_seq",
           "fit_tool_result"]

#: Largest encoded record, in bytes, including its final ``\n`` (16 MiB).
MAX_RECORD_BYTES = 16 * 1024 * 1024

#: Deepest nesting of arrays and objects the writer accepts in a record (the envelope object is level 1).
MAX_NESTING = 512

#: Bytes (UTF-8) of a tool's output kept when the whole output would make its tool_result record larger than
#: :data:`MAX_RECORD_BYTES` (docs/spec.md section 6, "Tool output over the limit"): 1 MiB.  JSON escaping
#: makes one byte at most six (``\u0000``), so the kept part and the marker always fit.
TOOL_OUTPUT_KEEP_BYTES = 1024 * 1024

#: The largest seq a record can get (2^53, the last integer every JSON reader holds exactly): used to measure.
_MAX_SEQ = 2 ** 53

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _nesting(value: Any) -> int:
    """Return the nesting depth of arrays and objects in ``value`` (iterative; stops past :data:`MAX_NESTING`)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > deepest:
            deepest = depth
            if deepest > MAX_NESTING:
                break
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _opt(out: dict[str, Any], key: str, value: Any) -> None:
    """Set an optional field unless it is absent or at its zero value: Go's ``omitempty`` writes no ``false``,
    ``0`` or ``""`` (docs/spec.md section 3); such a field reads back as absent, which means the same."""
    if value:
        out[key] = value


#: The bytes Go's ``encoding/json`` escapes inside strings beyond JSON's own rules (HTML-safe output, and the
#: JavaScript line terminators U+2028 and U+2029), with their escapes.  None of them can occur outside a
#: string in compact JSON, so replacing them in the encoded line touches only string contents.
_LT, _GT, _AMP, _E2 = 0x3C, 0x3E, 0x26, 0xE2  # the first byte of U+2028 / U+2029 in UTF-8 is 0xE2


def _go_escape(data: bytes) -> bytes:
    """``data`` (compact JSON, UTF-8) with ``<``, ``>``, ``&``, U+2028, U+2029 escaped as Go writes them.

    Checked with one ``memchr`` per byte value first (``int in bytes``), so a line without them costs
    about 0.1 us; each replacement is one more pass over the line.
    """
    if _LT in data:
        data = data.replace(b"<", b"\\u003c")
    if _GT in data:
        data = data.replace(b">", b"\\u003e")
    if _AMP in data:
        data = data.replace(b"&", b"\\u0026")
    if _E2 in data:
        data = data.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
    return data


def _payload(record: Record) -> dict[str, Any]:
    out: dict[str, Any]
    if isinstance(record, MetaRecord):
        out = {"version": record.version, "run_id": record.run_id, "created": record.created,
               "fingerprint": record.fingerprint.to_json()}
        _opt(out, "prompt", record.prompt)
        _opt(out, "interactive", record.interactive)
    elif isinstance(record, AssistantRecord):
        out = {"iteration": record.iteration, "message": record.message}
        _opt(out, "stop_reason", record.stop_reason)
        out["in_tokens"] = record.in_tokens
        out["out_tokens"] = record.out_tokens
        _opt(out, "cache_read_tokens", record.cache_read_tokens)
        _opt(out, "cache_create_tokens", record.cache_create_tokens)
    elif isinstance(record, UserRecord):
        out = {"message": record.message}
    elif isinstance(record, ToolResultRecord):
        out = {"tool_use_id": record.tool_use_id, "result": record.result}
        _opt(out, "remote", record.remote)
    elif isinstance(record, TerminalRecord):
        out = {"reason": record.reason}
        _opt(out, "message", record.message)
    else:
        raise InvalidRecord(f"not a journal record: {type(record).__name__}")
    for key, value in record.extra.items():
        out.setdefault(key, value)
    return out


def record_to_json(record: Record, seq: int | None = None) -> dict[str, Any]:
    """Return the record's envelope as a JSON-ready dict (``seq``, ``protocol``, payload).

    ``seq``, when given, is written instead of ``record.seq`` (the envelope of ``with_seq(record, seq)``).
    """
    return {"seq": record.seq if seq is None else seq, "protocol": record.protocol, record.key: _payload(record)}


def encode_record(record: Record, seq: int | None = None) -> bytes:
    """Encode ``record`` as one ``\\n``-terminated line of UTF-8 JSON (docs/spec.md sections 3 and 6).

    ``seq``, when given, is written (and named in errors) instead of ``record.seq``: the
    line of ``with_seq(record, seq)`` without building that record first.

    The bytes are what Go's ``encoding/json`` writes for the same values (docs/spec.md
    section 3, "What fiskj writes"): payload fields in declaration order, optional
    fields at their zero value left out, non-ASCII text as UTF-8 except U+2028 and
    U+2029, and ``<``, ``>``, ``&`` escaped (``\\u003c``...).  A lone surrogate, which
    no UTF-8 (and no Go string) can hold, is written as its ``\\udXXX`` escape so it
    still round-trips.  Raises :class:`InvalidRecord` if the record cannot
    be encoded (non-JSON values, NaN, nested deeper than :data:`MAX_NESTING`)
    and :class:`RecordTooLarge` if the line would exceed :data:`MAX_RECORD_BYTES`.
    """
    if seq is None:
        seq = record.seq
    obj = record_to_json(record, seq)
    try:
        text = _encoder.encode(obj)
    except RecursionError:
        data = None
    except (TypeError, ValueError) as exc:
        raise InvalidRecord(f"record seq {seq} cannot be encoded as JSON: {exc}") from None
    else:
        try:
            data = _go_escape(text.encode("utf-8"))
        except UnicodeEncodeError:  # a lone surrogate (only ever inside a string): its JSON escape
            data = _go_escape(text.encode("utf-8", "backslashreplace"))
    # Counting brackets is cheap; only a line with many of them is walked.
    if data is None or (data.count(b"[") + data.count(b"{") > MAX_NESTING and _nesting(obj) > MAX_NESTING):
        raise InvalidRecord(f"record seq {seq} nests arrays and objects deeper than {MAX_NESTING} levels "
                            f"(fiskj.codec.MAX_NESTING), which a reader may not be able to parse; nothing was written",
                            field=record.key)
    if len(data) + 1 > MAX_RECORD_BYTES:
        raise RecordTooLarge(
            f"record seq {seq} encodes to {len(data) + 1} bytes, over the limit of "
            f"{MAX_RECORD_BYTES} bytes (fiskj.codec.MAX_RECORD_BYTES); nothing was written",
            field=record.key,
        )
    return data + b"\n"


#: record class -> a getter of all its fields but ``seq``, for the classes whose last field is ``seq``.
_ALL_BUT_SEQ = {cls: operator.attrgetter(*[f.name for f in dataclasses.fields(cls)][:-1])
                for cls in (MetaRecord, AssistantRecord, UserRecord, ToolResultRecord, TerminalRecord)
                if [f.name for f in dataclasses.fields(cls)][-1] == "seq"}


def with_seq(record: Record, seq: int) -> Record:
    """Return ``dataclasses.replace(record, seq=seq)`` (docs/spec.md section 9: the writer assigns seqs).

    For the five record classes it calls the constructor with the other fields read in one
    ``attrgetter`` call (half the cost of ``dataclasses.replace``; the same record).
    """
    get = _ALL_BUT_SEQ.get(type(record))
    if get is None:
        return dataclasses.replace(record, seq=seq)
    return type(record)(*get(record), seq)


def _result_fits(tool_use_id: str, block: dict[str, Any]) -> bool:
    """True when the tool_result record of ``block`` encodes within :data:`MAX_RECORD_BYTES` at any seq."""
    text = block["content"][0]["text"]
    # Each character encodes to at most 6 bytes (an escape like \u0000); the envelope takes < 1 KiB.
    if (len(text) + 2 * len(tool_use_id)) * 6 + 1024 <= MAX_RECORD_BYTES:
        return True
    try:
        encode_record(ToolResultRecord(tool_use_id=tool_use_id, result=block), _MAX_SEQ)
    except RecordTooLarge:
        return False
    return True


def fit_tool_result(tool_use_id: str, text: str, is_error: bool) -> tuple[dict[str, Any], int]:
    """Return ``(block, dropped)``: the tool_result block of a tool's output, cut to fit the record limit.

    docs/spec.md section 6, "Tool output over the limit".  ``block`` is
    :func:`fiskj.records.tool_result_block` of ``text`` and ``dropped`` is 0 when
    its tool_result record encodes within :data:`MAX_RECORD_BYTES`.  Otherwise
    the output is cut to its first :data:`TOOL_OUTPUT_KEEP_BYTES` bytes of UTF-8
    (at a character boundary; a lone surrogate counts 3 bytes), a marker line
    saying how many bytes were dropped is added, ``is_error`` is true, and
    ``dropped`` is the number of bytes left out.  Pure; raises
    :class:`RecordTooLarge` only if even an empty output cannot fit (a
    ``tool_use_id`` of megabytes, which no record holding it could carry).
    """
    block = tool_result_block(tool_use_id, text, is_error)
    if _result_fits(tool_use_id, block):
        return block, 0
    data = text.encode("utf-8", "surrogatepass")
    cut = min(TOOL_OUTPUT_KEEP_BYTES, len(data))
    while 0 < cut < len(data) and data[cut] & 0xC0 == 0x80:  # back up to the start of a character
        cut -= 1
    for keep in (cut, 0):
        dropped = len(data) - keep
        marker = (f"\n[fiskj: tool output truncated: {dropped} of {len(data)} bytes dropped, the first {keep} "
                  f"kept; the whole output would have made a tool_result record larger than the record limit "
                  f"of {MAX_RECORD_BYTES} bytes]")
        block = tool_result_block(tool_use_id, data[:keep].decode("utf-8", "surrogatepass") + marker, True)
        if _result_fits(tool_use_id, block):
            return block, dropped
    encode_record(ToolResultRecord(tool_use_id=tool_use_id, result=block), _MAX_SEQ)  # raises RecordTooLarge
    return block, len(data)  # pragma: no cover - the line above raised
