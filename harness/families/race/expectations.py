"""Expectations that more than one race meets: a refused probe, exactly one winner of two.

These only record (:meth:`~harness.families.race.trial.Trial.record`): what
the race expects and what the agents answered.  :mod:`harness.checkers.race`
judges the facts.
"""

from __future__ import annotations

import hashlib
from typing import Any

from harness.families.race.driver import AgentTimeout
from harness.families.race.trial import Role, Trial, brief

__all__ = ["digest", "probe_refused", "exactly_one_won", "answered"]


def digest(data: bytes | None) -> dict[str, Any] | None:
    """A journal snapshot as a fact: its size and SHA-256 (``None``: no journal)."""
    return None if data is None else {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def answered(t: Trial, role: Role, op: str, error: str | None, *, holder: Role | None = None,
             what: str | None = None) -> None:
    """Record whether ``role`` answered its ``op`` within the at-once timeout (``error``: the timeout, else None)."""
    t.record("answered", {"within_s": t.at_once_timeout}, {"answered": error is None, "error": error},
             leg=role.index, op=op, holder=None if holder is None else holder.index, what=what)


def probe_refused(t: Trial, b: Role, holder: Role, what: str, **fields: Any) -> bool:
    """B tries to open the run while ``holder`` holds it: it must be refused at once and change nothing.

    Records ``answered``, ``refused``, ``at_once`` (for a refusal) and
    ``journal_unchanged``; returns True when B was refused (re-raises
    :class:`AgentTimeout` when it did not answer).
    """
    before = t.snapshot()
    try:
        msg = t.call(b, "open", timeout=t.at_once_timeout, **fields)
    except AgentTimeout as exc:
        answered(t, b, "open", str(exc), holder=holder, what=what)
        raise
    answered(t, b, "open", None, holder=holder, what=what)
    refused = not msg.get("ok") and (msg.get("error") or {}).get("kind") == "RunLocked"
    if msg.get("ok"):
        t.call(b, "close")
    t.record("refused", {"error": "RunLocked"}, {"answer": brief(msg)}, leg=b.index, holder=holder.index, what=what)
    if refused:
        t.at_once(b, msg, "refusal_ms")
    t.record("journal_unchanged", "unchanged", {"before": digest(before), "after": digest(t.snapshot())},
             leg=b.index, op="open", what=what)
    return refused


def exactly_one_won(t: Trial, a: Role, b: Role, what: str, rule: str) -> list[Role]:
    """Of ``a`` and ``b`` (both finished) exactly one must end ok and the other be refused; return the winners.

    ``what`` names the two and what winning is (``"resumers proceeded"``),
    ``rule`` states the expectation in the violation's message.  Records
    ``one_winner`` and one ``no_error`` per role.
    """
    t.record("one_winner", 1, {"outcomes": [{"leg": r.index, "role": r.name, "outcome": r.outcome} for r in (a, b)]},
             what=what, rule=rule)
    for r in (a, b):
        t.record("no_error", ["ok", "refused"], {"outcome": r.outcome, "error": r.error}, leg=r.index)
    return [r for r in (a, b) if r.outcome == "ok"]
