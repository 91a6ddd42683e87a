"""The foreign subject (subjects/node/agent.mjs): a JavaScript agent with its own journal code.

It holds none of fiskj's code, so what these tests check is the contract of
docs/subject.md as a third party meets it: the journal it writes folds in
fiskj's reader with the expected conversation, a suspend resumes to the same
answer with no tool re-run, the run lock (flock(1) on the agent's own
descriptor) refuses a second agent and dies with its holder, drift is refused
with zero bytes appended, and every bug variant (``FISKJ_FOREIGN_BUG``) really
changes what the agent does, seen from outside without fault injection (the
ledger, strace, fiskj's reader, the agent's own ``status`` command).

The agent runs against the harness's fake model server (harness/server.py),
with the ledger tools of harness/workload.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from fiskj.cli import main as fiskj_main
from fiskj.errors import JournalError
from fiskj.reader import read_state
from harness.workload.server import ModelServer, Script, ToolCall, Turn, api_key
from harness.workload.build import write_tools_file

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "subjects" / "node" / "agent.mjs"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None,
    reason="!!! node (Node.js 20) is NOT INSTALLED: the foreign subject subjects/node/agent.mjs is NOT TESTED !!!")

MODEL = "claude-fiskj-fake"
RUN_ID = "foreign-1"
PROMPT = "Do the scripted ledger work."

#: Turn 0: a batch of two tools; turn 1: one tool; turn 2: the answer.
SCRIPT = Script(seed=7, model=MODEL, turns=(
    Turn(tools=(ToolCall("effect_a", n=1), ToolCall("effect_b", n=2))),
    Turn(tools=(ToolCall("effect_c", n=3),)),
    Turn(text="All ledger work done."),
))


def slow_script(ms: float, seed: int = 8) -> Script:
    """Three one-tool turns whose tools take ``ms`` after their effect, then the answer."""
    return Script(seed=seed, model=MODEL, turns=(
        Turn(tools=(ToolCall("effect_a", sleep_ms=ms, n=1),)),
        Turn(tools=(ToolCall("effect_b", sleep_ms=ms, n=2),)),
        Turn(tools=(ToolCall("effect_c", sleep_ms=ms, n=3),)),
        Turn(text="Slow work done."),
    ))


@pytest.fixture(scope="module")
def model_server():
    with ModelServer() as srv:
        yield srv


class Trial:
    """One run of the agent: its own store, ledger, tools file and server session; legs count up."""

    def __init__(self, server: ModelServer, tmp: Path, script: Script = SCRIPT, run_id: str = RUN_ID) -> None:
        self.server, self.tmp, self.script, self.run_id = server, tmp, script, run_id
        tmp.mkdir(parents=True, exist_ok=True)
        self.session = server.open_session(script)
        self.state_home = tmp / "state"
        self.ledger = tmp / "ledger.jsonl"
        self.tools = write_tools_file(tmp / "tools.json")
        self.leg = 0

    @property
    def store(self) -> Path:
        return self.state_home / "fisk-ai" / "runs"

    @property
    def journal(self) -> Path:
        return self.store / f"{self.run_id}.json"

    def env(self, bug: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FISKJ_", "ANTHROPIC_", "XDG_STATE_HOME"))}
        env.update(ANTHROPIC_BASE_URL=self.server.base_url, ANTHROPIC_API_KEY=api_key(self.session.token, self.leg),
                   XDG_STATE_HOME=str(self.state_home), FISKJ_LEDGER=str(self.ledger), FISKJ_HARNESS_LEG=str(self.leg))
        if bug:
            env["FISKJ_FOREIGN_BUG"] = bug
        return env

    def config(self, model: str = MODEL, tools: str | None = None, max_tokens: int = 1_000_000,
               max_iterations: int = 20) -> list[str]:
        return ["--model", model, "--base-url", self.server.base_url, "--tools", tools or self.tools,
                "--max-tokens", str(max_tokens), "--max-iterations", str(max_iterations)]

    def start_argv(self, chat: bool = False, **cfg) -> list[str]:
        return ["run", "--checkpoint", "--name", self.run_id, *self.config(**cfg), *(["--chat"] if chat else []),
                "--", PROMPT]

    def resume_argv(self, force: bool = False, **cfg) -> list[str]:
        return ["run", "--resume", self.run_id, *(["--force"] if force else []), *self.config(**cfg)]

    def popen(self, args: list[str], *, bug: str | None = None, wrap: list[str] = (), stdin=subprocess.DEVNULL):
        proc = subprocess.Popen([*wrap, NODE, str(AGENT), *args], env=self.env(bug), stdin=stdin,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.leg += 1
        return proc

    def run(self, args: list[str], *, bug: str | None = None, wrap: list[str] = (), input: str | None = None,
            timeout: float = 30) -> subprocess.CompletedProcess:
        proc = self.popen(args, bug=bug, wrap=wrap, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL)
        out, err = proc.communicate(input, timeout=timeout)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def status(self, bug: str | None = None) -> dict:
        done = self.run(["status", self.run_id], bug=bug)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def effects(self) -> list[dict]:
        if not self.ledger.exists():
            return []
        return [json.loads(line) for line in self.ledger.read_text().splitlines() if line.strip()]

    def write_journal(self, data: bytes) -> None:
        self.store.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.journal.write_bytes(data)
        os.chmod(self.journal, 0o600)


def expected_messages(script: Script, prompt: str = PROMPT) -> list[dict]:
    """The conversation an uninterrupted run of ``script`` must fold to."""
    messages = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
    for turn in range(len(script.turns)):
        blocks, _stop, _usage = script.reply(turn)
        messages.append({"role": "assistant", "content": blocks})
        results = [{"type": "tool_result", "tool_use_id": b["id"], "content": f"ok {b['name']} {b['id']} n={b['input']['n']}\n",
                    "is_error": False} for b in blocks if b["type"] == "tool_use"]
        if results:
            messages.append({"role": "user", "content": results})
    return messages


def verify(path: Path) -> subprocess.CompletedProcess:
    """``fiskj session verify PATH``: fiskj's own command line (:func:`fiskj.cli.main`), in this process (a
    Python start and fiskj's imports spared)."""
    argv = ["session", "verify", str(path)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = fiskj_main(argv)
    return subprocess.CompletedProcess(["fiskj", *argv], code, out.getvalue(), err.getvalue())


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def journal_from(records: list[dict]) -> bytes:
    """Records (envelopes) renumbered from seq 1, one compact line each."""
    out = []
    for seq, rec in enumerate(records, 1):
        rec = dict(rec, seq=seq)
        out.append(json.dumps(rec, separators=(",", ":"), ensure_ascii=False))
    return ("\n".join(out) + "\n").encode()


def terminal(reason: str) -> dict:
    return {"seq": 0, "protocol": "io.choria.fisk-ai.v1.session.terminal", "terminal": {"reason": reason}}


def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def journal_has(trial: Trial, text: str) -> bool:
    return trial.journal.exists() and text in trial.journal.read_text(errors="replace")


@pytest.fixture(scope="module")
def reference(model_server, tmp_path_factory):
    """An uninterrupted run of SCRIPT: its journal records (every derived journal starts from them)."""
    trial = Trial(model_server, tmp_path_factory.mktemp("reference"))
    done = trial.run(trial.start_argv())
    assert done.returncode == 0, done.stderr
    records = lines_of(trial.journal)
    # the agent writes compact JSON exactly as Python's json.dumps does for this content
    assert journal_from(records) == trial.journal.read_bytes()
    return records


# --- the contract ------------------------------------------------------------------------------


def test_a_run_writes_a_journal_that_fiskj_folds_to_the_expected_conversation(model_server, tmp_path):
    trial = Trial(model_server, tmp_path)
    done = trial.run(trial.start_argv())
    assert done.returncode == 0, done.stderr
    assert done.stdout == "All ledger work done.\n"
    assert verify(trial.journal).returncode == 0
    state = read_state(trial.journal)
    assert state.status == "completed" and state.torn_tail is None
    assert state.messages == expected_messages(SCRIPT)
    assert state.final_answer() == "All ledger work done."
    assert state.counters.llm_calls == 3 and state.counters.tool_calls == 3
    assert state.counters.in_tokens == 100 + 110 + 120 and state.counters.out_tokens == (20 + 14) + (20 + 7) + 20
    assert state.meta.run_id == RUN_ID and state.meta.prompt == PROMPT and state.meta.version == 2
    fp = state.fingerprint
    assert (fp.model, fp.thinking_mode, fp.max_tokens, fp.max_iterations) == (MODEL, "off", 1_000_000, 20)
    assert re.fullmatch(r"[0-9a-f]{64}", fp.system_hash) and re.fullmatch(r"[0-9a-f]{64}", fp.tools_hash)
    # the request carried the tools, and the key of the trial and the leg
    call = trial.session.calls[0]
    assert call.leg == 0 and call.messages == expected_messages(SCRIPT)[:1]
    # every tool ran exactly once, with the harness environment passed through
    assert sorted((e["tool_use_id"], e["attempt"], e["leg"]) for e in trial.effects()) == [
        ("toolu_7_0_0", 1, 0), ("toolu_7_0_1", 1, 0), ("toolu_7_1_0", 1, 0)]
    # modes: store directory 0700, journal and lock 0600
    assert trial.store.stat().st_mode & 0o777 == 0o700
    assert trial.journal.stat().st_mode & 0o777 == 0o600
    assert (trial.store / f"{RUN_ID}.lock").stat().st_mode & 0o777 == 0o600
    # the agent's own reading
    assert trial.status() == {"status": "completed", "records": 8, "last_seq": 8, "pending": None, "next_iteration": 3}
    # a second create of the same id is refused, and a completed run is not resumed; neither appends
    before = trial.journal.read_bytes()
    again = trial.run(trial.start_argv())
    assert again.returncode == 1 and "RunExists" in again.stderr
    refused = trial.run(trial.resume_argv())
    assert refused.returncode == 2 and "completed" in refused.stderr
    assert trial.journal.read_bytes() == before and len(trial.session.calls) == 3


def test_a_chat_run_journals_each_follow_up_and_suspends_at_end_of_input(model_server, tmp_path):
    script = Script(seed=9, model=MODEL, turns=(Turn(tools=(ToolCall("effect_a", n=5),)), Turn(text="first"),
                                                 Turn(text="second")))
    trial = Trial(model_server, tmp_path, script)
    done = trial.run(trial.start_argv(chat=True), input="next one, please\n")
    assert done.returncode == 3, done.stderr
    assert done.stdout == "first\nsecond\n"
    state = read_state(trial.journal)
    assert state.status == "suspended" and state.meta.interactive is True
    assert state.messages[-2] == {"role": "user", "content": [{"type": "text", "text": "next one, please"}]}
    assert state.final_answer() == "second"
    # a resume with no more input suspends again without a model call
    calls = len(trial.session.calls)
    again = trial.run(trial.resume_argv())
    assert again.returncode == 3 and len(trial.session.calls) == calls
    assert verify(trial.journal).returncode == 0


def test_suspend_then_resume_gives_the_same_answer_with_no_tool_re_run(model_server, tmp_path):
    script = slow_script(300)
    trial = Trial(model_server, tmp_path, script)
    proc = trial.popen(trial.start_argv())
    wait_for(lambda: journal_has(trial, '"tool_use_id":"toolu_8_0_0","result"'))
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=15)
    assert proc.returncode == 3, err
    first = read_state(trial.journal)
    assert first.status == "suspended" and first.pending is None
    assert lines_of(trial.journal)[-1]["terminal"]["reason"] == "suspended"
    done = trial.run(trial.resume_argv())
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Slow work done.\n"
    state = read_state(trial.journal)
    assert state.status == "completed" and state.messages == expected_messages(script)
    assert [e["attempt"] for e in trial.effects()] == [1, 1, 1]  # no tool re-run
    keys = [c.key for c in trial.session.calls]
    assert len(keys) == len(set(keys)) == 4  # no model call repeated
    assert verify(trial.journal).returncode == 0


