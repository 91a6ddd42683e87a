"""Expectations that more than one race checks: a refused probe, exactly one winner of two."""

from __future__ import annotations

from typing import Any

from harness.families.race.driver import AgentTimeout
from harness.families.race.trial import Role, Trial, brief

__all__ = ["probe_refused", "exactly_one_won"]


def probe_refused(t: Trial, b: Role, holder: Role, what: str, **fields: Any) -> bool:
    """B tries to open the run while ``holder`` holds it: it must be refused at once and change nothing."""
    before = t.snapshot()
    try:
        msg = t.call(b, "open", timeout=t.at_once_timeout, **fields)
    except AgentTimeout as exc:
        t.expect(False, "blocked", f"{what}: leg {b.index} did not answer within {t.at_once_timeout:g} s while "
                 f"leg {holder.index} held the run (it waits instead of being refused)", leg=b.index, error=str(exc))
        raise
    refused = not msg.get("ok") and (msg.get("error") or {}).get("kind") == "RunLocked"
    if msg.get("ok"):
        t.call(b, "close")
    t.expect(refused, "not_refused", f"{what}: leg {b.index} was not refused with RunLocked while leg "
             f"{holder.index} held the run: {msg.get('error') or 'it got the lock'}", leg=b.index,
             answer=brief(msg))
    if refused:
        t.at_once(b, msg, "refusal_ms")
    after = t.snapshot()
    t.expect(before == after, "refused_writer_changed_journal", f"{what}: the journal changed across leg {b.index}'s "
             f"refused open ({len(before or b'')} -> {len(after or b'')} bytes)", leg=b.index)
    return refused


def exactly_one_won(t: Trial, a: Role, b: Role, what: str, rule: str) -> list[Role]:
    """Of ``a`` and ``b`` (both finished) exactly one ended ok and the other was refused; return the winners.

    ``what`` names the two and what winning is (``"resumers proceeded"``),
    ``rule`` states the expectation in the violation's message.
    """
    winners = [r for r in (a, b) if r.outcome == "ok"]
    t.expect(len(winners) == 1, "not_exactly_one", f"{len(winners)} of the two {what} "
             f"({', '.join(f'leg {r.index}: {r.outcome}' for r in (a, b))}); {rule}",
             outcomes={r.name: r.outcome for r in (a, b)})
    for r in (a, b):
        t.expect(r.outcome in ("ok", "refused"), "unexpected_error", f"leg {r.index} failed: {r.error}", leg=r.index)
    return winners
