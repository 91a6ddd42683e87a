#!/usr/bin/env python3
"""A tool-calling LangGraph agent, built as LangGraph's docs build one, with a small CLI (README.md beside it).

    agent.py run THREAD --db DB --model M --base-url URL --max-tokens N --max-iterations N --mcp-config FILE -- PROMPT
    agent.py resume THREAD --db DB --model M --base-url URL --max-tokens N --max-iterations N --mcp-config FILE
    agent.py status THREAD --db DB

The graph: ``StateGraph(MessagesState)``, a model node (``ChatAnthropic(...).bind_tools(tools)``), a ``ToolNode``
and ``tools_condition``, compiled with an ``AsyncSqliteSaver`` (``langgraph-checkpoint-sqlite``) on ``DB``; the
thread id is THREAD.  Tools come from the MCP servers of ``--mcp-config`` (``{"mcpServers": {...}}``, Claude
Code's form) through ``langchain-mcp-adapters``.  Every superstep is checkpointed before the next one starts
(``durability="sync"``).  SIGINT/SIGTERM ask LangGraph to drain (``RunControl.request_drain``): the run stops at
the next superstep boundary and the suspend is recorded beside the checkpoints.  ``resume`` continues the thread
(``astream(None, config)``), which re-runs a step a crash cut short (a ``ToolNode`` re-runs its whole batch) and
does nothing on a completed thread.  ``status`` prints ``{"status", "tool_results", "answer"}`` from the
checkpointer's saved state, taking no lock.

Exit status: 0 completed (the answer on stdout; also a resume of a completed thread: a no-op), 3 suspended,
1 error (the model or a tool failed, the iteration cap, an unknown thread on resume), 2 usage (also ``run`` of a
thread that exists).  ``FISKJ_LANGGRAPH_BUG`` selects a broken variant (``BUGS``; README.md).
"""

from __future__ import annotations

import signal

# A suspend asked for while LangGraph is still importing (a second or more) is kept and honoured at the first
# superstep boundary, not lost to Python's default SIGINT handling.
_EARLY: list[str] = []
for _signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_signum, lambda signum, frame: _EARLY.append(signal.Signals(signum).name))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

#: The broken variants (each a mistake a LangGraph user makes), chosen by $FISKJ_LANGGRAPH_BUG.
BUGS = {
    "sync-off": "the checkpointer's connection runs with PRAGMA synchronous=OFF (commits never fsynced)",
    "effect-outside-graph": "the model node runs the reply's tools itself, before its step is checkpointed, and "
                            "the ToolNode answers from that in-process cache",
    "new-thread-on-resume": "resume starts a fresh thread with the saved prompt instead of continuing the thread",
    "memory-saver": "an InMemorySaver where the SQLite checkpointer was meant",
}
BUG = os.environ.get("FISKJ_LANGGRAPH_BUG", "")
EXIT_COMPLETED, EXIT_ERROR, EXIT_USAGE, EXIT_SUSPENDED = 0, 1, 2, 3
#: The side table where a run's clean stop is recorded: (thread, the checkpoint it stopped at, outcome).
ENDS_TABLE = "CREATE TABLE IF NOT EXISTS fiskj_run_ends (thread_id TEXT PRIMARY KEY, checkpoint_id TEXT, outcome TEXT)"


class Refused(Exception):
    """A command that cannot be carried out; ``code`` is its exit status."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.asynccontextmanager
async def open_checkpointer(db: str):
    """The graph's checkpointer on ``db`` (an ``AsyncSqliteSaver``, its tables set up), its directory made durable."""
    if BUG == "memory-saver":
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
        return
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    folder = os.path.dirname(os.path.abspath(db))
    if not os.path.isdir(folder):
        os.makedirs(folder)
        _fsync_dir(os.path.dirname(folder))
    async with AsyncSqliteSaver.from_conn_string(db) as saver:
        await saver.setup()
        if BUG == "sync-off":
            await saver.conn.execute("PRAGMA synchronous=OFF")
        await saver.conn.execute(ENDS_TABLE)
        await saver.conn.commit()
        yield saver


