"""Race ``readers-during-appends``: load and list during split appends never fail, never go back, see a torn tail.

The script records what the poller saw (facts ``mid_write_snapshot`` and
``poll``); :mod:`harness.checkers.race` judges them.
"""

from __future__ import annotations

from harness.families.race.trial import Trial

__all__ = ["readers_during_appends"]


def readers_during_appends(t: Trial) -> None:
    """A poller loads and lists in a loop while a writer appends, its writes split at sequence points."""
    t.seed_run("records", n=t.rng.randint(0, 2))
    p, w = t.roles_for(("P", "poller"), ("W", "writer"))
    poll_id = t.send(p, "poll")
    p.agent.wait_for(lambda m: m.get("event") == "polling", t.timeout_s, "polling")
    n = t.rng.randint(5, 15)
    pauses = []
    if t.schedule == "split-writes":
        for k in sorted(t.rng.sample(range(1, n + 2), t.rng.randint(1, 3))):
            pauses.append({"name": f"torn-{k}", "op": "write", "path": "journal", "k": k,
                           "split": round(t.rng.uniform(0.05, 0.95), 2)})
    ident = t.send(w, "open", n=n, tag="W", terminal="suspended", close=True, pause=pauses, spin_us=t.spin())
    answered = None
    for bp in pauses:
        msg = t.maybe_paused(w, ident)
        if msg.get("event") != "paused":  # the writer ended before its breakpoint (refused by a reader?)
            answered = msg
            break
        acked = [m.get("seq", 0) for m in w.agent.inbox if m.get("event") == "ack"]
        p.agent.raw("snapshot")
        obs = p.agent.wait_for(lambda m: m.get("event") == "observed", t.timeout_s, "snapshot")
        t.step(p, "observed", load=obs.get("load"), list=obs.get("list"))
        t.record("mid_write_snapshot", "load and list without error, a torn tail, no acked seq missing",
                 {"load": obs.get("load", {}), "list": obs.get("list", {}), "acked": acked},
                 leg=p.index, writer=w.index, at=bp["name"])
        t.cont(w)
    w_msg = answered if answered is not None else t.reply(w, ident)
    t.outcome(w, w_msg)
    t.record("writer_ok", "the writer appends all its records: readers never take the run from it",
             {"answer": {"ok": w_msg.get("ok", False), "error": w_msg.get("error")}}, leg=w.index)
    p.agent.raw("stop")
    msg = t.reply(p, poll_id)
    t.outcome(p, msg)
    p.detail["poll"] = {k: msg.get(k) for k in ("loops", "torn", "max_seq")}
    t.metrics.setdefault("poll_loops", []).append(float(msg.get("loops", 0)))
    t.record("poll", "no error, the seq never goes back",
             {"errors": (msg.get("errors") or [])[:5], "error_count": len(msg.get("errors") or []),
              "regressions": msg.get("regressions")}, leg=p.index)
    for role in (p, w):
        t.finish(role)
