"""The jetstream family: faults of the JetStream server(s) a subject's store lives on (issue 28; docs/jetstream.md).

For a subject whose profile has ``[jetstream]`` (its commands name ``{store_url}``), each trial starts the
server in its own folder, under the outside observer (root: its store directory), and a stream the store
accepts; runs the scenario's workload to its end on it (:meth:`Runner.reference` of a runner of this trial);
then applies the server fault and resumes the run through the one leg runner, leg 0 being that run
(a :class:`harness.runner.trial.Prelude`) with the fault on it.  ``power-loss``: the server is SIGKILLed and its
store directory laid as a crash state of its observed writes and fsyncs after the run's last acknowledged
publish (docs/persistence-model.md; :func:`harness.families.power_loss.crashstates.window`), then it restarts.
I4 judges the publishes fiskj's IO seam traced as acknowledged (op ``publish``, docs/ioseam.md) against the
records the restarted store holds.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import tempfile
import threading
from dataclasses import replace
from typing import Any

from fiskj.cli_common import open_store

from harness.families.base import FamilyBase, Planned, Ran
from harness.families.jetstream.params import MODES, Params
from harness.families.power_loss.crashstates import window
from harness.history.faults import fault_counts
from harness.history.model import Fault, History
from harness.observer.trace import ops_to_trace
from harness.runner.faults import NOOP
from harness.runner.trial import Prelude, Runner, run_id_for
from harness.scenario.model import Scenario
from harness.subject.nats_server import NatsServer, add_stream, start_server

__all__ = ["JETSTREAM", "JetStreamFamily", "lay_state"]

STREAM = "FISKJ"


def durable_tree(root: str) -> tuple[dict[str, bytes], set[str]]:
    """Make every file and folder under ``root`` durable (fsync each; the stream as an operator's that existed
    long before the run) and return them: the tree before the server's trace (path -> bytes, folders)."""
    files, dirs = {}, set()
    for d, _, names in os.walk(os.path.realpath(root), topdown=False):
        for name in names:
            with open(os.path.join(d, name), "rb+") as f:
                files[f.name] = f.read()
                os.fsync(f.fileno())
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(fd)
        os.close(fd)
        dirs.add(d)
    return files, dirs


def lay_state(events: list[dict[str, Any]], root: str, before: tuple[dict[str, bytes], set[str]], state: int,
              sector_bytes: int, seed: int) -> dict[str, Any]:
    """Replace the store directory ``root`` (``before``: its durable tree when the trace began) with crash
    state ``state`` of the server's trace ``events`` at its end (0: no unsynced unit kept, 1: every unit, else
    a sample seeded by ``seed``); its summary."""
    root = os.path.realpath(root)
    files, dirs = before
    units, _ = window(events, files, dirs, len(events), complete=False, sector_bytes=sector_bytes)
    rng = random.Random(f"{seed}:{state}")
    dropped = units if state == 0 else [] if state == 1 else [u for u in units if rng.random() < 0.5]
    _, crash = window(events, files, dirs, len(events), dropped, complete=False, sector_bytes=sector_bytes)
    assert crash is not None
    shutil.rmtree(root)
    for d in sorted(d for d in crash.dirs | {root} if d.startswith(root)):
        os.makedirs(d, exist_ok=True)
    for path, data in crash.files.items():
        if path.startswith(root + "/"):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
    return {**crash.describe(), "units": len(units), "dropped": len(dropped)}


