"""The MCP fork server: our stdio MCP server forked, per agent start, from one pre-imported interpreter per
process (:func:`fork_server`: the legs' fork server loop, :func:`harness.subject.forkserver_main.serve`, with a
server as its child).  Why, the launcher it serves (:mod:`harness.workload.mcp_launch`), each leg's ticket
(:meth:`McpForkServer.ticket`; :meth:`McpForkServer.end` returns once its servers ended) and what the observer
sees: docs/subject.md "The MCP fork server".

Run as ``python -I -m harness.workload.mcp_fork SOCKET`` by :meth:`McpForkServer.start` only.
"""

from __future__ import annotations

import atexit
import itertools
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any, Sequence

from harness.subject.forkserver import ServerProcess
from harness.subject.forkserver_main import serve

__all__ = ["LAUNCHER", "McpForkError", "McpForkServer", "fork_server"]

#: The launcher an agent runs (by path, standard library only).
LAUNCHER = Path(__file__).resolve().with_name("mcp_launch.py")
#: The environment its servers run with: what an MCP client gives a stdio server configured with ``"env": {}``
#: (the mcp SDK's default), none of the harness's.
SERVER_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


class McpForkError(RuntimeError):
    """The MCP fork server could not be started, or stopped answering."""


class McpForkServer(ServerProcess):
    """A pre-imported interpreter that forks our stdio MCP server for each launcher that connects (thread-safe;
    serves any number of legs at once).  :meth:`start` returns once it accepts connections.  ``python``: its
    interpreter (and the launcher's); ``wrap``: a command it runs under (a test's outside observer)."""

    ERROR = McpForkError
    WHAT = "MCP fork server"

    def __init__(self, python: str | None = None, wrap: Sequence[str] = ()) -> None:
        super().__init__()
        self.python = python or sys.executable
        self.wrap = list(wrap)
        self._count = itertools.count(1)

    def _command(self) -> tuple[list[str], dict[str, str], str | None]:
        env = {k: os.environ[k] for k in SERVER_ENV if k in os.environ}
        return [*self.wrap, self.python, "-I", "-m", __name__], env, "/"

    def ticket(self) -> str:
        """A new leg's ticket (unique in this process)."""
        return f"{os.getpid()}-{next(self._count)}"

    def command(self, ledger: str, leg: int, ticket: str, *, drifted: bool = False) -> list[str]:
        """The argv an agent runs for the server of ``ticket``: the launcher with the server's arguments."""
        cmd = [self.python, "-I", "-S", str(LAUNCHER), self.socket_path, ticket, "--ledger", ledger, "--leg", str(leg)]
        return cmd + ["--drifted"] if drifted else cmd

    def end(self, ticket: str, timeout: float = 30.0) -> None:
        """Return once every server of ``ticket`` has ended (those still running
        :data:`harness.subject.forkserver_main.END_GRACE_S` later are killed); a launcher of ``ticket`` that
        comes later gets no server.  Raises :class:`McpForkError` when the fork server does not answer."""
        try:
            with self.request({"end": ticket}, timeout=timeout) as sock:
                reply = sock.recv(64)
        except (OSError, McpForkError) as exc:
            raise McpForkError(f"the MCP fork server did not end ticket {ticket}: {exc}") from None
        if reply != b"ended":
            raise McpForkError(f"the MCP fork server did not end ticket {ticket}: {reply!r}")


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


def _serve_child(req: dict[str, Any], fds: list[int], conn: socket.socket) -> None:
    """In the forked child: take the launcher's streams (``fds``) as 0, 1, 2 and serve with ``req["args"]``, tied
    to the launcher by ``conn``; never returns."""
    code = 1
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        from harness.workload.mcp_server import serve_forked

        code = serve_forked(list(req["args"]), conn.fileno())
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


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.stderr.write("usage: python -I -m harness.workload.mcp_fork SOCKET (run by McpForkServer.start)\n")
        sys.exit(2)
    from harness.workload import mcp_server

    mcp_server.preload()
    sys.exit(serve(sys.argv[1], _serve_child, {}))
