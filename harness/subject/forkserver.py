"""The fork server's harness side (docs/subject.md "Fork servers"): legs forked from a pre-imported interpreter,
a fiskj-based subject's (``python -m fiskj``, the mutant subject), or any Python agent's whose profile declares
``[fork_server]`` (its script or module run as ``__main__`` in the forked leg).  One server per subject forks the
legs of every worker thread side by side; its process runs :mod:`harness.subject.forkserver_main` (for an agent
on the agent's own interpreter, which need not have the harness installed).  :class:`ServerProcess` is what
every fork server's harness side shares (the MCP fork server's too, :mod:`harness.workload.mcp_fork`)."""

from __future__ import annotations

import errno
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Mapping, Self, Sequence

from harness.subject.forkserver_main import AGENT_FLAG

__all__ = ["ForkServer", "ForkedProcess", "ForkRefused", "ServerProcess", "AGENT_FLAG"]

_ROOT = str(Path(__file__).resolve().parents[2])
_BOOT = ("import sys; sys.path.insert(0, sys.argv.pop(1)); import harness.subject.forkserver_main as f; del sys.path[0]; "
         "sys.exit(f.main(sys.argv[1:]))")


class ForkRefused(RuntimeError):
    """A leg the fork server must not fork (:meth:`ForkServer.spawn`): its environment differs from the
    server's in a variable the pre-imports read; the leg is started as a fresh process instead."""


class ServerProcess:
    """A fork server's process (:func:`harness.subject.forkserver_main.serve`), the harness's side: started by
    :meth:`start` (idempotent, thread-safe) with the Unix socket it serves on (in a 0700 folder) as its last
    argument, asked over that socket (:meth:`request`), ended by :meth:`close` or when this process dies (EOF on
    its stdin).  A subclass says how it runs (:meth:`_command`) and takes its ready message (:meth:`_ready`);
    ``ERROR`` is what it raises, ``WHAT`` how it names itself."""

    ERROR: type[RuntimeError] = RuntimeError
    WHAT = "fork server"
    #: How long it may take to say it is ready (its imports: seconds).
    START_TIMEOUT_S = 120.0

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._dir: str | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`close` while the process lives."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def socket_path(self) -> str:
        """The Unix socket it serves on."""
        if self._dir is None:
            raise self.ERROR(f"the {self.WHAT} is not started")
        return os.path.join(self._dir, "s")

    def _command(self) -> tuple[list[str], dict[str, str], str | None]:  # pragma: no cover (each subclass's)
        raise NotImplementedError

    def _ready(self, ready: dict[str, Any]) -> None:
        """Take the process's ready message (the subclass's)."""

    def start(self) -> Self:
        """Start the process (idempotent); returns ``self``.  Raises ``ERROR`` when it does not say it is ready
        within :data:`START_TIMEOUT_S` (its message, e.g. a pre-import's error, named)."""
        with self._lock:
            if self._proc is not None:
                return self
            argv, env, cwd = self._command()
            self._dir = tempfile.mkdtemp(prefix="fiskj-fork-")  # 0700: only this user connects
            try:
                self._proc = subprocess.Popen([*argv, self.socket_path], env=env, cwd=cwd, stdin=subprocess.PIPE,
                                              stdout=subprocess.PIPE, start_new_session=True, close_fds=True)
            except BaseException:
                self._stop(0)
                raise
            assert self._proc.stdout is not None
            poller = select.poll()  # not select(): a campaign's descriptors may number over FD_SETSIZE (1024)
            poller.register(self._proc.stdout, select.POLLIN)
            line = self._proc.stdout.readline() if poller.poll(self.START_TIMEOUT_S * 1000.0) else b""
            try:
                ready = json.loads(line)
            except ValueError:
                ready = {"error": line.decode(errors="replace") or f"no word in {self.START_TIMEOUT_S:g} s"}
            if not ready.get("ready"):
                proc = self._proc
                self._stop(1.0)
                raise self.ERROR(f"the {self.WHAT} did not start (exit {proc.returncode}): {ready.get('error')}")
            self._ready(ready)
            return self

    def request(self, msg: dict[str, Any], fds: Sequence[int] = (), timeout: float = 60.0) -> socket.socket:
        """Send ``msg`` (with ``fds``) on a new connection, returned for its answers (a blocking socket with
        ``timeout``).  Raises ``OSError`` when the process does not take it."""
        self.start()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.settimeout(timeout)
            sock.connect(self.socket_path)
            socket.send_fds(sock, [json.dumps(msg).encode()], list(fds))
        except BaseException:
            sock.close()
            raise
        return sock

    def close(self, timeout: float = 5.0) -> None:
        """Stop the process (EOF on its stdin; killed after ``timeout`` s); idempotent.  What it forked runs on."""
        with self._lock:
            self._stop(timeout)

    def _stop(self, timeout: float) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


