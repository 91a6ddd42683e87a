"""``fiskj run``: arguments, exit status, output, and real signals and kills (fiskj.cli_run)."""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import subprocess
import sys

import pytest

from fake_anthropic import FakeAnthropic, text, tool_use, turns
from fiskj import cli_run
from fiskj.errors import UsageError
from fiskj.reader import read_records, read_state
from fiskj.records import TerminalRecord, ToolResultRecord

SHIM = ("import sys, argparse; from fiskj import cli_run; p = argparse.ArgumentParser(prog='fiskj'); "
        "s = p.add_subparsers(); cli_run.register(s); a = p.parse_args(); sys.exit(a.func(a))")


def fiskj_argv():
    try:  # the full dispatcher once fiskj.cli_session exists
        import fiskj.cli_session  # noqa: F401
        return [sys.executable, "-m", "fiskj"]
    except ImportError:
        return [sys.executable, "-c", SHIM]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)


def cli(*argv, stdin=""):
    """Run ``fiskj run ARGV`` in-process; return (status, stdout, stderr)."""
    parser = argparse.ArgumentParser(prog="fiskj")
    cli_run.register(parser.add_subparsers())
    args = parser.parse_args(["run", *argv])
    out, err = io.StringIO(), io.StringIO()
    code = cli_run.run_command(args, out, err, io.StringIO(stdin))
    return code, out.getvalue(), err.getvalue()


def reasons(path):
    return [r.reason for r in read_records(path)[0] if isinstance(r, TerminalRecord)]


