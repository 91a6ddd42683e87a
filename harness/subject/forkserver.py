"""The fork server: legs forked from a pre-imported interpreter (docs/subject.md "Fork servers"): a fiskj-based
subject's (``python -m fiskj``, the mutant subject), or any Python agent whose profile declares ``[fork_server]``
(its script or module run as ``__main__`` in the forked leg).  Started by :meth:`ForkServer.start` only: as
``python -m harness.subject.forkserver_main --fork-server`` for fiskj, and for an agent on the agent's own interpreter
(which need not have the harness installed: only :mod:`harness.subject.forkserver_main`, the server process's
own code, and :mod:`harness.names` are imported there); a campaign's per-thread servers are forked from one such
server started as a template (:meth:`ForkServer.clone`).  This module is the harness's side."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.subject.forkserver_main import AGENT_FLAG, TEMPLATE_FLAG

__all__ = ["ForkServer", "ForkedProcess", "ForkRefused", "AGENT_FLAG", "TEMPLATE_FLAG"]

_ROOT = str(Path(__file__).resolve().parents[2])
_BOOT = ("import sys; sys.path.insert(0, sys.argv.pop(1)); import harness.subject.forkserver_main as f; del sys.path[0]; "
         "sys.exit(f.main(sys.argv[1:]))")


class ForkRefused(RuntimeError):
    """A leg the fork server must not fork (:meth:`ForkServer.spawn`): its environment differs from the
    server's in a variable the pre-imports read; the leg is started as a fresh process instead."""


