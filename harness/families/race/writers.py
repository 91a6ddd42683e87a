"""Race ``two-writers``: while A holds the run, B is refused at once and changes no byte; sessions never interleave.

The script records facts only; :mod:`harness.checkers.race` judges them
(the sessions from the final journal's bytes, recorded as latin-1 text).
"""

from __future__ import annotations

from harness.families.race.expectations import probe_refused
from harness.families.race.trial import Trial, brief

__all__ = ["two_writers", "record_sessions"]

_LOCKED = ("RunLocked",)


def two_writers(t: Trial) -> None:
    """A holds the run (idle, paused mid-append, or just released) while B opens it; or both run free sessions."""
    t.seed_run("records", n=t.rng.randint(0, 3))
    a, b = t.roles_for(("A", "writer"), ("B", "writer"))
    n = t.rng.randint(1, 4)
    if t.schedule == "holder-idle":
        msg = t.call(a, "open")
        t.outcome(a, msg)
        probe_refused(t, b, a, "A holds the run, idle")
        t.outcome(b, b.replies[-1], _LOCKED)
        t.outcome(a, t.call(a, "append", n=n, tag="A", terminal="suspended", close=True))
    elif t.schedule == "holder-mid-append":
        bp = t.rng.choice([
            {"op": "fsync", "path": "journal", "k": t.rng.randint(1, n + 1), "when": t.rng.choice(["before", "after"])},
            {"op": "write", "path": "journal", "k": t.rng.randint(1, n + 1), "split": round(t.rng.uniform(0.1, 0.9), 2)},
            {"op": "flock", "path": "lock", "k": 1, "when": "after"},
            {"op": "close", "path": "journal", "k": 1, "when": "before"},
        ])
        ident = t.send(a, "open", n=n, tag="A", terminal="suspended", close=True, pause=[{"name": "hold", **bp}])
        t.paused(a)
        probe_refused(t, b, a, f"A paused at {bp['op']} of the {bp['path']}")
        t.outcome(b, b.replies[-1], _LOCKED)
        t.cont(a)
        t.outcome(a, t.reply(a, ident))
    elif t.schedule == "release-gap":
        ident = t.send(a, "open", n=n, tag="A", terminal="suspended", close=True,
                       pause=[{"name": "released", "op": "close", "path": "lock", "k": 1, "when": "after"}])
        t.paused(a)
        msg = t.call(b, "open", n=t.rng.randint(1, 3), tag="B", terminal="suspended", close=True)
        t.outcome(b, msg, _LOCKED)
        t.cont(a)
        t.outcome(a, t.reply(a, ident))
        t.record("released_open", {"outcome": "ok"}, {"outcome": b.outcome, "error": b.error}, leg=b.index,
                 holder=a.index)
    else:  # free: both run sessions (open, append, close) as fast as they can
        rounds = t.rng.randint(2, 4)
        ids = {}
        for role in (a, b) if t.rng.random() < 0.5 else (b, a):
            ids[role.name] = t.send(role, "session", rounds=rounds, n=n, tag=role.name, spin_us=t.spin())
        for role in (a, b):
            msg = t.reply(role, ids[role.name])
            t.outcome(role, msg)
            for r in msg.get("rounds", []):
                if r["outcome"] == "locked":
                    t.measure("refusal_ms", r["t1"] - r["t0"])
            t.record("session_ok", {"ok": True}, {"answer": brief(msg)}, leg=role.index)
    for role in (a, b):
        t.finish(role)
    record_sessions(t)


def record_sessions(t: Trial) -> None:
    """Record the final journal: the lines of one writer's session (its tag) must be contiguous and in order."""
    data = t.snapshot() or b""
    t.record("sessions_contiguous", "each session's lines contiguous", {"journal": data.decode("latin-1")})
