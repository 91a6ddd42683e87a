"""Claude Code itself against the fake Messages API (issue 24 item 5): the real client, with its default thinking
on, completes a multi-turn scripted conversation with no HTTP 400, and a new turn in the finished session is a new
state (harness/workload/server.py).

Needs the pinned Claude Code installed by ``scripts/install-claude-code.sh`` (into ``.cache/claude-code``) or a
``claude`` binary named by ``$FISKJ_CLAUDE_CODE``; skipped otherwise (the default suite installs nothing).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness.workload.server import ModelServer, Script, ToolCall, Turn, api_key

ROOT = Path(__file__).resolve().parent.parent
INSTALLED = ROOT / ".cache" / "claude-code" / "node_modules" / ".bin" / "claude"
CLAUDE = Path(os.environ.get("FISKJ_CLAUDE_CODE") or INSTALLED)

pytestmark = pytest.mark.skipif(
    not os.access(CLAUDE, os.X_OK),
    reason=f"Claude Code is not installed at {CLAUDE}: run scripts/install-claude-code.sh "
           "(or set FISKJ_CLAUDE_CODE to a claude binary)")

# Tool turns name Claude Code's built-in tools: it answers each (a tool_result, here an input-validation error,
# since the scripted input is the harness's), which is all the conversation's state needs.
SCRIPT = Script(seed=24, turns=(
    Turn(tools=(ToolCall("Read"),)),
    Turn(tools=(ToolCall("Bash"), ToolCall("Read"))),
    Turn(text="All three turns done."),
))


def claude(server: ModelServer, token: str, leg: int, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / "cfg"),
           "TMPDIR": str(home / "tmp"), "ANTHROPIC_BASE_URL": server.base_url,
           "ANTHROPIC_API_KEY": api_key(token, leg)}
    (home / "tmp").mkdir(exist_ok=True)
    return subprocess.run([str(CLAUDE), *args], env=env, cwd=home / "work", capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


def test_claude_code_completes_a_scripted_conversation_with_default_thinking_and_a_new_turn_is_a_new_state(
        tmp_path):
    (tmp_path / "work").mkdir()
    session_id = str(uuid.uuid4())
    with ModelServer() as server:
        s = server.open_session(SCRIPT)
        started = time.monotonic()
        run = claude(server, s.token, 0, tmp_path, "-p", "Run the ledger batch.", "--session-id", session_id)
        took = time.monotonic() - started
        print(f"one Claude Code run of {len(s.calls)} model calls took {took:.1f} s")
        assert run.returncode == 0, (run.stdout, run.stderr, s.log)
        assert "All three turns done." in run.stdout
        first = list(s.calls)
        # a new turn in the finished session, twice: each a new state past the script
        for leg, prompt in ((1, "And one more thing."), (2, "And another.")):
            more = claude(server, s.token, leg, tmp_path, "-p", prompt, "--resume", session_id)
            assert more.returncode == 0 and "(script exhausted)" in more.stdout, (more.stdout, more.stderr, s.log)
        calls = server.close_session(s.token)
    assert not [line for line in s.log if line.startswith("refused")]  # no HTTP 400, ever
    assert [c.turn for c in first] == [0, 1, 2] and [c.turn for c in calls[3:]] == [3, 3]
    assert len({c.key for c in calls}) == len(calls) == 5  # no request repeats another's state
    # default thinking on: every reply started with a signed thinking block (no turn scripts one) ...
    assert all(c.reply[0]["type"] == "thinking" and c.reply[0]["signature"] for c in calls)
    # ... and the tool loop sent each one back, signature and all
    sent = [m for m in first[2].messages if m["role"] == "assistant"]
    assert [m["content"][0] for m in sent] == [first[0].reply[0], first[1].reply[0]]
    assert [c.leg for c in calls] == [0, 0, 0, 1, 2]


@pytest.mark.slow
def test_the_bundled_profile_runs_its_transcript_through_power_loss_and_names_the_lost_lines(tmp_path):
    """subjects/claude-code/profile.toml as a user runs it: its own session id, cwd and transcript, tools over MCP.
    Power loss judges the transcript where Claude Code keeps it; it is never fsynced, so lines are lost."""
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "run", "power-loss-basic", "noop-baseline",
                           "--subject", str(ROOT / "subjects" / "claude-code" / "profile.toml"), "--trials", "2",
                           "--report-json", str(report), "--keep", "none", "--shrink-budget", "0"],
                          env={**os.environ, "FISKJ_CLAUDE_CODE": str(CLAUDE)}, cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 1 and "setup error" not in proc.stderr, proc.stderr[-3000:]
    found = [(v["invariant"], x["kind"], x.get("detail", "")) for v in json.loads(report.read_text())["violations"]
             for x in v["evidence"].get("violations", [])]
    assert ("I4", "append_not_synced") in {f[:2] for f in found}
    lost = [d for inv, kind, d in found if (inv, kind) == ("I4", "lost")]
    assert lost and all("/.claude/projects/" in d and ".jsonl: line" in d for d in lost), lost
    assert any(" user " in d for d in lost), lost  # named by Claude Code's own line type and uuid


SCRIPT_PATH = ROOT / "scripts" / "install-claude-code.sh"
needs_npm = pytest.mark.skipif(shutil.which("npm") is None or shutil.which("node") is None,
                               reason="node and npm are not installed")


def _install(prefix: Path, registry: str, **npm_config: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PREFIX": str(prefix), "npm_config_registry": registry, **npm_config}
    return subprocess.run(["sh", str(SCRIPT_PATH)], env=env, capture_output=True, text=True, timeout=120)


@needs_npm
def test_the_install_script_says_clearly_when_the_registry_is_unreachable(tmp_path):
    # nothing listens on the discard port; asked once (the script's default retry would only wait a second more)
    run = _install(tmp_path / "cc", "http://127.0.0.1:9/", npm_config_fetch_retries="0")
    assert run.returncode == 3 and run.stdout == ""
    assert "cannot reach @anthropic-ai/claude-code@2.1.328 on the npm registry http://127.0.0.1:9/" in run.stderr
    assert not (tmp_path / "cc" / "node_modules" / ".bin" / "claude").exists()


@needs_npm
def test_the_install_script_is_idempotent_and_needs_no_network_once_installed():
    if not os.access(INSTALLED, os.X_OK):
        pytest.skip(f"Claude Code is not installed at {INSTALLED}: run scripts/install-claude-code.sh")
    run = _install(INSTALLED.parent.parent.parent, "http://127.0.0.1:9/")
    assert (run.returncode, run.stdout, run.stderr) == (0, f"{INSTALLED}\n", "")
