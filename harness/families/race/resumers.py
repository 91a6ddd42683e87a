"""Race ``two-resumers``: of two resumes of a pending batch exactly one proceeds; each unanswered tool runs once.

The script records facts only; :mod:`harness.checkers.race` judges them
(the tool runs from the history's effects ledger).
"""

from __future__ import annotations

from harness.families.race.driver import AgentTimeout
from harness.families.race.expectations import answered as answered_in_time
from harness.families.race.expectations import exactly_one_won
from harness.families.race.trial import Trial

__all__ = ["two_resumers"]


def two_resumers(t: Trial) -> None:
    """Two resumes of a pending batch: together, the loser paused at its lock, or B while A is in a tool."""
    tools = t.rng.randint(2, 4)
    answered = t.rng.randint(0, tools - 1)
    t.seed_run("pending", tools=tools, answered=answered)
    a, b = t.roles_for(("A", "resumer"), ("B", "resumer"))
    refusals = ("RunLocked", "ResumeRefused")
    if t.schedule == "together":
        first, second = (a, b) if t.rng.random() < 0.5 else (b, a)
        ids = {first.name: t.send(first, "resume", spin_us=t.spin()), second.name: t.send(second, "resume", spin_us=t.spin())}
        for role in (a, b):
            t.outcome(role, t.reply(role, ids[role.name]), refusals)
    elif t.schedule == "loser-waits-at-lock":
        ident = t.send(b, "resume", pause=[{"name": "at-lock", "op": "flock", "path": "lock", "k": 1, "when": "before"}])
        t.paused(b)
        t.outcome(a, t.call(a, "resume"), refusals)
        t.cont(b)
        t.outcome(b, t.reply(b, ident), refusals)
    else:  # winner-in-tool: A holds the run inside its first tool; B resumes then
        ident = t.send(a, "resume", pause=[{"name": "in-tool", "op": "tool", "path": "any", "k": 1, "when": "after"}])
        t.paused(a)
        try:
            msg = t.call(b, "resume", timeout=t.at_once_timeout)
        except AgentTimeout as exc:
            answered_in_time(t, b, "resume", str(exc), holder=a)
            raise
        answered_in_time(t, b, "resume", None, holder=a)
        t.outcome(b, msg, refusals)
        if b.outcome == "refused":
            t.at_once(b, msg, "refusal_ms")
        t.cont(a)
        t.outcome(a, t.reply(a, ident), refusals)
    for role in (a, b):
        t.finish(role)
    exactly_one_won(t, a, b, "resumers proceeded", "exactly one must")
    # each unanswered tool runs once, an answered one never: counted from the history's effects (the ledger)
    ids = [f"toolu_race_{i}" for i in range(tools)]
    t.record("tool_runs", {tid: 0 if i < answered else 1 for i, tid in enumerate(ids)}, "history.effects",
             answered_before=ids[:answered])
