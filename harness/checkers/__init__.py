"""The checkers: the only judges of a :class:`~harness.history.model.History`.

One module per invariant of docs/spec.md section 15 (ids ``I1`` .. ``I11``,
listed in :data:`INVARIANTS`, named in :data:`.verdict.CHECKERS`).  Each module
exposes ``check(history) -> Verdict``;
its docstring points to the invariant's normative text and states how it is
judged from the history (its violations' kinds and evidence).

A family (signals, tail, power loss, race) only records facts in the
history; the checkers turn facts into verdicts.  A checker answers
``valid``, ``invalid`` (with evidence enough to act on) or ``unknown`` (the
history cannot decide it).  :func:`check_all` runs them; a checker that
raises is recorded as ``unknown`` with the exception as evidence, never as
``valid``.  Checkers do no IO (tests/test_purity.py): journal bytes are
decoded in memory.

Every evidence dict has ``summary`` (one line); an invalid verdict adds
``violations`` (a list of dicts, each with a ``kind``), and most verdicts
add ``checked`` (how many items were judged).  An unknown one has ``reason``.

The :class:`Verdict` type, the statuses and :func:`combine` live in
:mod:`.verdict` and are exported here.
"""

from __future__ import annotations

from typing import Any

from harness.checkers import (i1_suspend, i2_tool_reruns, i3_model_repeats, i4_acknowledged, i5_readable,
                              i6_reference, i7_conversation, i8_one_writer, i9_refusal, i10_reading,
                              i11_workload)
from harness.checkers.verdict import (CHECKERS, INVALID, INVARIANTS, STATUSES, UNKNOWN, VALID, Verdict, combine, make,
                                      verdict_from_json)
from harness.checkers.journal_view import shared_splits
from harness.history.model import History, history_from_json

__all__ = ["VALID", "INVALID", "UNKNOWN", "STATUSES", "INVARIANTS", "Verdict", "check_all",
           "verdict_from_json", "combine", "make"]

#: id -> checker module (``check`` is looked up at call time).
_MODULES: dict[str, Any] = {
    "I1": i1_suspend, "I2": i2_tool_reruns, "I3": i3_model_repeats, "I4": i4_acknowledged, "I5": i5_readable,
    "I6": i6_reference, "I7": i7_conversation, "I8": i8_one_writer, "I9": i9_refusal, "I10": i10_reading,
    "I11": i11_workload,
}
_TABLE = CHECKERS


def _id(inv: str) -> str:
    """``inv`` as registered (``i4`` -> ``I4``)."""
    return inv.upper()


def _where(exc: BaseException, frames: int = 3) -> str:
    """The last ``frames`` frames of ``exc``'s traceback, from the code objects only (no source is read)."""
    rows = []
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        rows.append(f'  File "{code.co_filename}", line {tb.tb_lineno}, in {code.co_name}\n')
        tb = tb.tb_next
    return ("".join(rows[-frames:]) + f"{type(exc).__name__}: {exc}\n")[-2000:]


def check_all(history: History | dict[str, Any], invariants: list[str] | None = None) -> list[Verdict]:
    """Run the checkers of ``invariants`` (default: ``I1`` .. ``I11``, in id order) on ``history``.

    docs/spec.md section 15.  ``history`` may be a :class:`History` or its
    JSON form.  Ids are ``I1`` .. ``I11`` (any case).  Unknown
    ids raise ``ValueError`` naming the known ones.  A checker that raises,
    or returns something that is not a :class:`Verdict` for its id, yields
    an ``unknown`` verdict whose evidence holds the error and the last
    frames of its traceback.
    """
    if isinstance(history, dict):
        history = history_from_json(history)
    ids = list(INVARIANTS) if invariants is None else [_id(i) for i in invariants]
    bad = [i for i in ids if i not in _TABLE]
    if bad:
        raise ValueError(f"unknown invariant id(s) {bad}; known: {', '.join(_TABLE)}")
    out = []
    with shared_splits():  # the checkers ask for the same few journal snapshots: each split once
        for inv in ids:
            out.append(_check(inv, history))
    return out


def _check(inv: str, history: History) -> Verdict:
    """The verdict of checker ``inv`` on ``history``: an ``unknown`` one when it raises or returns no verdict
    for ``inv`` (:func:`check_all`)."""
    modname, name = _TABLE[inv]
    checker = f"{__name__}.{modname}"
    try:
        verdict = _MODULES[inv].check(history)
        if not isinstance(verdict, Verdict) or verdict.invariant != inv:
            raise TypeError(f"{checker}.check returned {verdict!r:.120}, expected a Verdict for {inv}")
    except Exception as exc:  # noqa: BLE001 - a crashing checker is unknown, never valid
        verdict = Verdict(inv, name, UNKNOWN, {
            "summary": f"checker raised {type(exc).__name__}: {exc}",
            "reason": "checker raised",
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": _where(exc),
        }, checker)
    return verdict
