"""The stream the jetstream family's trials make, and who leads it (issue 28; docs/jetstream.md): shared by the
family's executor and its fault modules (:mod:`harness.families.jetstream.damage`, ``writers``)."""

from __future__ import annotations

import json

from fiskj.jetstream import NatsClient

from harness.errors import SetupError
from harness.subject.nats_server import NatsServer, stream_leader

__all__ = ["STREAM", "current_leader", "make_leader"]

#: The stream every trial of the family makes (the store's name in ``{store_url}``).
STREAM = "FISKJ"


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