class _Executor:
    def __init__(self, scenario: Scenario, runner: Runner, params: Params) -> None:
        self.scenario, self.runner, self.params = scenario, runner, params

    def run(self, planned: Planned) -> Ran:
        spec = planned.schedule[0]
        replicas, sync = self.runner.subject.jetstream or (1, "default")
        tmp = tempfile.mkdtemp(prefix="fiskj-jetstream-", dir=self.runner.tmp_root)
        server = None
        try:
            server = start_server(tmp, sync_interval=None if sync == "default" else sync)
            add_stream([server.url], STREAM, replicas=1)
            url = f"{server.url}/{STREAM}?allow_single_replica=1"
            with Runner(replace(self.runner.subject, store_url=url), self.runner.server, tmp_root=tmp,
                        fork_server=False, observe=False) as runner:
                trial = self._power_loss if spec.get("kind") == "power_loss" else self._kill
                history = trial(runner, server, spec, planned.seed, os.path.join(tmp, "server-ops.log"))
        finally:
            if server is not None:
                server.stop(signal.SIGKILL)
            shutil.rmtree(tmp, ignore_errors=True)
        history.schedule = [dict(f) for f in planned.schedule]
        return Ran(history, fault_counts(history))

    def _power_loss(self, runner: Runner, server: NatsServer, spec: dict[str, Any], seed: int, log: str) -> History:
        """The run to its end on the observed server, then its power cut: crash state ``spec["state"]`` laid,
        the server restarted, the run resumed (leg 0 the run, as a :class:`Prelude`)."""
        server.stop()
        before = durable_tree(server.store_dir)
        server.start(observe=log)
        ref = runner.reference(self.scenario)
        proc = server.proc
        server.stop(signal.SIGKILL)  # the power goes: the server dies with its page cache
        state = lay_state(ops_to_trace(proc.ops()), server.store_dir, before, int(spec.get("state", 0)),
                          self.params.sector_bytes, seed)
        server.start()
        leg = replace(ref.history.legs[0], fault=Fault(kind="power_loss", injected=True,
                                                       detail={"server": server.name, "state": state}))
        prelude = Prelude(files={}, dirs=[], old_home=ref.history.options.get("trial_dir", ""), slug="",
                          run_uuid=ref.history.options.get("run_uuid", ""), leg=leg,
                          calls=list(ref.history.model_calls), effects=list(ref.history.effects))
        return runner.run_trial(self.scenario, seed, NOOP, prelude=prelude)

    def _kill(self, runner: Runner, server: NatsServer, spec: dict[str, Any], seed: int, log: str) -> History:
        """SIGKILL of the server right after its ``spec["event"]``-th write of its store (a record persisted,
        its ack not sent: a lost ack), restarted at once on the same store while the run goes on."""
        runner.reference(self.scenario)  # I6's reference, on this server; then that run is deleted
        with open_store(runner.subject.store_url) as store:
            store.delete(run_id_for(self.scenario))
        server.stop()
        server.start(observe=log, faults=(f"kill-after@{int(spec['event'])}:write",))
        proc, done, restarted = server.proc, threading.Event(), []

        def restart() -> None:  # the kill is observed when the tracer exits: the server comes back at once
            proc.wait()
            if not done.is_set():
                server.start()
                restarted.append(True)

        watcher = threading.Thread(target=restart, name="fiskj-nats-restart", daemon=True)
        watcher.start()
        try:
            history = runner.run_trial(self.scenario, seed, NOOP)
        finally:
            done.set()
            if not restarted:
                server.stop(signal.SIGKILL)
            watcher.join()
        history.legs[0].fault = Fault(kind="server_kill", injected=bool(restarted),
                                      detail={"server": server.name, "after_write": int(spec["event"])})
        return history

    def close(self) -> None:
        pass


class JetStreamFamily(FamilyBase):
    """The jetstream family (see the module docstring); registered as :data:`JETSTREAM`."""

    name = "jetstream"
    modes = MODES
    Params = Params
    resumes = True

    def needs_reference(self, scenario: Scenario) -> bool:
        return False  # each trial's own run on its own server is the reference

    def unsupported(self, subject: Any, scenario: Scenario | None = None) -> str | None:
        if subject.jetstream is None:
            return ("its store is not a JetStream server the harness starts: run it with a profile that has "
                    "[jetstream] and --store {store_url} (subjects/jetstream/*.toml)")
        if not subject.caps.fiskj_based:
            return "acknowledged publishes are read from fiskj's IO seam (op publish): a fiskj-based subject only"
        return None

    def plan(self, scenario: Scenario, reference: Any, count: int, seed: int,
             schedules: list[list[dict[str, Any]]] | None, subject: Any = None) -> list[Planned]:
        if schedules is not None:
            return [Planned([dict(f) for f in s], "explicit", seed) for s in schedules]
        if self.params(scenario).fault == "power-loss":
            return [Planned([{"kind": "power_loss", "state": i}], "crash-state", seed) for i in range(count)]
        return [Planned([{"kind": "server_kill", "event": k}], "exhaustive", seed) for k in range(1, count + 1)]

    def open(self, scenario: Scenario, runner: Runner, reference: Any) -> _Executor:
        return _Executor(scenario, runner, self.params(scenario))


#: The registered instance.
JETSTREAM = JetStreamFamily()
