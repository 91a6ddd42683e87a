"""The race nemesis: writers, resumers, creators and readers of one run, racing under sequence points.

Issue 6 item 3 and field cases F14, F15, F18; FORMAT.md defects 2 and 3.
Each *race* is two or three :mod:`harness.race_agent` processes working on
one run of a fresh store.  The driver orders them with explicit sequence
points, never with sleeps: an agent's answer on its pipe, a breakpoint on an
IO-seam call (the agent pauses before or after the k-th ``flock``,
``open``, ``write``, ``fsync`` or ``close`` of the lock or journal file, or
in the middle of a write, and waits for a ``continue`` line), a ledger-tool
breakpoint, and ``waitpid`` of a SIGKILLed holder.  Where the order is
meant to be free, commands are sent together with random busy-wait spins
(jitter).  Each trial draws its *schedule* (a forced interleaving, or a
free one) and its parameters from ``random.Random(f"{race}/{seed}")``, so a
trial is replayed by its race, seed and mutant.

Races (:data:`RACES`) and what each expects beyond the invariants:

* ``two-writers``: while A holds the run (idle, paused mid-append, or
  having just released it), B's ``open`` gets ``RunLocked`` at once (within
  :data:`AT_ONCE_MS`) and changes no byte; free sessions never interleave.
* ``two-resumers``: two resumes of a run with a pending tool batch: exactly
  one proceeds, the other is refused (``RunLocked``, or ``ResumeRefused``
  once the winner completed it); each unanswered tool runs once, an
  answered one never (defect 2, F15).
* ``two-creates``: two creates of one named run: exactly one wins, the
  other gets ``RunExists`` and writes nothing; the journal is the winner's
  records, all of them (defect 3).
* ``holder-killed``: A is SIGKILLed holding the run (at a seam call, mid
  write, or after a random number of acks): once it is reaped, B opens the
  run at once and finds every record A acknowledged (F14).
* ``readers-during-appends``: a poller runs ``load`` and ``list`` in a
  tight loop while a writer appends, with writes split at sequence points:
  never an error, the seq never goes back, and a half-written line is a torn
  tail to them.
* ``lock-survives-other-fds``: A holds the run while it reads the journal
  through other descriptors, opens and closes the lock file, and runs a
  child that exits: B stays refused.  Then A starts a long-lived child and
  is SIGKILLed: B gets the run at once (the lock descriptor is close-on-exec,
  F18).

A trial returns a :class:`RaceResult`: a :class:`~harness.history.History`
(one :class:`~harness.history.Leg` per agent role, each with its IO-seam
trace with times ``t`` added, its journal snapshot and a
``Fault(kind="race", detail={...})``), the verdicts of the invariant
checkers of :mod:`harness.checkers` that apply (I2, I4, I5, I8, I9) and a
``race`` verdict for the race's own expectations.  Entry point for the
campaign: :func:`run_race_trial` with a shared :class:`RaceDriver` (the
pool of agent processes, reused across trials; one per mutant).
"""

from __future__ import annotations

import base64
import json
import os
import random
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from fiskj.codec import decode_record
from fiskj.errors import FiskjError
from fiskj.reader import read_state
from fiskj.records import TerminalRecord, UserRecord

from .checkers import INVALID, UNKNOWN, VALID, Verdict, check_all
from .history import Effect, Fault, History, Leg

__all__ = ["RACES", "INVARIANTS_BY_RACE", "SCHEDULES", "AT_ONCE_MS", "RaceResult", "RaceDriver", "AgentTimeout",
           "run_race_trial", "run_races", "races_of", "race_summary"]

mono = time.monotonic_ns

#: The races, in the order a campaign cycles through them.
RACES = ("two-writers", "two-resumers", "two-creates", "holder-killed", "readers-during-appends",
         "lock-survives-other-fds")

#: Invariants judged per race (the others have nothing to judge in a race).
INVARIANTS_BY_RACE: dict[str, tuple[str, ...]] = {
    "two-writers": ("I4", "I5", "I8", "I9"),
    "two-resumers": ("I2", "I4", "I5", "I8", "I9"),
    "two-creates": ("I4", "I5", "I8", "I9"),
    "holder-killed": ("I4", "I5", "I8"),
    "readers-during-appends": ("I4", "I5", "I8"),
    "lock-survives-other-fds": ("I4", "I5", "I8", "I9"),
}

#: Schedules each race draws from (a forced interleaving, or ``free``/``together``: jitter only).
SCHEDULES: dict[str, tuple[str, ...]] = {
    "two-writers": ("holder-idle", "holder-mid-append", "release-gap", "free"),
    "two-resumers": ("together", "loser-waits-at-lock", "winner-in-tool"),
    "two-creates": ("together", "both-paused-at-first-open", "winner-mid-create"),
    "holder-killed": ("kill-at-call", "kill-mid-write", "kill-after-acks"),
    "readers-during-appends": ("split-writes", "free"),
    "lock-survives-other-fds": ("fds-and-children",),
}

#: A refusal or a takeover slower than this (ms, measured inside the agent around the store call) is a violation.
AT_ONCE_MS = 100.0
#: How long the driver waits for an answer that must come at once (a blocked lock shows as this timeout).
AT_ONCE_TIMEOUT_S = 2.0
#: The most jitter (µs) spun before a command sent "together".
JITTER_US = 400


class AgentTimeout(Exception):
    """An agent did not answer in time (it blocked, e.g. on a lock it should have been refused)."""


class SetupFailed(Exception):
    """The run a race needs could not be prepared (the trial is judged unknown, not valid)."""


# --- the agent processes --------------------------------------------------------------------------------