def test_help_documents_every_option_the_environment_and_the_exit_status():
    proc = subprocess.run([*fiskj_argv(), "run", "--help"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0
    for word in ("--checkpoint", "--name", "--resume", "--force", "--model", "--system", "--tools", "--max-tokens",
                 "--max-iterations", "--thinking", "--chat", "--base-url", "--store", "ANTHROPIC_API_KEY",
                 "ANTHROPIC_BASE_URL", "scripted:SEED[:TURNS]", "0 completed, 3 suspended, 1 error"):
        assert word in proc.stdout, word


@pytest.mark.parametrize("argv, needle", [
    ([], "PROMPT is required"),
    (["--force", "go"], "--force only applies"),
    (["--name", "n1", "go"], "--name needs --checkpoint"),
    (["--resume", "r1", "go"], "--resume takes no PROMPT"),
    (["--system", "absent.txt", "go"], "cannot read --system"),
    (["--thinking", "lots", "go"], "thinking mode"),
    (["--model", "scripted:x", "go"], "scripted:SEED"),
    (["--checkpoint", "--name", "../etc", "go"], "InvalidRunID"),
])
def test_a_usage_error_exits_2_with_one_typed_line(argv, needle):
    code, out, err = cli(*argv)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("fiskj run: ") and needle in err


def test_a_bad_tools_file_or_an_argument_of_the_wrong_type_exits_2(tmp_path, capsys):
    (tmp_path / "tools.json").write_text("{")
    assert cli("--tools", "tools.json", "go")[0] == 2
    with pytest.raises(SystemExit) as info:
        cli("--max-tokens", "0", "go")
    assert info.value.code == 2


def test_a_checkpointed_run_prints_its_id_on_stderr_and_the_answer_on_stdout(tmp_path):
    code, out, err = cli("--checkpoint", "--name", "r1", "--store", "st", "--model", "scripted:1:2", "count", "it")
    assert code == 0 and out.startswith("Answer at turn 2") and "run id: r1" in err.splitlines()[0]
    state = read_state(tmp_path / "st" / "r1.json")
    assert state.status == "completed" and state.prompt == "count it" and state.fingerprint.model == "scripted:1:2"


def test_without_a_model_a_key_or_a_server_run_is_a_usage_error_saying_what_to_pass(tmp_path):
    # Issue 15 item 2: this used to run the scripted model silently.
    for argv in (["hello"], ["--checkpoint", "--name", "r1", "hello"]):
        code, out, err = cli(*argv)
        assert (code, out) == (2, "") and len(err.splitlines()) == 1, err
        assert err.startswith("fiskj run: UsageError: ") and "--model NAME" in err and "ANTHROPIC_API_KEY" in err
        assert "--model scripted:0" in err
    assert not (tmp_path / "xdg").exists()
    with pytest.raises(UsageError, match="no --model given"):
        cli_run.default_model(None, {})
    assert cli_run.default_model(None, {"ANTHROPIC_API_KEY": "k"}) == cli_run.DEFAULT_MODEL
    assert cli_run.default_model(None, {"ANTHROPIC_BASE_URL": "http://x"}) == cli_run.DEFAULT_MODEL
    assert cli_run.default_model("http://x", {}) == cli_run.DEFAULT_MODEL
    code, out, err = cli("-q", "--model", "scripted:0", "hello")  # the demo model, when asked for
    assert (code, err) == (0, "") and out.startswith("Answer")


def test_a_completed_run_is_refused_on_resume_with_exit_2_and_nothing_appended(tmp_path):
    cli("--checkpoint", "--name", "r1", "--store", "st", "--model", "scripted:0", "go")
    before = (tmp_path / "st" / "r1.json").read_bytes()
    code, out, err = cli("--resume", "r1", "--store", "st")
    assert code == 2 and "ResumeRefused" in err and "'completed'" in err
    assert (tmp_path / "st" / "r1.json").read_bytes() == before


def test_a_changed_model_is_refused_naming_the_field_and_force_proceeds(tmp_path):
    code, _, _ = cli("--checkpoint", "--name", "r1", "--store", "st", "--max-iterations", "1", "--model", "scripted:0",
                     "go")
    assert code == 1  # scripted:0 calls tools for 3 turns: the cap of 1 ends it
    journal = tmp_path / "st" / "r1.json"
    assert reasons(journal) == ["max_iterations"]
    journal.write_bytes(journal.read_bytes().rsplit(b"\n", 2)[0] + b"\n")  # as if killed before the terminal
    before = journal.read_bytes()
    code, _, err = cli("--resume", "r1", "--store", "st", "--model", "scripted:0:0")
    assert code == 2 and "FingerprintMismatch" in err and "model: 'scripted:0' -> 'scripted:0:0'" in err
    assert len(err.strip().splitlines()) == 1 and journal.read_bytes() == before
    code, out, err = cli("--resume", "r1", "--store", "st", "--model", "scripted:0:0", "--max-iterations", "9",
                         "--force")
    assert code == 0 and out.startswith("Answer") and "resuming despite a changed configuration" in err
    assert reasons(journal) == ["completed"]


def test_resume_prints_a_short_replay_including_the_pending_batch(tmp_path):
    cli("--checkpoint", "--name", "r1", "--store", "st", "--max-iterations", "1", "--model", "scripted:0", "go")
    journal = tmp_path / "st" / "r1.json"
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join(lines[:2]))  # M, A: killed before its first tool returned
    code, out, err = cli("--resume", "r1", "--store", "st", "--max-iterations", "5")
    assert code == 2 and "max_iterations: 1 -> 5" in err  # the budgets default to the journal's ...
    code, out, err = cli("--resume", "r1", "--store", "st")
    replay = err.splitlines()
    assert replay[0].startswith("resuming run r1: open, 2 records, next iteration 1")
    assert "  user: go" in replay and any(line.startswith("  pending batch: 0 answered") for line in replay)
    assert code == 1 and reasons(journal) == ["max_iterations"]  # ... so the cap of 1 holds


def test_a_run_that_ended_on_its_cap_is_resumed_not_refused_and_a_forced_larger_cap_completes_it(tmp_path):
    # As fisk-ai: only a completed run is refused; every other end is one leg of the run.
    assert cli("--checkpoint", "--name", "r1", "--store", "st", "--max-iterations", "1", "--model", "scripted:0",
               "go")[0] == 1
    journal = tmp_path / "st" / "r1.json"
    code, out, err = cli("--resume", "r1", "--store", "st")
    assert code == 1 and "ResumeRefused" not in err and "resuming run r1: max_iterations" in err
    assert reasons(journal) == ["max_iterations", "max_iterations"]
    code, out, err = cli("--resume", "r1", "--store", "st", "--max-iterations", "9", "--force")
    assert code == 0 and out.startswith("Answer") and reasons(journal) == ["max_iterations"] * 2 + ["completed"]
    code, _, err = cli("--resume", "r1", "--store", "st", "--max-iterations", "9", "--force")
    assert code == 2 and "ResumeRefused" in err and "'completed'" in err


def test_budget_and_iteration_ends_exit_1(tmp_path):
    assert cli("--checkpoint", "--name", "b", "--store", "st", "--max-tokens", "10", "--model", "scripted:0",
               "go")[0] == 1
    assert reasons(tmp_path / "st" / "b.json") == ["budget"]
    code, _, err = cli("-q", "--max-iterations", "2", "--model", "scripted:0", "go")
    assert code == 1 and "ended: max_iterations" in err


def test_an_unknown_run_or_a_broken_store_is_one_error_line_with_exit_1(tmp_path):
    (tmp_path / "afile").write_text("x")
    for argv in (["--resume", "nope", "--store", "st"], ["--checkpoint", "--store", "afile", "--model", "scripted:0",
                                                         "go"]):
        code, out, err = cli(*argv)
        assert code == 1 and len(err.splitlines()) == 1 and "Traceback" not in err, err


def test_a_chat_run_journals_piped_follow_ups_and_suspends_at_end_of_input(tmp_path):
    code, out, err = cli("--checkpoint", "--name", "c1", "--store", "st", "--chat", "--model", "scripted:2:1", "hi",
                         stdin="tell me more\n")
    assert code == 3 and len(out.splitlines()) == 2 and "tell me more" in out.splitlines()[1]
    assert "resume with: fiskj run --resume c1 --store st" in err
    state = read_state(tmp_path / "st" / "c1.json")
    assert state.interactive and state.status == "suspended"
    assert state.messages[-2]["content"] == [text("tell me more")]
    code, out, err = cli("--resume", "c1", "--store", "st", stdin="and more\n")
    state = read_state(tmp_path / "st" / "c1.json")
    assert code == 3 and "and more" in out and state.messages[-2]["content"] == [text("and more")]


def test_a_model_server_that_keeps_failing_ends_the_run_with_error_after_its_retries_and_a_resume_continues(tmp_path):
    # Issue 15 item 1 (docs/spec.md section 17): 2 retries, waiting what retry-after-ms asks (1 ms here).
    with FakeAnthropic(lambda body: (500, b"boom", {"retry-after-ms": "1"})) as server:
        code, out, err = cli("--checkpoint", "--name", "e1", "--store", "st", "--base-url", server.url,
                             "--model", "m1", "go")
        assert len(server.requests) == 3
    assert code == 1 and "HTTP 500" in err and "gave up after 2 retries" in err
    assert "retry 1 of 2 in 0.00 s" in err and "resume with: fiskj run --resume e1 --store st" in err
    assert reasons(tmp_path / "st" / "e1.json") == ["error"]
    with FakeAnthropic(turns([line("a")])) as server:
        code, out, err = cli("--resume", "e1", "--store", "st", "--base-url", server.url)
    assert code == 0 and out == "done after 1 turns\n"
    assert reasons(tmp_path / "st" / "e1.json") == ["error", "completed"]


def test_an_overloaded_server_is_retried_and_the_run_completes(tmp_path):
    answers = [(529, b'{"type":"error","error":{"type":"overloaded_error"}}', {"retry-after": "0.001"}),
               (503, b"busy", {"retry-after-ms": "1"})]
    reply_to = turns([line("a")])
    with FakeAnthropic(lambda body: answers.pop(0) if answers else reply_to(body)) as server:
        code, out, err = cli("--checkpoint", "--name", "o1", "--store", "st", "--base-url", server.url,
                             "--model", "m1", "go")
        assert len(server.requests) == 4
    assert code == 0 and out == "done after 1 turns\n" and reasons(tmp_path / "st" / "o1.json") == ["completed"]
    assert [r.key for r in read_records(tmp_path / "st" / "o1.json")[0]].count("assistant") == 2


def test_max_retries_0_does_not_retry(tmp_path):
    with FakeAnthropic(lambda body: (529, b"overloaded")) as server:
        code, _, err = cli("-q", "--base-url", server.url, "--model", "m1", "--max-retries", "0", "go")
        assert code == 1 and len(server.requests) == 1 and "HTTP 529" in err and "gave up" not in err


def test_running_out_of_memory_on_resume_is_one_line_saying_how_to_resume_and_changes_nothing(tmp_path, monkeypatch):
    import fiskj.fold

    cli("--checkpoint", "--name", "r1", "--store", "st", "--max-iterations", "1", "--model", "scripted:0", "go")
    journal = tmp_path / "st" / "r1.json"
    before = journal.read_bytes()
    real = fiskj.fold.Folder.add

    def add(self, record):
        raise MemoryError()

    monkeypatch.setattr(fiskj.fold.Folder, "add", add)
    code, out, err = cli("--resume", "r1", "--store", "st")
    assert (code, out) == (1, "") and err == ("fiskj run: MemoryError: out of memory; the journal keeps every "
                                              "acknowledged record: resume with: fiskj run --resume r1 --store st\n")
    assert journal.read_bytes() == before
    monkeypatch.setattr(fiskj.fold.Folder, "add", real)
    code, _, err = cli("--resume", "r1", "--store", "st", "--max-iterations", "9", "--force")
    assert code == 0 and reasons(journal) == ["max_iterations", "completed"]


def test_an_answer_holding_a_lone_surrogate_is_printed_as_its_escape_and_output_goes_on(tmp_path):
    # A model's JSON may hold "\\ud800"; a UTF-8 stdout cannot: it used to break all later output.
    with FakeAnthropic(lambda body: {**reply_text("half \ud800 a pair")}) as server:
        parser = argparse.ArgumentParser(prog="fiskj")
        cli_run.register(parser.add_subparsers())
        args = parser.parse_args(["run", "-q", "--base-url", server.url, "--model", "m1", "go"])
        raw = io.BytesIO()
        out = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
        assert cli_run.run_command(args, out, io.StringIO(), io.StringIO()) == 0
    assert raw.getvalue() == b"half \\ud800 a pair\n"


def reply_text(value):
    from fake_anthropic import reply

    return reply([text(value)])


# --- real processes, real signals ------------------------------------------------------------


def gate_tools(tmp_path):
    """Tools file with ``gate``: appends 'g' to effects.log, and on its first run only, reports on the
    FIFO ``started`` and blocks until a line arrives on the FIFO ``go`` (a sequence point for the test)."""
    os.mkfifo(tmp_path / "started")
    os.mkfifo(tmp_path / "go")
    code = (f"import os; d={str(tmp_path)!r}; open(d+'/effects.log','a').write('g\\n'); m=d+'/gate.marker'\n"
            "if not os.path.exists(m):\n"
            "    open(m,'w').close(); open(d+'/started','w').write('x'); open(d+'/go').read()\n"
            "print('gate passed', end='')")
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([{"name": "gate", "description": "waits for the test", "input_schema":
                                 {"type": "object"}, "command": [sys.executable, "-c", code]}]))
    return str(path)


