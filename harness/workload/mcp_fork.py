"""The MCP fork server: our stdio MCP server forked, per agent start, from one pre-imported interpreter.

Starting :mod:`harness.workload.mcp_server` costs about two seconds of CPU (the official ``mcp`` SDK's
imports), once per leg of every agent that takes its tools over stdio MCP.  Instead the harness runs one
fork server per process (:func:`fork_server`, started on first use, ended with the process or by
:meth:`McpForkServer.close`), and an agent's configuration names the launcher
(:mod:`harness.workload.mcp_launch`, a few milliseconds): it passes its standard streams over the fork
server's Unix socket, the fork server forks a server that serves on them (:func:`mcp_server.serve_forked`)
and tells the launcher its exit status.  Each leg has a ticket (:meth:`McpForkServer.ticket`):
:meth:`McpForkServer.end` returns once every server of that ticket has ended, so no line of a leg is
written after the harness moved past it.  docs/subject.md "Tools over MCP" says what the observer sees.

Run as ``python -I -m harness.workload.mcp_fork SOCKET`` by :meth:`McpForkServer.start` only.
"""

from __future__ import annotations

import atexit
import itertools
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Sequence

__all__ = ["LAUNCHER", "McpForkError", "McpForkServer", "fork_server"]

#: The launcher an agent runs (by path, standard library only).
LAUNCHER = Path(__file__).resolve().with_name("mcp_launch.py")
#: The environment its servers run with: what an MCP client gives a stdio server configured with ``"env": {}``
#: (the mcp SDK's default), none of the harness's.
SERVER_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
#: How long the fork server may take to say it is ready (its imports: about 2 s on an idle machine).
START_TIMEOUT_S = 120
#: How long a leg's servers may take to end once the harness ended the leg (they end when their launcher
#: is gone), before they are killed.
END_GRACE_S = 5.0


class McpForkError(RuntimeError):
    """The MCP fork server could not be started, or stopped answering."""


class McpForkServer:
    """A pre-imported interpreter that forks our stdio MCP server for each launcher that connects (thread-safe;
    serves any number of legs at once).  :meth:`start` returns once it accepts connections.  ``python``: its
    interpreter (and the launcher's); ``wrap``: a command it runs under (a test's outside observer)."""

    def __init__(self, python: str | None = None, wrap: Sequence[str] = ()) -> None:
        self.python = python or sys.executable
        self.wrap = list(wrap)
        self._proc: subprocess.Popen | None = None
        self._dir: str | None = None
        self._count = itertools.count(1)
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`close` while the process lives."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def socket_path(self) -> str:
        """The Unix socket launchers connect to."""
        if self._dir is None:
            raise McpForkError("the MCP fork server is not started")
        return os.path.join(self._dir, "s")

    def start(self) -> "McpForkServer":
        """Start the process (idempotent); returns ``self``.  Raises :class:`McpForkError` when it does not start
        (within :data:`START_TIMEOUT_S`)."""
        with self._lock:
            if self._proc is not None:
                return self
            self._dir = tempfile.mkdtemp(prefix="fiskj-mcp-")  # 0700: only this user connects
            env = {k: os.environ[k] for k in SERVER_ENV if k in os.environ}
            self._proc = subprocess.Popen([*self.wrap, self.python, "-I", "-m", __name__, self.socket_path], env=env, cwd="/",
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
                                          close_fds=True)
            assert self._proc.stdout is not None
            ready, _, _ = select.select([self._proc.stdout], [], [], START_TIMEOUT_S)
            line = self._proc.stdout.readline() if ready else b"(no word in %d s)" % START_TIMEOUT_S
            if line != b"ready\n":
                proc = self._proc
                self._stop(1.0)
                raise McpForkError(f"the MCP fork server did not start (exit {proc.returncode}): {line!r}")
            return self

    def ticket(self) -> str:
        """A new leg's ticket (unique in this process)."""
        return f"{os.getpid()}-{next(self._count)}"

    def command(self, ledger: str, leg: int, ticket: str, *, drifted: bool = False) -> list[str]:
        """The argv an agent runs for the server of ``ticket``: the launcher with the server's arguments."""
        cmd = [self.python, "-I", "-S", str(LAUNCHER), self.socket_path, ticket, "--ledger", ledger, "--leg", str(leg)]
        return cmd + ["--drifted"] if drifted else cmd

    def end(self, ticket: str, timeout: float = 30.0) -> None:
        """Return once every server of ``ticket`` has ended (those still running :data:`END_GRACE_S` later
        are killed).  Raises :class:`McpForkError` when the fork server does not answer."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
            sock.settimeout(timeout)
            try:
                sock.connect(self.socket_path)
                sock.send(b"end\0" + ticket.encode())
                reply = sock.recv(64)
            except OSError as exc:
                raise McpForkError(f"the MCP fork server did not end ticket {ticket}: {exc}") from None
        if reply != b"ended":
            raise McpForkError(f"the MCP fork server did not end ticket {ticket}: {reply!r}")

    def close(self, timeout: float = 10.0) -> None:
        """Stop the process (its stdin closed; killed after ``timeout`` s); servers already forked run on until
        their launchers end."""
        with self._lock:
            self._stop(timeout)

    def _stop(self, timeout: float = 10.0) -> None:
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


_SERVER: McpForkServer | None = None
_SERVER_LOCK = threading.Lock()


def fork_server() -> McpForkServer:
    """This process's MCP fork server, started on first use (again if it died); closed when the process exits."""
    global _SERVER
    with _SERVER_LOCK:
        if _SERVER is None or not _SERVER.running:
            if _SERVER is None:
                atexit.register(lambda: _SERVER is not None and _SERVER.close())
            else:
                _SERVER.close()
            _SERVER = McpForkServer().start()
        return _SERVER


