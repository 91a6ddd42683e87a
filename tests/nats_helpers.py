"""What the JetStream tests share: one NATS server per test module and a fresh stream per test.

A test module imports the fixtures (``from nats_helpers import nats_server, stream``).  The server runs with
``sync_interval: always`` in the module's temporary directory (harness/subject/nats_server.py); each
``stream`` is a new stream the JetStream store accepts (R1, allowed), on its own prefix.
"""

from __future__ import annotations

import itertools
import signal

import pytest

from fiskj.jetstream import JetStreamStore
from harness.subject.nats_server import add_stream, start_server

_names = itertools.count(1)


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory):
    server = start_server(str(tmp_path_factory.mktemp("nats")), sync_interval="always")
    yield server
    server.stop(signal.SIGKILL)


class Stream:
    """A stream on the module's server: ``name``, ``prefix``, ``url`` (a store URL), ``store()`` (a new store)."""

    def __init__(self, server, **overrides):
        n = next(_names)
        self.server, self.name, self.prefix = server, f"RUNS{n}", f"p{n}"
        add_stream([server.url], self.name, prefix=self.prefix, **overrides)
        self.url = f"{server.url}/{self.name}?allow_single_replica=1"
        self.stores = []

    def store(self, **kw) -> JetStreamStore:
        s = JetStreamStore(self.url, **kw)
        self.stores.append(s)
        return s


@pytest.fixture
def stream(nats_server):
    s = Stream(nats_server)
    yield s
    for store in s.stores:
        store.close()