def test_the_lock_refuses_a_second_agent_and_dies_with_its_holder(model_server, tmp_path):
    # A chat run waiting for its next line holds the lock for as long as its stdin stays open.
    script = Script(seed=10, model=MODEL, turns=(Turn(text="hello"), Turn(text="bye")))
    trial = Trial(model_server, tmp_path, script)
    first = trial.popen(trial.start_argv(chat=True), stdin=subprocess.PIPE)
    try:
        wait_for(lambda: journal_has(trial, '"stop_reason":"end_turn"'))
        # flock(1) exited long ago, yet the lock is held (by the agent's own descriptor)
        with open(trial.store / f"{RUN_ID}.lock", "rb") as fh:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        before = trial.journal.read_bytes()
        second = trial.run(trial.resume_argv(), input="ignored\n")
        assert second.returncode == 1 and "locked" in second.stderr, second.stderr
        assert trial.journal.read_bytes() == before
    finally:
        first.kill()  # SIGKILL
        first.communicate()
    assert first.returncode == -signal.SIGKILL
    third = trial.run(trial.resume_argv(), input="one more\n")
    assert third.returncode == 3, third.stderr  # a chat run ends suspended at the end of its input
    state = read_state(trial.journal)
    assert state.final_answer() == "bye" and state.messages[-2]["content"][0]["text"] == "one more"


