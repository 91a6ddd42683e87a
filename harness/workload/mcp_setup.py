"""Giving an agent the workload's tools over MCP: its MCP configuration for a leg, and the HTTP server (both
transports and both forms of the configuration: docs/subject.md "Tools over MCP").

The runner's one call per leg is :func:`open_leg` (write the file, start the HTTP server when there is one;
close it after the leg: the HTTP server stopped, the leg's forked stdio servers ended).  How the agent shows the
tools to the model is the spec's ``tool_name`` template (:meth:`McpSpec.tool_template`, for
:func:`harness.workload.build.build_workload`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.workload.mcp_fork import McpForkServer, fork_server
from harness.workload.tools import TOOL_NAMES, check_template, shown_name

__all__ = ["SERVER_NAME", "TRANSPORTS", "McpSetupError", "McpSpec", "server_command", "mcp_config",
           "write_mcp_config", "HttpMcpServer", "LegMcp", "open_leg"]

#: The name of our MCP server in an agent's configuration (Claude Code shows ``mcp__fiskj__effect_a``).
SERVER_NAME = "fiskj"
#: How an agent reaches the server.
TRANSPORTS = ("stdio", "http")
#: The module the server runs as.
MODULE = "harness.workload.mcp_server"

_SERVER = re.compile(r"[a-zA-Z0-9_-]{1,64}")


class McpSetupError(RuntimeError):
    """The MCP server could not be set up for a leg: a bad spec, or an HTTP server that did not start."""


@dataclass(frozen=True)
class McpSpec:
    """How a profile gives its agent the tools over MCP.

    ``transport``: ``"stdio"`` or ``"http"``; ``server``: the server's name in the configuration
    (``[a-zA-Z0-9_-]``, 1-64 characters); ``tool_name``: how the agent shows a tool to the model, a
    template over ``{server}`` and ``{tool}`` (Claude Code: ``"mcp__{server}__{tool}"``).  Raises
    :class:`McpSetupError` for a bad transport or server name, and
    :class:`harness.workload.tools.ToolNameError` for a bad template.
    """

    transport: str = "stdio"
    server: str = SERVER_NAME
    tool_name: str = "mcp__{server}__{tool}"

    def __post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise McpSetupError(f"mcp transport {self.transport!r}: expected one of {', '.join(TRANSPORTS)}")
        if not _SERVER.fullmatch(self.server):
            raise McpSetupError(f"mcp server name {self.server!r}: expected 1-64 of [a-zA-Z0-9_-]")
        self.tool_template()

    def tool_template(self) -> str:
        """The ``tool_name`` template with the server filled in, for ``build_workload(..., tool_name=...)``."""
        return check_template(self.tool_name, self.server)

    def shown_tools(self) -> list[str]:
        """The names the model sees for the workload's tools, in order (for an agent's allow-list:
        Claude Code's ``--allowedTools mcp__fiskj__effect_a,...``)."""
        return [shown_name(self.tool_template(), tool) for tool in TOOL_NAMES]


def server_command(ledger: str | os.PathLike[str], leg: int, *, transport: str = "stdio", drifted: bool = False,
                   interpreter: str | None = None) -> list[str]:
    """The argv that runs our MCP server on its own for ``leg``, writing to the effects ledger ``ledger`` (made
    absolute): the HTTP server's (an agent's stdio configuration names the fork server's launcher instead,
    :func:`mcp_config`).

    ``python -I``: neither the caller's working directory nor its environment changes what runs; ``interpreter``
    default: this environment's (its venv: the server needs the ``mcp`` package), not its realpath.
    """
    cmd = [interpreter or sys.executable, "-I", "-m", MODULE, "--ledger", os.path.abspath(ledger), "--leg", str(leg)]
    if transport != "stdio":
        cmd += ["--transport", transport]
    if drifted:
        cmd.append("--drifted")
    return cmd


def mcp_config(spec: McpSpec, *, ledger: str | os.PathLike[str] | None = None, leg: int = -1, url: str | None = None,
               drifted: bool = False, ticket: str | None = None, fork: McpForkServer | None = None) -> dict[str, Any]:
    """The agent's MCP configuration for one leg: ``{"mcpServers": {SERVER: {...}}}`` (module docstring).

    ``stdio`` needs ``ledger`` (and ``leg``): the command is the launcher of the fork server ``fork``
    (without it this process's, :func:`harness.workload.mcp_fork.fork_server`, started on first use), for
    ``ticket`` (a new one
    without it; :func:`open_leg` ends the leg's servers by theirs); ``http`` needs ``url``
    (:attr:`HttpMcpServer.url`).  Raises :class:`McpSetupError` when the one it needs is missing, and
    :class:`harness.workload.mcp_fork.McpForkError` when the fork server does not start.
    """
    if spec.transport == "stdio":
        if ledger is None:
            raise McpSetupError("a stdio MCP configuration needs the effects ledger's path")
        fork = fork or fork_server()
        cmd = fork.command(os.path.abspath(ledger), leg, ticket or fork.ticket(), drifted=drifted)
        entry: dict[str, Any] = {"type": "stdio", "command": cmd[0], "args": cmd[1:], "env": {}}
    else:
        if not url:
            raise McpSetupError("an http MCP configuration needs the server's URL")
        entry = {"type": "http", "url": url}
    return {"mcpServers": {spec.server: entry}}