class AgentProc:
    """One :mod:`harness.race_agent` process and its two pipes."""

    def __init__(self, env: dict[str, str], log_dir: str) -> None:
        self.argv = [sys.executable, "-m", "harness.race_agent"]
        self.stderr_path = os.path.join(log_dir, f"agent-{os.getpid()}-{id(self)}.err")
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                         env=env, close_fds=True, bufsize=0)
        self.pid = self.proc.pid
        self.fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        self.buf = b""
        self.inbox: list[dict[str, Any]] = []
        self.next_id = 0
        self.ready = False
        self.dead = False
        self.t_killed: int | None = None
        self.child: int | None = None      # a forked child serving the pipes (see fork())
        self.garbage: list[bytes] = []

    def _read(self, deadline: float) -> bool:
        """Read what is available (waiting until ``deadline``); False on timeout or EOF."""
        left = max(0.0, deadline - time.monotonic())
        if not select.select([self.fd], [], [], left)[0]:
            return False
        chunk = os.read(self.fd, 65536)
        if not chunk:
            return False
        self.buf += chunk
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            if line.strip():
                try:
                    self.inbox.append(json.loads(line))
                except ValueError:
                    self.garbage.append(line[:200])  # half a line from a killed child
        return True

    def wait_for(self, pred: Callable[[dict[str, Any]], bool], timeout: float, what: str) -> dict[str, Any]:
        """Return (and consume) the first message matching ``pred``; raise :class:`AgentTimeout`."""
        deadline = time.monotonic() + timeout
        while True:
            for i, msg in enumerate(self.inbox):
                if pred(msg):
                    return self.inbox.pop(i)
            if not self._read(deadline):
                if self.proc.poll() is not None and not self.inbox:
                    raise AgentTimeout(f"agent pid {self.pid} exited ({self.proc.returncode}) while waiting for {what}")
                if time.monotonic() >= deadline:
                    raise AgentTimeout(f"agent pid {self.pid} gave no {what} within {timeout:g} s")

    def wait_ready(self, timeout: float) -> None:
        if not self.ready:
            self.wait_for(lambda m: m.get("event") == "ready", timeout, "ready line")
            self.ready = True

    def send(self, op: str, **fields: Any) -> int:
        self.next_id += 1
        msg = {"id": self.next_id, "op": op, **fields}
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg, separators=(",", ":")) + "\n").encode())
        return self.next_id

    def cont(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b'{"op":"continue"}\n')

    def raw(self, op: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"op": op}) + "\n").encode())

    def reply(self, ident: int, timeout: float) -> dict[str, Any]:
        return self.wait_for(lambda m: m.get("id") == ident, timeout, f"answer to command {ident}")

    def drain_events(self, kind: str) -> list[dict[str, Any]]:
        out = [m for m in self.inbox if m.get("event") == kind]
        self.inbox = [m for m in self.inbox if m.get("event") != kind]
        return out

    def fork(self, timeout: float) -> int:
        """Have the agent fork a child that serves the next commands; return the child's pid."""
        msg = self.reply(self.send("fork"), timeout)
        self.child = int(msg["pid"])
        return self.child

    def kill_child(self, timeout: float) -> int:
        """SIGKILL the forked child and wait until the agent reaped it; return the time just before the signal."""
        assert self.child is not None
        child, t = self.child, mono()
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.wait_for(lambda m: m.get("event") == "child-exited" and m.get("pid") == child, timeout, "child reap")
        self.inbox = [m for m in self.inbox if "id" not in m]  # answers the child owed die with it
        self.child = None
        return t

    def end_child(self, timeout: float) -> None:
        """Let the forked child exit cleanly and wait until the agent reaped it."""
        assert self.child is not None
        child = self.child
        self.raw("exit")
        self.wait_for(lambda m: m.get("event") == "child-exited" and m.get("pid") == child, timeout, "child exit")
        self.child = None

    def kill(self) -> int:
        """SIGKILL the agent and reap it; return the monotonic time just before the signal was sent.

        The agent certainly lived (and held whatever it held) until then; the
        kernel released its locks before the reap returned.
        """
        if not self.dead:
            self.t_killed = mono()
            if self.child is not None:  # never leave a child serving the pipes
                try:
                    os.kill(self.child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.child = None
            try:
                self.proc.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.dead = True
            while self._read(time.monotonic() + 1.0):  # what it wrote before it died (EOF ends it)
                pass
        return self.t_killed or mono()

    def close_pipes(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()  # type: ignore[union-attr]
            except OSError:
                pass

    def stderr_tail(self, limit: int = 2000) -> str:
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read()[-limit:].decode("utf-8", "replace")
        except OSError:
            return ""


class RaceDriver:
    """A pool of race agents (all with the same ``mutant``), reused across trials.

    It keeps ``spares`` agents starting in the background beyond what a
    trial takes, so a trial that kills an agent does not make the next one
    wait for a fresh process.  ``start`` agents are spawned at once (in
    parallel); a driver for one trial wants ``spares=0, start=2``.

    Use as a context manager, or call :meth:`close`.  ``timeout_s`` bounds
    every wait for an answer that need not be immediate;
    ``at_once_timeout_s`` every wait for one that must come at once (a
    refusal, a takeover): past it the agent counts as blocked.
    ``at_once_ms`` is the slowest refusal or takeover (measured inside the
    agent around the store call) that still counts as "at once".
    """

    def __init__(self, mutant: str | None = None, *, timeout_s: float = 20.0,
                 at_once_timeout_s: float = AT_ONCE_TIMEOUT_S, at_once_ms: float = AT_ONCE_MS, spares: int = 2,
                 start: int = 0) -> None:
        self.mutant = mutant
        self.spares = spares
        self.timeout_s = timeout_s
        self.at_once_timeout_s = at_once_timeout_s
        self.at_once_ms = at_once_ms
        self.log_dir = tempfile.mkdtemp(prefix="fiskj-race-agents-")
        env = {k: v for k, v in os.environ.items() if not k.startswith("FISKJ_")}
        if mutant:
            env["FISKJ_MUTANT"] = mutant
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.env = env
        self.idle: list[AgentProc] = []
        self.spawned = 0
        for _ in range(start):
            self.idle.append(self._spawn())

    def _spawn(self) -> AgentProc:
        self.spawned += 1
        return AgentProc(self.env, self.log_dir)

    def take(self, n: int) -> list[AgentProc]:
        """Return ``n`` ready agents, preferring those already up; top the pool up with spares."""
        while len(self.idle) < n + self.spares:
            self.idle.append(self._spawn())
        for agent in self.idle:
            if not agent.ready:
                try:
                    agent.wait_ready(0)
                except AgentTimeout:
                    pass
        self.idle.sort(key=lambda a: not a.ready)  # stable: the ready ones first, in pool order
        agents, self.idle = self.idle[:n], self.idle[n:]
        for agent in agents:
            agent.wait_ready(self.timeout_s)
        return agents

    def give_back(self, agent: AgentProc, clean: bool) -> None:
        """Return ``agent`` to the pool, or kill it (a spare replaces it at the next :meth:`take`)."""
        if clean and not agent.dead and agent.proc.poll() is None:
            self.idle.append(agent)
            return
        agent.kill()
        agent.close_pipes()
        if self.spares:
            self.idle.append(self._spawn())

    def close(self) -> None:
        for agent in self.idle:
            try:
                agent.raw("exit")
                agent.proc.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass
        for agent in self.idle:
            try:
                agent.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                agent.kill()
            for f in (agent.proc.stdout,):
                try:
                    f.close()  # type: ignore[union-attr]
                except OSError:
                    pass
        self.idle = []
        shutil.rmtree(self.log_dir, ignore_errors=True)

    def __enter__(self) -> "RaceDriver":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# --- one trial ------------------------------------------------------------------------------------------


@dataclass
class _Role:
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


class _Trial:
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
        self.roles: list[_Role] = []
        self.steps: list[dict[str, Any]] = []
        self.violations: list[dict[str, Any]] = []
        self.metrics: dict[str, list[float]] = {}
        self.notes: list[str] = []
        self.children: list[int] = []
        self.free: list[AgentProc] = []   # agents of finished roles, free for a later role of this trial
        self.t0 = mono()

    # -- roles -------------------------------------------------------------------------------------

    def roles_for(self, *names_kinds: tuple[str, str], fork: tuple[str, ...] = ()) -> list[_Role]:
        """New roles (legs), each on its own agent: a finished role's agent is reused, else the pool's.

        Roles named in ``fork`` run in a child the agent forks, so that a
        SIGKILL ends the role but not the pooled agent.
        """
        reuse, self.free = self.free[:len(names_kinds)], self.free[len(names_kinds):]
        agents = reuse + (self.driver.take(len(names_kinds) - len(reuse)) if len(names_kinds) > len(reuse) else [])
        out = []
        for agent, (name, kind) in zip(agents, names_kinds):
            index = len(self.roles)
            role = _Role(index, name, kind, agent, os.path.join(self.dir, f"leg{index}.trace"),
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

    def step(self, role: _Role, what: str, **info: Any) -> None:
        self.steps.append({"t_ms": round((mono() - self.t0) / 1e6, 3), "leg": role.index, "role": role.name,
                           "step": what, **info})

    def send(self, role: _Role, op: str, **fields: Any) -> int:
        shown = {k: v for k, v in fields.items() if k not in ("store", "trace", "timing", "ledger")}
        self.step(role, "send", op=op, **shown)
        return role.agent.send(op, **fields)

    def reply(self, role: _Role, ident: int, timeout: float | None = None) -> dict[str, Any]:
        msg = role.agent.reply(ident, timeout or self.timeout_s)
        role.replies.append(msg)
        info = {"ok": msg.get("ok")}
        if not msg.get("ok"):
            info["error"] = (msg.get("error") or {}).get("kind")
        self.step(role, "answer", **info)
        return msg

    def call(self, role: _Role, op: str, timeout: float | None = None, **fields: Any) -> dict[str, Any]:
        return self.reply(role, self.send(role, op, **fields), timeout)

    def paused(self, role: _Role, timeout: float | None = None) -> dict[str, Any]:
        ev = role.agent.wait_for(lambda m: m.get("event") == "paused", timeout or self.timeout_s, "pause")
        self.step(role, "paused", at=ev.get("name"), op=ev.get("op"), path=ev.get("path"), when=ev.get("when"),
                  n=ev.get("n"))
        return ev

    def maybe_paused(self, role: _Role, ident: int, timeout: float | None = None) -> dict[str, Any]:
        """The pause event, or the command's answer if it finished without reaching its breakpoint."""
        msg = role.agent.wait_for(lambda m: m.get("event") == "paused" or m.get("id") == ident,
                                  timeout or self.timeout_s, "pause or answer")
        if msg.get("event") == "paused":
            self.step(role, "paused", at=msg.get("name"), op=msg.get("op"), path=msg.get("path"),
                      when=msg.get("when"), n=msg.get("n"))
        else:
            role.replies.append(msg)
            self.step(role, "answer", ok=msg.get("ok"), note="finished before its breakpoint")
        return msg

    def cont(self, role: _Role) -> None:
        self.step(role, "continue")
        role.agent.cont()

    def kill(self, role: _Role) -> int:
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

    def outcome(self, role: _Role, msg: dict[str, Any], refusals: tuple[str, ...] = ()) -> str:
        """Record the role's outcome from a final answer: ok, refused (an expected error kind) or error."""
        if msg.get("ok"):
            role.outcome, role.exit_code, role.error = "ok", int(msg.get("exit_code", 0) or 0), None
        else:
            err = msg.get("error") or {}
            role.error = err
            role.outcome = "refused" if err.get("kind") in refusals else "error"
            role.exit_code = 1
        return role.outcome

    def finish(self, role: _Role, t_end: int | None = None) -> None:
        if role.finished:
            return
        if not role.killed:
            self.call(role, "end")
            if role.forked:
                role.agent.end_child(self.timeout_s)
        role.t_end = t_end or mono()
        role.journal = self.snapshot()
        role.finished = True

    def expect(self, ok: bool, kind: str, detail: str, **evidence: Any) -> bool:
        if not ok:
            self.violations.append({"kind": kind, "detail": detail, **evidence})
        return ok

    def measure(self, name: str, ns: int | float) -> float:
        ms = ns / 1e6
        self.metrics.setdefault(name, []).append(ms)
        return ms

    def at_once(self, role: _Role, msg: dict[str, Any], what: str) -> None:
        """Check that a store call was refused, or got the lock, within ``at_once_ms`` (timed inside the agent).

        A refusal is timed from the command's start to its answer; a takeover
        from the command's start to the return of the flock that got the run
        lock (from the leg's timed trace): reading and repairing the journal
        afterwards is not waiting for the lock.
        """
        start = msg.get("t_mark", msg.get("t0", 0))
        ns = msg.get("t1", 0) - start
        if msg.get("ok"):
            got = [ev["t1"] for ev in _trace(role) if ev.get("op") == "flock" and not ev.get("error")
                   and "t1" in ev and ev["t1"] >= start and str(ev.get("path", "")).endswith(".lock")]
            if got:
                ns = min(got) - start
            if msg.get("opened_ns") is not None:
                self.measure("open_ms", msg["opened_ns"])
        ms = self.measure(what, ns)
        self.expect(ms <= self.at_once_ms, "not_at_once", f"leg {role.index} ({role.name}): {what} took "
                    f"{ms:.1f} ms, over {self.at_once_ms:g} ms", leg=role.index, ms=round(ms, 3))

    def seed_run(self, shape: str = "records", **fields: Any) -> _Role:
        (setup,) = self.roles_for(("setup", "setup"))
        msg = self.call(setup, "seed", shape=shape, **fields)
        if not msg.get("ok"):
            raise SetupFailed(f"seeding the run failed: {msg.get('error')}")
        self.outcome(setup, msg)
        self.finish(setup)
        self.free.append(setup.agent)
        return setup


# --- the races ------------------------------------------------------------------------------------------

_LOCKED = ("RunLocked",)


def _probe_refused(t: _Trial, b: _Role, holder: _Role, what: str, **fields: Any) -> bool:
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
             answer=_brief(msg))
    if refused:
        t.at_once(b, msg, "refusal_ms")
    after = t.snapshot()
    t.expect(before == after, "refused_writer_changed_journal", f"{what}: the journal changed across leg {b.index}'s "
             f"refused open ({len(before or b'')} -> {len(after or b'')} bytes)", leg=b.index)
    return refused


def _brief(msg: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in msg.items() if k in ("ok", "error", "seqs", "last_seq", "reason", "opened_ns")}


def _race_two_writers(t: _Trial) -> None:
    t.seed_run("records", n=t.rng.randint(0, 3))
    a, b = t.roles_for(("A", "writer"), ("B", "writer"))
    n = t.rng.randint(1, 4)
    if t.schedule == "holder-idle":
        msg = t.call(a, "open")
        t.outcome(a, msg)
        _probe_refused(t, b, a, "A holds the run, idle")
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
        _probe_refused(t, b, a, f"A paused at {bp['op']} of the {bp['path']}")
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
        t.expect(b.outcome == "ok", "refused_after_release", f"leg {b.index} was refused after leg {a.index} "
                 f"released the run: {b.error}", leg=b.index)
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
            t.expect(msg.get("ok", False), "session_failed", f"leg {role.index}'s sessions failed: {msg.get('error')}",
                     leg=role.index)
    for role in (a, b):
        t.finish(role)
    _check_sessions(t)


def _check_sessions(t: _Trial) -> None:
    """Lines of one writer's session (its tag) are contiguous and in order in the final journal."""
    data = t.snapshot() or b""
    tags: list[tuple[str, int]] = []
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            continue
        try:
            rec = decode_record(line)
        except FiskjError:
            continue
        if isinstance(rec, UserRecord):
            text = rec.message["content"][0].get("text", "")
            tag, _, i = text.rpartition(":")
            tags.append((tag, int(i) if i.isdigit() else -1))
        elif isinstance(rec, TerminalRecord):
            tags.append((rec.message or "", 1 << 30))
    seen: dict[str, int] = {}
    for pos, (tag, i) in enumerate(tags):
        if tag.startswith("seed"):
            continue
        if tag in seen and seen[tag] != pos - 1:
            t.expect(False, "interleaved", f"session {tag!r} is interleaved with another writer's lines "
                     f"(record {pos + 1})", tag=tag)
            return
        seen[tag] = pos


def _race_two_resumers(t: _Trial) -> None:
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
    proceeded = [r for r in (a, b) if r.outcome == "ok"]
    t.expect(len(proceeded) == 1, "not_exactly_one", f"{len(proceeded)} of the two resumers proceeded "
             f"({', '.join(f'leg {r.index}: {r.outcome}' for r in (a, b))}); exactly one must",
             outcomes={r.name: r.outcome for r in (a, b)})
    for r in (a, b):
        t.expect(r.outcome in ("ok", "refused"), "unexpected_error", f"leg {r.index} failed: {r.error}", leg=r.index)
    # each unanswered tool runs once, an answered one never
    runs: dict[str, int] = {}
    for e in _effects(t):
        runs[e.tool_use_id] = runs.get(e.tool_use_id, 0) + 1
    ids = [f"toolu_race_{i}" for i in range(tools)]
    for i, tid in enumerate(ids):
        want = 0 if i < answered else 1
        t.expect(runs.get(tid, 0) == want, "tool_runs", f"tool {tid} ran {runs.get(tid, 0)} time(s), expected {want} "
                 f"({'answered before the race' if want == 0 else 'unanswered'})", tool_use_id=tid)


def _race_two_creates(t: _Trial) -> None:
    a, b = t.roles_for(("A", "creator"), ("B", "creator"))
    n = {a.name: t.rng.randint(0, 3), b.name: t.rng.randint(0, 3)}

    def create(role: _Role, **extra: Any) -> int:
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
        except AgentTimeout:
            t.expect(False, "blocked", f"leg {b.index}'s create did not answer within {t.at_once_timeout:g} s", leg=b.index)
            raise
        t.outcome(b, msg, ("RunExists",))
        if b.outcome == "refused":
            t.at_once(b, msg, "refusal_ms")
        t.expect(t.snapshot() == before, "refused_writer_changed_journal",
                 f"the journal changed across leg {b.index}'s refused create", leg=b.index)
        t.cont(a)
        t.outcome(a, t.reply(a, ident), ("RunExists",))
    for role in (a, b):
        t.finish(role)
    winners = [r for r in (a, b) if r.outcome == "ok"]
    t.expect(len(winners) == 1, "not_exactly_one", f"{len(winners)} of the two creates succeeded "
             f"({', '.join(f'leg {r.index}: {r.outcome}' for r in (a, b))}); exactly one must win, the other get RunExists",
             outcomes={r.name: r.outcome for r in (a, b)})
    for r in (a, b):
        t.expect(r.outcome in ("ok", "refused"), "unexpected_error", f"leg {r.index} failed: {r.error}", leg=r.index)
    if len(winners) == 1:
        w = winners[0]
        seqs = next((m.get("seqs") for m in reversed(w.replies) if m.get("seqs")), [])
        final = t.snapshot() or b""
        lines = [ln for ln in final.splitlines(keepends=True) if ln.endswith(b"\n")]
        t.expect(len(lines) == len(seqs), "winner_records", f"the journal holds {len(lines)} line(s); the winner "
                 f"(leg {w.index}) acknowledged {len(seqs)}", leg=w.index)


def _kill_candidates(t: _Trial, n: int) -> list[dict[str, Any]]:
    k = t.rng.randint(1, n + 1)
    return [
        {"op": "write", "path": "journal", "k": k, "when": t.rng.choice(["before", "after"])},
        {"op": "fsync", "path": "journal", "k": k, "when": t.rng.choice(["before", "after"])},
        {"op": "flock", "path": "lock", "k": 1, "when": "after"},
        {"op": "open", "path": "journal", "k": 1, "when": "after"},
        {"op": "close", "path": "journal", "k": 1, "when": "before"},
        {"op": "close", "path": "lock", "k": 1, "when": "before"},
    ]


def _race_holder_killed(t: _Trial) -> None:
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
    msg = t.call(b, "open", timeout=t.at_once_timeout)
    t.outcome(b, msg)
    if t.expect(msg.get("ok", False), "not_taken_over", f"after leg {a.index} was SIGKILLed and reaped, leg {b.index} "
                f"could not open the run: {msg.get('error')}", leg=b.index):
        t.at_once(b, msg, "takeover_ms")
        last = msg.get("last_seq", 0)
        t.expect(last >= max(acked, default=0), "acked_missing", f"leg {b.index} opened at seq {last}, below the "
                 f"last seq {max(acked, default=0)} leg {a.index} acknowledged", leg=b.index)
        t.outcome(b, t.call(b, "append", n=t.rng.randint(1, 3), tag="B", terminal="suspended", close=True))
    a.detail["acked"] = acked
    t.finish(b)


def _race_readers(t: _Trial) -> None:
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
    for bp in pauses:
        t.paused(w)
        acked = [m.get("seq", 0) for m in w.agent.inbox if m.get("event") == "ack"]
        p.agent.raw("snapshot")
        obs = p.agent.wait_for(lambda m: m.get("event") == "observed", t.timeout_s, "snapshot")
        t.step(p, "observed", load=obs.get("load"), list=obs.get("list"))
        load, lst = obs.get("load", {}), obs.get("list", {})
        t.expect("error" not in load, "false_corruption", f"load raised while leg {w.index} was mid-write: "
                 f"{load.get('error')}", leg=p.index, at=bp["name"])
        t.expect("error" not in lst, "false_corruption", f"list reported the run unreadable while leg {w.index} was "
                 f"mid-write: {lst.get('error')}", leg=p.index, at=bp["name"])
        if "error" not in load:
            t.expect(load.get("torn") is not None, "torn_tail_not_reported", f"load saw no torn tail while leg "
                     f"{w.index} had half a line on disk ({bp['name']})", leg=p.index)
            t.expect(load.get("last_seq", 0) >= max(acked, default=0), "acked_missing",
                     f"load returned seq {load.get('last_seq')} below the acknowledged {max(acked, default=0)}", leg=p.index)
        t.cont(w)
    t.outcome(w, t.reply(w, ident))
    p.agent.raw("stop")
    msg = t.reply(p, poll_id)
    t.outcome(p, msg)
    p.detail["poll"] = {k: msg.get(k) for k in ("loops", "torn", "max_seq")}
    t.metrics.setdefault("poll_loops", []).append(float(msg.get("loops", 0)))
    t.expect(not msg.get("errors"), "false_corruption", f"load/list failed {len(msg.get('errors') or [])} time(s) "
             f"during appends: {(msg.get('errors') or [{}])[0]}", leg=p.index, errors=(msg.get("errors") or [])[:5])
    t.expect(not msg.get("regressions"), "seq_went_back", f"a load saw the seq go back: {msg.get('regressions')}",
             leg=p.index)
    for role in (p, w):
        t.finish(role)


def _race_fds(t: _Trial) -> None:
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
            t.expect(msg.get("ok", False), "holder_step_failed", f"leg {a.index}'s {op} failed: {msg.get('error')}",
                     leg=a.index)
            what = f"after A's {op}{' ' + fields['file'] if 'file' in fields else ''}"
            _probe_refused(t, b, a, what)
        t.outcome(a, t.call(a, "append", n=t.rng.randint(1, 3), tag="A"))
        msg = t.call(a, "spawn", argv=[sleep_bin, "30"], wait=False)
        if msg.get("ok"):
            t.children.append(msg["pid"])
            # Barrier: posix_spawn (vfork) returns once the child reaches exec, but the child closes its
            # close-on-exec descriptors a moment later; its comm turns to the new image's name only after.
            _exec_done(msg["pid"], os.path.basename(sleep_bin), t.timeout_s)
        t.step(a, "kill", with_child=msg.get("pid"))
        t.kill(a)
        msg = t.call(b, "open", timeout=t.at_once_timeout)
        t.outcome(b, msg)
        if t.expect(msg.get("ok", False), "not_taken_over", f"after leg {a.index} was SIGKILLed (its child pid "
                    f"{t.children[-1] if t.children else '?'} still running), leg {b.index} could not open the run: "
                    f"{msg.get('error')}", leg=b.index):
            t.at_once(b, msg, "takeover_ms")
            t.outcome(b, t.call(b, "append", n=1, tag="B", terminal="suspended", close=True))
    finally:
        for pid in t.children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
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


_RUNNERS: dict[str, Callable[[_Trial], None]] = {
    "two-writers": _race_two_writers,
    "two-resumers": _race_two_resumers,
    "two-creates": _race_two_creates,
    "holder-killed": _race_holder_killed,
    "readers-during-appends": _race_readers,
    "lock-survives-other-fds": _race_fds,
}


# --- history and verdicts -------------------------------------------------------------------------------


def _effects(t: _Trial) -> list[Effect]:
    try:
        with open(t.ledger, "rb") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []
    rows.sort(key=lambda r: r["t"])
    attempts: dict[str, int] = {}
    out = []
    for r in rows:
        attempts[r["tool_use_id"]] = attempts.get(r["tool_use_id"], 0) + 1
        out.append(Effect(tool_use_id=r["tool_use_id"], attempt=attempts[r["tool_use_id"]], pid=r["pid"], t=r["t"],
                          leg=r.get("leg", -1), tool=r.get("tool", "")))
    return out


def _trace(role: _Role) -> list[dict[str, Any]]:
    """The leg's IO-seam trace, each event given ``t0``/``t1`` from the agent's timing file and a ``t``.

    ``t`` is the conservative time for the one-writer checks: for ``close``
    and ``write`` the time before the call (a lock released, a write begun),
    for every other op the time after it returned (a lock acquired, an fsync
    acknowledged).  The seam's own ``t`` (written after every call, so late
    for a release) is kept as ``t_seam``.  An event of a killed leg with no timing line (the kill
    landed inside that call) gets the time the SIGKILL was sent, an upper
    bound (``t_from: "kill"``).  The two halves of a split write (a sequence
    point inside one write of the engine) are merged back into the one write
    event they stand for.
    """
    events: list[dict[str, Any]] = []
    try:
        with open(role.trace, "rb") as f:
            for line in f:
                if line.endswith(b"\n"):
                    events.append(json.loads(line))
    except FileNotFoundError:
        return []
    times: dict[int, tuple[int, int, str]] = {}
    try:
        with open(role.timing, "rb") as f:
            for line in f:
                parts = line.decode().split()
                if len(parts) >= 3 and line.endswith(b"\n"):
                    times[int(parts[0])] = (int(parts[1]), int(parts[2]), parts[3] if len(parts) > 3 else "")
    except FileNotFoundError:
        pass
    out: list[dict[str, Any]] = []
    for ev in events:
        tt = times.get(ev.get("n", -1))
        if tt is None:
            if role.killed and role.t_end:
                ev["t"] = ev["t1"] = role.t_end
                ev["t_from"] = "kill"
            out.append(ev)
            continue
        ev["t0"], ev["t1"] = tt[0], tt[1]
        if "t" in ev:
            ev["t_seam"] = ev["t"]  # the seam's own time: when its line was written, after the call
        ev["t"] = tt[0] if ev.get("op") in ("close", "write") else tt[1]
        head = out[-1] if out else None
        if tt[2] == "split-tail" and head is not None and head.get("split") == "head" and ev.get("op") == "write":
            data = base64.b64decode(head.get("data") or "") + base64.b64decode(ev.get("data") or "")
            head.update(data=base64.b64encode(data).decode("ascii"), len=len(data), t1=ev["t1"], split="merged")
            if ev.get("error"):
                head["error"] = ev["error"]
            continue
        if tt[2] == "split-head":
            ev["split"] = "head"
        out.append(ev)
    return out


def _legs(t: _Trial) -> list[Leg]:
    """One :class:`Leg` per role.  Fault counting (``harness.campaign.fault_counts``): a trial injects one
    ``race`` (carried by its last racing leg) and one ``kill`` per SIGKILLed leg."""
    racing = [r for r in t.roles if r.kind != "setup"]
    carrier = next((r for r in reversed(racing) if not r.killed), racing[-1] if racing else None)
    legs = []
    for r in t.roles:
        detail = {"race": t.race, "schedule": t.schedule, "role": r.name, "outcome": r.outcome, **r.detail}
        if r.error:
            detail["error"] = f"{r.error.get('kind')}: {r.error.get('message')}"
        if r.kind == "setup":
            fault = Fault(kind="none", detail=detail)
        elif r.killed:
            fault = Fault(kind="kill", signal="SIGKILL", at={"race": t.race}, detail=detail, injected=True)
        else:
            fault = Fault(kind="race", detail=detail, injected=r is carrier)
        stderr = ""
        if r.outcome == "refused" and r.error:
            stderr = f"fiskj: refused: {r.error.get('kind')}: {r.error.get('message')}\n"
        elif r.outcome == "error" and r.error:
            stderr = f"fiskj: error: {r.error.get('kind')}: {r.error.get('message')}\n"
        legs.append(Leg(index=r.index, kind=r.kind, argv=r.agent.argv + [f"({r.name}{', forked' if r.forked else ''})"], pid=r.pid,
                        t_start=r.t_start, t_end=r.t_end or mono(), fault=fault,
                        exit_code=None if r.killed else r.exit_code, exit_signal="SIGKILL" if r.killed else None,
                        journal=r.journal, trace=_trace(r), stdout=json.dumps([_brief(m) for m in r.replies])[:4000],
                        stderr=stderr))
    return legs


@dataclass
class RaceResult:
    """One race trial: what was observed (``history``), the ``verdicts`` and ``metrics``.

    ``metrics``: ``refusal_ms`` (refused open/resume/create, start to
    answer), ``takeover_ms`` (open after a holder died, start to the lock),
    ``open_ms`` (that whole open, journal read and repair included),
    ``poll_loops`` (load+list rounds of a poller).
    """

    race: str
    seed: int
    schedule: str
    mutant: str | None
    history: History
    verdicts: list[Verdict]
    metrics: dict[str, list[float]]
    elapsed_s: float

    @property
    def ok(self) -> bool:
        """True when no verdict is invalid or unknown."""
        return all(v.status == VALID for v in self.verdicts)

    @property
    def violations(self) -> list[Verdict]:
        """The invalid verdicts."""
        return [v for v in self.verdicts if v.status == INVALID]

    def status(self) -> str:
        statuses = [v.status for v in self.verdicts]
        return INVALID if INVALID in statuses else UNKNOWN if UNKNOWN in statuses else VALID

    def reproducer(self) -> dict[str, Any]:
        """What replays this trial: race, seed, schedule, mutant, and the driver's steps."""
        return {"race": self.race, "seed": self.seed, "schedule": self.schedule, "mutant": self.mutant,
                "steps": self.history.schedule}

    def summary(self) -> str:
        bad = "; ".join(f"{v.invariant}: {v.summary}" for v in self.verdicts if v.status != VALID)
        return (f"{self.race} seed={self.seed} schedule={self.schedule}"
                f"{' mutant=' + self.mutant if self.mutant else ''}: {self.status()}" + (f" ({bad})" if bad else ""))

    def to_json(self) -> dict[str, Any]:
        from .history import history_to_json
        return {"race": self.race, "seed": self.seed, "schedule": self.schedule, "mutant": self.mutant,
                "status": self.status(), "elapsed_s": self.elapsed_s, "metrics": self.metrics,
                "verdicts": [v.to_json() for v in self.verdicts], "history": history_to_json(self.history)}


def _race_verdict(t: _Trial, setup_error: str | None = None) -> Verdict:
    name = f"race {t.race}: its expected outcome (refused at once, exactly one winner, takeover, no false corruption)"
    if setup_error is not None and not t.violations:
        return Verdict("race", name, UNKNOWN, {"summary": f"not run: {setup_error}", "reason": setup_error},
                       "harness.races")
    if t.violations:
        kinds = sorted({v["kind"] for v in t.violations})
        return Verdict("race", name, INVALID, {
            "summary": f"{len(t.violations)} violation(s) ({', '.join(kinds)}): {t.violations[0]['detail']}",
            "violations": t.violations, "checked": len(t.steps)}, "harness.races")
    return Verdict("race", name, VALID, {"summary": f"{t.schedule}: as expected", "checked": len(t.steps)},
                   "harness.races")


def _final_state(data: bytes | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    if data is None:
        return None, {"kind": "missing", "message": "no journal"}
    try:
        return read_state(data).to_json(), None
    except FiskjError as exc:
        return None, exc.to_json()


def run_race_trial(scenario: Any, race: str, seed: int, workdir: str | os.PathLike[str], *,
                   driver: RaceDriver | None = None, mutant: str | None = None, schedule: str | None = None,
                   keep: bool = False) -> RaceResult:
    """Run one trial of ``race`` with ``seed`` in a fresh store under ``workdir``; return a :class:`RaceResult`.

    ``scenario`` (a :class:`harness.scenario.Scenario`, or None) gives the
    name, the per-trial time budget (``trials.timeout_s``) and the
    invariants to judge (``check.invariants``, intersected with
    :data:`INVARIANTS_BY_RACE`).  ``driver`` is the agent pool to use (its
    mutant applies; pass one to run many trials fast); without one a
    temporary pool with ``mutant`` is made and closed.  ``schedule`` forces
    one of :data:`SCHEDULES` (default: drawn from the seed).  The trial
    directory is removed unless ``keep``.
    """
    if race not in _RUNNERS:
        raise ValueError(f"unknown race {race!r}; known: {', '.join(RACES)}")
    if driver is None:
        with RaceDriver(mutant, spares=0, start=2) as tmp:
            return run_race_trial(scenario, race, seed, workdir, driver=tmp, schedule=schedule, keep=keep)
    if mutant is not None and mutant != driver.mutant:
        raise ValueError(f"mutant {mutant!r} differs from the driver's {driver.mutant!r}")
    timeout = min(float(getattr(getattr(scenario, "trials", None), "timeout_s", 20.0)), driver.timeout_s)
    t = _Trial(driver, race, seed, os.fspath(workdir), schedule, timeout)
    started = time.monotonic()
    aborted = False
    setup_error: str | None = None
    try:
        _RUNNERS[race](t)
    except SetupFailed as exc:
        setup_error = str(exc)
        t.notes.append(f"setup failed: {exc}")
    except AgentTimeout as exc:
        aborted = True
        t.notes.append(f"aborted: {exc}")
        if not any(v["kind"] == "blocked" for v in t.violations):
            t.expect(False, "timeout", f"an agent did not answer: {exc}",
                     stderr={r.index: r.agent.stderr_tail(800) for r in t.roles if r.agent.stderr_tail(1)})
    except BaseException:
        aborted = True  # a harness error: its agents may be paused mid-command; never reuse them
        raise
    finally:
        for child in t.children:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for role in t.roles:
            if aborted and not role.finished:
                role.t_end = role.agent.kill()
                role.killed = True
                role.journal, role.finished = t.snapshot(), True
                role.outcome = role.outcome if role.outcome != "ok" else "aborted"
            elif not role.finished:
                try:
                    t.finish(role)
                except AgentTimeout:
                    role.agent.kill()
        clean: dict[int, bool] = {}
        for r in t.roles:  # an agent that served several roles is clean only if every one ended cleanly
            ok = r.finished and (r.forked or not r.killed) and not aborted and r.agent.child is None
            clean[id(r.agent)] = clean.get(id(r.agent), True) and ok
        for role in t.roles:
            if id(role.agent) in clean:
                driver.give_back(role.agent, clean.pop(id(role.agent)))
    final, final_error = _final_state(t.snapshot())
    history = History(scenario=getattr(scenario, "name", None) or f"race-{race}", seed=seed, schedule=t.steps,
                      run_id=t.run_id, legs=_legs(t), effects=_effects(t), final_state=final,
                      final_error=final_error, notes=t.notes,
                      options={"race": race, "schedule": t.schedule, "mutant": driver.mutant})
    wanted = INVARIANTS_BY_RACE[race]
    if scenario is not None and getattr(scenario, "check", None) is not None:
        wanted = tuple(i for i in wanted if i in scenario.check.invariants)
    verdicts = check_all(history, list(wanted)) + [_race_verdict(t, setup_error)]
    if not keep:
        shutil.rmtree(t.dir, ignore_errors=True)
    return RaceResult(race, seed, t.schedule, driver.mutant, history, verdicts, t.metrics,
                      time.monotonic() - started)


def races_of(scenario: Any) -> list[str]:
    """The races a scenario asks for: ``[faults] races`` when the schema has it, else from its name.

    ``race-<race>`` names one race (``race-two-writers``); any other name
    (``race-all``) means every race of :data:`RACES`.
    """
    raw = getattr(scenario, "raw", None) or {}
    listed = (raw.get("faults") or {}).get("races")
    if listed:
        bad = [r for r in listed if r not in RACES]
        if bad:
            raise ValueError(f"unknown race(s) {bad}; known: {', '.join(RACES)}")
        return list(listed)
    name = getattr(scenario, "name", "") or ""
    for race in RACES:
        if name == f"race-{race}":
            return [race]
    return list(RACES)


def run_races(scenario: Any, seed: int, workdir: str | os.PathLike[str], *, trials: int | None = None,
              mutant: str | None = None, driver: RaceDriver | None = None,
              stop_on_violation: bool = False) -> list[RaceResult]:
    """Run ``trials`` (default ``scenario.trials.count``) race trials, cycling through :func:`races_of`.

    Trial ``i`` uses seed ``seed + i``.  With ``stop_on_violation`` it stops
    at the first trial that is not valid.
    """
    races = races_of(scenario)
    count = trials if trials is not None else int(getattr(getattr(scenario, "trials", None), "count", len(races)))
    own = driver is None
    driver = driver or RaceDriver(mutant)
    out = []
    try:
        for i in range(count):
            result = run_race_trial(scenario, races[i % len(races)], seed + i, workdir, driver=driver)
            out.append(result)
            if stop_on_violation and not result.ok:
                break
    finally:
        if own:
            driver.close()
    return out


def race_summary(results: list[RaceResult]) -> dict[str, Any]:
    """Counts per race and status, trials per second, and refusal/takeover latencies (ms: median, max)."""
    out: dict[str, Any] = {"trials": len(results), "by_race": {}, "latency_ms": {}}
    total = sum(r.elapsed_s for r in results)
    out["trials_per_s"] = round(len(results) / total, 2) if total else None
    for r in results:
        row = out["by_race"].setdefault(r.race, {VALID: 0, INVALID: 0, UNKNOWN: 0})
        row[r.status()] += 1
    merged: dict[str, list[float]] = {}
    for r in results:
        for k, v in r.metrics.items():
            merged.setdefault(k, []).extend(v)
    for k, v in merged.items():
        if k in ("refusal_ms", "takeover_ms", "open_ms") and v:
            out["latency_ms"][k] = {"n": len(v), "median": round(statistics.median(v), 3), "max": round(max(v), 3)}
    return out