# ---- the fork server process -------------------------------------------------------------------------------

class _Child:
    def __init__(self, pid: int, conn: socket.socket, ticket: bytes) -> None:
        self.pid, self.conn, self.ticket = pid, conn, ticket
        self.pidfd = os.pidfd_open(pid)


def _serve_child(conn: socket.socket, fds: list[int], args: list[str], others: list[int]) -> None:
    """In the forked child: take the launcher's streams as 0, 1, 2 and serve; never returns."""
    code = 1
    try:
        for fd in others:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        from harness.workload.mcp_server import serve_forked

        code = serve_forked(args, conn.fileno())
    except SystemExit as exc:  # argparse's usage error
        code = exc.code if isinstance(exc.code, int) else 2
    except BaseException:  # noqa: BLE001 - the traceback goes to the agent's stderr, as a server's would
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - the agent closed it
                pass
        os._exit(code)


def _serve(path: str) -> int:
    """The fork server's loop: fork a server per ``serve`` message, answer ``end`` messages; until stdin ends."""
    from harness.workload import mcp_server

    mcp_server.preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(128)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    children: dict[int, _Child] = {}  # pidfd -> child
    ending: list[tuple[bytes, socket.socket, float]] = []  # (ticket, who asked, when to kill)
    killed: set[int] = set()
    ended: set[bytes] = set()  # tickets whose leg is over: a launcher that comes later is refused
    while True:
        now = time.monotonic()
        for item in list(ending):  # answer the ends whose servers are gone; kill those past their grace
            ticket, asker, deadline = item
            left = [c for c in children.values() if c.ticket == ticket]
            if not left:
                ending.remove(item)
                ended.add(ticket)
                try:
                    asker.send(b"ended")
                except OSError:
                    pass
                asker.close()
            elif now >= deadline:
                for c in left:
                    if c.pid not in killed:
                        killed.add(c.pid)
                        os.kill(c.pid, signal.SIGKILL)
        timeout = max(0.0, min(d for _, _, d in ending) - now) if ending else None
        readable, _, _ = select.select([0, listener, *children], [], [], timeout)
        if 0 in readable and not os.read(0, 4096):
            break  # the harness is gone
        for pidfd in [fd for fd in readable if fd in children]:
            child = children.pop(pidfd)
            _, status = os.waitpid(child.pid, 0)
            killed.discard(child.pid)
            os.close(pidfd)
            try:
                child.conn.send(b"x%d" % os.waitstatus_to_exitcode(status))
            except OSError:
                pass  # the launcher is gone
            child.conn.close()
        if listener in readable:
            conn, _ = listener.accept()
            conn.settimeout(5.0)
            try:
                msg, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
            except OSError:
                conn.close()
                continue
            conn.settimeout(None)  # (blocking again: the server's gate reads and writes it as a plain descriptor)
            parts = msg.split(b"\0")
            if parts[0] == b"serve" and len(parts) >= 2 and len(fds) == 3 and parts[1] not in ended:
                others = [listener.fileno(), 0, *children, *(c.conn.fileno() for c in children.values()),
                          *(a.fileno() for _, a, _ in ending)]
                sys.stdout.flush()
                try:
                    pid = os.fork()
                except OSError as exc:  # the launcher sees its socket end without a status, and says so
                    sys.stderr.write(f"mcp_fork: cannot fork a server: {exc}\n")
                    pid = -1
                if pid == 0:
                    _serve_child(conn, fds, [os.fsdecode(p) for p in parts[2:]], others)
                for fd in fds:
                    os.close(fd)
                if pid < 0:
                    conn.close()
                    continue
                child = _Child(pid, conn, parts[1])
                children[child.pidfd] = child
            elif parts[0] == b"end" and len(parts) == 2 and not fds:
                ending.append((parts[1], conn, time.monotonic() + END_GRACE_S))
            else:
                for fd in fds:
                    os.close(fd)
                conn.close()
    listener.close()
    try:
        os.unlink(path)
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.stderr.write("usage: python -I -m harness.workload.mcp_fork SOCKET (run by McpForkServer.start)\n")
        sys.exit(2)
    sys.exit(_serve(sys.argv[1]))
