"""One race trial: its roles, its store, and the steps a race's script takes through them.

A :class:`Trial` is what a race function (:mod:`.writers`, :mod:`.resumers`,
:mod:`.creates`, :mod:`.holders`, :mod:`.readers`) works with: it hands out
roles (one agent each, one :class:`~harness.history.model.Leg` each), sends
commands and waits for answers and pauses (recording every step), and
collects the race's facts (what each expectation met: :meth:`Trial.record`)
and metrics.  It judges nothing: :mod:`harness.checkers.race` does.
"""

from __future__ import annotations

import os
import random
import tempfile
from dataclasses import dataclass, field
from time import monotonic_ns as mono
from typing import Any

from harness.families.race.catalog import JITTER_US, SCHEDULES
from harness.families.race.driver import AgentProc, AgentTimeout, RaceDriver
from harness.families.race.traces import timed_trace
from harness.runner.process import sigkill

__all__ = ["SetupFailed", "Role", "Trial", "brief"]


class SetupFailed(Exception):
    """The run a race needs could not be prepared (the trial is judged unknown, not valid)."""


def brief(msg: dict[str, Any]) -> dict[str, Any]:
    """The fields of an agent's answer worth keeping in a step or a leg's stdout."""
    return {k: v for k, v in msg.items() if k in ("ok", "error", "seqs", "last_seq", "reason", "opened_ns")}


@dataclass
class Role:
    """One agent's part in a trial: becomes one :class:`Leg`."""

    index: int
    name: str
    kind: str
    agent: AgentProc
    trace: str
    timing: str
    t_start: int = 0
    t_end: int = 0
    outcome: str = "ok"          # ok | refused | error | killed
    error: dict[str, Any] | None = None
    exit_code: int | None = 0
    killed: bool = False
    journal: bytes | None = None
    replies: list[dict[str, Any]] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)
    finished: bool = False
    pid: int = 0
    forked: bool = False


