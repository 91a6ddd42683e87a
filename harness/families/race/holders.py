"""Races ``holder-killed`` and ``lock-survives-other-fds``: a SIGKILLed holder's lock goes with it, and only then.

The scripts record facts only; :mod:`harness.checkers.race` judges them.
"""

from __future__ import annotations

import os
import shutil
import time
from time import monotonic_ns as mono
from typing import Any

from harness.families.race.expectations import probe_refused
from harness.families.race.driver import sigkill
from harness.families.race.trial import Role, Trial, brief

__all__ = ["holder_killed", "lock_survives_other_fds"]


def _kill_candidates(t: Trial, n: int) -> list[dict[str, Any]]:
    k = t.rng.randint(1, n + 1)
    return [
        {"op": "write", "path": "journal", "k": k, "when": t.rng.choice(["before", "after"])},
        {"op": "fsync", "path": "journal", "k": k, "when": t.rng.choice(["before", "after"])},
        {"op": "flock", "path": "lock", "k": 1, "when": "after"},
        {"op": "open", "path": "journal", "k": 1, "when": "after"},
        {"op": "close", "path": "journal", "k": 1, "when": "before"},
        {"op": "close", "path": "lock", "k": 1, "when": "before"},
    ]


def _take_over(t: Trial, b: Role, after: str) -> dict[str, Any] | None:
    """B opens the run once its holder is dead: it must get it at once; return the answer, or None if refused.

    ``after`` says what happened to the holder, for the violation's message.
    """
    msg = t.call(b, "open", timeout=t.at_once_timeout)
    t.outcome(b, msg)
    t.record("taken_over", {"ok": True}, {"answer": brief(msg)}, leg=b.index, after=after)
    if not msg.get("ok", False):
        return None
    t.at_once(b, msg, "takeover_ms")
    return msg


def holder_killed(t: Trial) -> None:
    """A is SIGKILLed holding the run (at a seam call, mid write, or after some acks); B then opens it."""
    t.seed_run("records", n=t.rng.randint(0, 2))
    a, b = t.roles_for(("A", "holder"), ("B", "next-writer"), fork=("A",))
    if t.schedule == "kill-after-acks":
        n = t.rng.randint(80, 200)
        ident = t.send(a, "open", n=n, tag="A", terminal="suspended", close=True)
        k = t.rng.randint(1, n // 4)
        a.agent.wait_for(lambda m: m.get("event") == "ack" and m.get("seq", 0) >= k, t.timeout_s, f"ack {k}")
        spin = t.rng.randint(0, 200)
        until = mono() + spin * 1000
        while mono() < until:
            pass
        t.step(a, "kill", after_ack=k, spin_us=spin)
        if any(m.get("id") == ident for m in a.agent.inbox):
            t.notes.append("the holder finished its session before the timed kill landed")
    else:
        n = t.rng.randint(1, 5)
        if t.schedule == "kill-mid-write":
            bp = {"op": "write", "path": "journal", "k": t.rng.randint(1, n + 1), "split": round(t.rng.uniform(0.05, 0.95), 2)}
        else:
            bp = t.rng.choice(_kill_candidates(t, n))
        ident = t.send(a, "open", n=n, tag="A", terminal="suspended", close=True, pause=[{"name": "kill-here", **bp}])
        msg = t.maybe_paused(a, ident)
        if msg.get("id") == ident:
            t.notes.append("holder finished before its kill point")
        t.step(a, "kill", at=bp)
    a.detail["kill"] = t.steps[-1]
    t.kill(a)
    acked = [m.get("seq", 0) for m in a.agent.drain_events("ack")]
    msg = _take_over(t, b, f"after leg {a.index} was SIGKILLed and reaped")
    if msg is not None:
        t.record("acked_kept", "last_seq >= every acked seq", {"last_seq": msg.get("last_seq", 0), "acked": acked},
                 leg=b.index, holder=a.index)
        t.outcome(b, t.call(b, "append", n=t.rng.randint(1, 3), tag="B", terminal="suspended", close=True))
    a.detail["acked"] = acked
    t.finish(b)


def lock_survives_other_fds(t: Trial) -> None:
    """A's lock survives its other descriptors and a child that exits; once A is SIGKILLed, B gets the run."""
    t.seed_run("records", n=t.rng.randint(0, 2))
    a, b = t.roles_for(("A", "holder"), ("B", "prober"), fork=("A",))
    t.outcome(a, t.call(a, "open"))
    true_bin, sleep_bin = shutil.which("true") or "/bin/true", shutil.which("sleep") or "/bin/sleep"
    actions: list[tuple[str, dict[str, Any]]] = [
        ("load", {}), ("other_fd", {"file": "journal"}), ("other_fd", {"file": "lock"}),
        ("spawn", {"argv": [true_bin], "wait": True}),
    ]
    t.rng.shuffle(actions)
    try:
        for op, fields in actions:
            msg = t.call(a, op, **fields)
            t.record("holder_step", {"ok": True}, {"answer": brief(msg)}, leg=a.index, op=op)
            what = f"after A's {op}{' ' + fields['file'] if 'file' in fields else ''}"
            probe_refused(t, b, a, what)
        t.outcome(a, t.call(a, "append", n=t.rng.randint(1, 3), tag="A"))
        msg = t.call(a, "spawn", argv=[sleep_bin, "30"], wait=False)
        if msg.get("ok"):
            t.children.append(msg["pid"])
            # Barrier: posix_spawn (vfork) returns once the child reaches exec, but the child closes its
            # close-on-exec descriptors a moment later; its comm turns to the new image's name only after.
            _exec_done(msg["pid"], os.path.basename(sleep_bin), t.timeout_s)
        t.step(a, "kill", with_child=msg.get("pid"))
        t.kill(a)
        if _take_over(t, b, f"after leg {a.index} was SIGKILLed (its child pid "
                      f"{t.children[-1] if t.children else '?'} still running)") is not None:
            t.outcome(b, t.call(b, "append", n=1, tag="B", terminal="suspended", close=True))
    finally:
        for pid in t.children:
            sigkill(pid)
    for role in (a, b):
        t.finish(role)


def _exec_done(pid: int, name: str, timeout: float) -> None:
    """Wait until process ``pid`` has finished exec'ing ``name`` (its /proc comm shows it) or is gone."""
    deadline = time.monotonic() + timeout
    path = f"/proc/{pid}/comm"
    while time.monotonic() < deadline:
        try:
            with open(path, "rb") as f:
                if f.read().strip() == name.encode()[:15]:
                    return
        except OSError:
            return
        os.sched_yield()
