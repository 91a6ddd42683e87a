"""Decode one journal line (docs/spec.md sections 3 "Lines and the envelope", 4 "Payloads", 6 "Limits").

``decode_record(line)`` parses one line (with or without its ``\\n``) into a
typed record and checks the envelope and payload types strictly; it raises
:class:`CorruptJournal` (or :class:`UnsupportedVersion`) naming the
offending ``field``.  The caller (the reader) adds path, line and offset.
It accepts both forms of what Go escapes (``<`` and ``\\u003c``), as any
JSON reader does, refuses a line over :data:`MAX_RECORD_BYTES`, and refuses
a number that does not fit a float (``1e400``: it would decode to infinity,
which no JSON encoder writes back; Go refuses it too).

Encoding is :mod:`fiskj.encode` (the line fisk-ai writes, and the limits
both sides share); its names are re-exported here, so ``fiskj.codec`` is
still the one place to import a line's codec from.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from .encode import MAX_NESTING, MAX_RECORD_BYTES, encode_record, record_to_json, with_seq
from .errors import CorruptJournal, RecordTooLarge, UnsupportedVersion
from .fingerprint import FIELDS as FINGERPRINT_FIELDS
from .fingerprint import Fingerprint
from .records import (
    PAYLOAD_KEYS,
    VERSION,
    AssistantRecord,
    MetaRecord,
    Record,
    TerminalRecord,
    ToolResultRecord,
    UserRecord,
)

__all__ = ["MAX_RECORD_BYTES", "MAX_NESTING", "encode_record", "decode_record", "record_to_json", "with_seq"]

_decoder = json.JSONDecoder(parse_constant=lambda name: _raise_constant(name),
                            parse_float=lambda text: _finite_float(text))
_scan_once = _decoder.scan_once


def _raise_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (_INF, -_INF):
        raise ValueError(f"number {text[:40]} is out of the range of a float")
    return value


_INF = float("inf")


# --- decoding -------------------------------------------------------------------


def _bad(message: str, field: str | None = None) -> CorruptJournal:
    return CorruptJournal(message, field=field)


def _int(obj: dict[str, Any], key: str, where: str, *, required: bool = True) -> int | None:
    value = obj.get(key)
    if value is None:
        if key in obj:
            raise _bad(f"{where}.{key} is null, expected an integer", f"{where}.{key}")
        if required:
            raise _bad(f"{where}.{key} is missing", f"{where}.{key}")
        return None
    if type(value) is not int:
        raise _bad(f"{where}.{key} is {type(value).__name__} {value!r:.40}, expected an integer", f"{where}.{key}")
    return value


def _str(obj: dict[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None:
        if key in obj:
            raise _bad(f"{where}.{key} is null, expected a string", f"{where}.{key}")
        if required:
            raise _bad(f"{where}.{key} is missing", f"{where}.{key}")
        return None
    if type(value) is not str:
        raise _bad(f"{where}.{key} is {type(value).__name__}, expected a string", f"{where}.{key}")
    return value


def _bool(obj: dict[str, Any], key: str, where: str) -> bool | None:
    value = obj.get(key)
    if value is None:
        if key in obj:
            raise _bad(f"{where}.{key} is null, expected a boolean", f"{where}.{key}")
        return None
    if type(value) is not bool:
        raise _bad(f"{where}.{key} is {type(value).__name__}, expected a boolean", f"{where}.{key}")
    return value


def _obj(obj: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = obj.get(key)
    if value is None:
        raise _bad(f"{where}.{key} is missing", f"{where}.{key}")
    if type(value) is not dict:
        raise _bad(f"{where}.{key} is {type(value).__name__}, expected an object", f"{where}.{key}")
    return value


def _extra(payload: dict[str, Any], known: frozenset[str]) -> dict[str, Any]:
    if len(payload) <= len(known) and known.issuperset(payload):
        return {}
    return {k: v for k, v in payload.items() if k not in known}


def _message(payload: dict[str, Any], where: str, role: str) -> dict[str, Any]:
    message = _obj(payload, "message", where)
    got = message.get("role")
    if got != role:
        raise _bad(f"{where}.message.role is {got!r}, expected {role!r}", f"{where}.message.role")
    content = message.get("content")
    if not isinstance(content, (list, str)):
        raise _bad(f"{where}.message.content must be a list of blocks or a string", f"{where}.message.content")
    return message


_META = frozenset(("version", "run_id", "created", "fingerprint", "prompt", "interactive"))
_ASSISTANT = frozenset(("iteration", "message", "stop_reason", "in_tokens", "out_tokens",
                        "cache_read_tokens", "cache_create_tokens"))
_USER = frozenset(("message",))
_TOOL_RESULT = frozenset(("tool_use_id", "result", "remote"))
_TERMINAL = frozenset(("reason", "message"))
_FP = frozenset(FINGERPRINT_FIELDS)
_CONTENT_TYPES = (list, str)  # exact types: a decoded JSON value is never a subclass
#: Block types of assistant messages, each kept as one shared string.
_BLOCK_TYPES = {t: t for t in ("text", "tool_use", "thinking", "redacted_thinking", "server_tool_use",
                               "web_search_tool_result", "image", "document")}


def _builder(cls: type, order: tuple[str, ...]) -> Any:
    """A positional constructor of ``cls`` for the decode fast paths: the same record as ``cls(*args)``.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``, which is
    half the cost of building a record; the builder stores the arguments in the slots directly
    (what that ``__init__`` ends up doing).  It is used only while ``cls`` is a slots dataclass
    with exactly the fields ``order`` (which the fast paths pass in that order) and no
    ``__post_init__``; otherwise ``cls`` itself is called.  A reordered class fails at import.
    """
    if tuple(f.name for f in dataclasses.fields(cls)) != order:  # pragma: no cover - a records.py change
        raise ImportError(f"fiskj.codec: the fields of {cls.__name__} are not {order}; update the decode fast paths")
    if hasattr(cls, "__post_init__") or tuple(cls.__dict__.get("__slots__", ())) != order:  # pragma: no cover
        return cls
    names = [f"a{i}" for i in range(len(order))]
    env = {"new": object.__new__, "cls": cls, **{f"set{i}": cls.__dict__[n].__set__ for i, n in enumerate(order)}}
    exec(f"def build({', '.join(names)}):\n    r = new(cls)\n"  # noqa: S102 - fixed text, as dataclasses does
         + "".join(f"    set{i}(r, {a})\n" for i, a in enumerate(names)) + "    return r\n", env)
    build = env["build"]
    sample = tuple(range(len(order)))
    if build(*sample) != cls(*sample):  # pragma: no cover - the slots are not the fields
        return cls
    build.__qualname__ = build.__name__ = f"build_{cls.__name__}"
    return build


_assistant = _builder(AssistantRecord, ("iteration", "message", "in_tokens", "out_tokens", "stop_reason",
                                        "cache_read_tokens", "cache_create_tokens", "extra", "seq"))
_user = _builder(UserRecord, ("message", "extra", "seq"))
_tool_result = _builder(ToolResultRecord, ("tool_use_id", "result", "remote", "extra", "seq"))


def _fingerprint(payload: dict[str, Any]) -> Fingerprint:
    fp = _obj(payload, "fingerprint", "meta")
    w = "meta.fingerprint"
    return Fingerprint(
        model=_str(fp, "model", w), system_hash=_str(fp, "system_hash", w),  # type: ignore[arg-type]
        tools_hash=_str(fp, "tools_hash", w), thinking_mode=_str(fp, "thinking_mode", w),  # type: ignore[arg-type]
        max_tokens=_int(fp, "max_tokens", w), max_iterations=_int(fp, "max_iterations", w),  # type: ignore[arg-type]
        extra=_extra(fp, _FP),
    )


def _decode_meta(p: dict[str, Any], seq: int) -> MetaRecord:
    version = _int(p, "version", "meta")
    assert version is not None
    if version > VERSION:
        raise UnsupportedVersion(
            f"journal version {version} is newer than this reader, which reads versions 1 to {VERSION}; "
            f"upgrade fiskj to read it", field="meta.version")
    if version < 1:
        raise _bad(f"meta.version is {version}, expected 1 or {VERSION}", "meta.version")
    return MetaRecord(
        version=version, run_id=_str(p, "run_id", "meta"), created=_str(p, "created", "meta"),  # type: ignore[arg-type]
        fingerprint=_fingerprint(p), prompt=_str(p, "prompt", "meta", required=False),
        interactive=_bool(p, "interactive", "meta"), extra=_extra(p, _META), seq=seq)


def _decode_assistant(p: dict[str, Any], seq: int) -> AssistantRecord:
    # Fast path: the shape encode_record writes (no null, no unknown key, all types right) is
    # accepted with one check per field; anything else takes the checked path, which names the field.
    get = p.get
    iteration, message, in_tokens, out_tokens = get("iteration"), get("message"), get("in_tokens"), get("out_tokens")
    stop, cread, ccreate = get("stop_reason"), get("cache_read_tokens"), get("cache_create_tokens")
    if (type(iteration) is int and type(message) is dict and type(in_tokens) is int and type(out_tokens) is int
            and iteration >= 0 and in_tokens >= 0 and out_tokens >= 0
            and len(p) == 4 + (stop is not None) + (cread is not None) + (ccreate is not None)
            and (stop is None or type(stop) is str)
            and (cread is None or (type(cread) is int and cread >= 0))
            and (ccreate is None or (type(ccreate) is int and ccreate >= 0))
            and message.get("role") == "assistant" and type(message.get("content")) in _CONTENT_TYPES):
        message["role"] = "assistant"  # the same text, one shared string (a fold keeps every message)
        content = message["content"]
        if type(content) is list:
            for block in content:
                if type(block) is dict:
                    kind = block.get("type")
                    if type(kind) is str and kind in _BLOCK_TYPES:
                        block["type"] = _BLOCK_TYPES[kind]
        return _assistant(iteration, message, in_tokens, out_tokens, stop, cread, ccreate, {}, seq)
    return _decode_assistant_checked(p, seq)


def _decode_assistant_checked(p: dict[str, Any], seq: int) -> AssistantRecord:
    w = "assistant"
    iteration = _int(p, "iteration", w)
    if iteration is not None and iteration < 0:
        raise _bad(f"assistant.iteration is {iteration}, expected >= 0", "assistant.iteration")
    rec = AssistantRecord(
        iteration=iteration, message=_message(p, w, "assistant"),  # type: ignore[arg-type]
        in_tokens=_int(p, "in_tokens", w), out_tokens=_int(p, "out_tokens", w),  # type: ignore[arg-type]
        stop_reason=_str(p, "stop_reason", w, required=False),
        cache_read_tokens=_int(p, "cache_read_tokens", w, required=False),
        cache_create_tokens=_int(p, "cache_create_tokens", w, required=False),
        extra=_extra(p, _ASSISTANT), seq=seq)
    for name in ("in_tokens", "out_tokens", "cache_read_tokens", "cache_create_tokens"):
        value = getattr(rec, name)
        if value is not None and value < 0:
            raise _bad(f"assistant.{name} is {value}, expected >= 0", f"assistant.{name}")
    return rec


def _decode_user(p: dict[str, Any], seq: int) -> UserRecord:
    message = p.get("message")
    if (len(p) == 1 and type(message) is dict and message.get("role") == "user"
            and type(message.get("content")) in _CONTENT_TYPES):
        message["role"] = "user"
        return _user(message, {}, seq)
    return _decode_user_checked(p, seq)


def _decode_user_checked(p: dict[str, Any], seq: int) -> UserRecord:
    return UserRecord(message=_message(p, "user", "user"), extra=_extra(p, _USER), seq=seq)


def _decode_tool_result(p: dict[str, Any], seq: int) -> ToolResultRecord:
    tool_use_id, result = p.get("tool_use_id"), p.get("result")
    if (type(tool_use_id) is str and type(result) is dict and result.get("type") == "tool_result"
            and result.get("tool_use_id") == tool_use_id):
        # Equal values, shared objects: the block a fold keeps holds no second copy of either string.
        result["type"] = "tool_result"
        result["tool_use_id"] = tool_use_id
        n = len(p)
        if n == 2:
            return _tool_result(tool_use_id, result, None, {}, seq)
        remote = p.get("remote")
        if n == 3 and type(remote) is bool:
            return _tool_result(tool_use_id, result, remote, {}, seq)
    return _decode_tool_result_checked(p, seq)


def _decode_tool_result_checked(p: dict[str, Any], seq: int) -> ToolResultRecord:
    w = "tool_result"
    tool_use_id = _str(p, "tool_use_id", w)
    result = _obj(p, "result", w)
    if result.get("type") != "tool_result":
        raise _bad(f"tool_result.result.type is {result.get('type')!r}, expected 'tool_result'", "tool_result.result.type")
    if result.get("tool_use_id") != tool_use_id:
        raise _bad(f"tool_result.result.tool_use_id {result.get('tool_use_id')!r} differs from "
                   f"tool_result.tool_use_id {tool_use_id!r}", "tool_result.result.tool_use_id")
    return ToolResultRecord(tool_use_id=tool_use_id, result=result,  # type: ignore[arg-type]
                            remote=_bool(p, "remote", w), extra=_extra(p, _TOOL_RESULT), seq=seq)


def _decode_terminal(p: dict[str, Any], seq: int) -> TerminalRecord:
    reason = _str(p, "reason", "terminal")
    if not reason:
        raise _bad("terminal.reason is empty", "terminal.reason")
    return TerminalRecord(reason=reason, message=_str(p, "message", "terminal", required=False),  # type: ignore[arg-type]
                          extra=_extra(p, _TERMINAL), seq=seq)


#: payload key -> its decoder: a fast path for the shape encode_record writes, else the checked one.
_DECODERS = {
    "meta": _decode_meta,
    "assistant": _decode_assistant,
    "user": _decode_user,
    "tool_result": _decode_tool_result,
    "terminal": _decode_terminal,
}
#: payload key -> its decoder without a fast path: every field checked one by one (the rule the fast paths keep).
_CHECKED_DECODERS = {
    "meta": _decode_meta,
    "assistant": _decode_assistant_checked,
    "user": _decode_user_checked,
    "tool_result": _decode_tool_result_checked,
    "terminal": _decode_terminal,
}


def decode_record(line: bytes) -> Record:
    """Decode one journal line (``bytes``, a trailing ``\\n`` allowed) into a record (docs/spec.md sections 3-6).

    Raises :class:`CorruptJournal` when the line is not UTF-8, not one JSON
    object, nested too deeply, or breaks the envelope or payload rules (the
    ``field`` attribute names the offending field, e.g. ``"assistant.in_tokens"``),
    :class:`RecordTooLarge` when it exceeds :data:`MAX_RECORD_BYTES`, and
    :class:`UnsupportedVersion` for a meta record newer than :data:`VERSION`.
    Duplicate JSON keys resolve to the last value, as Go's ``encoding/json`` does.
    ``NaN``, ``Infinity`` and numbers beyond a float's range (``1e400``) are refused.
    """
    text = _text_of(line)
    # Fast path: one call of the C scanner, for a line that is exactly one JSON value and its
    # ``\n`` (what encode_record writes).  Anything else (leading or other trailing whitespace,
    # extra data, any parse error) takes the full decoder, whose answer and errors are the rule.
    try:
        obj, end = _scan_once(text, 0)
        whole = end == len(text) or (end == len(text) - 1 and text[end] == "\n")
    except Exception:  # noqa: BLE001 - StopIteration, ValueError, RecursionError: the full decoder decides
        whole = False
    if not whole:
        obj = _decode_text(text)
    return _decode_value(obj)


def _decode_record_checked(line: bytes) -> Record:
    """:func:`decode_record` without its fast paths: the full JSON decoder, then the envelope and payload
    checked field by field.  Same answer, record or error, for every line (tests/test_codec_paths.py).
    """
    return _decode_envelope(_decode_text(_text_of(line)), _CHECKED_DECODERS)


def _text_of(line: bytes) -> str:
    """The line's text: :class:`RecordTooLarge` over :data:`MAX_RECORD_BYTES`, ``CorruptJournal`` if not UTF-8."""
    if len(line) > MAX_RECORD_BYTES:
        raise RecordTooLarge(f"line of {len(line)} bytes exceeds the record limit of {MAX_RECORD_BYTES} bytes")
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad(f"line is not valid UTF-8 (byte {exc.start} of the line)") from None