class ForkedProcess:
    """A leg forked by a :class:`ForkServer`: the parts of :class:`subprocess.Popen` the nemesis uses (``pid``,
    ``returncode``: ``-N`` when killed by signal N, :meth:`wait`, :meth:`poll`), its end told over its own
    connection to the server."""

    def __init__(self, conn: socket.socket, pid: int) -> None:
        self._conn = conn
        self.pid = pid
        self.returncode: int | None = None

    def wait_for_exit(self, timeout: float | None) -> bool:
        """Block until the leg exited (True) or ``timeout`` seconds passed (False).  Raises ``RuntimeError`` when
        the fork server died first."""
        if self.returncode is None:
            poller = select.poll()
            poller.register(self._conn, select.POLLIN)
            if not poller.poll(None if timeout is None else timeout * 1000.0):
                return False
            try:
                msg = self._conn.recv(64)
            except OSError:
                msg = b""
            if msg[:1] != b"x":
                raise RuntimeError(f"the fork server exited before its leg (pid {self.pid}) did")
            self.returncode = int(msg[1:])
            self._conn.close()
        return True

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the end; returns ``returncode``.  Raises ``subprocess.TimeoutExpired`` after ``timeout`` s."""
        if not self.wait_for_exit(timeout):
            raise subprocess.TimeoutExpired(["fork-server leg", str(self.pid)], timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def poll(self) -> int | None:
        """``returncode`` once ended, else ``None`` (does not block)."""
        self.wait_for_exit(0)
        return self.returncode


class ForkServer(ServerProcess):
    """A pre-imported interpreter that forks legs, any number at once (thread-safe: one per subject, shared by
    a campaign's worker threads, so the imports are paid once).  Raises ``OSError`` / ``RuntimeError`` when the
    server dies."""

    def __init__(self, python: str | None = None, *, agent: Sequence[str] = (), preimport: Sequence[str] = (),
                 env: Mapping[str, str] | None = None) -> None:
        """``python``: the interpreter (default this one).  ``agent``: a Python agent's entry after the
        interpreter, ``[SCRIPT]`` or ``["-m", MODULE]`` (empty: fiskj's legs); ``preimport``: the modules the
        server imports once before it forks an agent's legs; ``env``: the server's environment (default this
        process's).  Raises ``ValueError`` for an entry of another form."""
        super().__init__()
        self.python = python or sys.executable
        self.agent = list(agent)
        if self.agent and not (len(self.agent) == 1 and not self.agent[0].startswith("-")
                               or len(self.agent) == 2 and self.agent[0] == "-m"):
            raise ValueError(f"a fork server runs a Python agent as SCRIPT or -m MODULE, not {self.agent!r}")
        self.preimport = list(preimport)
        self.env = dict(env) if env is not None else None
        self._read_at_import: dict[str, str | None] = {}

    def _command(self) -> tuple[list[str], dict[str, str], str | None]:
        env = self.env if self.env is not None else dict(os.environ)
        if not self.agent:
            return [self.python, "-m", "harness.subject.forkserver_main", "--fork-server"], env, None
        spec = json.dumps({"entry": self.agent, "preimport": self.preimport})
        return [self.python, "-c", _BOOT, _ROOT, AGENT_FLAG, spec], env, None

    def _ready(self, ready: dict[str, Any]) -> None:
        self._read_at_import = dict(ready.get("read_at_import") or {})

    def refusal(self, env: Mapping[str, str]) -> str | None:
        """Why a leg with environment ``env`` must not be forked from this (started) server, or ``None``: a
        variable the pre-imports read has another value (or presence) in ``env`` than it had in the server."""
        changed = sorted(name for name, value in self._read_at_import.items() if env.get(name) != value)
        if not changed:
            return None
        return (f"the agent's pre-imports read {', '.join(changed)} from the environment, and this leg's "
                f"value differs from the fork server's: started fresh")

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], *, stdin: str | None, stdout: str,
              stderr: str, main: str | None = None, seccomp: bytes | None = None) -> ForkedProcess:
        """Fork a leg running ``fiskj`` with ``argv`` (the words after the subject prefix) in a new session:
        ``env`` its whole environment, ``stdin`` a file path or ``None`` (``/dev/null``), ``stdout``/``stderr`` file
        paths (truncated); ``main``: a module whose ``main(argv)`` runs instead of :func:`fiskj.cli.main`, after the
        preload (the journal-state engine's reader child); ``seccomp``: the outside observer's filter
        (:func:`harness.observer.run.seccomp_filter`), which the leg installs, then stops until the tracer
        attaches to it (docs/observer.md "Use").  A Python agent's leg runs its script or module as ``__main__``
        with ``argv`` instead (``main`` does not apply); raises :class:`ForkRefused` when the leg must be started
        fresh (:meth:`refusal`, or a request too long for the server's socket)."""
        self.start()
        refused = self.refusal(env)
        if refused:
            raise ForkRefused(refused)
        req = {"argv": list(argv), "env": dict(env), "stdin": stdin, "stdout": stdout, "stderr": stderr,
               "main": main, "seccomp": seccomp.hex() if seccomp else None}
        try:
            conn = self.request({"fork": req})
        except OSError as exc:
            if exc.errno == errno.EMSGSIZE:
                raise ForkRefused("the leg's request is too long for the fork server's socket: started fresh")
            raise
        try:
            msg = conn.recv(64)
        except BaseException:
            conn.close()
            raise
        if msg[:1] != b"p":
            conn.close()
            raise RuntimeError(f"the fork server did not fork: {msg!r}")
        return ForkedProcess(conn, int(msg[1:]))
