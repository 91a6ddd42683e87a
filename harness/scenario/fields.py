"""Value checkers for scenario keys, and a family's ``Params`` dataclass as its TOML schema (pure).

A checker takes the raw TOML value and returns the converted value, or raises :class:`Bad`.  A ``Params`` field
whose metadata holds a checker (``field(default=..., metadata=key(int_(0)))``) is a ``[faults]`` key a scenario
may give (docs/scenarios.md); fields without one (``seed``, ``jobs``) come from elsewhere.
"""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any, Callable

__all__ = ["Bad", "Check", "int_", "num", "bool_", "str_", "name", "choice", "list_of", "range_ms", "key",
           "toml_keys"]

Check = Callable[[Any], Any]

_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


class Bad(Exception):
    """A value a checker refuses; ``str()`` is the message (the parser adds file, line and key)."""


def _expect(v: Any, ok: bool, what: str) -> None:
    """Raise :class:`Bad` "expected ``what``" unless ``ok``."""
    if not ok:
        raise Bad(f"expected {what}, got {type(v).__name__} {v!r}")


def int_(lo: int | None = None) -> Callable[[Any], int]:
    """An integer (not a bool), at least ``lo`` when given."""
    def check(v: Any) -> int:
        _expect(v, isinstance(v, int) and not isinstance(v, bool), "an integer")
        if lo is not None and v < lo:
            raise Bad(f"must be >= {lo}, got {v}")
        return v

    return check


def num(lo: float = 0.0, strict: bool = False) -> Callable[[Any], float]:
    """A number >= ``lo`` (> ``lo`` when ``strict``), as a float."""
    def check(v: Any) -> float:
        _expect(v, isinstance(v, (int, float)) and not isinstance(v, bool), "a number")
        if v < lo or (strict and v == lo):
            raise Bad(f"must be {'>' if strict else '>='} {lo}, got {v}")
        return float(v)

    return check


def bool_(v: Any) -> bool:
    """``true`` or ``false``."""
    _expect(v, isinstance(v, bool), "true or false")
    return v


def str_(v: Any) -> str:
    """A string."""
    _expect(v, isinstance(v, str), "a string")
    return v


def name(v: Any) -> str:
    """A scenario name: 1 or more of ``[A-Za-z0-9_.-]``."""
    v = str_(v)
    if not _NAME_RE.match(v):
        raise Bad(f"must be 1 or more of [A-Za-z0-9_.-], got {v!r}")
    return v


def choice(*options: str) -> Callable[[Any], str]:
    """One of ``options``."""
    def check(v: Any) -> str:
        v = str_(v)
        if v not in options:
            raise Bad(f"must be one of {', '.join(repr(o) for o in options)}, got {v!r}")
        return v

    return check


def list_of(options: tuple[str, ...], *, nonempty: bool = False) -> Callable[[Any], tuple[str, ...]]:
    """A list of strings among ``options`` (not empty when ``nonempty``), as a tuple."""
    def check(v: Any) -> tuple[str, ...]:
        _expect(v, isinstance(v, list), "a list of strings")
        if nonempty and not v:
            raise Bad("must not be empty")
        for item in v:
            if not isinstance(item, str) or item not in options:
                raise Bad(f"items must be among {', '.join(options)}, got {item!r}")
        return tuple(v)

    return check


def range_ms(v: Any) -> tuple[float, float]:
    """A time in ms, or ``[min, max]``; returns ``(min, max)``."""
    if isinstance(v, list):
        if len(v) != 2:
            raise Bad(f"expected a number or [min, max], got a list of {len(v)}")
        lo, hi = (num()(x) for x in v)
        if hi < lo:
            raise Bad(f"[min, max] with max < min: {v!r}")
        return (lo, hi)
    x = num()(v)
    return (x, x)


def key(check: Check) -> dict[str, Check]:
    """Field metadata that makes a ``Params`` field a scenario key checked by ``check``."""
    return {"check": check}


def toml_keys(params_cls: type) -> dict[str, Check]:
    """The scenario keys of a family's ``Params`` dataclass: field name -> checker, in field order."""
    return {f.name: f.metadata["check"] for f in fields(params_cls) if "check" in f.metadata}
