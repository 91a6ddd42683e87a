"""The LangGraph subject (subjects/langgraph/agent.py) against the harness's fake model server and MCP server.

What a third party meets: the agent completes the fake server's script with every tool run exactly once
(the effects ledger), a SIGTERM suspends it at a superstep boundary and a resume finishes it with no tool
re-run, its ``status`` reads the SQLite checkpointer's saved state, a resume of a completed thread is a no-op,
an unknown thread is refused, and each bug variant (``FISKJ_LANGGRAPH_BUG``) really changes what it does.

Its legs run as a harness campaign runs them: forked from the profile's fork server (``[fork_server]``,
docs/subject.md "Fork servers") through :class:`harness.runner.starter.LegStarter`; one test runs the same
thread fresh (a new interpreter, as a user runs ``agent.py``) and forked and compares what they did, so the
fork route cannot differ unseen.

The agent runs in its own environment (scripts/install-langgraph.sh: langchain-mcp-adapters needs mcp<2, the
harness mcp>=2.3); the module fixture makes it, and the tests skip, saying why, only when that cannot be done.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from harness.runner.starter import LegStarter
from harness.selftest.targets import LANGGRAPH_SUBJECT, LANGGRAPH_TARGETS
from harness.subject.forkserver import ForkedProcess
from harness.subject.profile import load_profile
from harness.workload.mcp_setup import McpSpec, mcp_config, write_mcp_config
from harness.workload.server import ModelServer, Script, ToolCall, Turn, api_key

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "subjects" / "langgraph" / "agent.py"
MODEL = "claude-fiskj-fake"
PROMPT = "Do the scripted ledger work."

#: Turn 0: a batch of two tools; turn 1: one tool; turn 2: the answer.
SCRIPT = Script(seed=7, model=MODEL, turns=(
    Turn(tools=(ToolCall("effect_a", n=1), ToolCall("effect_b", n=2))),
    Turn(tools=(ToolCall("effect_c", n=3),)),
    Turn(text="All ledger work done."),
))
#: SCRIPT with tools that take 300 ms after their effect: a signal sent once an effect is in the ledger lands
#: while that batch runs (the node tests' slow_script does the same).
SLOW = Script(seed=7, model=MODEL, turns=(
    Turn(tools=(ToolCall("effect_a", n=1, sleep_ms=300), ToolCall("effect_b", n=2, sleep_ms=300))),
    Turn(tools=(ToolCall("effect_c", n=3, sleep_ms=300),)),
    Turn(text="All ledger work done."),
))


@pytest.fixture(scope="module")
def python() -> str:
    """The LangGraph environment's interpreter ($FISKJ_LANGGRAPH_PYTHON, else made by the install script)."""
    given = os.environ.get("FISKJ_LANGGRAPH_PYTHON")
    if given:
        return given
    done = subprocess.run(["sh", str(ROOT / "scripts" / "install-langgraph.sh")], capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        pytest.skip(f"!!! the LangGraph subject is NOT TESTED: scripts/install-langgraph.sh failed: {done.stderr.strip()}")
    return done.stdout.strip()


@pytest.fixture(scope="module")
def model_server():
    with ModelServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def starter(python):
    """The legs' starter of a campaign against the LangGraph profile: its fork server pre-imported LangGraph."""
    subject = load_profile(ROOT / LANGGRAPH_SUBJECT)
    legs = LegStarter(replace(subject, extra_env=(("FISKJ_LANGGRAPH_PYTHON", python),)), fork_server=True)
    yield legs
    legs.close()


class Trial:
    """One thread of the agent: its own database, ledger, MCP configuration and server session; legs count up.
    A leg is forked by ``starter`` (as a campaign's leg is), or with ``fresh`` a new interpreter."""

    def __init__(self, starter: LegStarter, server: ModelServer, tmp: Path, script: Script = SCRIPT) -> None:
        self.starter, self.server, self.tmp = starter, server, tmp
        self.prefix = [starter.subject.fill(w, {}) for w in starter.subject.argv]  # [python, agent.py]
        self.session = server.open_session(script)
        self.db = tmp / "state" / "langgraph" / "checkpoints.sqlite"
        self.ledger = tmp / "ledger.jsonl"
        self.leg = 0
        self.n = 0
        self.thread = "lg-1"
        tmp.mkdir(parents=True, exist_ok=True)

    def argv(self, command: str) -> list[str]:
        if command == "status":
            return ["status", self.thread, "--db", str(self.db)]
        config = write_mcp_config(self.tmp / f"mcp-{self.leg}.json",
                                  mcp_config(McpSpec(tool_name="{tool}"), ledger=self.ledger, leg=self.leg))
        args = [command, self.thread, "--db", str(self.db), "--model", MODEL, "--base-url", self.server.base_url,
                "--max-tokens", "4096", "--max-iterations", "20", "--mcp-config", config]
        return [*args, "--", PROMPT] if command == "run" else args

    def popen(self, command: str, bug: str | None = None, *, fresh: bool = False, log: Path | None = None):
        """Start a leg; its output goes to ``out``/``err`` files (``self.out(proc)``).  ``log``: observed (the
        harness's outside observer writes its durability operations there)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FISKJ_", "ANTHROPIC_"))}
        env.update(ANTHROPIC_API_KEY=api_key(self.session.token, self.leg), FISKJ_LEDGER=str(self.ledger),
                   FISKJ_HARNESS_LEG=str(self.leg), **({"FISKJ_LANGGRAPH_BUG": bug} if bug else {}))
        self.n += 1
        out, err = self.tmp / f"{self.n}-{command}.out", self.tmp / f"{self.n}-{command}.err"
        argv = [*self.prefix, *self.argv(command)]
        if fresh:
            with open(out, "wb") as fo, open(err, "wb") as fe:
                proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe,
                                        start_new_session=True)
        elif log is not None:
            self.starter.observe = True
            try:
                proc = self.starter.start(argv, env, None, out, err, log=log, roots=(str(self.tmp),))
            finally:
                self.starter.observe = False
        else:
            proc = self.starter.start(argv, env, None, out, err)
            assert isinstance(proc, ForkedProcess), "the LangGraph profile's leg was not forked"
        proc.files = (out, err)
        self.leg += command != "status"
        return proc

    @staticmethod
    def output(proc) -> tuple[str, str]:
        return tuple(f.read_text(encoding="utf-8", errors="replace") for f in proc.files)

    def finish(self, proc, timeout: float = 120) -> subprocess.CompletedProcess:
        code = proc.wait(timeout)
        return subprocess.CompletedProcess(proc.pid, code, *self.output(proc))

    def run(self, command: str, bug: str | None = None, **how) -> subprocess.CompletedProcess:
        return self.finish(self.popen(command, bug, **how))

    def status(self, bug: str | None = None, **how) -> dict:
        done = self.run("status", bug, **how)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def effects(self) -> list[dict]:
        if not self.ledger.exists():
            return []
        return [json.loads(line) for line in self.ledger.read_text().splitlines() if line.strip()]

    def tool_ids(self) -> list[str]:
        script = self.session.script
        return [b["id"] for turn in range(len(script.turns)) for b in script.reply(turn)[0] if b["type"] == "tool_use"]


def _first_effect(trial: Trial, proc) -> None:
    deadline = time.monotonic() + 60
    while not trial.effects():
        assert proc.poll() is None and time.monotonic() < deadline, trial.output(proc)
        time.sleep(0.005)


def _mode_and_checkpoints(db: Path) -> tuple[str, int]:
    with sqlite3.connect(db) as conn:
        return conn.execute("PRAGMA journal_mode").fetchone()[0], conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]


def _ledger(trial: Trial) -> list[tuple[int, str]]:
    return sorted((e["leg"], e["tool_use_id"]) for e in trial.effects())


def test_completes_the_script_once_forked_as_fresh(starter, model_server, tmp_path):
    """The forked route (a campaign's) and a fresh interpreter (a user's) give the same run: exit status, answer,
    effects ledger and status reading of the same script; then, forked, the rest of the thread's commands.  The
    two threads are apart (their own store, ledger and server session): the fresh one runs while the forked one
    does (its interpreter imports LangGraph while the fork server does, or a forked leg runs)."""
    fresh = Trial(starter, model_server, tmp_path / "fresh")
    fresh_leg = fresh.popen("run", fresh=True)
    trial = Trial(starter, model_server, tmp_path / "forked")
    done = trial.run("run")
    assert done.returncode == 0, done.stderr
    fresh_done = fresh.finish(fresh_leg)
    assert fresh_done.returncode == 0, fresh_done.stderr
    fresh_status = fresh.status(fresh=True)
    assert done.stdout.strip() == "All ledger work done."
    assert sorted(e["tool_use_id"] for e in trial.effects()) == sorted(trial.tool_ids())
    assert trial.status() == {"status": "completed", "tool_results": trial.tool_ids(), "answer": "All ledger work done."}
    assert (fresh_done.returncode, fresh_done.stdout) == (done.returncode, done.stdout), "forked differs from fresh"
    assert _ledger(fresh) == _ledger(trial) and fresh_status == trial.status(), "forked differs from fresh"
    assert fresh.status() == fresh_status  # a forked reading of the fresh leg's store reads the same
    mode, checkpoints = _mode_and_checkpoints(trial.db)
    assert mode == "wal" and checkpoints >= 6          # input, agent, tools, agent, tools, agent
    assert _mode_and_checkpoints(fresh.db) == (mode, checkpoints)
    # a completed thread resumed: LangGraph has nothing to run, the agent prints the answer (no-op)
    calls = len(trial.session.calls)
    again = trial.run("resume")
    assert (again.returncode, again.stdout.strip()) == (0, "All ledger work done."), again.stderr
    assert len(trial.effects()) == 3
    assert len(trial.session.calls) == calls
    # run of an existing thread is a usage error; resume of an unknown thread is refused
    assert trial.run("run").returncode == 2
    trial.thread = "no-such-thread"
    refused = trial.run("resume")
    assert refused.returncode == 1 and "no thread 'no-such-thread'" in refused.stderr
    assert trial.status() == {"status": None, "tool_results": [], "answer": None}


def test_suspend_at_a_superstep_boundary_then_resume(starter, model_server, tmp_path):
    """SIGTERM once the first tool's effect is in the ledger: the batch finishes, the run drains, a resume ends it."""
    trial = Trial(starter, model_server, tmp_path, SLOW)
    proc = trial.popen("run")
    _first_effect(trial, proc)
    os.kill(proc.pid, signal.SIGTERM)
    done = trial.finish(proc, 60)
    assert done.returncode == 3, done.stderr
    status = trial.status()
    assert status["status"] == "suspended" and status["answer"] is None
    assert set(status["tool_results"]) <= set(trial.tool_ids()) and len(status["tool_results"]) >= 2
    done = trial.run("resume")
    assert (done.returncode, done.stdout.strip()) == (0, "All ledger work done."), done.stderr
    assert sorted(e["tool_use_id"] for e in trial.effects()) == sorted(trial.tool_ids())   # nothing re-run
    assert trial.status()["status"] == "completed"


def test_a_killed_leg_reads_running_and_resumes(starter, model_server, tmp_path):
    """SIGKILL mid-run: status says running (not suspended), a resume completes with at most the batch re-run."""
    trial = Trial(starter, model_server, tmp_path)
    proc = trial.popen("run")
    _first_effect(trial, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert trial.status()["status"] == "running"
    done = trial.run("resume")
    assert done.returncode == 0, done.stderr
    ids = [e["tool_use_id"] for e in trial.effects()]
    assert set(ids) == set(trial.tool_ids()) and all(ids.count(i) <= 2 for i in ids)


def test_an_unknown_bug_variant_is_a_usage_error(starter, model_server, tmp_path):
    done = Trial(starter, model_server, tmp_path).run("run", bug="nope")
    assert done.returncode == 2 and "FISKJ_LANGGRAPH_BUG='nope'" in done.stderr


def test_sync_off_never_fsyncs_a_commit(starter, model_server, tmp_path):
    """Observed as a campaign observes a leg (the outside observer follows aiosqlite's own thread, which does the
    IO): the correct agent fsyncs the WAL at every commit, sync-off only while LangGraph sets its tables up
    (before the variant's PRAGMA)."""
    def wal_syncs(bug: str | None) -> int:
        trial = Trial(starter, model_server, tmp_path / str(bug))
        log = tmp_path / f"observed-{bug}.jsonl"
        done = trial.run("run", bug=bug, log=log)
        assert done.returncode == 0, done.stderr
        ops = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        return sum(op.get("op") in ("fsync", "fdatasync") and op.get("ret") == 0
                   and str(op.get("path", "")).endswith("checkpoints.sqlite-wal") for op in ops)

    assert wal_syncs(None) - wal_syncs("sync-off") >= 6      # one a checkpoint at least


def test_memory_saver_keeps_nothing(starter, model_server, tmp_path):
    trial = Trial(starter, model_server, tmp_path)
    assert trial.run("run", bug="memory-saver").returncode == 0
    assert not trial.db.exists() and trial.status("memory-saver")["status"] is None
    assert trial.run("resume", bug="memory-saver").returncode == 1


@pytest.mark.parametrize("bug", ["effect-outside-graph", "new-thread-on-resume"])
def test_a_clean_suspend_reruns_tools_in_the_variants(starter, model_server, tmp_path, bug):
    """SIGTERM once the first effect is in the ledger, then a resume: each variant runs a tool twice (the correct
    agent runs each once: test_suspend_at_a_superstep_boundary_then_resume)."""
    trial = Trial(starter, model_server, tmp_path, SLOW)
    proc = trial.popen("run", bug=bug)
    _first_effect(trial, proc)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(60) == 3
    done = trial.run("resume", bug=bug)
    assert (done.returncode, done.stdout.strip()) == (0, "All ledger work done."), done.stderr
    ids = [e["tool_use_id"] for e in trial.effects()]
    assert max(ids.count(i) for i in ids) == 2
    # new-thread-on-resume leaves the suspended thread suspended; the other finishes it
    assert trial.status()["status"] == ("suspended" if bug == "new-thread-on-resume" else "completed")


def _campaign(tmp_path: Path, python: str, scenarios: list[str], trials: int, bug: str | None = None):
    """``fiskj-harness run`` of the bundled ``scenarios`` against the LangGraph profile (variant ``bug``)."""
    import sys

    subject = (f"FISKJ_LANGGRAPH_BUG={bug} " if bug else "") + f"FISKJ_LANGGRAPH_PYTHON={python} " \
        + str(ROOT / LANGGRAPH_SUBJECT)
    report = tmp_path / "report.json"
    argv = [sys.executable, "-m", "harness.cli.main", "run", *scenarios, "--subject", subject, "--trials", str(trials),
            "--seed", "1", "--report-json", str(report), "--quiet", "--keep", "none",
            *(["--first-violation", "--shrink-budget", "0"] if bug else [])]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={k: v for k, v in os.environ.items() if not k.startswith("FISKJ_")})
    return proc, (json.loads(report.read_text()) if report.exists() else None)


@pytest.mark.slow
@pytest.mark.long  # about 2 min on 2 idle cores (every leg a fresh LangGraph interpreter); the default suite keeps
# the agent's own tests above and the memory-saver catch below (tests/README.md "What the suite costs")
def test_the_langgraph_agent_passes_power_loss_of_its_sqlite_store_and_kills_judged_from_its_reading(tmp_path, python):
    proc, report = _campaign(tmp_path, python, ["power-loss-basic", "kill-every-event"], 4)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    for inv in ("I4", "I5", "I6"):
        row = report["invariants"][inv]
        assert row["valid"] > row.get("vacuous", 0) and row["unknown"] == 0, (inv, row)
    assert report["faults"]["power_loss"] >= 2 and report["faults"]["kill"] >= 2
    assert "journal format opaque" in proc.stdout + proc.stderr


# memory-saver (the cheapest, 2 trials) runs in the default suite: the whole route, from the agent's own store to
# a caught I4, on every CI run; the other variants are long (--long): their invariants (I4 of an unsynced commit,
# I1/I2 of a tool re-run after a clean suspend) are caught in the own mutants' fast tests (tests/test_mutants.py).
@pytest.mark.slow
@pytest.mark.parametrize("bug", [pytest.param(b, marks=() if b == "memory-saver" else pytest.mark.long)
                                 for b in sorted(LANGGRAPH_TARGETS)])
def test_each_langgraph_variant_is_caught_by_its_bundled_scenario(tmp_path, python, bug):
    target = LANGGRAPH_TARGETS[bug]
    proc, report = _campaign(tmp_path, python, [target.scenario], target.trials, bug=bug)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    caught = {row["invariant"] for row in report["violations"]}
    assert caught & set(target.expect), (bug, caught)
