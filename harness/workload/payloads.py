"""Payloads the workload gives its tools and replies (pure, seeded): docs/workload.md "Payloads"."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

from fiskj.encode import MAX_RECORD_BYTES, encode_record
from fiskj.records import ToolResultRecord, tool_result_block

from harness.scenario.model import LIMIT_OUTPUTS, OUTPUT_KINDS

__all__ = ["output_spec", "limit_spec", "fill_text", "thinking_text", "record_size", "FILL_UNIT", "UNDER_BY",
           "OVER_BY", "SEPARATORS", "UNICODE_PIECES", "BAD_UTF8"]

#: The characters other than ``\\n`` that ``str.splitlines`` ends a line at (the first three in every output).
SEPARATORS = ("\u2028", "\u2029", "\u0085", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")

#: Non-ASCII text: scripts, astral characters, a combining mark, joiners, a byte-order mark inside.
UNICODE_PIECES = ("Grüße, Jürgen", "naïve café", "Ελληνικά", "Русский текст", "中文字符", "日本語のテキスト",
                  "한국어 문장", "עברית", "العربية", "हिन्दी", "🙂 emoji", "👩\u200d💻 zwj", "e\u0301 combining",
                  "\ufeff bom inside", "𝄞 𝕏 astral", "zero\u200bwidth", "½ ∑ ∞ ≠ ≈", "\u00a0nbsp", "ǅ titlecase")

#: Bytes no UTF-8 decoder accepts, each after an ASCII label.
BAD_UTF8 = (b"ff:\xff", b"fe:\xfe", b"overlong-nul:\xc0\x80", b"surrogate:\xed\xa0\x80", b"lone-cont:\x80",
            b"beyond:\xf4\x90\x80\x80", b"cut:\xe2\x82")

#: The unit of a fill at the record limit (docs/workload.md "Payloads"): the record is larger than the output,
#: and a cut can land inside a character.
FILL_UNIT = "Fill é\x00<&>\t\"\\ " + "x" * 40

#: How far under the limit the ``under`` record is (bytes, at a seq of 9 digits: fewer digits, further under).
UNDER_BY = 64
#: How far over the limit the ``over`` record is (bytes, at seq 1: any larger seq, further over).
OVER_BY = 64

_UNDER_SEQ = 10 ** 8
_OVER_SEQ = 1


def _pick(rng: random.Random, pool: tuple[Any, ...], least: int) -> list[Any]:
    """``least`` or more items of ``pool`` in a drawn order (each at most once)."""
    return rng.sample(pool, rng.randint(min(least, len(pool)), len(pool)))


def _unicode(rng: random.Random) -> str:
    pieces = _pick(rng, UNICODE_PIECES, 6)
    for must in ("𝄞 𝕏 astral", "e\u0301 combining"):
        if must not in pieces:
            pieces.insert(rng.randint(0, len(pieces)), must)
    return " | ".join(pieces) + "\n"


def _separators(rng: random.Random) -> str:
    seps = list(SEPARATORS[:3]) + _pick(rng, SEPARATORS[3:], 2)
    rng.shuffle(seps)
    return "".join(f"part {i} {rng.choice(UNICODE_PIECES)}{sep}" for i, sep in enumerate(seps)) + "end\n"


def _controls(rng: random.Random) -> str:
    chars = [chr(c) for c in range(0x20)] + ["\x7f"]
    rng.shuffle(chars)
    return "controls:" + "".join(f"{ch}{rng.randint(0, 9)}" for ch in chars) + "\n"


def _json(rng: random.Random) -> str:
    """A JSON document as ``json.dumps`` writes it (ASCII escapes)."""
    return json.dumps({
        "kind": "payload", "n": rng.randint(0, 2 ** 31), "big": 2 ** 64 + rng.randint(0, 999),
        "numbers": [0, -1, 2 ** 53, 1.5, -0.25, 1e-07, 6.02e23], "nul": "a\x00b", "lone_high": "\ud800",
        "lone_low": "\udfff", "reversed_pair": "\udc00\ud800", "pair": "\U0001f600",
        "separators": "\u2028\u2029\u0085", "html": "</script><!--&-->", "quote": "\"\\/",
        "text": rng.choice(UNICODE_PIECES), "nested": [[[{"deep": [rng.randint(0, 9)]}]], {}, [], None, True, False],
    }) + "\n"


def _surrogates(rng: random.Random) -> str:
    lone = ["\ud800", "\udbff", "\udc00", "\udfff", "\udc00\ud800"]
    rng.shuffle(lone)
    return "lone surrogates: " + " ".join(f"{i}:{s}" for i, s in enumerate(lone)) + " pair: \U0001f600\n"


def _binary(rng: random.Random) -> str:
    pieces = _pick(rng, BAD_UTF8, 4)
    for must in (b"ff:\xff", b"surrogate:\xed\xa0\x80"):
        if must not in pieces:
            pieces.append(must)
    return base64.b64encode(b" ".join(pieces) + b"\n").decode("ascii")


def _error(rng: random.Random) -> str:
    return (f"tool failed: {rng.choice(UNICODE_PIECES)} — ошибка, 失败\nsecond line\u0085third line"
            f"\u2028fourth, exit 1\n")


#: Output kind -> the spec key and the draw of its value (``"plain"``: no spec).
_KINDS = {"unicode": ("text", _unicode), "separators": ("text", _separators), "controls": ("text", _controls),
          "json": ("text", _json), "surrogates": ("text", _surrogates), "binary": ("base64", _binary),
          "error": ("error", _error)}


def output_spec(kind: str, rng: random.Random) -> dict[str, Any] | None:
    """The output spec of one tool call of ``kind`` (docs/scenarios.md ``outputs``), drawn from ``rng``.

    ``"plain"`` gives ``None`` (the ledger tool's own ``ok`` line).  Raises ``ValueError`` for an unknown kind."""
    if kind == "plain":
        return None
    if kind not in _KINDS:
        raise ValueError(f"unknown output kind {kind!r}; known: {', '.join(OUTPUT_KINDS)}")
    key, draw = _KINDS[kind]
    return {key: draw(rng)}


def record_size(tool_use_id: str, text: str, seq: int = 1) -> int:
    """Bytes of the tool_result record fiskj journals for output ``text`` of ``tool_use_id`` (a success),
    final ``\\n`` included, at ``seq``.  Raises :class:`fiskj.errors.RecordTooLarge` over the limit."""
    return len(encode_record(ToolResultRecord(tool_use_id=tool_use_id,
                                              result=tool_result_block(tool_use_id, text, False)), seq))


def fill_text(spec: dict[str, Any]) -> str:
    """The text of a fill spec: ``unit * count + tail``."""
    return spec["fill"] * spec["count"] + spec["tail"]


def limit_spec(which: str, tool_use_id: str) -> dict[str, Any]:
    """The fill spec whose tool_result record is :data:`UNDER_BY` bytes under (at a 9-digit seq) or
    :data:`OVER_BY` bytes over (at seq 1) :data:`fiskj.encode.MAX_RECORD_BYTES` (docs/spec.md section 6).
    Raises ``ValueError`` for a ``which`` other than ``"under"`` and ``"over"``."""
    if which not in LIMIT_OUTPUTS:
        raise ValueError(f"unknown limit output {which!r}; known: {', '.join(LIMIT_OUTPUTS)}")
    seq, target = (_UNDER_SEQ, MAX_RECORD_BYTES - UNDER_BY) if which == "under" else (_OVER_SEQ,
                                                                                       MAX_RECORD_BYTES + OVER_BY)
    base = record_size(tool_use_id, "", seq)
    unit = record_size(tool_use_id, FILL_UNIT, seq) - base
    count = (target - base) // unit
    return {"fill": FILL_UNIT, "count": count, "tail": "x" * (target - base - count * unit)}


def thinking_text(rng: random.Random, turn: int) -> str:
    """The text of turn ``turn``'s thinking block: a few sentences with non-ASCII and a U+0085 in them."""
    return (f"Turn {turn}: let me think. {rng.choice(UNICODE_PIECES)}; the ledger comes first.\u0085"
            f"Then {rng.choice(UNICODE_PIECES)}, then the tools.\n")