def test_drift_is_refused_with_zero_bytes_appended_and_force_proceeds(model_server, tmp_path, reference):
    trial = Trial(model_server, tmp_path)
    trial.write_journal(journal_from(reference[:4] + [terminal("suspended")]))
    before = trial.journal.read_bytes()
    drifted_tools = write_tools_file(tmp_path / "tools-drifted.json", drifted=True)
    for cfg, field in ((dict(model=MODEL + "-drifted"), "model"), (dict(tools=drifted_tools), "tool set"),
                       (dict(max_tokens=1_000_001), "max_tokens"), (dict(max_iterations=21), "max_iterations")):
        done = trial.run(trial.resume_argv(**cfg))
        assert done.returncode == 2 and field in done.stderr, done.stderr
        assert trial.journal.read_bytes() == before
    assert trial.session.calls == [] and trial.effects() == []
    forced = trial.run(trial.resume_argv(force=True, model=MODEL + "-drifted"))
    assert forced.returncode == 0, forced.stderr
    state = read_state(trial.journal)
    assert state.status == "completed" and state.messages == expected_messages(SCRIPT)


@pytest.mark.parametrize("content", [b"", b'{"seq":1,"protoc'], ids=["empty", "torn-only"])
def test_a_journal_holding_no_complete_record_is_reclaimed_by_a_start(model_server, tmp_path, content):
    trial = Trial(model_server, tmp_path)
    trial.write_journal(content)
    done = trial.run(trial.start_argv())
    assert done.returncode == 0, done.stderr
    assert verify(trial.journal).returncode == 0 and read_state(trial.journal).status == "completed"