def write_mcp_config(path: str | os.PathLike[str], config: dict[str, Any]) -> str:
    """Write ``config`` as JSON to ``path`` (a temporary file renamed into place); returns ``str(path)``."""
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    return str(target)


class HttpMcpServer:
    """Our MCP server over streamable HTTP, run by the harness for one leg (a child process).

    Starts at construction and returns once the server accepts connections (it prints its URL:
    an observed event, not a wait); :attr:`url` is then ``http://127.0.0.1:PORT/mcp``.  :meth:`close`
    closes its stdin, on which it stops, and reaps it.  Raises :class:`McpSetupError` when it exits
    before it says where it listens (its stderr in the message).
    """

    def __init__(self, ledger: str | os.PathLike[str], leg: int, *, drifted: bool = False,
                 interpreter: str | None = None) -> None:
        cmd = server_command(ledger, leg, transport="http", drifted=drifted, interpreter=interpreter)
        self._stderr = tempfile.TemporaryFile()  # read only when it fails: a pipe nobody drains could block it
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     close_fds=True, cwd="/")
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        try:
            self.url: str = json.loads(line)["url"]
        except (ValueError, KeyError, TypeError):
            if self.proc.poll() is None:  # it printed something else: it is no server of ours
                self.proc.kill()
            self.proc.wait()
            self._stderr.seek(0)
            err = self._stderr.read().decode("utf-8", "replace")
            self.close()
            raise McpSetupError(f"the MCP HTTP server did not start (exit {self.proc.returncode}): "
                                f"{err.strip()[-400:] or line!r}") from None

    @property
    def pid(self) -> int:
        """The server process's pid (the ``pid`` of its ledger lines)."""
        return self.proc.pid

    def close(self, timeout: float = 10.0) -> int:
        """Stop the server (close its stdin; SIGKILL if it has not exited after ``timeout`` s); returns its status."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self._stderr.close()

    def __enter__(self) -> "HttpMcpServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@dataclass
class LegMcp:
    """What :func:`open_leg` set up for one leg: ``config_path`` (the file written), ``config`` (its content),
    ``http`` (the HTTP server, or ``None`` for stdio), ``fork`` and ``ticket`` (stdio: the fork server and
    the leg's ticket).  :meth:`close` after the leg (idempotent)."""

    config_path: str
    config: dict[str, Any]
    http: HttpMcpServer | None = None
    fork: McpForkServer | None = None
    ticket: str = ""

    def close(self) -> None:
        """Stop the leg's HTTP server, if any; return once the leg's forked stdio servers have ended (they end
        when their launchers do: the agent's tree is gone once the leg is over).  Raises
        :class:`harness.workload.mcp_fork.McpForkError` when the fork server does not answer."""
        if self.http is not None:
            self.http.close()
            self.http = None
        if self.fork is not None:
            fork, self.fork = self.fork, None
            fork.end(self.ticket)

    def __enter__(self) -> "LegMcp":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def open_leg(spec: McpSpec, config_path: str | os.PathLike[str], *, ledger: str | os.PathLike[str], leg: int,
             drifted: bool = False, interpreter: str | None = None) -> LegMcp:
    """Set up the MCP server of leg ``leg`` before the agent starts: the one call a runner makes per leg.

    ``http``: starts :class:`HttpMcpServer` (the harness's child, outside the agent's process tree;
    ``interpreter``: its Python); ``stdio``: takes a ticket of this process's fork server.  Then writes the
    agent's configuration (:func:`mcp_config`) to ``config_path``, the file the profile's command names
    (``--mcp-config {mcp_config}``).  Returns the :class:`LegMcp` to close after the leg.  Raises
    :class:`McpSetupError` (HTTP server did not start), :class:`harness.workload.mcp_fork.McpForkError`
    (fork server did not start) or ``OSError`` (file not written).
    """
    http = HttpMcpServer(ledger, leg, drifted=drifted, interpreter=interpreter) if spec.transport == "http" else None
    fork = fork_server() if spec.transport == "stdio" else None
    ticket = fork.ticket() if fork is not None else ""
    try:
        config = mcp_config(spec, ledger=ledger, leg=leg, url=http.url if http else None, drifted=drifted,
                            ticket=ticket or None)
        path = write_mcp_config(config_path, config)
    except BaseException:
        if http is not None:
            http.close()
        raise
    return LegMcp(path, config, http, fork, ticket)
