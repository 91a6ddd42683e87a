"""Where a key is in a TOML file, found from the text (:mod:`tomllib` gives no positions): the lines that
errors about scenario and profile files name (pure)."""

from __future__ import annotations

import re
import tomllib
from typing import Any

__all__ = ["find_line", "key_at", "load_toml", "located"]

_HEADER_RE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")


def _bare(key: str) -> str:
    key = key.strip()
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "\"'":
        return key[1:-1]
    return key


def find_line(text: str, section: str, key: str | None) -> int | None:
    """Return the 1-based line of ``key`` in table ``section`` (``""``: the top level) of TOML ``text``.

    With ``key`` ``None``, the table's header line (or its first dotted key).
    Dotted keys and a table header naming the key are found too; ``None`` when
    nothing matches.
    """
    wanted = ".".join(p for p in (section, key) if p)
    current = ""
    for number, line in enumerate(text.splitlines(), start=1):
        m = _HEADER_RE.match(line)
        if m:
            current = ".".join(_bare(p) for p in m.group(1).split("."))
            if current == wanted or (key is None and current == section):
                return number
            continue
        if "=" not in line or line.lstrip().startswith("#"):
            continue
        lhs = line.split("=", 1)[0]
        full = ".".join(([current] if current else []) + [_bare(p) for p in lhs.split(".")])
        if full == wanted or (key is None and full.startswith(wanted + ".")):
            return number
    return None


_ASSIGN_RE = re.compile(r"^\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*=")


def key_at(text: str, line: int) -> str | None:
    """The dotted key written on 1-based ``line`` of TOML ``text`` (``"faults.family"``), its table the last
    header above it; ``None`` when the line holds no ``key =``."""
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return None
    m = _ASSIGN_RE.match(lines[line - 1])
    if not m:
        return None
    table = ""
    for above in reversed(lines[:line - 1]):
        h = _HEADER_RE.match(above)
        if h:
            table = ".".join(_bare(p) for p in h.group(1).split("."))
            break
    key = ".".join(_bare(p) for p in m.group(1).split("."))
    return f"{table}.{key}" if table else key


def load_toml(text: str, where: str, error: Any) -> dict[str, Any]:
    """Parse TOML ``text`` of file ``where``; a syntax error raises ``error(message, path=, line=, key=)``
    (a :class:`harness.errors.ScenarioError` or a subclass) naming the line and the key written on it."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        line = int(m.group(1)) if m else None
        raise error(f"TOML syntax error: {exc}", path=where, line=line,
                    key=key_at(text, line) if line else None) from None


def located(error: Any, text: str, where: str, section: str, key: str | None, message: str) -> Any:
    """``error(message, ...)`` about ``key`` of table ``section`` (``""``: the top level) of ``text``: its
    dotted key, and the line that holds it, else the table's header (a missing key)."""
    dotted = ".".join(p for p in (section, key) if p) or None
    line = find_line(text, section, key) or (find_line(text, section, None) if section else None)
    return error(message, path=where, line=line, key=dotted)
