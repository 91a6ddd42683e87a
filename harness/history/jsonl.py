"""A ``jsonl`` journal's lines (docs/subject.md "Journal formats"): one JSON value per line, known by offset.  Pure."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["JsonLine", "decode_json_line", "holds_a_line"]


@dataclass(frozen=True)
class JsonLine:
    """A complete line of a ``jsonl`` journal, decoded: one JSON ``value`` (a fisk-ai record it is not).

    Its ``seq`` is ``None``: such a line is known by its offset (docs/subject.md "Journal formats").
    """

    value: Any
    seq: None = None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_json_line(raw: bytes) -> JsonLine:
    """Decode one complete ``jsonl`` line (its newline included or not) as one JSON value.

    Strict: UTF-8 only, no ``NaN``/``Infinity``, nothing but whitespace around the value.
    Raises :class:`ValueError` (``UnicodeDecodeError``, ``json.JSONDecodeError``) naming what is wrong.
    """
    return JsonLine(json.loads(raw.decode("utf-8"), parse_constant=_reject_constant))


def holds_a_line(journal: bytes | None) -> bool:
    """True when ``journal``'s first line is complete and one JSON value: the run was created."""
    first = (journal or b"").split(b"\n", 1)
    if len(first) < 2:
        return False
    try:
        decode_json_line(first[0])
    except ValueError:
        return False
    return True
