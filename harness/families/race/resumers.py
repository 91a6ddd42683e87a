"""Race ``two-resumers``: of two resumes of a pending batch exactly one proceeds; each unanswered tool runs once."""

from __future__ import annotations

from harness.families.race.driver import AgentTimeout
from harness.families.race.expectations import exactly_one_won
from harness.families.race.to_history import ledger_effects
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
        except AgentTimeout:
            t.expect(False, "blocked", f"leg {b.index}'s resume did not answer within {t.at_once_timeout:g} s while "
                     f"leg {a.index} held the run", leg=b.index)
            raise
        t.outcome(b, msg, refusals)
        if b.outcome == "refused":
            t.at_once(b, msg, "refusal_ms")
        t.cont(a)
        t.outcome(a, t.reply(a, ident), refusals)
    for role in (a, b):
        t.finish(role)
    exactly_one_won(t, a, b, "resumers proceeded", "exactly one must")
    # each unanswered tool runs once, an answered one never
    runs: dict[str, int] = {}
    for e in ledger_effects(t):
        runs[e.tool_use_id] = runs.get(e.tool_use_id, 0) + 1
    ids = [f"toolu_race_{i}" for i in range(tools)]
    for i, tid in enumerate(ids):
        want = 0 if i < answered else 1
        t.expect(runs.get(tid, 0) == want, "tool_runs", f"tool {tid} ran {runs.get(tid, 0)} time(s), expected {want} "
                 f"({'answered before the race' if want == 0 else 'unanswered'})", tool_use_id=tid)
