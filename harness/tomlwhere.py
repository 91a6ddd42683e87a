"""Where a key is in a TOML file: the line numbers that errors about scenario and profile files name.

:mod:`tomllib` reports no positions for well-formed documents, so an error
about a value (a wrong type, an unknown key) finds its line here, from the
text: :func:`find_line` for a dotted key, :func:`key_at` for the key on a
line (a syntax error's line).  Pure: strings in, numbers out.
"""

from __future__ import annotations

import re

__all__ = ["find_line", "key_at"]

_HEADER_RE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")


def _bare(key: str) -> str:
    key = key.strip()
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "\"'":
        return key[1:-1]
    return key


def find_line(text: str, section: str, key: str | None) -> int | None:
    """Return the 1-based line of ``key`` in table ``section`` of TOML ``text``.

    ``section`` is ``""`` for the top level.  With ``key`` ``None`` the
    table's header line is returned (or its first dotted key).  Dotted keys
    (``workload.turns = 3`` at the top level) and a table header naming the
    key (``[nemesis]`` for section ``""``, key ``"nemesis"``) are found too.
    Returns ``None`` when nothing matches.
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
    """The dotted key written on 1-based ``line`` of TOML ``text`` (``"faults.family"``), if it holds one.

    Used to name the key of a TOML syntax error (a bad value after ``key =``).
    The table is the last ``[header]`` above the line.  ``None`` when the
    line holds no ``key =``.
    """
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