class _PopenLike:
    """``wait`` and ``poll`` as :class:`subprocess.Popen` has them, over a subclass's ``wait_for_exit(timeout)``
    (True once ended, ``returncode`` set) and its ``_NAME`` (what a ``TimeoutExpired`` names)."""

    _NAME = "process"
    pid: int
    returncode: int | None

    def wait_for_exit(self, timeout: float | None) -> bool:  # pragma: no cover (each subclass has its own)
        raise NotImplementedError

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the end; returns ``returncode``.  Raises ``subprocess.TimeoutExpired`` after ``timeout`` s."""
        if not self.wait_for_exit(timeout):
            raise subprocess.TimeoutExpired([self._NAME, str(self.pid)], timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def poll(self) -> int | None:
        """``returncode`` once ended, else ``None`` (does not block)."""
        self.wait_for_exit(0)
        return self.returncode


class ForkedProcess(_PopenLike):
    """A leg forked by a :class:`ForkServer`: the parts of :class:`subprocess.Popen` the nemesis uses
    (``pid``, ``returncode``: ``-N`` when killed by signal N)."""

    _NAME = "fork-server leg"

    def __init__(self, server: "ForkServer", pid: int) -> None:
        self._server = server
        self.pid = pid
        self.returncode: int | None = None

    def wait_for_exit(self, timeout: float | None) -> bool:
        """Block until the leg exited (True) or ``timeout`` seconds passed (False)."""
        if self.returncode is None:
            msg = self._server._read(timeout)
            if msg is None:
                return False
            self.returncode = os.waitstatus_to_exitcode(int(msg["status"]))
        return True



class ForkServer:
    """A pre-imported interpreter that forks legs, one at a time (the next :meth:`spawn` waits until the last
    leg exited); not thread-safe: one per worker thread.  It ends at :meth:`close`, or when its stdin reaches EOF
    (the harness died).  Raises ``OSError`` / ``RuntimeError`` when the server dies.

    A ``template`` server forks no leg: it imports once and :meth:`clone` forks servers from it, each as
    warm as it is and one per worker thread, so that a campaign's threads pay the imports once, not once
    each (thread-safe; a clone is the template's child, watched through its pidfd)."""

    def __init__(self, python: str | None = None, *, agent: Sequence[str] = (), preimport: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, template: bool = False) -> None:
        """``python``: the interpreter (default this one).  ``agent``: a Python agent's entry after the
        interpreter, ``[SCRIPT]`` or ``["-m", MODULE]`` (empty: fiskj's legs); ``preimport``: the modules the
        server imports once before it forks an agent's legs; ``env``: the server's environment (default this
        process's without :data:`harness.subject.contract.HARNESS_ENV`); ``template``: a server that only
        clones (:meth:`clone`).  Raises ``ValueError`` for an entry of another form."""
        self.python = python or sys.executable
        self.agent = list(agent)
        if self.agent and not (len(self.agent) == 1 and not self.agent[0].startswith("-")
                               or len(self.agent) == 2 and self.agent[0] == "-m"):
            raise ValueError(f"a fork server runs a Python agent as SCRIPT or -m MODULE, not {self.agent!r}")
        self.preimport = list(preimport)
        self.env = dict(env) if env is not None else None
        self.template = template
        self._proc: subprocess.Popen | _Clone | None = None
        self._sock: socket.socket | None = None  # a template's requests (a clone's pipes go with them)
        self._clone_lock = threading.Lock()
        self._buf = b""
        self._last: ForkedProcess | None = None
        self._read_at_import: dict[str, str | None] = {}

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`close` while the server process lives."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> "ForkServer":
        """Start the server process (idempotent); returns ``self``."""
        if self._proc is None:
            from harness.subject.contract import HARNESS_ENV

            env = self.env if self.env is not None else {k: v for k, v in os.environ.items() if k not in HARNESS_ENV}
            argv = [self.python, "-m", "harness.subject.forkserver_main", "--fork-server"]
            if self.agent:
                spec = json.dumps({"entry": self.agent, "preimport": self.preimport})
                argv = [self.python, "-c", _BOOT, _ROOT, AGENT_FLAG, spec]
            stdin: Any = subprocess.PIPE
            if self.template:  # its requests come on a socket: each carries the new server's pipes
                argv.append(TEMPLATE_FLAG)
                self._sock, stdin = socket.socketpair()
            try:
                self._proc = subprocess.Popen(argv, env=env, stdin=stdin, stdout=subprocess.PIPE,
                                              start_new_session=True, close_fds=True)
            except BaseException:
                if self._sock is not None:
                    self._sock.close()
                raise
            finally:
                if self.template:
                    stdin.close()
            self._read_at_import = dict(self._ready(120.0, "fork server").get("read_at_import") or {})
        return self

    def _ready(self, timeout: float, what: str) -> dict[str, Any]:
        """The server's ready message, read within ``timeout`` seconds; closes the server and raises
        ``RuntimeError`` naming ``what`` when it says anything else or nothing."""
        try:
            ready = self._read(timeout)
        except (RuntimeError, ValueError) as exc:
            ready = {"error": str(exc)}
        if not ready or not ready.get("ready"):
            self.close()
            raise RuntimeError(f"the {what} did not start: {ready!r}")
        return ready

    def clone(self) -> "ForkServer":
        """A new server forked from this started template (``template``): as warm as it, ready to
        :meth:`spawn`, ended by its own :meth:`close`.  Thread-safe.  Raises ``RuntimeError`` / ``OSError``
        when the template is not running or does not fork."""
        if not self.template:
            raise ValueError("only a template fork server clones")
        self.start()
        requests, theirs = os.pipe()[::-1], os.pipe()  # (write, read): the harness writes; (read, write): it reads
        mine = (requests[0], theirs[0])
        try:
            with self._clone_lock:
                assert self._sock is not None
                socket.send_fds(self._sock, [b"clone\n"], [requests[1], theirs[1]])
                msg = self._read(30.0)
            if not msg or "pid" not in msg:
                raise RuntimeError(f"the template fork server did not clone: {msg!r}")
            clone = _Clone(int(msg["pid"]), *mine)
        except BaseException:
            for fd in mine:
                os.close(fd)
            raise
        finally:
            os.close(requests[1])  # the clone's ends: the template passed them on
            os.close(theirs[1])
        server = ForkServer(self.python, agent=self.agent, preimport=self.preimport, env=self.env)
        server._proc = clone
        server._ready(30.0, "cloned fork server")
        server._read_at_import = dict(self._read_at_import)
        return server

    def refusal(self, env: Mapping[str, str]) -> str | None:
        """Why a leg with environment ``env`` must not be forked from this (started) server, or ``None``: a
        variable the pre-imports read has another value (or presence) in ``env`` than it had in the server."""
        changed = sorted(name for name, value in self._read_at_import.items() if env.get(name) != value)
        if not changed:
            return None
        return (f"the agent's pre-imports read {', '.join(changed)} from the environment, and this leg's "
                f"value differs from the fork server's: started fresh")

    def _read(self, timeout: float | None) -> dict[str, Any] | None:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        poller = select.poll()  # not select(): a campaign's descriptors may number over FD_SETSIZE (1024)
        poller.register(fd, select.POLLIN)
        while b"\n" not in self._buf:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            ready = poller.poll(None if remaining is None else remaining * 1000.0)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError("the fork server exited unexpectedly")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], *, stdin: str | None, stdout: str,
              stderr: str, main: str | None = None, seccomp: bytes | None = None) -> ForkedProcess:
        """Fork a leg running ``fiskj`` with ``argv`` (the words after the subject prefix) in a new session:
        ``env`` its whole environment, ``stdin`` a file path or ``None`` (``/dev/null``), ``stdout``/``stderr`` file
        paths (truncated); ``main``: a module whose ``main(argv)`` runs instead of :func:`fiskj.cli.main`, after the
        preload (the journal-state engine's reader child); ``seccomp``: the outside observer's filter
        (:func:`harness.observer.run.seccomp_filter`), which the leg installs, then stops until the tracer
        attaches to it (docs/observer.md "Use").  Waits for the last leg's exit first.  A Python agent's leg runs
        its script or module as ``__main__`` with ``argv`` instead (``main`` does not apply); raises
        :class:`ForkRefused` when the leg must be started fresh (:meth:`refusal`)."""
        if self.template:
            raise ValueError("a template fork server forks no leg: spawn from its clone()")
        self.start()
        refused = self.refusal(env)
        if refused:
            raise ForkRefused(refused)
        if self._last is not None and not self._last.wait_for_exit(60.0):
            raise RuntimeError(f"the fork server's last leg (pid {self._last.pid}) did not end")
        assert self._proc is not None and self._proc.stdin is not None
        req = {"argv": list(argv), "env": dict(env), "stdin": stdin, "stdout": stdout, "stderr": stderr,
               "main": main, "seccomp": seccomp.hex() if seccomp else None}
        self._proc.stdin.write(json.dumps(req).encode() + b"\n")
        self._proc.stdin.flush()
        msg = self._read(60.0)
        if not msg or "pid" not in msg:
            raise RuntimeError(f"the fork server did not fork: {msg!r}")
        self._last = ForkedProcess(self, int(msg["pid"]))
        return self._last

    def close(self) -> None:
        """Stop the server (EOF on its stdin, then SIGKILL after 5 s); idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if self._sock is not None:
                self._sock.close()
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


class _Clone(_PopenLike):
    """A server cloned from a template (:meth:`ForkServer.clone`), the parts of :class:`subprocess.Popen` a
    :class:`ForkServer` uses: ``stdin``/``stdout`` (its pipes), :meth:`poll`, :meth:`wait`, :meth:`kill`.  It is
    the template's child, not this process's: its end is seen through its pidfd."""

    _NAME = "cloned fork server"

    def __init__(self, pid: int, stdin_fd: int, stdout_fd: int) -> None:
        """``stdin_fd``/``stdout_fd``: this side of its request and reply pipes (closed with the files made of
        them; not taken when the pidfd cannot be had: ``OSError``)."""
        self.pid = pid
        self.returncode: int | None = None
        self._pidfd: int | None = os.pidfd_open(pid)
        self.stdin = os.fdopen(stdin_fd, "wb")
        self.stdout = os.fdopen(stdout_fd, "rb")

    def wait_for_exit(self, timeout: float | None) -> bool:
        """Whether the server ended within ``timeout`` seconds (``None``: until it does; its ``returncode``
        is then ``-1``: its status is the template's to reap)."""
        if self.returncode is None and self._pidfd is not None:
            poller = select.poll()
            poller.register(self._pidfd, select.POLLIN)
            if not poller.poll(None if timeout is None else timeout * 1000.0):
                return False
            os.close(self._pidfd)
            self._pidfd, self.returncode = None, -1
        return True

    def kill(self) -> None:
        """SIGKILL the server (through its pidfd: never another process that got its pid)."""
        if self._pidfd is not None:
            with suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
