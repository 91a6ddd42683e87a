"""The workload's tools over MCP: an MCP server in front of the effects ledger (the official ``mcp`` SDK).

The same tools (:mod:`harness.workload.tools`), effect and answer as :mod:`harness.workload.ledger_tool` (its
docstring is the contract; each line made by :func:`harness.workload.ledger_tool.append_entry`).  Its command
line, transports, a line's ``tool_use_id`` (:data:`AGENT_ID_KEYS`), its answers and MCP errors, and an agent's
stdio server forked behind a launcher (:func:`serve_forked`, :class:`Gate`): docs/subject.md "Tools over MCP"
and "The MCP fork server".
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import sys
import threading
from contextlib import nullcontext
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from harness.workload.ledger_tool import answer, append_entry, open_ledger, render_out
from harness.workload.tools import INPUT_SCHEMA, TOOL_NAMES, description

__all__ = ["TRANSPORTS", "AGENT_ID_KEYS", "BadArguments", "Gate", "check_arguments", "result_of", "make_server",
           "preload", "serve_forked", "main"]

#: The transports the server speaks.
TRANSPORTS = ("stdio", "http")
#: Keys of a ``tools/call``'s ``_meta`` under which an agent sends the model's tool_use id
#: (Claude Code 2.1: ``claudecode/toolUseId``); the fallback when the arguments hold none.
AGENT_ID_KEYS = ("claudecode/toolUseId",)


class BadArguments(ValueError):
    """A ``tools/call`` whose arguments the tool does not take: the message names the argument and why."""


def check_arguments(tool: str, arguments: Any, agent_id: Any = None) -> tuple[str, dict[str, Any], Any]:
    """Check one call's ``arguments`` against the input schema; returns ``(tool_use_id, arguments, rendered out)``.

    ``tool_use_id``: the argument when it is a non-empty string, else ``agent_id`` (the id the agent
    sent beside the call, :data:`AGENT_ID_KEYS`; as the ledger tool falls back to
    ``$FISKJ_TOOL_USE_ID``) when that is one; neither is :class:`BadArguments`.  ``sleep_ms`` a number, ``n`` an integer, ``fail`` a
    boolean (each when present); ``out`` an output spec (:func:`harness.workload.ledger_tool.render_out`;
    ``rendered`` is ``None`` without it).  Other keys are ignored, as the ledger tool ignores them.
    Raises :class:`BadArguments` (before any effect).  Pure.
    """
    if not isinstance(arguments, dict):
        raise BadArguments(f"{tool}: arguments must be a JSON object, got {type(arguments).__name__}")
    tid = arguments.get("tool_use_id")
    if tid is None or tid == "":
        tid = agent_id
    if not isinstance(tid, str) or not tid:
        raise BadArguments(f"{tool}: arguments.tool_use_id must be a non-empty string, got {tid!r}")
    checks = (("sleep_ms", (int, float), "a number"), ("n", (int,), "an integer"), ("fail", (bool,), "a boolean"))
    for key, kinds, what in checks:
        value = arguments.get(key)
        if key in arguments and (not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)):
            raise BadArguments(f"{tool}: arguments.{key} must be {what}, got {value!r}")
    rendered = None
    if "out" in arguments:
        try:
            rendered = render_out(arguments["out"])
        except (ValueError, TypeError) as exc:
            raise BadArguments(f"{tool}: arguments.out: {exc}") from None
    return tid, arguments, rendered


def _text(value: str | bytes) -> str:
    # What fiskj shows of a tool's output: its UTF-8, undecodable bytes (and lone surrogates) replaced.
    data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    return data.decode("utf-8", "replace")


def result_of(tool: str, stdout: str | bytes, stderr: str | bytes, status: int) -> types.CallToolResult:
    """The MCP result of the ledger tool's answer ``(stdout, stderr, status)`` (:func:`ledger_tool.answer`).

    Status 0: stdout as text.  Otherwise ``isError`` with stderr as text (stdout when stderr is empty;
    a line naming the status when both are), as fiskj shows a failed command tool.  Pure.
    """
    if status == 0:
        return types.CallToolResult(content=[types.TextContent(text=_text(stdout))])
    text = _text(stderr) or _text(stdout) or f"ledger tool {tool!r} exited with status {status}"
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


class Gate:
    """A forked server's tie to its launcher (:mod:`harness.workload.mcp_launch`, in the agent's process tree),
    over the socket ``fd`` the launcher connected with.

    :meth:`ask`, right before a ledger line's write: the launcher must answer, with one ``write`` call, or this
    process ends there (``os._exit``) without the line.  So a leg that is killed (its launcher with it), or
    stopped, or held by the outside observer once a kill is due (it holds every ``write``) gets no new line,
    as when the server was the agent's own child.  :meth:`watch`: when the launcher is gone the process ends
    at once, after a line being written (``lock``).
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.Lock()  # held from a line's open to its close: the watcher ends the process outside it

    def ask(self) -> None:
        """Return once the launcher answered; end the process when it is gone."""
        try:
            os.write(self.fd, b"?")
            ok = os.read(self.fd, 16) == b"!"
        except OSError:
            ok = False
        if not ok:
            os._exit(0)  # the leg is over: no line, no answer (its client is gone)

    def watch(self) -> None:
        """Start the thread that ends this process when the launcher's end of the socket closes."""

        def until_gone() -> None:
            poll = select.poll()
            poll.register(self.fd, select.POLLRDHUP)
            while not any(ev & (select.POLLRDHUP | select.POLLHUP | select.POLLERR | select.POLLNVAL)
                          for _, ev in poll.poll()):
                pass
            with self.lock:
                os._exit(0)

        threading.Thread(target=until_gone, name="fiskj-mcp-launcher", daemon=True).start()