# --- the bug variants --------------------------------------------------------------------------


def test_an_unknown_bug_variant_is_a_usage_error(model_server, tmp_path):
    trial = Trial(model_server, tmp_path)
    done = trial.run(trial.start_argv(), bug="no-such-bug")
    assert done.returncode == 2 and "unknown FISKJ_FOREIGN_BUG" in done.stderr
    assert not trial.journal.exists()


def fsyncs(trial: Trial, bug: str | None) -> list[str]:
    """Paths the agent's main thread fsynced during a fresh start (strace; the store does not exist yet)."""
    trace = trial.tmp / f"strace-{bug}.txt"
    done = trial.run(trial.start_argv(), bug=bug, wrap=["strace", "-qq", "-y", "-e", "trace=fsync", "-o", str(trace)])
    assert done.returncode == 0, done.stderr
    return re.findall(r"^fsync\(\d+<([^>]*)>\)\s+=\s+0", trace.read_text(), re.M)


@pytest.fixture(scope="module")
def correct_fsyncs(model_server, tmp_path_factory):
    """The correct agent's fsyncs during a fresh start, and its trial (one strace'd run for every variant row)."""
    good = Trial(model_server, tmp_path_factory.mktemp("good"))
    return fsyncs(good, None), good


@pytest.mark.parametrize("bug", ["no-fsync", "no-dir-fsync", "store-dir-not-durable"])
def test_the_fsync_variants_leave_out_their_fsync(model_server, tmp_path, bug, correct_fsyncs):
    ok, good = correct_fsyncs
    bad = Trial(model_server, tmp_path / "bad")
    broken = fsyncs(bad, bug)

    def count(paths, trial, name):
        return sum(1 for p in paths if p == str({"journal": trial.journal, "store": trial.store,
                                                    "parent": trial.store.parent, "home": trial.state_home}[name]))

    # the correct agent: one fsync per record, the store directory once, each new directory's parent
    expect = {"journal": 8, "store": 1, "parent": 1, "home": 1}
    assert {k: count(ok, good, k) for k in expect} == expect
    if bug == "no-fsync":
        expect["journal"] = 0
    elif bug == "no-dir-fsync":
        expect["store"] = 0
    else:
        expect["parent"] = expect["home"] = 0
    assert {k: count(broken, bad, k) for k in expect} == expect
    assert read_state(bad.journal).status == "completed"


