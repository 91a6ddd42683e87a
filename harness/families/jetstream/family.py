"""The jetstream family: faults of the JetStream server(s) a subject's store lives on (issue 28).

Each fault (a power loss at the run's end or, with ``[faults] at``, at a mid-run point of the recorded run:
:mod:`harness.families.jetstream.midrun`; a kill after a block write or fsync; a replica's damage:
:mod:`harness.families.jetstream.damage`; a stale writer: :mod:`harness.families.jetstream.writers`), how a trial
starts its servers under the observer, runs the workload, applies the fault and resumes the run through the one
leg runner, and what I4 judges: docs/jetstream.md "Server faults".
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

from harness.errors import SetupError
from harness.families.base import FamilyBase, Planned, Ran
from harness.families.jetstream import damage
from harness.families.jetstream.cluster import STREAM, current_leader, make_leader, resumed, store_url
from harness.families.jetstream.midrun import PastEnd, by_exit, crash_plan, crash_point, cut_leg, held, server_prefix
from harness.families.jetstream.params import MODES, Params
from harness.families.jetstream.writers import stale_writer
from harness.families.power_loss.crashstates import window
from harness.families.signals.recorded import slug_for
from harness.history.faults import fault_counts
from harness.history.model import Fault, History
from harness.names import EXIT_ERROR
from harness.observer.trace import ops_to_trace
from harness.runner.faults import NOOP
from harness.runner.trial import Runner, run_id_for
from harness.scenario.model import Scenario
from harness.subject.nats_server import NatsServer, add_stream, start_cluster, start_server

__all__ = ["JETSTREAM", "JetStreamFamily", "lay_state"]



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
              sector_bytes: int, seed: int, upto: int | None = None) -> dict[str, Any]:
    """Replace the store directory ``root`` (``before``: its durable tree when the trace began) with crash
    state ``state`` of the server's trace ``events`` after its first ``upto`` events (default: at its end; 0: no
    unsynced unit kept, 1: every unit, else a sample seeded by ``seed``); its summary."""
    root = os.path.realpath(root)
    files, dirs = before
    upto = len(events) if upto is None else upto
    units, _ = window(events, files, dirs, upto, complete=False, sector_bytes=sector_bytes)
    rng = random.Random(f"{seed}:{state}")
    dropped = units if state == 0 else [] if state == 1 else [u for u in units if rng.random() < 0.5]
    _, crash = window(events, files, dirs, upto, dropped, complete=False, sector_bytes=sector_bytes)
    assert crash is not None
    shutil.rmtree(root)
    for d in sorted(d for d in crash.dirs | {root} if d.startswith(root)):
        os.makedirs(d, exist_ok=True)
    for path, data in crash.files.items():
        if path.startswith(root + "/"):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
    return {**crash.describe(), "units": len(units), "dropped": len(dropped), "state": state}


def _restart(nodes: list[NatsServer], tmp: str, faults: tuple[str, ...] = ()) -> None:
    """Start ``nodes`` again, under the observer (``tmp/NAME-ops.log``; ``faults``), and wait until each is ready."""
    for node in nodes:
        node.start(wait=False, observe=os.path.join(tmp, f"{node.name}-ops.log") if tmp else None, faults=faults)
    for node in nodes:
        node.wait_ready()


class _Executor:
    def __init__(self, scenario: Scenario, runner: Runner, params: Params) -> None:
        self.scenario, self.runner, self.params = scenario, runner, params

    def run(self, planned: Planned) -> Ran:
        spec = planned.schedule[0]
        replicas, sync = self.runner.subject.jetstream or (1, "default")
        tmp = tempfile.mkdtemp(prefix="fiskj-jetstream-", dir=self.runner.tmp_root)
        nodes: list[NatsServer] = []
        try:
            sync_interval = None if sync == "default" else sync
            nodes = ([start_server(tmp, sync_interval=sync_interval)] if replicas == 1
                     else start_cluster(tmp, size=replicas, sync_interval=sync_interval).servers)
            add_stream([n.url for n in nodes], STREAM, replicas=replicas)
            url = store_url(nodes, replicas)
            # legs started as any family's (forked when the subject's contract allows it: the reference's
            # ``python -m fiskj``; a fork server pre-imports fiskj, not nats, and opens no connection)
            with Runner(replace(self.runner.subject, store_url=url), self.runner.server, tmp_root=tmp,
                        observe=False) as runner:
                kind = spec.get("kind")
                if kind == "damage":
                    history = damage.run(self.scenario, runner, nodes, spec, planned.seed)
                elif kind == "stale_writer":
                    history = stale_writer(self.scenario, runner, nodes, STREAM, spec, planned.seed, tmp)
                else:
                    trial = self._power_loss if kind == "power_loss" else self._kill
                    history = trial(runner, nodes, spec, planned.seed, tmp)
        finally:
            for node in nodes:
                node.stop(signal.SIGKILL)
            shutil.rmtree(tmp, ignore_errors=True)
        history.schedule = [dict(f) for f in planned.schedule]
        return Ran(history, fault_counts(history))

    def _power_loss(self, runner: Runner, nodes: list[NatsServer], spec: dict[str, Any], seed: int,
                    tmp: str) -> History:
        """The run to its end on the observed servers, then the power cut of the stream's leader (every node
        with ``nodes = "all"``): crash state ``spec["state"]`` laid in each, restarted, the run resumed (leg 0
        the run, as a :class:`Prelude`)."""
        for node in nodes:
            node.stop()
        before = {node.name: durable_tree(node.store_dir) for node in nodes}
        _restart(nodes, tmp)
        current_leader(nodes)
        ref = runner.reference(self.scenario)
        leader = current_leader(nodes)
        cut = nodes if self.params.nodes == "all" else [n for n in nodes if n.name == leader]
        at = spec.get("at", "end")
        if at != "end":  # a mid-run point: every node goes back to it (what came after never happened)
            return self._mid_run(runner, nodes, cut, leader, before, ref.history, spec, seed)
        states = {}
        for node in cut:
            proc = node.proc
            node.stop(signal.SIGKILL)  # the power goes: the server dies with its page cache
            states[node.name] = lay_state(ops_to_trace(proc.ops()), node.store_dir, before[node.name],
                                          int(spec.get("state", 0)), self.params.sector_bytes, seed)
        detail: dict[str, Any] = {"leader": leader, "states": states}
        detail.update(self._back(nodes, cut))
        return resumed(self.scenario, runner, ref.history, Fault(kind="power_loss", injected=True, detail=detail), seed)

    @staticmethod
    def _back(nodes: list[NatsServer], cut: list[NatsServer]) -> dict[str, Any]:
        """Restart ``cut`` (unobserved) and wait for the stream's leader; ``{"restart": why}`` when it fails (a
        node that does not come back, no stream leader: the run and the checkers see it), else ``{}``."""
        try:
            _restart(cut, "")
            current_leader(nodes)
        except SetupError as exc:
            return {"restart": str(exc)}
        return {}

    def _mid_run(self, runner: Runner, nodes: list[NatsServer], cut: list[NatsServer], leader: str,
                 before: dict[str, tuple[dict[str, bytes], set[str]]], history: History, spec: dict[str, Any],
                 seed: int) -> History:
        """Power loss at a mid-run crash point of the recorded run ``history`` (:mod:`.midrun`: ``spec["at"]``
        ``"ack"`` or ``"event"``, ``spec["point"]`` K): every node SIGKILLed; the ``cut`` nodes' store directories
        laid as crash state ``spec["state"]`` of their traces up to the point's instant, the others' as they were
        then (every unit kept: they only go back in time with the run); the agent's leg 0 cut at that instant
        (a :class:`Prelude`), the run resumed.  A point past the run's end injects nothing (the run resumed as
        it ended)."""
        traces = {}
        for node in nodes:
            proc = node.proc
            node.stop(signal.SIGKILL)
            traces[node.name] = by_exit(ops_to_trace(proc.ops()))
        try:
            point = crash_point(spec["at"], int(spec["point"]), history.legs[0].trace, traces[leader], history.run_id)
        except PastEnd as exc:
            detail = {"leader": leader, "at": spec["at"], "point": int(spec["point"]), **self._back(nodes, nodes)}
            fault = Fault(kind="power_loss", injected=False, detail=detail)
            out = resumed(self.scenario, runner, history, fault, seed)
            out.notes.append(f"{exc} (not injected)")
            return out
        states, cut_names = {}, {n.name for n in cut}
        for node in nodes:
            state = int(spec.get("state", 0)) if node.name in cut_names else 1
            upto = server_prefix(traces[node.name], point.t)
            states[node.name] = lay_state(traces[node.name], node.store_dir, before[node.name], state,
                                          self.params.sector_bytes, seed, upto)
            # (how many acknowledged records this node had written by then: of a cluster, who held them)
            states[node.name]["held"] = held(traces[node.name], upto, history.legs[0].trace, history.run_id, point.t)
        detail: dict[str, Any] = {"leader": leader, "states": states, **point.describe(), **self._back(nodes, nodes)}
        fault = Fault(kind="power_loss", injected=True, detail=detail)
        prelude = cut_leg(history, point.t, fault, slug_for(runner.subject)(history.options.get("trial_dir", "")))
        return runner.run_trial(self.scenario, seed, NOOP, prelude=prelude)

    def _kill(self, runner: Runner, nodes: list[NatsServer], spec: dict[str, Any], seed: int, tmp: str) -> History:
        """SIGKILL of the server (of a cluster: the stream's leader) right after its ``spec["event"]``-th write of a
        block file of the stream (its fsync with ``spec["op"] = "fsync"``; a record persisted, its ack not sent: a
        lost ack), restarted at once on the same store while the run goes on; a run that ended in error meanwhile
        (the store away longer than the writer's retries, its journal poisoned) is resumed."""
        runner.reference(self.scenario)  # I6's reference, on these servers; then that run is deleted
        with open_store(runner.subject.store_url) as store:
            store.delete(run_id_for(self.scenario))
        target = next(n for n in nodes if n.name == current_leader(nodes))  # of a cluster: the stream's leader
        target.stop()
        op = spec.get("op", "write")
        kinds = "fsync,fdatasync" if op == "fsync" else "write"
        _restart([target], tmp, (f"kill-after@{int(spec['event'])}:{kinds}=*/streams/{STREAM}/msgs/*.blk",))
        make_leader(nodes, target.name)
        proc, done, restarted = target.proc, threading.Event(), []

        def restart() -> None:  # the kill is observed when the tracer exits: the server comes back at once
            proc.wait()
            if not done.is_set():
                target.start()
                restarted.append(True)

        watcher = threading.Thread(target=restart, name="fiskj-nats-restart", daemon=True)
        watcher.start()
        try:
            history = runner.run_trial(self.scenario, seed, NOOP)
        finally:
            done.set()
            if not restarted:
                target.stop(signal.SIGKILL)
            watcher.join()
        fault = Fault(kind="server_kill", injected=bool(restarted),
                      detail={"server": target.name, f"after_{op}": int(spec["event"])})
        if not restarted:
            history.notes.append(f"the server made fewer than {spec['event']} block {op}s: no kill (not injected)")
        elif history.legs[0].exit_code == EXIT_ERROR:  # the store was away longer than the writer's retries
            return resumed(self.scenario, runner, history, fault, seed)
        history.legs[0].fault = fault
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
        if subject.jetstream_storage == "memory":
            return ("its [jetstream] storage = \"memory\": the JetStream store refuses a stream that keeps its "
                    "messages in memory (fiskj: StreamRefused, field storage; every run is lost when the server "
                    "restarts), so no trial can run; use storage = \"file\"")
        if not subject.caps.fiskj_based:
            return ("acknowledged publishes are read from fiskj's IO seam (op publish): a fiskj-based subject only "
                    "(to test a changed JetStream store, run fiskj with it patched in: command "
                    "[\"{python}\", \"-m\", \"harness.selftest.subject\"] and FISKJ_PRELOAD = \"YOUR_MODULE\" in [env], "
                    "docs/selftest.md)")
        if scenario is not None and self.params(scenario).fault == "damage" and subject.jetstream[0] < 3:
            return ("damage of one replica's block files needs 3 replicas: with one there is no other copy, so "
                    "damaged block files lose records by construction (docs/jetstream.md)")
        return None

    def plan(self, scenario: Scenario, reference: Any, count: int, seed: int,
             schedules: list[list[dict[str, Any]]] | None, subject: Any = None) -> list[Planned]:
        if schedules is not None:
            return [Planned([dict(f) for f in s], "explicit", seed) for s in schedules]
        params = self.params(scenario)
        if params.fault == "stale-writer":  # K: writer 1 held after its K-th acknowledged publish
            return [Planned([{"kind": "stale_writer", "after_publish": k}], "exhaustive", seed) for k in range(1, count + 1)]
        if params.fault == "damage":
            return [Planned([damage.spec_for(i)], "damage-point", seed) for i in range(count)]
        if params.fault == "power-loss" and params.at == "end":
            return [Planned([{"kind": "power_loss", "state": i}], "crash-state", seed) for i in range(count)]
        if params.fault == "power-loss":
            return [Planned([point], "crash-point", seed) for point in crash_plan(params.at, params.states, count)]
        op = {"op": "fsync"} if params.after == "fsync" else {}
        return [Planned([{"kind": "server_kill", "event": k, **op}], "exhaustive", seed) for k in range(1, count + 1)]

    def open(self, scenario: Scenario, runner: Runner, reference: Any) -> _Executor:
        return _Executor(scenario, runner, self.params(scenario))


#: The registered instance.
JETSTREAM = JetStreamFamily()
