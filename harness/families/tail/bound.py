"""Which tail trials ``--trials N`` keeps (docs/scenarios.md, family ``tail``): a seeded, deterministic subset of
every trial the run's mutations allow (every resumable torn mutation, not only the unbounded plan's
``resume_checks``), one damage class at a time.  Pure.

:func:`bounded` groups the trials by stratum (:func:`stratum`: the check, the form of the damage, the label),
takes one of each stratum of :data:`FIRST` in its order (the damage each class of engine bug is first seen
with), then one of every other stratum in the plan's order, then a second of each, and so on up to ``N``,
each stratum's drawn by a generator seeded with the campaign seed; the result keeps the plan's order.  So
``--trials 5`` holds the five checks of :data:`FIRST`, and any ``N`` at least the number of strata (26 for
``tails-basic``) covers every form of damage.
"""

from __future__ import annotations

import random
import re
from typing import Callable, Sequence, TypeVar

from harness.families.tail.mutations import Mutation

__all__ = ["FIRST", "stratum", "form", "bounded", "round_robin"]

T = TypeVar("T")

#: The strata a bounded plan takes first, in this order, each with the engine bug it is first to show.  The
#: tail mutants of harness/selftest/targets.py (4 trials each) are each caught by one of the first four.
FIRST: tuple[tuple[str, str, str], ...] = (
    # the reader keeps a complete final record (it must not be taken for a torn tail)
    ("reader", "intact", "clean"),
    # a torn last line that ends in its newline is cut before the resume appends (else the append is glued
    # to it, or the damaged line ends up inside the journal)
    ("resume", "zeroed-last+nl", "torn"),
    # a block of NULs inside the journal is corruption the resume refuses, never the journal's end
    ("resume", "nul-block", "corrupt"),
    # a garbage line followed by more is corruption the reader refuses naming its line, never a line it
    # skips (skipping it loses no record, so no gap in the seqs hides a reader that skips bad lines)
    ("reader", "garbage-2lines", "corrupt"),
    # a torn last line without its newline is cut before the resume appends (else the append is glued to
    # it and an acknowledged record is lost: fisk-ai's defect 1, docs/spec.md section 16)
    ("resume", "cut", "torn"),
)

_OFFSETS = re.compile(r"(?<=[a-z])\d+|@[0-9a-f:]*")


def form(mutation_id: str) -> str:
    """The form of damage a mutation id names, without its offsets and counts: ``cut@120`` -> ``cut``,
    ``zeros4096+nl`` -> ``zeros+nl``, ``garbage0-2lines`` -> ``garbage-2lines``, ``flip3@77:00`` -> ``flip``,
    ``mid-run@310+garbage`` -> ``mid-run+garbage``, ``nul-block@88`` -> ``nul-block``."""
    return _OFFSETS.sub("", mutation_id)


def stratum(check: str, m: Mutation) -> tuple[str, str, str]:
    """``(check, form, expect)`` of a trial that checks mutation ``m`` with ``check`` (``reader``, ``resume``)."""
    return check, form(m.id), m.expect


def bounded(trials: Sequence[T], n: int, seed: int, key: Callable[[T], tuple[str, str, str]]) -> list[T]:
    """At most ``n`` of ``trials`` (module docstring), in their order; deterministic for ``(trials, n, seed)``.

    ``key`` gives a trial's stratum.  Raises ``ValueError`` for ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"a bounded tail plan needs at least 1 trial, got {n}")
    if n >= len(trials):
        return list(trials)
    rng = random.Random(f"tail-bound:{seed}")
    strata: dict[tuple[str, str, str], list[int]] = {}
    for i, t in enumerate(trials):
        strata.setdefault(key(t), []).append(i)
    for members in strata.values():
        rng.shuffle(members)
    order = [s for s in FIRST if s in strata] + [s for s in strata if s not in FIRST]
    return [trials[i] for i in sorted(round_robin([strata[s] for s in order], n))]


def round_robin(queues: Sequence[Sequence[T]], limit: int | None = None) -> list[T]:
    """The first item of each queue, then the second of each, and so on, at most ``limit`` (``None``: all)."""
    out: list[T] = []
    depth = 0
    while any(depth < len(q) for q in queues) and (limit is None or len(out) < limit):
        out += [q[depth] for q in queues if depth < len(q)]
        depth += 1
    return out[:limit]
