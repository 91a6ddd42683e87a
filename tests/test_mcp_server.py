"""The workload's tools over MCP (harness/workload/mcp_server.py, mcp_setup.py): the official ``mcp`` client
lists and calls them over stdio (a server forked by the fork server, behind the launcher an agent runs:
mcp_fork.py, mcp_launch.py) and streamable HTTP; each call's ledger line is written and fsynced before the
answer (the outside observer shows the order), outlives a server killed after it, and counts its attempt
across servers (legs); a line waits for the launcher's answer, so a stopped launcher holds it and a killed
one leaves none, and the server ends with it; bad arguments are MCP errors with no effect; and the scripted
tool_use blocks name the tools as the agent shows them (harness/workload/tools.py templates).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import psutil
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from harness.history.readers import read_ledger
from harness.observer import entry_order, observer_binary, parse_ops
from harness.scenario.model import WorkloadSpec
from harness.workload.build import build_workload
from harness.workload.mcp_fork import LAUNCHER, McpForkError, McpForkServer, fork_server
from harness.workload.mcp_setup import TRANSPORTS, HttpMcpServer, McpSetupError, McpSpec, mcp_config, open_leg
from harness.workload.script import Script, ToolCall, Turn
from harness.workload.server import ModelServer, api_key
from harness.workload.tools import INPUT_SCHEMA, PLAIN, TOOL_NAMES, ToolNameError, check_template, description

LEDGER_LINE = ('{"tool_use_id": %s, "attempt": %d, "pid": %d, "t": %d, "leg": %d, "tool": %s}\n')


def _stdio(config: dict) -> StdioServerParameters:
    # The server exactly as the agent's configuration says, from "/" and with an empty environment.
    entry = config["mcpServers"]["fiskj"]
    assert entry["type"] == "stdio"
    return StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"], cwd="/")


def _run(session):
    # One client session on its own event loop; the deadline only keeps a hung server from hanging the suite.
    async def bounded():
        with anyio.fail_after(60):
            return await session()

    return anyio.run(bounded)


def _lines(ledger: Path) -> list[dict]:
    return [json.loads(line) for line in ledger.read_bytes().splitlines()] if ledger.exists() else []


def _tracer_usable(tmp: Path) -> bool:
    proc = subprocess.run([str(observer_binary()), "--log", str(tmp / "probe.log"), "--root", str(tmp), "--",
                           "/bin/true"], capture_output=True, text=True, timeout=30)
    return proc.returncode == 0


def test_over_stdio_each_tool_is_listed_and_called_and_its_line_is_fsynced_before_it_is_closed(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    log = tmp_path / "observer.log"
    traced = _tracer_usable(tmp_path)  # then a fork server of its own runs under the observer: its servers too
    fork = McpForkServer(wrap=[str(observer_binary()), "--log", str(log), "--root", str(tmp_path), "--ops",
                               "durable", "--"]).start() if traced else fork_server()
    config = mcp_config(McpSpec(), ledger=ledger, leg=4, fork=fork)
    results, errors = {}, {}

    async def session() -> list:
        async with Client(_stdio(config)) as client:
            listed = (await client.list_tools()).tools
            for k, name in enumerate(TOOL_NAMES):
                results[name] = await client.call_tool(name, {"tool_use_id": f"toolu_7_0_{k}", "n": 10 + k})
            results["again"] = await client.call_tool("effect_a", {"tool_use_id": "toolu_7_0_0", "n": 10})
            results["fail"] = await client.call_tool("effect_b", {"tool_use_id": "toolu_7_1_0", "fail": True})
            results["out"] = await client.call_tool("effect_c", {"tool_use_id": "toolu_7_1_1",
                                                                 "out": {"text": "héllo ✓"}})
            results["out_error"] = await client.call_tool("effect_a", {"tool_use_id": "toolu_7_1_2",
                                                                       "out": {"error": "it broke"}})
            results["meta"] = await client.call_tool("effect_b", {"n": 1},  # the id the agent sends beside it
                                                     meta={"claudecode/toolUseId": "toolu_7_2_0"})
            with pytest.raises(MCPError) as exc:  # an id argument of another type is no id, whatever the agent sent
                await client.call_tool("effect_a", {"tool_use_id": 7}, meta={"claudecode/toolUseId": "toolu_x"})
            errors["id_meta"] = exc.value
            bad = {"id": {"tool_use_id": 7}, "empty": {}, "n": {"tool_use_id": "x", "n": "3"},
                   "out": {"tool_use_id": "x", "out": {"text": 1}}, "sleep": {"tool_use_id": "x", "sleep_ms": True}}
            for key, arguments in bad.items():
                with pytest.raises(MCPError) as exc:
                    await client.call_tool("effect_a", arguments)
                errors[key] = exc.value
            with pytest.raises(MCPError) as exc:
                await client.call_tool("effect_z", {"tool_use_id": "x"})
            errors["unknown"] = exc.value
            return listed

    try:
        listed = _run(session)
    finally:
        if traced:
            fork.close()  # (the observer's log is whole once it ended)
    assert [(t.name, t.description, t.input_schema) for t in listed] == \
        [(name, description(name), INPUT_SCHEMA) for name in TOOL_NAMES]
    for k, name in enumerate(TOOL_NAMES):  # the ledger tool's answer, to the byte
        assert not results[name].is_error
        assert results[name].content[0].text == f"ok {name} toolu_7_0_{k} n={10 + k}\n"
    assert results["fail"].is_error and results["fail"].content[0].text == \
        "ledger_tool: effect_b toolu_7_1_0 failed as asked\n"
    assert not results["out"].is_error and results["out"].content[0].text == "héllo ✓"
    assert results["out_error"].is_error and results["out_error"].content[0].text == "it broke"
    assert results["meta"].content[0].text == "ok effect_b toolu_7_2_0 n=1\n"
    assert all(e.code == INVALID_PARAMS for e in errors.values())
    assert "tool_use_id" in errors["id"].message and "arguments.n" in errors["n"].message
    assert "arguments.out" in errors["out"].message and "sleep_ms" in errors["sleep"].message
    assert "effect_z" in errors["unknown"].message

    lines = _lines(ledger)  # bad calls left no line; the repeated id is attempt 2
    assert [(e["tool_use_id"], e["attempt"], e["leg"], e["tool"]) for e in lines] == [
        ("toolu_7_0_0", 1, 4, "effect_a"), ("toolu_7_0_1", 1, 4, "effect_b"), ("toolu_7_0_2", 1, 4, "effect_c"),
        ("toolu_7_0_0", 2, 4, "effect_a"), ("toolu_7_1_0", 1, 4, "effect_b"), ("toolu_7_1_1", 1, 4, "effect_c"),
        ("toolu_7_1_2", 1, 4, "effect_a"), ("toolu_7_2_0", 1, 4, "effect_b")]
    assert len({e["pid"] for e in lines}) == 1  # one server process made them all
    raw = ledger.read_bytes().splitlines(keepends=True)
    assert raw[0].decode() == LEDGER_LINE % ('"toolu_7_0_0"', 1, lines[0]["pid"], lines[0]["t"], 4, '"effect_a"')
    assert read_ledger(ledger)[1] == []  # every line is one the history reads

    if not traced:
        pytest.skip("ptrace is not permitted here: the fsync order was not observed (the lines were checked)")
    with open(log, "rb") as f:
        ops = [o for o in entry_order(parse_ops(f)) if o.path == str(ledger)]
    per_line = []  # each entry: open, flock, write of the whole line, fsync of that descriptor, then close
    for op in ops:
        if op.op == "open":
            per_line.append([op.op])
        else:
            per_line[-1].append(op.op)
            if op.op == "write":
                assert op.len == len(raw[len(per_line) - 1])
    assert per_line == [["open", "flock", "write", "fsync", "close"]] * len(lines)


def test_a_line_is_on_disk_while_its_call_is_unanswered_and_outlives_the_killed_server(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    state = {}

    async def killed_leg() -> None:  # leg 0: the call sleeps after its effect; the server is killed in it
        async with Client(_stdio(mcp_config(McpSpec(), ledger=ledger, leg=0))) as client:
            async def call() -> None:
                try:
                    state["result"] = await client.call_tool("effect_b", {"tool_use_id": "toolu_9_0_0",
                                                                          "sleep_ms": 600_000})
                except Exception as exc:  # the connection to a killed server
                    state["error"] = exc

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                while not ledger.exists() or not ledger.read_bytes().endswith(b"\n"):  # the observed event
                    await anyio.sleep(0.005)
                assert "result" not in state and "error" not in state  # written, not yet answered
                state["pid"] = _lines(ledger)[0]["pid"]
                os.kill(state["pid"], signal.SIGKILL)

    async def resumed_leg() -> str:  # leg 1: the same call again, from a new server
        async with Client(_stdio(mcp_config(McpSpec(), ledger=ledger, leg=1))) as client:
            result = await client.call_tool("effect_b", {"tool_use_id": "toolu_9_0_0"})
            return result.content[0].text

    _run(killed_leg)
    assert "result" not in state
    effects, notes = read_ledger(ledger)
    assert notes == [] and [(e.tool_use_id, e.attempt, e.leg, e.pid) for e in effects] == \
        [("toolu_9_0_0", 1, 0, state["pid"])]
    text = _run(resumed_leg)
    assert text == "ok effect_b toolu_9_0_0 n=0\n"
    effects, _ = read_ledger(ledger)
    assert [(e.tool_use_id, e.attempt, e.leg) for e in effects] == [("toolu_9_0_0", 1, 0), ("toolu_9_0_0", 2, 1)]
    assert effects[1].pid != state["pid"]


def _launcher(ticket: str) -> int:
    # The pid of the launcher of ``ticket`` (the client's child), by its command line.
    for pid in os.listdir("/proc"):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(LAUNCHER).encode() in argv and ticket.encode() in argv:
            return int(pid)
    raise AssertionError(f"no launcher of ticket {ticket}")


def _locked(ledger: Path) -> bool:
    # True while another process holds the ledger's lock (a call between its flock and its close).
    fd = os.open(ledger, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_a_line_waits_for_the_launcher_so_a_stopped_one_holds_it_and_a_killed_one_leaves_none(tmp_path):
    """What a kill of the agent's tree does to its forked server (docs/subject.md "Tools over MCP"): the line
    of a call already read is made under the ledger's lock and written only on the launcher's answer; the
    launcher killed, the server ends without it, and ``end`` returns once it has."""
    ledger = tmp_path / "ledger.jsonl"
    ledger.touch()
    leg = open_leg(McpSpec(), tmp_path / "mcp.json", ledger=ledger, leg=0)
    state = {}

    async def session() -> None:
        async with Client(_stdio(leg.config)) as client:
            await client.list_tools()
            launcher = _launcher(leg.ticket)
            for k, end in enumerate((signal.SIGCONT, signal.SIGKILL)):
                os.kill(launcher, signal.SIGSTOP)  # as the observer holds it once a kill is due

                async def call(k: int = k) -> None:
                    try:
                        state[k] = await client.call_tool("effect_a", {"tool_use_id": f"toolu_5_{k}"})
                    except Exception as exc:  # the connection to a server that ended
                        state[k] = exc

                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    while not _locked(ledger):  # the observed event: the call's line is made, under the lock
                        await anyio.sleep(0.005)
                    state[f"lines{k}"] = len(_lines(ledger))  # ... and not written while the launcher is held
                    os.kill(launcher, end)
                    if end == signal.SIGKILL:
                        await anyio.to_thread.run_sync(leg.close)  # returns once the leg's server has ended
                        tg.cancel_scope.cancel()

    _run(session)
    assert state["lines0"] == 0 and state[0].content[0].text == "ok effect_a toolu_5_0 n=0\n"  # held, then written
    assert state["lines1"] == 1 and not hasattr(state.get(1), "content")  # the second call: never answered ...
    lines = _lines(ledger)
    assert [e["tool_use_id"] for e in lines] == ["toolu_5_0"]  # ... nor written
    with pytest.raises(ProcessLookupError):  # and its server is gone
        os.kill(lines[0]["pid"], 0)


def test_a_launcher_without_its_fork_server_or_of_an_ended_leg_gets_no_server_and_says_so(tmp_path):
    fork = fork_server()
    argv = fork.command(str(tmp_path / "ledger.jsonl"), 0, fork.ticket())
    gone = subprocess.run([*argv[:4], str(tmp_path / "no-socket"), *argv[5:]], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    assert gone.returncode == 1 and "no MCP fork server answers at" in gone.stderr, gone.stderr
    fork.end(argv[5])  # the leg is over: a launcher of its ticket that comes later gets no server
    late = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert late.returncode == 1 and "ended without an exit status" in late.stderr, late.stderr
    assert not (tmp_path / "ledger.jsonl").exists()


def test_a_launcher_whose_server_is_killed_dies_by_the_same_signal(tmp_path):
    """The launcher ends as its server ended (docs/subject.md "The MCP fork server"): a server killed by
    SIGKILL, whose disposition cannot be set, leaves a launcher killed by SIGKILL, with nothing on stderr."""
    fork = fork_server()
    ticket = fork.ticket()
    launcher = subprocess.Popen(fork.command(str(tmp_path / "ledger.jsonl"), 0, ticket), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        server = None
        for _ in range(6000):  # the observed event: the fork server's child for this launcher
            kids = psutil.Process(fork._proc.pid).children()
            if kids:
                server = kids[0]
                break
            time.sleep(0.005)
        assert server is not None, "no server was forked for the launcher"
        server.kill()
        _, err = launcher.communicate(timeout=60)
    finally:
        launcher.kill()
        fork.end(ticket)
    assert launcher.returncode == -signal.SIGKILL and err == b"", (launcher.returncode, err)


def test_over_streamable_http_the_harness_runs_the_server_for_a_leg(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    spec = McpSpec(transport="http")
    state = {}
    leg = open_leg(spec, tmp_path / "mcp.json", ledger=ledger, leg=2)
    config = json.loads(Path(leg.config_path).read_text())
    assert config == {"mcpServers": {"fiskj": {"type": "http", "url": leg.http.url}}}
    assert leg.http.url.startswith("http://127.0.0.1:") and leg.http.url.endswith("/mcp")
    pid, proc = leg.http.pid, leg.http.proc

    async def session() -> None:
        async with Client(leg.http.url) as client:
            state["names"] = [t.name for t in (await client.list_tools()).tools]
            state["result"] = await client.call_tool("effect_c", {"tool_use_id": "toolu_3_0_0", "n": 5})
            with pytest.raises(MCPError) as exc:
                await client.call_tool("effect_c", {"n": 5})
            state["error"] = exc.value

            async def in_flight() -> None:  # still sleeping when the leg ends
                try:
                    await client.call_tool("effect_a", {"tool_use_id": "toolu_3_1_0", "sleep_ms": 600_000})
                except Exception as exc:
                    state["cut"] = exc

            async with anyio.create_task_group() as tg:
                tg.start_soon(in_flight)
                while len(_lines(ledger)) < 2:  # the observed event: its line is written
                    await anyio.sleep(0.005)
                await anyio.to_thread.run_sync(leg.close)  # the leg is over

    _run(session)
    assert proc.returncode == 0  # it stopped on its own when the leg closed it, the call in flight notwithstanding
    assert state["names"] == list(TOOL_NAMES) and "cut" in state
    assert state["result"].content[0].text == "ok effect_c toolu_3_0_0 n=5\n" and not state["result"].is_error
    assert state["error"].code == INVALID_PARAMS and "tool_use_id" in state["error"].message
    assert [(e["tool_use_id"], e["attempt"], e["leg"], e["pid"], e["tool"]) for e in _lines(ledger)] == \
        [("toolu_3_0_0", 1, 2, pid, "effect_c"), ("toolu_3_1_0", 1, 2, pid, "effect_a")]


def test_an_http_server_that_cannot_start_is_a_setup_error(tmp_path):
    with pytest.raises(McpSetupError, match="did not start"):  # an interpreter that exits at once, saying nothing
        HttpMcpServer(tmp_path / "ledger.jsonl", 0, interpreter="/bin/false")
    assert not (tmp_path / "ledger.jsonl").exists()


def test_a_fork_server_that_cannot_start_is_a_typed_error():
    with pytest.raises(McpForkError, match="did not start"):  # an interpreter that exits at once, saying nothing
        McpForkServer(python="/bin/false").start()


def test_the_stdio_config_names_everything_on_its_command_line(tmp_path):
    config = mcp_config(McpSpec(), ledger=tmp_path / "l.jsonl", leg=3, ticket="t-1", drifted=True)
    entry = config["mcpServers"]["fiskj"]
    assert entry["command"] == sys.executable and entry["env"] == {}
    assert entry["args"] == ["-I", "-S", str(LAUNCHER), fork_server().socket_path, "t-1", "--ledger",
                             str(tmp_path / "l.jsonl"), "--leg", "3", "--drifted"]
    with pytest.raises(McpSetupError):
        mcp_config(McpSpec(transport="http"))
    with pytest.raises(McpSetupError):
        McpSpec(transport="sse")
    with pytest.raises(McpSetupError):
        McpSpec(server="two words")


def test_scripted_tool_use_blocks_name_the_tools_as_the_agent_shows_them():
    spec = WorkloadSpec(seed=11, turns=2, tools_per_turn=3)
    plain = build_workload(spec).script
    shown = build_workload(spec, tool_name=McpSpec().tool_template()).script
    for turn in range(len(plain.turns)):
        a, b = plain.reply(turn)[0], shown.reply(turn)[0]
        uses_a = [x for x in a if x["type"] == "tool_use"]
        uses_b = [x for x in b if x["type"] == "tool_use"]
        assert [x["name"] for x in uses_b] == [f"mcp__fiskj__{x['name']}" for x in uses_a]
        assert all(x["name"] in TOOL_NAMES for x in uses_a)
        assert [(x["id"], x["input"]) for x in uses_a] == [(x["id"], x["input"]) for x in uses_b]
    assert [t.tools for t in plain.turns] == [t.tools for t in shown.turns]  # the ToolCalls keep the plain name
    # the state a conversation reaches does not depend on the names (tool_result ids answer the calls)
    blocks, _, _ = shown.reply(0)
    answered = [{"role": "user", "content": "go"}, {"role": "assistant", "content": blocks},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": b["id"], "content": "ok"}
                                             for b in blocks if b["type"] == "tool_use"]}]
    assert shown.position(answered) == plain.position(answered) and shown.position(answered).turn == 1


def test_a_tool_name_template_is_checked():
    assert check_template(PLAIN) == "{tool}"
    assert check_template("mcp__{server}__{tool}", "fiskj") == "mcp__fiskj__{tool}"
    script = Script(seed=1, turns=(Turn(tools=(ToolCall("effect_c"),)),), tool_name="x_{tool}")
    assert [b["name"] for b in script.reply(0)[0] if b["type"] == "tool_use"] == ["x_effect_c"]
    for bad in ("mcp__{server}", "{tool}{tool}", "{tool!r}", "{other}_{tool}", "my {tool}", "{tool:>9}", "{tool",
                "{server}_{tool}"):
        with pytest.raises(ToolNameError):
            check_template(bad)
    with pytest.raises(ToolNameError):
        McpSpec(tool_name="{tool}.x")
    assert McpSpec().shown_tools() == ["mcp__fiskj__effect_a", "mcp__fiskj__effect_b", "mcp__fiskj__effect_c"]
    assert McpSpec(server="ledger", tool_name="{server}_{tool}").shown_tools()[0] == "ledger_effect_a"


@pytest.mark.slow
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_claude_code_lists_and_calls_our_tools_over_mcp(tmp_path, transport):
    """Claude Code itself (the pinned one scripts/install-claude-code.sh installs, or ``$FISKJ_CLAUDE_CODE``: a
    ``claude`` binary) against the fake model: it runs every scripted call of our MCP tools, each one ledger
    line of this leg."""
    from test_claude_code_client import CLAUDE

    if not os.access(CLAUDE, os.X_OK):
        pytest.skip(f"Claude Code is not installed at {CLAUDE}: run scripts/install-claude-code.sh "
                    "(or set FISKJ_CLAUDE_CODE to a claude binary)")
    claude = str(CLAUDE)
    spec = McpSpec(transport=transport)
    workload = build_workload(WorkloadSpec(seed=5, turns=2, tools_per_turn=2), "cc-mcp", tool_name=spec.tool_template())
    ledger, home = tmp_path / "ledger.jsonl", tmp_path / "home"
    home.mkdir()
    with ModelServer() as server, open_leg(spec, tmp_path / "mcp.json", ledger=ledger, leg=0) as leg:
        session = server.open_session(workload.script)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TMPDIR": str(tmp_path),
               "ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": api_key(session.token, 0),
               "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
               "MAX_THINKING_TOKENS": "0"}  # (the fake model's adaptive thinking: issue 24 item 5)
        proc = subprocess.run([claude, "-p", workload.prompt, "--mcp-config", leg.config_path, "--strict-mcp-config",
                               "--allowedTools", ",".join(spec.shown_tools()),
                               "--model", workload.model, "--output-format", "json"],
                              env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=300)
        calls = server.close_session(session.token)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    scripted = [b for t in range(len(workload.script.turns)) for b in workload.script.reply(t)[0]
                if b["type"] == "tool_use"]
    assert [b["name"] for c in calls for b in c.reply if b.get("type") == "tool_use"] == [b["name"] for b in scripted]
    assert all(b["name"].startswith("mcp__fiskj__") for b in scripted)
    effects, notes = read_ledger(ledger)
    assert notes == [] and [(e.tool_use_id, e.attempt, e.leg, e.tool) for e in effects] == \
        [(b["id"], 1, 0, b["name"].removeprefix("mcp__fiskj__")) for b in scripted]
    assert json.loads(proc.stdout)["result"] == workload.script.reply(len(workload.script.turns) - 1)[0][0]["text"]