def _record(ledger: str, tool_use_id: str, tool: str, leg: int, gate: Gate | None) -> None:
    with gate.lock if gate is not None else nullcontext():
        try:
            fd = open_ledger(ledger)
        except OSError as exc:
            raise MCPError(types.INTERNAL_ERROR, f"{tool}: cannot open ledger {ledger}: {exc}") from None
        try:
            append_entry(fd, tool_use_id, tool, leg, gate.ask if gate is not None else None)
        except OSError as exc:
            raise MCPError(types.INTERNAL_ERROR, f"{tool}: cannot write ledger {ledger}: {exc}") from None


def make_server(ledger: str, leg: int = -1, drifted: bool = False, gate: Gate | None = None) -> Server[Any]:
    """The MCP server (low-level SDK :class:`mcp.server.lowlevel.Server`, named ``fiskj``) of the workload's tools.

    ``ledger``: the effects ledger's path; ``leg``: the leg index of its lines; ``drifted``: the
    descriptions say so (fingerprint drift ``"tools"``); ``gate``: a forked server's :class:`Gate`, asked
    before each line's write.  Each ``tools/call`` checks its arguments (:func:`check_arguments`), appends
    its ledger line and fsyncs it (in a worker thread, so calls run concurrently and wait on the ledger's
    lock, not on each other), sleeps ``sleep_ms``, then answers (:func:`result_of`).  Unknown tool or bad arguments: :class:`MCPError` ``-32602``.
    """
    tools = [types.Tool(name=name, description=description(name, drifted), input_schema=INPUT_SCHEMA)
             for name in TOOL_NAMES]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = params.name
        if tool not in TOOL_NAMES:
            raise MCPError(types.INVALID_PARAMS, f"no tool {tool!r} (tools: {', '.join(TOOL_NAMES)})")
        meta = params.meta or {}
        agent_id = next((meta[k] for k in AGENT_ID_KEYS if isinstance(meta.get(k), str)), None)
        try:
            tool_use_id, data, rendered = check_arguments(
                tool, params.arguments if params.arguments is not None else {}, agent_id)
        except BadArguments as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        await anyio.to_thread.run_sync(_record, ledger, tool_use_id, tool, leg, gate)
        sleep_ms = data.get("sleep_ms") or 0
        if sleep_ms > 0:
            await anyio.sleep(sleep_ms / 1000.0)
        return result_of(tool, *answer(tool, tool_use_id, data, rendered))

    return Server("fiskj", version="1", on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _serve_http(server: Server[Any]) -> None:
    import uvicorn

    app = server.streamable_http_app(stateless_http=True, json_response=True, host="127.0.0.1")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.set_inheritable(False)
    port = sock.getsockname()[1]
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False))
    started = web.startup

    async def startup(sockets: Any = None) -> None:  # say where once the app accepts connections
        await started(sockets=sockets)
        sys.stdout.write(json.dumps({"url": f"http://127.0.0.1:{port}/mcp"}) + "\n")
        sys.stdout.flush()

    web.startup = startup  # type: ignore[method-assign]

    def until_eof() -> None:  # the harness closes our stdin (or dies): the leg is over, stop serving
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        web.force_exit = True  # without waiting for a call still sleeping (its agent is gone; its line is written)
        web.should_exit = True

    threading.Thread(target=until_eof, name="fiskj-mcp-stdin", daemon=True).start()
    web.run(sockets=[sock])


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -I -m harness.workload.mcp_server",
                                description="The workload's ledger tools over MCP (stdio or streamable HTTP).")
    p.add_argument("--ledger", required=True, help="the effects ledger (an absolute path)")
    p.add_argument("--leg", type=int, default=-1, help="the leg index written in each ledger line")
    p.add_argument("--transport", choices=TRANSPORTS, default="stdio")
    p.add_argument("--drifted", action="store_true", help="drifted tool descriptions (fingerprint drift)")
    return p


def preload() -> None:
    """Import what serving over stdio imports on first use (the fork server's, before it forks servers)."""
    import importlib

    for name in ("anyio._backends._asyncio", "mcp.server.stdio"):  # (no loop runs here: no thread may exist at a fork)
        importlib.import_module(name)


def serve_forked(argv: list[str], launcher: int) -> int:
    """Serve over stdio in a process forked by the fork server (:mod:`harness.workload.mcp_fork`), its standard
    streams the agent's, ``launcher`` the socket of its launcher (:class:`Gate`); ``argv``: the command line's
    ``--ledger``, ``--leg``, ``--drifted``.  Returns the exit status (2: a bad command line)."""
    gate = Gate(launcher)
    gate.watch()
    return main(argv, gate)


def main(argv: list[str] | None = None, gate: Gate | None = None) -> int:
    """Run the server until its client goes away; returns the exit status (2: a bad command line).
    ``gate``: a forked server's (:func:`serve_forked`)."""
    args = _parser().parse_args(argv)
    if not os.path.isabs(args.ledger):
        sys.stderr.write(f"mcp_server: --ledger must be an absolute path, got {args.ledger!r}\n")
        return 2
    if gate is not None and args.transport != "stdio":
        sys.stderr.write("mcp_server: a forked server serves over stdio only\n")
        return 2
    server = make_server(args.ledger, args.leg, args.drifted, gate)
    if args.transport == "http":
        _serve_http(server)
        return 0
    anyio.run(_serve_stdio, server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