def _decode_value(obj: Any) -> Record:
    """The record of a line's parsed JSON value: the envelope and payload checks of :func:`decode_record`."""
    if type(obj) is dict and len(obj) == 3:
        seq = obj.get("seq")
        protocol = obj.get("protocol")
        if type(seq) is int and seq >= 1 and type(protocol) is str:
            key = PAYLOAD_KEYS.get(protocol)
            if key is not None:
                payload = obj.get(key)
                if type(payload) is dict:
                    return _DECODERS[key](payload, seq)
    return _decode_envelope(obj)


#: An odd integer above 2**62: no float equals it, and JSON writes it only as these digits.
_SENTINEL = 7310585136524867391
_DIGITS = str(_SENTINEL).encode("ascii")
_SEPARATOR = b"," + _DIGITS + b","


def _parse_lines(lines: list[bytes]) -> list[Any] | None:
    """Parse several complete lines with ONE call of the C scanner; ``None`` unless each is exactly one JSON value.

    The lines (each ending in ``\n``, none over :data:`MAX_RECORD_BYTES`) are parsed as the array
    ``[line1,S,line2,S,...]`` with ``S`` = :data:`_SENTINEL`.  One call instead of one per line is
    faster, and the scanner's key memo, which lives for one call, then shares each repeated key
    (``"type"``, ``"content"``...) among all the lines instead of one copy per object: the
    conversation a fold keeps takes a quarter less memory.  The result is trusted only when no
    line contains the digits of ``S`` and the array holds exactly the lines' values at the even
    places and ``S`` at every odd place: a line that is not one whole value would have to swallow
    a separator (an odd place then holds something else), and no line can put an ``S`` there
    without writing its digits.  Each value is then what :func:`decode_record` parses from its
    line alone (same scanner, same hooks, same whitespace rules).  ``None`` (any line not UTF-8,
    not JSON, more than one value, ``NaN``, nested too deeply, holding the digits...): the caller
    decodes the lines one by one, which says what is wrong where.
    """
    n = len(lines)
    data = b"[" + _SEPARATOR.join(lines) + b"]"
    if data.count(_DIGITS) != n - 1:  # only the separators may hold them
        return None
    try:
        text = data.decode("utf-8")
        values, end = _scan_once(text, 0)
    except Exception:  # noqa: BLE001 - any failure: decode line by line
        return None
    if end != len(text) or len(values) != 2 * n - 1 or values[1::2] != [_SENTINEL] * (n - 1):
        return None
    return values[::2]