async def _record_end(saver: Any, thread: str, checkpoint_id: str | None, outcome: str | None) -> None:
    """Record (``outcome`` given) or clear the thread's clean stop at ``checkpoint_id``."""
    if not hasattr(saver, "conn"):
        return
    if outcome is None:
        await saver.conn.execute("DELETE FROM fiskj_run_ends WHERE thread_id = ?", (thread,))
    else:
        await saver.conn.execute("INSERT OR REPLACE INTO fiskj_run_ends VALUES (?, ?, ?)",
                                 (thread, checkpoint_id, outcome))
    await saver.conn.commit()


async def _recorded_end(saver: Any, thread: str) -> tuple[str, str] | None:
    if not hasattr(saver, "conn"):
        return None
    async with saver.conn.execute("SELECT checkpoint_id, outcome FROM fiskj_run_ends WHERE thread_id = ?",
                                  (thread,)) as cur:
        row = await cur.fetchone()
    return (row[0], row[1]) if row else None


def build_graph(checkpointer: Any, tools: list[Any], model: Any = None, prefetched: dict | None = None):
    """The agent's graph: START -> agent -> (tools -> agent)* -> END, compiled with ``checkpointer``.

    ``model`` is a ``ChatAnthropic`` (``None``: a graph only for reading the saved state).  ``prefetched``
    (the ``effect-outside-graph`` variant) holds ToolMessages the model node made before the ToolNode ran.
    """
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    bound = model.bind_tools(tools) if model is not None else None

    async def agent(state: MessagesState) -> dict[str, list[Any]]:
        reply = await bound.ainvoke(state["messages"])
        if prefetched is not None:      # the effect-outside-graph variant: run the tools now, to save a step
            by_name = {t.name: t for t in tools}
            for call in reply.tool_calls:
                prefetched[call["id"]] = await by_name[call["name"]].ainvoke({**call, "type": "tool_call"})
        return {"messages": [reply]}

    async def from_cache(request: Any, execute: Any) -> Any:
        done = (prefetched or {}).pop(request.tool_call["id"], None)
        return done if done is not None else await execute(request)

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools, handle_tool_errors=True,
                                       awrap_tool_call=from_cache if prefetched is not None else None))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def _text(message: Any) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")


async def reading(saver: Any, thread: str) -> dict[str, Any]:
    """The thread's status as its saved state shows it (module docstring; docs/subject.md ``[reading]``)."""
    from langchain_core.messages import AIMessage, ToolMessage

    graph = build_graph(saver, [])
    config = {"configurable": {"thread_id": thread}}
    snapshot = await graph.aget_state(config)
    if not snapshot.created_at:
        return {"status": None, "tool_results": [], "answer": None}
    messages = snapshot.values.get("messages", [])
    results = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    if not snapshot.next and not snapshot.tasks:   # a step's saved task writes with no checkpoint after: not done
        last = messages[-1] if messages else None
        answer = _text(last) if isinstance(last, AIMessage) else None
        return {"status": "completed", "tool_results": results, "answer": answer}
    end = await _recorded_end(saver, thread)
    if any(task.error for task in snapshot.tasks):
        status = "error"
    elif end and end[0] == snapshot.config["configurable"]["checkpoint_id"]:
        status = end[1]
    else:
        status = "running"
    return {"status": status, "tool_results": results, "answer": None}


def _connections(path: str) -> dict[str, dict[str, Any]]:
    """``langchain-mcp-adapters`` connections from an ``{"mcpServers": ...}`` file."""
    try:
        with open(path, encoding="utf-8") as f:
            servers = json.load(f)["mcpServers"]
        out = {}
        for name, spec in servers.items():
            if spec.get("type", "stdio") == "stdio":
                out[name] = {"transport": "stdio", "command": spec["command"], "args": list(spec.get("args", [])),
                             "env": spec.get("env") or None}
            else:
                out[name] = {"transport": "streamable_http", "url": spec["url"]}
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise Refused(f"--mcp-config {path}: not an MCP configuration ({type(exc).__name__}: {exc})", EXIT_USAGE)


