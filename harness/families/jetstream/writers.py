"""Two writers of one run on two nodes, the run deleted between them: the jetstream family's ``stale-writer``
fault (issue 28).  Why only a deleted run tests the fence, trial *K*'s four steps (writer 1 held by its IO seam
after its *K*-th acknowledged publish, the run deleted, writer 1 continued and refused, writer 2 starting the
run again through the one leg runner) and what is judged: docs/jetstream.md "Two writers of one run".
"""

from __future__ import annotations

import glob
import json
import os
import signal
import threading
from dataclasses import replace
from typing import Any

from fiskj.cli_common import open_store
from fiskj.ioseam import FAULT_ENV

from harness.families.jetstream.cluster import resumed, store_url
from harness.history.model import Fault, History
from harness.names import EXIT_COMPLETED
from harness.runner.faults import NOOP
from harness.runner.trial import Runner, run_id_for
from harness.scenario.model import Scenario
from harness.subject.nats_server import NatsServer

__all__ = ["stale_writer", "node_url", "STOP"]

#: The IO-seam action that holds writer 1 after its K-th acknowledged publish (docs/ioseam.md).
STOP = "stop-after"


def node_url(node: NatsServer, stream: str, replicas: int) -> str:
    """The store URL of ``stream`` through ``node`` only (a client of that node alone)."""
    return store_url([node], replicas, stream)


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (state ``T``); False once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False


def _held(trace_glob: str) -> dict[str, Any] | None:
    """The trace line of the publish the IO seam stopped its process after (``fault: stop-after``), or ``None``."""
    for path in glob.glob(trace_glob):
        try:
            with open(path, "rb") as f:
                for line in f:
                    if b'"fault":"stop-after"' in line:
                        return json.loads(line)
        except (OSError, ValueError):
            continue
    return None


class _Deleter(threading.Thread):
    """Waits until writer 1 is held (its trace shows the stop and it is stopped: observed, never timed), purges
    the run through ``url`` (as ``fiskj session rm``), then continues it.  ``detail``: what was done."""

    def __init__(self, trace_glob: str, url: str, run_id: str) -> None:
        super().__init__(name="fiskj-stale-writer", daemon=True)
        self.trace_glob, self.url, self.run_id = trace_glob, url, run_id
        self.done, self.detail, self.error = threading.Event(), {}, ""

    def run(self) -> None:
        while not self.done.wait(0.005):  # polls for an event the leg reports; the wait is no fault time
            held = _held(self.trace_glob)
            if held is None or not _stopped(int(held["pid"])):
                continue
            try:
                with open_store(self.url) as store:
                    store.delete(self.run_id)
                self.detail = {"run_deleted_after_n": int(held["n"]), "pid": int(held["pid"])}
            except Exception as exc:  # noqa: BLE001 - said in the history: the fault was not injected
                self.error = f"deleting run {self.run_id} failed: {type(exc).__name__}: {exc}"
            finally:
                os.kill(int(held["pid"]), signal.SIGCONT)
            return


def stale_writer(scenario: Scenario, runner: Runner, nodes: list[NatsServer], stream: str, spec: dict[str, Any],
                 seed: int, tmp: str) -> History:
    """Trial ``spec = {"kind": "stale_writer", "after_publish": K}`` (the module docstring) on ``nodes`` (writer 1
    on the first, writer 2 on the last; one server: both on it), ``runner`` the family's (its subject, model
    server); its history, leg 0 writer 1 with fault ``stale_writer``.  Raises :class:`harness.errors.SetupError`
    as the runner does."""
    k, run_id, replicas = int(spec["after_publish"]), run_id_for(scenario), len(nodes)
    first, second = nodes[0], nodes[-1]
    url_a, url_b = node_url(first, stream, replicas), node_url(second, stream, replicas)
    held_root = os.path.join(tmp, "writer-1")
    os.makedirs(held_root, exist_ok=True)
    subject = runner.subject
    with Runner(replace(subject, store_url=url_b), runner.server, tmp_root=tmp, fork_server=False,
                observe=False) as writer2:
        ref = writer2.reference(scenario)
        with open_store(url_b) as store:
            store.delete(run_id)
        held = replace(subject, store_url=url_a, extra_env=subject.extra_env + ((FAULT_ENV, f"{STOP}@{k}:publish"),))
        deleter = _Deleter(os.path.join(held_root, "fiskj-trial-*", "trace-0.jsonl"), url_b, run_id)
        with Runner(held, runner.server, tmp_root=held_root, fork_server=False, observe=False) as writer1:
            deleter.start()
            try:
                history = writer1.run_trial(scenario, seed, NOOP, with_reference=False)
            finally:
                deleter.done.set()
                deleter.join()
        detail = {"after_publish": k, "writer_node": first.name, "rival_node": second.name, **deleter.detail}
        leg = replace(history.legs[0], fault=Fault(kind="stale_writer", injected=bool(deleter.detail), detail=detail))
        if deleter.error:
            history.notes.append(deleter.error)
        elif not deleter.detail:
            history.notes.append(f"writer 1 made fewer than {k} acknowledged publishes: the run was not deleted "
                                 "under it (not injected)")
        if leg.exit_code == EXIT_COMPLETED or not deleter.detail:  # it ended the run: the trial ends, as a leg's would
            history.legs[0] = leg
            history.reference = ref.reference
            return history
        out = resumed(scenario, writer2, history, leg.fault, seed)
        out.notes[:0] = [n for n in history.notes if not n.startswith("leg 0 ended with exit")]  # (it was held)
        return out