def _decode_text(text: str) -> Any:
    """The full JSON decode of a line's text (``CorruptJournal`` when it is not one JSON value)."""
    try:
        return _decoder.decode(text)
    except RecursionError:
        raise _bad("line is JSON nested too deeply to decode") from None
    except ValueError as exc:
        raise _bad(f"line is not valid JSON: {exc}") from None


def _decode_envelope(obj: Any, decoders: dict[str, Any] = _DECODERS) -> Record:
    """Check the envelope of a decoded line field by field (the slow path: it names what is wrong)."""
    if type(obj) is not dict:
        raise _bad(f"line is a JSON {type(obj).__name__}, expected an object")
    seq = obj.get("seq")
    if type(seq) is not int:
        raise _bad("seq is missing" if seq is None else f"seq is {type(seq).__name__} {seq!r:.40}, expected an integer", "seq")
    if seq < 1:
        raise _bad(f"seq is {seq}, expected an integer >= 1", "seq")
    protocol = obj.get("protocol")
    key = PAYLOAD_KEYS.get(protocol) if type(protocol) is str else None
    if key is None:
        raise _bad(f"unknown protocol {protocol!r}", "protocol")
    if len(obj) != 3 or key not in obj:
        others = sorted(k for k in obj if k not in ("seq", "protocol"))
        if key not in obj:
            raise _bad(f"protocol {protocol} needs payload key {key!r}, found {others}", key)
        raise _bad(f"exactly one payload key {key!r} is allowed, found {others}", key)
    payload = obj[key]
    if type(payload) is not dict:
        raise _bad(f"payload {key!r} is {type(payload).__name__}, expected an object", key)
    return decoders[key](payload, seq)