class Trial:
    """One trial of ``race`` with ``seed``: a fresh store under ``workdir``, its roles, steps and facts.

    ``rng`` (seeded from the race and seed) draws the schedule, unless one
    is given, and every parameter of the race's script.
    """

    def __init__(self, driver: RaceDriver, race: str, seed: int, workdir: str, schedule: str | None,
                 timeout_s: float) -> None:
        self.driver, self.race, self.seed = driver, race, seed
        self.rng = random.Random(f"{race}/{seed}")
        self.schedule = schedule or self.rng.choice(SCHEDULES[race])
        if self.schedule not in SCHEDULES[race]:
            raise ValueError(f"race {race!r} has no schedule {self.schedule!r}; known: {', '.join(SCHEDULES[race])}")
        self.timeout_s = timeout_s
        self.at_once_timeout = driver.at_once_timeout_s
        self.at_once_ms = driver.at_once_ms
        os.makedirs(workdir, exist_ok=True)
        self.dir = tempfile.mkdtemp(prefix=f"{race}-{seed}-", dir=workdir)
        self.store = os.path.join(self.dir, "state", "fisk-ai", "runs")
        os.makedirs(self.store, mode=0o700)
        for d in (self.store, os.path.dirname(self.store), os.path.dirname(os.path.dirname(self.store))):
            os.chmod(d, 0o700)
        self.run_id = f"race-{seed}"
        self.journal_path = os.path.join(self.store, self.run_id + ".json")
        self.ledger = os.path.join(self.dir, "effects.jsonl")
        self.model = f"scripted:{seed % 1000}:1"
        self.roles: list[Role] = []
        self.steps: list[dict[str, Any]] = []
        self.facts: list[dict[str, Any]] = []   # expectations met, with what was observed (RaceFacts)
        self.metrics: dict[str, list[float]] = {}
        self.notes: list[str] = []
        self.children: list[int] = []
        self.free: list[AgentProc] = []   # agents of finished roles, free for a later role of this trial
        self.t0 = mono()

    # -- roles -------------------------------------------------------------------------------------

    def roles_for(self, *names_kinds: tuple[str, str], fork: tuple[str, ...] = ()) -> list[Role]:
        """New roles (legs), each on its own agent: a finished role's agent is reused, else the pool's.

        Roles named in ``fork`` run in a child the agent forks, so that a
        SIGKILL ends the role but not the pooled agent.
        """
        reuse, self.free = self.free[:len(names_kinds)], self.free[len(names_kinds):]
        agents = reuse + (self.driver.take(len(names_kinds) - len(reuse)) if len(names_kinds) > len(reuse) else [])
        out = []
        for agent, (name, kind) in zip(agents, names_kinds):
            index = len(self.roles)
            role = Role(index, name, kind, agent, os.path.join(self.dir, f"leg{index}.trace"),
                        os.path.join(self.dir, f"leg{index}.timing"))
            self.roles.append(role)
            out.append(role)
        for role in out:
            role.agent.inbox.clear()  # events left from an earlier trial
            role.pid = role.agent.pid
            if role.name in fork:
                role.pid, role.forked = role.agent.fork(self.timeout_s), True
                self.step(role, "forked", pid=role.pid)
            role.t_start = mono()
            self.call(role, "begin", store=self.store, run_id=self.run_id, leg=role.index, trace=role.trace,
                      timing=role.timing, ledger=self.ledger, model=self.model)
        return out

    def step(self, role: Role, what: str, **info: Any) -> None:
        self.steps.append({"t_ms": round((mono() - self.t0) / 1e6, 3), "leg": role.index, "role": role.name,
                           "step": what, **info})

    def send(self, role: Role, op: str, **fields: Any) -> int:
        shown = {k: v for k, v in fields.items() if k not in ("store", "trace", "timing", "ledger")}
        self.step(role, "send", op=op, **shown)
        return role.agent.send(op, **fields)

    def reply(self, role: Role, ident: int, timeout: float | None = None) -> dict[str, Any]:
        msg = role.agent.reply(ident, timeout or self.timeout_s)
        role.replies.append(msg)
        info = {"ok": msg.get("ok")}
        if not msg.get("ok"):
            info["error"] = (msg.get("error") or {}).get("kind")
        self.step(role, "answer", **info)
        return msg

    def call(self, role: Role, op: str, timeout: float | None = None, **fields: Any) -> dict[str, Any]:
        return self.reply(role, self.send(role, op, **fields), timeout)

    def paused(self, role: Role, timeout: float | None = None) -> dict[str, Any]:
        ev = role.agent.wait_for(lambda m: m.get("event") == "paused", timeout or self.timeout_s, "pause")
        self._step_paused(role, ev)
        return ev

    def _step_paused(self, role: Role, ev: dict[str, Any]) -> None:
        self.step(role, "paused", at=ev.get("name"), op=ev.get("op"), path=ev.get("path"), when=ev.get("when"),
                  n=ev.get("n"))

    def maybe_paused(self, role: Role, ident: int, timeout: float | None = None) -> dict[str, Any]:
        """The pause event, or the command's answer if it finished without reaching its breakpoint."""
        msg = role.agent.wait_for(lambda m: m.get("event") == "paused" or m.get("id") == ident,
                                  timeout or self.timeout_s, "pause or answer")
        if msg.get("event") == "paused":
            self._step_paused(role, msg)
        else:
            role.replies.append(msg)
            self.step(role, "answer", ok=msg.get("ok"), note="finished before its breakpoint")
        return msg

    def cont(self, role: Role) -> None:
        self.step(role, "continue")
        role.agent.cont()

    def kill(self, role: Role) -> int:
        t = role.agent.kill_child(self.timeout_s) if role.forked else role.agent.kill()
        role.killed, role.outcome, role.exit_code = True, "killed", None
        self.step(role, "killed+reaped", t_kill_ms=round((t - self.t0) / 1e6, 3))
        self.finish(role, t_end=t)
        return t

    def spin(self) -> int:
        r = self.rng.random()
        return 0 if r < 0.25 else self.rng.randint(0, 50) if r < 0.6 else self.rng.randint(0, JITTER_US)

    def snapshot(self) -> bytes | None:
        try:
            with open(self.journal_path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def outcome(self, role: Role, msg: dict[str, Any], refusals: tuple[str, ...] = ()) -> str:
        """Record the role's outcome from a final answer: ok, refused (an expected error kind) or error."""
        if msg.get("ok"):
            role.outcome, role.exit_code, role.error = "ok", int(msg.get("exit_code", 0) or 0), None
        else:
            err = msg.get("error") or {}
            role.error = err
            role.outcome = "refused" if err.get("kind") in refusals else "error"
            role.exit_code = 1
        return role.outcome

    def finish(self, role: Role, t_end: int | None = None) -> None:
        if role.finished:
            return
        if not role.killed:
            self.call(role, "end")
            if role.forked:
                role.agent.end_child(self.timeout_s)
        role.t_end = t_end or mono()
        role.journal = self.snapshot()
        role.finished = True

    def record(self, name: str, expected: Any, observed: Any, **context: Any) -> None:
        """Record that the race expects ``expected`` here and ``observed`` this (judged by harness.checkers.race)."""
        self.facts.append({"name": name, "expected": expected, "observed": observed, **context})

    def measure(self, name: str, ns: int | float) -> float:
        ms = ns / 1e6
        self.metrics.setdefault(name, []).append(ms)
        return ms

    def at_once(self, role: Role, msg: dict[str, Any], what: str) -> None:
        """Time a store call that must be refused, or get the lock, within ``at_once_ms`` (timed inside the agent).

        A refusal is timed from the command's start to its answer; a takeover
        from the command's start to the return of the flock that got the run
        lock (from the leg's timed trace): reading and repairing the journal
        afterwards is not waiting for the lock.
        """
        start = msg.get("t_mark", msg.get("t0", 0))
        ns = msg.get("t1", 0) - start
        if msg.get("ok"):
            got = [ev["t1"] for ev in timed_trace(role) if ev.get("op") == "flock" and not ev.get("error")
                   and "t1" in ev and ev["t1"] >= start and str(ev.get("path", "")).endswith(".lock")]
            if got:
                ns = min(got) - start
            if msg.get("opened_ns") is not None:
                self.measure("open_ms", msg["opened_ns"])
        ms = self.measure(what, ns)
        self.record("at_once", {"max_ms": self.at_once_ms}, {"ms": ms}, leg=role.index, role=role.name, what=what)

    def seed_run(self, shape: str = "records", **fields: Any) -> Role:
        (setup,) = self.roles_for(("setup", "setup"))
        msg = self.call(setup, "seed", shape=shape, **fields)
        if not msg.get("ok"):
            raise SetupFailed(f"seeding the run failed: {msg.get('error')}")
        self.outcome(setup, msg)
        self.finish(setup)
        self.free.append(setup.agent)
        return setup

    def wind_down(self, aborted: bool) -> None:
        """End every role still running and give the agents back to the pool (killed ones are replaced).

        After an abort the roles still running are killed (their agents may
        be paused mid-command); otherwise they end normally.
        """
        for child in self.children:
            sigkill(child)
        for role in self.roles:
            if aborted and not role.finished:
                role.t_end = role.agent.kill()
                role.killed = True
                role.journal, role.finished = self.snapshot(), True
                role.outcome = role.outcome if role.outcome != "ok" else "aborted"
            elif not role.finished:
                try:
                    self.finish(role)
                except AgentTimeout:
                    role.agent.kill()
        clean: dict[int, bool] = {}
        for r in self.roles:  # an agent that served several roles is clean only if every one ended cleanly
            ok = r.finished and (r.forked or not r.killed) and not aborted and r.agent.child is None
            clean[id(r.agent)] = clean.get(id(r.agent), True) and ok
        for role in self.roles:
            if id(role.agent) in clean:
                self.driver.give_back(role.agent, clean.pop(id(role.agent)))
