"""The pool of race agents and the driver's side of their pipe protocol (see :mod:`harness.families.race.agent`).

An :class:`AgentProc` is one agent process: commands go out as JSON lines
on its standard input; answers (``{"id": I, "ok": ...}``) and events
(``ready``, ``ack``, ``paused``, ``observed``, ``child-exited``, ...) come
back on its standard output and wait in its inbox until a sequence point
asks for them.  A :class:`RaceDriver` keeps a pool of agents with one
mutant, reused across trials.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from time import monotonic_ns as mono
from typing import Any, Callable

from harness.families.race.catalog import AT_ONCE_MS, AT_ONCE_TIMEOUT_S
from harness.names import MUTANT_ENV, MUTANT_PRELOAD, PRELOAD_ENV
from harness.runner.leg import LegStarter
from harness.runner.process import sigkill

__all__ = ["AgentTimeout", "AgentProc", "RaceDriver", "sigkill"]


class AgentTimeout(Exception):
    """An agent did not answer in time (it blocked, e.g. on a lock it should have been refused)."""


class AgentProc:
    """One :mod:`harness.families.race.agent` process and its two pipes."""

    def __init__(self, env: dict[str, str], log_dir: str) -> None:
        self.argv = [sys.executable, "-m", "harness.families.race.agent"]
        self.stderr_path = os.path.join(log_dir, f"agent-{os.getpid()}-{id(self)}.err")
        self.proc = LegStarter.start_piped(self.argv, env, self.stderr_path)  # the one leg runner starts it
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
        sigkill(child)
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
                sigkill(self.child)
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

    def __init__(self, mutant: str | None = None, *, preload: str | None = None, timeout_s: float = 20.0,
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
            env[MUTANT_ENV] = mutant
            # the preload that applies it in the agent (the mutants' table: harness.selftest.mutants.preload)
            env[PRELOAD_ENV] = preload or MUTANT_PRELOAD
        root = str(Path(__file__).resolve().parents[2])  # the checkout: harness/races/driver.py
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
            agent.close_pipes()  # its stdin is closed (or broken) already
        self.idle = []
        shutil.rmtree(self.log_dir, ignore_errors=True)

    def __enter__(self) -> "RaceDriver":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