async def _drive(saver: Any, args: argparse.Namespace, thread: str, graph_input: Any) -> int:
    """Run the graph on ``thread`` from ``graph_input`` (``None``: continue) to its end, a drain or an error."""
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.tools import load_mcp_tools
    from langgraph.errors import GraphDrained, GraphRecursionError
    from langgraph.runtime import RunControl

    control = RunControl()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, control.request_drain, signum.name)
    if _EARLY:
        control.request_drain(_EARLY[0])
    client = MultiServerMCPClient(_connections(args.mcp_config))
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 2 * args.max_iterations + 1}
    prefetched: dict[str, Any] | None = {} if BUG == "effect-outside-graph" else None
    # start-up: langchain_anthropic imports (a second or two) in a thread while the MCP servers start
    anthropic = asyncio.ensure_future(asyncio.to_thread(importlib.import_module, "langchain_anthropic"))
    async with contextlib.AsyncExitStack() as stack:
        tools = []
        for name in client.connections:
            session = await stack.enter_async_context(client.session(name))
            tools += await load_mcp_tools(session, server_name=name)
        model = (await anthropic).ChatAnthropic(model=args.model, base_url=args.base_url, max_tokens=args.max_tokens,
                                                api_key=os.environ.get("ANTHROPIC_API_KEY", "-"), max_retries=2,
                                                timeout=60)
        graph = build_graph(saver, tools, model, prefetched)
        await _record_end(saver, thread, None, None)
        try:
            async for _update in graph.astream(graph_input, config, stream_mode="updates", durability="sync",
                                               control=control):
                pass
        except GraphDrained as drained:
            state = await graph.aget_state(config)
            await _record_end(saver, thread, state.config["configurable"]["checkpoint_id"], "suspended")
            print(f"langgraph-agent: suspended ({drained.reason}); resume with: resume {thread}", file=sys.stderr)
            return EXIT_SUSPENDED
        except GraphRecursionError:
            state = await graph.aget_state(config)
            await _record_end(saver, thread, state.config["configurable"]["checkpoint_id"], "error")
            print(f"langgraph-agent: stopped after --max-iterations {args.max_iterations}", file=sys.stderr)
            return EXIT_ERROR
        state = await graph.aget_state(config)
    print(_text(state.values["messages"][-1]))
    return EXIT_COMPLETED


async def command(args: argparse.Namespace) -> int:
    """Carry out one CLI command; raises :class:`Refused` for one that cannot be."""
    async with open_checkpointer(args.db) as saver:
        now = await reading(saver, args.thread)
        if args.command == "status":
            print(json.dumps(now))
            return 0
        if args.command == "run":
            if now["status"] is not None:
                raise Refused(f"thread {args.thread!r} exists in {args.db}: continue it with `resume`", EXIT_USAGE)
            return await _drive(saver, args, args.thread, {"messages": [("user", args.prompt)]})
        if now["status"] is None:
            raise Refused(f"no thread {args.thread!r} in {args.db}: nothing to resume (start it with `run`)")
        if BUG == "new-thread-on-resume":
            graph = build_graph(saver, [])
            first = (await graph.aget_state({"configurable": {"thread_id": args.thread}})).values["messages"][0]
            return await _drive(saver, args, f"{args.thread}-{os.getpid()}", {"messages": [first]})
        if now["status"] == "completed":
            print(now["answer"])
            return EXIT_COMPLETED
        return await _drive(saver, args, args.thread, None)


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line (module docstring); ``SystemExit(2)`` on a usage error."""
    parser = argparse.ArgumentParser(prog="agent.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "resume", "status"):
        p = sub.add_parser(name)
        p.add_argument("thread")
        p.add_argument("--db", required=True, help="the SQLite checkpointer's database")
        if name != "status":
            p.add_argument("--model", required=True)
            p.add_argument("--base-url", required=True)
            p.add_argument("--max-tokens", type=int, required=True)
            p.add_argument("--max-iterations", type=int, default=25)
            p.add_argument("--mcp-config", required=True)
        if name == "run":
            p.add_argument("prompt")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if BUG and BUG not in BUGS:
        print(f"langgraph-agent: FISKJ_LANGGRAPH_BUG={BUG!r} is not one of {sorted(BUGS)}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(command(args))
    except Refused as exc:
        print(f"langgraph-agent: {exc}", file=sys.stderr)
        return exc.code
    except Exception as exc:  # the model or a tool failed: LangGraph saved the step's error with the checkpoint
        print(f"langgraph-agent: {args.command} {args.thread} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