def line(tid):
    return tool_use(tid, "append_line", {"path": "effects.log", "line": tid})


def effects(tmp_path):
    lines = (tmp_path / "effects.log").read_text().split()
    return {k: lines.count(k) for k in sorted(set(lines))}


def spawn(tmp_path, *argv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    return subprocess.Popen([*fiskj_argv(), "run", "--store", "st", *argv], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_ctrl_c_mid_tool_lets_the_batch_finish_then_suspends_and_resume_completes(tmp_path):
    tools = gate_tools(tmp_path)
    with FakeAnthropic(turns([tool_use("g1", "gate"), line("a")], [line("b")])) as server:
        agent = spawn(tmp_path, "--checkpoint", "--name", "r1", "--base-url", server.url, "--model", "m1",
                      "--tools", tools, "go")
        assert open(tmp_path / "started").read() == "x"  # the agent is inside the gate tool
        os.killpg(agent.pid, signal.SIGINT)  # Ctrl-C reaches the agent's process group ...
        os.killpg(agent.pid, signal.SIGINT)  # ... twice
        with open(tmp_path / "go", "w") as go:
            go.write("x\n")
        out, err = agent.communicate(timeout=30)
        assert agent.returncode == 3, err
        journal = tmp_path / "st" / "r1.json"
        kinds = [r.tool_use_id if isinstance(r, ToolResultRecord) else r.key for r in read_records(journal)[0]]
        assert kinds == ["meta", "assistant", "g1", "a", "terminal"] and reasons(journal) == ["suspended"]
        resumed = spawn(tmp_path, "--resume", "r1", "--base-url", server.url, "--tools", tools)
        out, err = resumed.communicate(timeout=30)
        assert resumed.returncode == 0, err
        assert out == "done after 2 turns\n" and "resuming run r1" in err
        assert [len(r["messages"]) for r in server.requests] == [1, 3, 5]  # no model call repeated
    assert effects(tmp_path) == {"a": 1, "b": 1, "g": 1}  # no tool run twice


def test_a_kill_between_two_tools_of_a_batch_reruns_only_the_unanswered_ones_on_resume(tmp_path):
    tools = gate_tools(tmp_path)
    with FakeAnthropic(turns([line("a"), tool_use("g1", "gate"), line("c")])) as server:
        agent = spawn(tmp_path, "--checkpoint", "--name", "r1", "--base-url", server.url, "--model", "m1",
                      "--tools", tools, "go")
        assert open(tmp_path / "started").read() == "x"
        os.kill(agent.pid, signal.SIGKILL)  # only the agent: the gate lives on in its own group
        agent.communicate(timeout=30)
        with open(tmp_path / "go", "w") as go:  # release the orphaned gate
            go.write("x\n")
        journal = tmp_path / "st" / "r1.json"
        assert [type(r).__name__ for r in read_records(journal)[0]] == ["MetaRecord", "AssistantRecord",
                                                                         "ToolResultRecord"]
        resumed = spawn(tmp_path, "--resume", "r1", "--base-url", server.url, "--tools", tools)
        out, err = resumed.communicate(timeout=30)
        assert resumed.returncode == 0, err
        assert [len(r["messages"]) for r in server.requests] == [1, 3]
        assert [b["tool_use_id"] for b in server.requests[1]["messages"][-1]["content"]] == ["a", "g1", "c"]
    assert effects(tmp_path) == {"a": 1, "c": 1, "g": 2}  # F10: a kept, g (in flight) re-run, c run once


def test_a_reader_that_goes_away_does_not_end_the_run_with_an_error(tmp_path):
    # `fiskj run ... | head -0`: stdout breaks at the first answer; the run must still complete.
    import subprocess
    import sys

    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    cmd = [sys.executable, "-m", "fiskj", "run", "--checkpoint", "--name", "pipe", "--model", "scripted:1:3", "hi"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.close()   # the reader is gone before anything is written
    proc.stderr.close()
    assert proc.wait(timeout=60) == 0
    from fiskj.store import FileStore

    assert FileStore(str(tmp_path / "fisk-ai" / "runs")).load("pipe").status == "completed"


def test_an_empty_run_name_or_resume_id_is_a_usage_error(tmp_path, capsys):
    from fiskj.cli import main

    assert main(["run", "--store", str(tmp_path), "--checkpoint", "--name", "", "hi"]) == 2
    assert "InvalidRunID" in capsys.readouterr().err
    assert main(["run", "--store", str(tmp_path), "--resume", ""]) == 2
    assert "InvalidRunID" in capsys.readouterr().err


def test_a_ctrl_c_while_the_run_is_being_set_up_suspends_it_at_its_first_boundary(tmp_path, monkeypatch, capsys):
    # Before, the default handler was in place until the loop started: a traceback or exit 1.
    import signal

    from fiskj import cli_run
    from fiskj.cli import main
    from fiskj.reader import read_state

    real = cli_run.make_registry

    def interrupted(*a, **kw):
        os.kill(os.getpid(), signal.SIGINT)  # delivered now, while the command sets up
        return real(*a, **kw)

    monkeypatch.setattr(cli_run, "make_registry", interrupted)
    status = main(["run", "--store", str(tmp_path), "--checkpoint", "--name", "early", "--model", "scripted:1", "hi"])
    assert status == 3, capsys.readouterr().err
    state = read_state(tmp_path / "early.json")
    assert state.status == "suspended" and state.counters.llm_calls == 0


def test_fiskj_version_is_the_package_version(capsys):
    import fiskj
    from fiskj.cli import main
    assert main(["--version"]) == 0 and capsys.readouterr().out.strip() == f"fiskj {fiskj.__version__}"


def test_a_resume_hint_never_prints_the_store_s_password_and_quotes_the_url():
    hint = cli_run._store_arg(argparse.Namespace(store="nats://alice:s3cret@127.0.0.1:4222/RUNS?allow_single_replica=1"))
    assert "s3cret" not in hint and hint == " --store 'nats://alice:***@127.0.0.1:4222/RUNS?allow_single_replica=1'"
    assert cli_run._store_arg(argparse.Namespace(store="st")) == " --store st"
    assert cli_run._store_arg(argparse.Namespace(store=None)) == ""
