"""The stream the jetstream family's trials make, who leads it, and a run resumed after its fault (issue 28;
docs/jetstream.md): shared by the family's executor and its fault modules (:mod:`harness.families.jetstream.damage`,
``writers``)."""

from __future__ import annotations

import json
from dataclasses import replace

from fiskj.jetstream import NatsClient

from harness.errors import SetupError
from harness.history.model import Fault, History
from harness.runner.faults import NOOP
from harness.runner.prelude import Prelude
from harness.runner.trial import Runner
from harness.scenario.model import Scenario
from harness.subject.nats_server import NatsServer, stream_leader

__all__ = ["STREAM", "ACK_WAIT_S", "current_leader", "make_leader", "store_url", "resumed"]

#: The stream every trial of the family makes (the store's name in ``{store_url}``).
STREAM = "FISKJ"
#: Seconds a trial's store waits for a request's answer (``?timeout=``; fiskj's default is 5): a writer whose
#: own server is killed under a publish asks again once reconnected, but one whose ack is lost with its
#: connection up (a cluster's leader killed) waits this long before it retries.  2 s is
#: still far above an ack on a loaded machine (milliseconds); a late ack is a lost ack either way, which
#: the engine must survive (docs/jetstream.md).
ACK_WAIT_S = 2


def store_url(nodes: list[NatsServer], replicas: int, stream: str = STREAM) -> str:
    """The store URL of ``stream`` through ``nodes`` (all of a cluster's, or one node's alone), with the
    trial's request timeout (:data:`ACK_WAIT_S`) and, for an R1 stream, ``allow_single_replica``."""
    query = f"timeout={ACK_WAIT_S}" + ("&allow_single_replica=1" if replicas == 1 else "")
    return "nats://" + ",".join(f"127.0.0.1:{n.port}" for n in nodes) + f"/{stream}?{query}"


def current_leader(nodes: list[NatsServer]) -> str:
    """The stream's leader once it has one and a quorum (one current follower); raises :class:`SetupError`."""
    return nodes[0].name if len(nodes) == 1 else stream_leader([n.url for n in nodes], STREAM, quorum=True)


def make_leader(nodes: list[NatsServer], name: str) -> None:
    """Step the stream's leader down, preferring ``name``, until ``name`` leads; raises :class:`SetupError`."""
    for _ in range(8):
        if current_leader(nodes) == name:
            return
        client = NatsClient([n.url for n in nodes], timeout=2.0)
        try:
            client.run(client.nc.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{STREAM}",
                                         json.dumps({"placement": {"preferred": name}}).encode(), timeout=2.0))
        except Exception:  # noqa: BLE001 - an election in progress: ask again
            pass
        finally:
            client.close()
    raise SetupError(f"server {name} did not become the leader of stream {STREAM}")


def resumed(scenario: Scenario, runner: Runner, history: History, fault: Fault, seed: int) -> History:
    """A trial of ``scenario`` whose leg 0 is ``history``'s with ``fault`` on it (a :class:`Prelude` with no files:
    the run's store is on its servers), resumed to its end by ``runner``."""
    prelude = Prelude(files={}, dirs=[], old_home=history.options.get("trial_dir", ""), slug="",
                      run_uuid=history.options.get("run_uuid", ""), leg=replace(history.legs[0], fault=fault),
                      calls=list(history.model_calls), effects=list(history.effects))
    return runner.run_trial(scenario, seed, NOOP, prelude=prelude)
