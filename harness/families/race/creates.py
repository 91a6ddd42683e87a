"""Race ``two-creates``: of two creates of one named run exactly one wins; the journal is all the winner's records.

The script records facts only; :mod:`harness.checkers.race` judges them.
"""

from __future__ import annotations

from typing import Any

from harness.families.race.driver import AgentTimeout
from harness.families.race.expectations import answered, digest, exactly_one_won
from harness.families.race.trial import Role, Trial

__all__ = ["two_creates"]


def two_creates(t: Trial) -> None:
    """Two creates of one run: together, both paused at their first open, or B while A is mid-create."""
    a, b = t.roles_for(("A", "creator"), ("B", "creator"))
    n = {a.name: t.rng.randint(0, 3), b.name: t.rng.randint(0, 3)}

    def create(role: Role, **extra: Any) -> int:
        return t.send(role, "create", n=n[role.name], tag=role.name, terminal="suspended", close=True, **extra)

    if t.schedule == "together":
        order = (a, b) if t.rng.random() < 0.5 else (b, a)
        ids = {r.name: create(r, spin_us=t.spin()) for r in order}
        for role in (a, b):
            t.outcome(role, t.reply(role, ids[role.name]), ("RunExists",))
    elif t.schedule == "both-paused-at-first-open":
        bp = [{"name": "first-open", "op": "open", "path": "any", "k": 1, "when": "before"}]
        first, second = (a, b) if t.rng.random() < 0.5 else (b, a)
        ids = {first.name: create(first, pause=bp), second.name: create(second, pause=bp)}
        t.paused(first)
        t.paused(second)
        t.cont(first)
        t.outcome(first, t.reply(first, ids[first.name]), ("RunExists",))
        t.cont(second)
        t.outcome(second, t.reply(second, ids[second.name]), ("RunExists",))
    else:  # winner-mid-create: A paused between its meta write and fsync; B creates then
        ident = create(a, pause=[{"name": "mid-create", "op": t.rng.choice(["write", "fsync"]), "path": "journal",
                                  "k": 1, "when": "after"}])
        t.paused(a)
        before = t.snapshot()
        try:
            msg = t.call(b, "create", timeout=t.at_once_timeout, n=n[b.name], tag=b.name, terminal="suspended",
                         close=True)
        except AgentTimeout as exc:
            answered(t, b, "create", str(exc))
            raise
        answered(t, b, "create", None)
        t.outcome(b, msg, ("RunExists",))
        if b.outcome == "refused":
            t.at_once(b, msg, "refusal_ms")
        t.record("journal_unchanged", "unchanged", {"before": digest(before), "after": digest(t.snapshot())},
                 leg=b.index, op="create", what=None)
        t.cont(a)
        t.outcome(a, t.reply(a, ident), ("RunExists",))
    for role in (a, b):
        t.finish(role)
    winners = exactly_one_won(t, a, b, "creates succeeded", "exactly one must win, the other get RunExists")
    if len(winners) == 1:
        w = winners[0]
        seqs = next((m.get("seqs") for m in reversed(w.replies) if m.get("seqs")), [])
        final = t.snapshot() or b""
        lines = [ln for ln in final.splitlines(keepends=True) if ln.endswith(b"\n")]
        t.record("winner_records", "journal_lines == acknowledged", {"journal_lines": len(lines),
                                                                      "acknowledged": len(seqs)}, leg=w.index)
