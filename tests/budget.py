"""How many examples a property test draws: the default suite's count, or a larger one under ``--long``.

``conftest.pytest_configure`` sets :data:`LONG` from ``--long`` before any test module is imported (in each
xdist worker too), so ``@settings(max_examples=examples(100, 400))`` is read at collection with the right
budget.  tests/README.md "What the suite costs (issue 27)" lists what each property draws in each suite.
"""

from __future__ import annotations

#: True when the session runs with ``--long`` (set by conftest.py's ``pytest_configure``).
LONG = False


def examples(default: int, long: int) -> int:
    """The number of examples to draw: ``default`` in the default suite, ``long`` under ``--long``."""
    if not 0 < default <= long:
        raise ValueError(f"examples({default}, {long}): expected 0 < default <= long")
    return long if LONG else default