def test_fsync_error_swallowed_carries_on_after_a_failed_fsync(model_server, tmp_path):
    results = {}
    for bug in (None, "fsync-error-swallowed"):
        trial = Trial(model_server, tmp_path / str(bug))
        trial.store.mkdir(parents=True, mode=0o700)  # so the first fsync is the one of the meta record
        wrap = ["strace", "-qq", "-o", "/dev/null", "-e", "trace=fsync", "-e", "inject=fsync:error=EIO:when=1"]
        results[bug] = (trial.run(trial.start_argv(), bug=bug, wrap=wrap), trial)
    done, trial = results[None]
    assert done.returncode == 1 and "fsync of seq 1" in done.stderr and "EIO" in done.stderr, done.stderr
    assert trial.session.calls == []
    done, trial = results["fsync-error-swallowed"]
    assert done.returncode == 0 and "fsync of the journal failed (EIO)" in done.stderr, done.stderr


def test_torn_tail_not_cut_glues_the_next_record_to_the_torn_bytes(model_server, tmp_path, reference):
    torn = json.dumps(reference[4], separators=(",", ":")).encode()[:40]  # half of the 2nd assistant record
    data = journal_from(reference[:4]) + torn
    for bug in (None, "torn-tail-not-cut"):
        trial = Trial(model_server, tmp_path / str(bug))
        trial.write_journal(data)
        done = trial.run(trial.resume_argv(), bug=bug)
        assert done.returncode == 0, done.stderr
        if bug is None:  # cut, then the same records as the uninterrupted run
            assert trial.journal.read_bytes() == journal_from(reference)
        else:
            assert torn + b'{"seq":5,' in trial.journal.read_bytes()  # glued
            with pytest.raises(JournalError):
                read_state(trial.journal)


def test_fold_before_lock_reads_the_journal_before_it_has_the_lock(model_server, tmp_path, reference):
    # A held lock and a corrupt interior: locking first answers "locked" without reading a byte;
    # folding first finds the corruption before it ever tries the lock.
    meta, first, _ = journal_from(reference[:2]).split(b"\n")
    data = meta + b"\nnot json\n" + first + b"\n"
    for bug, expect in ((None, "RunLocked"), ("fold-before-lock", "CorruptJournal")):
        trial = Trial(model_server, tmp_path / str(bug))
        trial.write_journal(data)
        with open(trial.store / f"{RUN_ID}.lock", "wb") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            done = trial.run(trial.resume_argv(), bug=bug)
        assert done.returncode == 1 and expect in done.stderr, done.stderr


def test_create_without_excl_appends_to_a_leftover_file_instead_of_reclaiming_it(model_server, tmp_path):
    leftover = b'{"seq":1,"protocol":"io.choria.fisk-ai.v1.sess'  # a create that died mid-write
    for bug in (None, "create-without-excl"):
        trial = Trial(model_server, tmp_path / str(bug))
        trial.write_journal(leftover)
        done = trial.run(trial.start_argv(), bug=bug)
        if bug is None:
            assert done.returncode == 0, done.stderr
            assert verify(trial.journal).returncode == 0
        else:
            assert trial.journal.read_bytes().startswith(leftover + b'{"seq":1,')  # no O_EXCL: appended
            assert verify(trial.journal).returncode == 1


def test_status_stays_suspended_after_later_records(model_server, tmp_path, reference):
    data = journal_from(reference[:4] + [terminal("suspended"), reference[4]])
    for bug, expect in ((None, "open"), ("status-stays-suspended", "suspended")):
        trial = Trial(model_server, tmp_path / str(bug))
        trial.write_journal(data)
        assert read_state(trial.journal).status == "open"
        assert trial.status(bug=bug) == {"status": expect, "records": 6, "last_seq": 6, "pending": ["toolu_7_1_0"],
                                         "next_iteration": 2}


def test_resume_reruns_answered_runs_the_answered_tool_of_a_pending_batch_again(model_server, tmp_path, reference):
    data = journal_from(reference[:3])  # meta, the 2-tool batch, the first tool's result
    for bug, attempts in ((None, {"toolu_7_0_1": 1, "toolu_7_1_0": 1}),
                          ("resume-reruns-answered", {"toolu_7_0_0": 1, "toolu_7_0_1": 1, "toolu_7_1_0": 1})):
        trial = Trial(model_server, tmp_path / str(bug))
        trial.write_journal(data)
        assert trial.status(bug=bug)["pending"] == ["toolu_7_0_1"]
        done = trial.run(trial.resume_argv(), bug=bug)
        assert done.returncode == 0, done.stderr
        assert {e["tool_use_id"]: e["attempt"] for e in trial.effects()} == attempts
        assert read_state(trial.journal).messages == expected_messages(SCRIPT)  # the journal stays right
