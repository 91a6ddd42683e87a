"""The "did you mean" of a misspelt name: a scenario, a key, a mutant (pure: no IO)."""

from __future__ import annotations

import difflib
from typing import Iterable

__all__ = ["did_you_mean"]


def did_you_mean(word: str, choices: Iterable[str], n: int = 3) -> str:
    """``"; did you mean 'a' or 'b'?"`` naming the (at most ``n``) ``choices`` closest to ``word``
    (:func:`difflib.get_close_matches`, cutoff 0.6), or ``""`` when none is close: a suffix for an
    error message that already names ``word``."""
    close = difflib.get_close_matches(word, list(choices), n=n, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
