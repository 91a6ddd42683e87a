"""Subject profiles (docs/subject.md "Subject profiles"): parsing, errors, templates, exits, journals."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from builders import M, T, journal

from harness.errors import ProfileError, SetupError
from harness.history.promises import FISK_AI, Promises
from harness.names import EXIT_COMPLETED, EXIT_ERROR, EXIT_SUSPENDED, EXIT_USAGE
from harness.subject.contract import RunConfig, default_subject, fork_server_enabled
from harness.subject.profile import bundled_profiles, load_profile, module_shadowed, parse_profile, resolve_subject

ROOT = Path(__file__).resolve().parent.parent
CFG = RunConfig(run_id="r1", model="m", base_url="http://127.0.0.1:9", tools_file="/t.json", max_tokens=100,
                max_iterations=5, prompt="do it", chat=True)

FISK_AI_LIKE = '''
name = "cli-agent"
command = ["{profile_dir}/bin/agent", "--quiet"]
home = true
chat = false

[env]
AGENT_OFFLINE = "1"
NODE_EXTRA_CA_CERTS = false

[commands]
start = ["run", "--name", "{run_id}", "--config", "{home}/agent.json", "--", "{prompt}"]
resume = ["run", "--resume", "{run_id}", "{force_args}", "--", "{resume_prompt}"]
force_args = ["--force", "--yes"]
resume_prompt = "continue where you left off"

[exit]
completed = [0]
suspended = [0]
error = [1]
refused = [1]
error_stdout = '"is_error":\\s*true'

[journal]
path = "{home}/.local/state/agent/{run_id}.jsonl"

[reading]
command = ["show", "{run_id}"]
status = "state.status"

[not_applicable]
I1 = "the agent has no suspend"

[promises]
resume_completed = "new-turn"
suspend_signals = ["SIGINT"]
interrupted_tool = "reported"
'''


def test_every_bundled_profile_loads_and_the_reference_profile_is_the_default_subject():
    paths = bundled_profiles()
    assert {p.relative_to(ROOT / "subjects").as_posix() for p in paths} >= {"reference.toml", "node/profile.toml",
                                                                           "fisk-ai/profile.toml"}
    for path in paths:
        assert load_profile(path).name
    ref, default = load_profile(ROOT / "subjects" / "reference.toml"), default_subject()
    assert ref.argv == default.argv and ref.is_reference
    assert ref.start_argv(CFG) == default.start_argv(CFG)
    assert ref.resume_argv(CFG, force=True) == default.resume_argv(CFG, force=True)
    assert ref.status_argv(CFG) == default.status_argv(CFG)
    assert ref.journal_path(CFG, state_home="/s") == Path("/s/fisk-ai/runs/r1.json")


def test_templates_splice_optional_words_and_fill_the_trial_s_values(tmp_path):
    s = parse_profile(FISK_AI_LIKE, str(tmp_path / "agent.toml"))
    assert s.argv == (str(tmp_path / "bin" / "agent"), "--quiet") and s.label == "cli-agent"
    assert s.start_argv(CFG)[2:] == ["run", "--name", "r1", "--config", "/agent.json", "--", "do it"]
    assert s.resume_argv(CFG)[2:] == ["run", "--resume", "r1", "--", "continue where you left off"]
    assert s.resume_argv(CFG, force=True)[2:6] == ["run", "--resume", "r1", "--force"]
    assert s.journal_path(CFG, state_home="/s", home="/h") == Path("/h/.local/state/agent/r1.jsonl")
    env = s.env(base={"NODE_EXTRA_CA_CERTS": "/x", "PATH": "/bin"}, base_url="u", api_key="k", state_home="/s",
                ledger="/l", leg=0, trace=None, home="/h")
    assert "NODE_EXTRA_CA_CERTS" not in env and env["AGENT_OFFLINE"] == "1" and env["HOME"] == "/h"
    assert dict(s.not_applicable) == {"I1": "the agent has no suspend"} and not s.chat


OWN_IDS = '''
name = "own-ids"
command = ["{env:OWN_AGENT_BIN}", "--print"]
home = true
cwd = "{trial_dir}/work"
[env]
TMPDIR = "{tmp_dir}"
CFG = '{{"dir": "{home}/cfg"}}'
[mcp]
transport = "http"
config = "{trial_dir}/m.json"
[commands]
start = ["-p", "{prompt}", "--session-id", "{run_uuid}", "--mcp-config", "{mcp_config}", "--tools", "{mcp_tools}"]
resume = ["--resume", "{run_uuid}", "--url", "{mcp_url}"]
[journal]
path = "{home}/.agent/projects/{cwd_slug}/{run_uuid}.jsonl"
format = "jsonl"
'''


def test_a_profile_gives_the_agent_its_own_id_cwd_env_and_mcp_tools(tmp_path, monkeypatch):
    s = parse_profile(OWN_IDS, str(tmp_path / "p.toml"))
    where = s.trial_where(tmp_path / "t")
    uid, t = where["run_uuid"], str(tmp_path / "t")
    assert all((tmp_path / "t" / d).is_dir() for d in ("home", "state", "tmp", "work"))
    assert where["cwd"] == f"{t}/work" and where["cwd_slug"] == f"{t}/work".replace("/", "-").replace("_", "-")
    assert s.trial_where(tmp_path / "u")["run_uuid"] != uid and s.trial_where(tmp_path / "u", uid)["run_uuid"] == uid
    assert s.tool_name == "mcp__fiskj__{tool}" and where["mcp_tools"].split(",")[0] == "mcp__fiskj__effect_a"
    monkeypatch.delenv("OWN_AGENT_BIN", raising=False)
    with pytest.raises(SetupError, match=r"reads \$OWN_AGENT_BIN, which is not set"):
        s.start_argv(CFG, **where)
    monkeypatch.setenv("OWN_AGENT_BIN", "")  # `VAR=$UNSET_VAR profile.toml`: an empty program path, refused
    with pytest.raises(SetupError, match=r"reads \$OWN_AGENT_BIN, which is set empty"):
        s.start_argv(CFG, **where)
    monkeypatch.setenv("OWN_AGENT_BIN", "/opt/agent")
    assert s.start_argv(CFG, **where) == ["/opt/agent", "--print", "-p", "do it", "--session-id", uid, "--mcp-config",
                                          f"{t}/m.json", "--tools", where["mcp_tools"]]
    assert s.resume_argv(CFG, **where, mcp_url="http://h/mcp")[-3:] == [uid, "--url", "http://h/mcp"]
    journal_path = s.journal_path(CFG, **where)
    assert journal_path == Path(f"{t}/home/.agent/projects/{where['cwd_slug']}/{uid}.jsonl")
    assert s.caps.journal.is_journal(str(journal_path), "r1")
    assert not s.caps.journal.is_journal(f"{journal_path.parent}/{uid}/sub/x.jsonl", "r1")
    env = s.env(base={"PATH": "/bin"}, base_url="u", api_key="k", state_home="/s", ledger="/l", leg=0, trace=None,
                values=s.values(CFG, **where))
    assert env["TMPDIR"] == f"{t}/tmp" and env["CFG"] == f'{{"dir": "{t}/home/cfg"}}'


def test_an_exit_status_of_several_outcomes_is_decided_by_the_journal(tmp_path):
    s = parse_profile(FISK_AI_LIKE, str(tmp_path / "agent.toml"))
    before = journal(M(), T("suspended"))
    assert s.outcome(0, before, before + b"") == EXIT_SUSPENDED  # (unchanged bytes, but 0 is not a refusal)
    assert s.outcome(0, None, journal(M(), T("completed"))) == EXIT_COMPLETED
    assert s.outcome(1, before, before) == EXIT_USAGE              # nothing appended: refused
    assert s.outcome(1, before, journal(M(), T("suspended"), T("error"), start=1)) == EXIT_ERROR
    assert s.outcome(7, before, before) == 7 and s.outcome(None, before, before) is None
    plain = default_subject()
    assert [plain.outcome(c, None, None) for c in (0, 1, 2, 3)] == [0, 1, 2, 3]
    done = journal(M(), T("completed"))   # exit 0 with an error result on stdout is an error ([exit] error_stdout)
    assert s.outcome(0, None, done, '{"type":"result","is_error": true}') == EXIT_ERROR
    assert s.outcome(0, None, done, '{"type":"result","is_error":false}') == EXIT_COMPLETED
    assert plain.outcome(0, None, done, '{"is_error":true}') == EXIT_COMPLETED


def test_promises_are_declared_in_their_own_table_and_fisk_ai_s_when_absent(tmp_path):
    s = parse_profile(FISK_AI_LIKE, str(tmp_path / "agent.toml"))
    assert s.promises == Promises("new-turn", ("SIGINT",), "reported")
    assert parse_profile(FISK_AI_LIKE.split("[promises]")[0], str(tmp_path / "a.toml")).promises == FISK_AI
    assert default_subject().promises == FISK_AI and default_subject().error_stdout == ""
    assert default_subject().semantics == ("resume of a completed run: refuse; suspend on SIGINT, SIGTERM; interrupted "
                                           "tool: rerun-at-most-once; exit: completed 0, suspended 3, error 1, refused 2")
    assert s.semantics.endswith("refused 1 (completed with stdout matching '\"is_error\":\\\\s*true': error)")


def test_a_subject_value_may_name_a_profile_after_variables():
    path = ROOT / "subjects" / "node" / "profile.toml"
    s = resolve_subject(f"FISKJ_FOREIGN_BUG=no-fsync {path}")
    assert s.name == "node-agent" and ("FISKJ_FOREIGN_BUG", "no-fsync") in s.extra_env
    assert resolve_subject(s.command_line()) == s and s.spec() == str(path)
    assert resolve_subject(f"{sys.executable} -m fiskj").is_reference


@pytest.mark.parametrize("edit, key, message", [
    (("[exit]", "[exits]"), "exits", "unknown key"),
    (('resume_prompt = "continue where you left off"', 'resume_promt = "x"'), "commands.resume_promt", "unknown key"),
    (('"--name", "{run_id}"', '"--name", "{runid}"'), "commands.start", "unknown template variable"),
    (('path = "{home}/.local', 'path = "/var/lib/agent/{run_id}'), "journal.path", "trial's directories"),
    (("home = true", "home = false"), "journal.path", "needs home = true"),
    (('I1 = "the agent has no suspend"', 'I42 = "x"'), "not_applicable.I42", "unknown invariant"),
    (("refused = [1]", "refused = [1, \"2\"]"), "exit.refused", "list of exit statuses"),
    (('NODE_EXTRA_CA_CERTS = false', 'NODE_EXTRA_CA_CERTS = 3'), "env.NODE_EXTRA_CA_CERTS", "false (remove it)"),
    (('status = "state.status"', 'records = "n"'), "reading.status", "missing"),
    (('command = ["{profile_dir}', 'command = ["{run_id}'), "command", "may only use"),
    (('status = "state.status"', 'status = "state.status"\nformat = "xml"'), "reading.format", 'expected "json" or "text"'),
    (('status = "state.status"', "format = \"text\"\nstatus = '^Status: (\\S+)'"), "reading.status", "names no group"),
    (('status = "state.status"', "format = \"text\"\nstatus = '(?P<value>(('"), "reading.status", "bad regular expression"),
    (('name = "cli-agent"', 'name = "cli-agent" ='), None, "TOML syntax error"),
    (('{run_id}.jsonl"', '{run_id}.jsonl"\nformat = "yaml"'), "journal.format", "unsupported journal format"),
    (('{run_id}.jsonl"', '{run_id}.jsonl"\nformat = "jsonl"'), "reading", "needs journal format 'fisk-ai-v2'"),
    (('"new-turn"', '"continue"'), "promises.resume_completed", "expected one of refuse, new-turn, no-op"),
    (('["SIGINT"]', '["SIGHUP"]'), "promises.suspend_signals", "those that suspend cleanly"),
    (('name = "cli-agent"', 'name = "cli-agent"\ntime_scale = 0.5'), "time_scale", "a number from 1 to 20"),
    (('"reported"', '"never"'), "promises.interrupted_tool", "rerun-at-most-once, rerun-step, reported"),
    (("error_stdout = '", "error_stdout = '(("), "exit.error_stdout", "regular expression"),
    (('I1 = "the agent has no suspend"', 'I1 = "x"\n[mcp]\ntransport = "pigeon"'), "mcp.transport", "'pigeon'"),
    (('I1 = "the agent has no suspend"', 'I1 = "x"\n[mcp]\ntool_name = "a{tool}{tool}"'), "mcp.tool_name", "exactly once"),
    (('AGENT_OFFLINE = "1"', 'AGENT_OFFLINE = "{env}"'), "env.AGENT_OFFLINE", "unknown template variable"),
    (('"--name", "{run_id}"', '"--name", "{model:x}"'), "commands.start", "unknown template variable"),
    (('I1 = "the agent has no suspend"', 'I1 = "x"\n[jetstream]\nreplicas = 2'), "jetstream.replicas", "expected 1 or 3"),
    (('I1 = "the agent has no suspend"', 'I1 = "x"\n[fork_server]\npreimport = ["a b"]'), "fork_server.preimport",
     "list of module names"),
    (('I1 = "the agent has no suspend"', 'I1 = "x"\n[jetstream]\nsync_interval = "2m"'), "jetstream.sync_interval",
     '"default" or "always"'),
    (('command = ["show", "{run_id}"]',
      'command = ["{profile_dir}/bin/agent", "--quiet", "show", "{run_id}"]'),
     "reading.command", "starts with the profile's command"),
])
def test_a_bad_profile_is_a_typed_error_naming_file_line_and_key(tmp_path, edit, key, message):
    path = tmp_path / "bad.toml"
    path.write_text(FISK_AI_LIKE.replace(*edit))
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    err = info.value
    assert message in str(err) and str(path) in str(err)
    if key is not None:
        assert err.key == key and err.line is not None
        wanted = ("[reading]" if message == "missing" or key == "reading"
                  else edit[1].split("\n")[-1].split("=")[0].strip().strip("[]\""))
        assert wanted in path.read_text().splitlines()[err.line - 1]


def test_a_fork_server_is_for_a_python_agent_s_script_or_module(tmp_path):
    """[fork_server] (docs/subject.md "Fork servers"): the modules named, and a command the server can run."""
    for command in ('["{python}", "{profile_dir}/agent.py"]', '["{python}", "-m", "agent"]'):
        subject = parse_profile(f'name = "py"\ncommand = {command}\n[fork_server]\npreimport = ["json", "email.utils"]\n',
                                str(tmp_path / "py.toml"))
        assert subject.fork_server == ("json", "email.utils") and subject.caps.forkable
    assert parse_profile('name = "py"\ncommand = ["{python}", "agent.py"]\n', "p.toml").fork_server is None
    with pytest.raises(ProfileError, match=r"\[PYTHON, SCRIPT\]") as info:
        parse_profile('name = "node"\ncommand = ["node", "agent.mjs", "--x"]\n[fork_server]\npreimport = ["x"]\n',
                      str(tmp_path / "node.toml"))
    assert info.value.key == "command"


def test_a_missing_profile_file_is_a_typed_error(tmp_path):
    with pytest.raises(ProfileError, match="no such profile file"):
        load_profile(tmp_path / "nope.toml")


def test_a_misspelt_profile_key_or_invariant_is_refused_with_the_closest_known_one(tmp_path):
    from harness.errors import ProfileError, SetupError
    from harness.subject.profile import load_profile

    for text, hint in (('name = "x"\ncommand = ["a"]\n[comands]\n', "did you mean 'commands'"),
                       ('name = "x"\ncommand = ["a"]\n[commands]\nresum = ["run"]\n', "did you mean 'resume'"),
                       ('name = "x"\ncommand = ["a"]\n[not_applicable]\nI12 = "why"\n', "did you mean")):
        path = tmp_path / "p.toml"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ProfileError, match=hint):
            load_profile(path)


def test_a_reproducer_names_a_profile_once_with_the_variables_its_templates_read_and_not_its_own_env(monkeypatch):
    from harness.subject.profile import resolve_subject

    monkeypatch.setenv("FISKJ_CLAUDE_CODE", "/opt/cc/claude")
    s = resolve_subject("X_Y=1 subjects/claude-code/profile.toml")
    line = s.command_line()
    assert line.startswith("X_Y=1 FISKJ_CLAUDE_CODE=/opt/cc/claude ") and line.endswith("/claude-code/profile.toml")
    assert "TMPDIR" not in line and line.count("=") == 2, line
    again = resolve_subject(line)                     # a replay of the reproducer: the same subject, nothing twice
    assert again.command_line() == line and again.profile_env == s.profile_env
    env = again.env(base_url="u", api_key="k", state_home="/s", ledger="/l/ledger", leg=0, trace=None,
                    values={"tmp_dir": "/t/tmp"})
    assert env["TMPDIR"] == "/t/tmp" and env["X_Y"] == "1" and env["FISKJ_CLAUDE_CODE"] == "/opt/cc/claude"


OPAQUE_STORE = '''
name = "graph-agent"
command = ["{profile_dir}/agent"]

[journal]
format = "opaque"
path = "{state_home}/graph"

[reading]
command = ["status", "{run_id}"]
status = "run.status"
tool_results = "tool_results"
answer = "answer"

[promises]
durable = "process-crash"
'''


@pytest.mark.parametrize("edit, key, message", [
    (('answer = "answer"\n', ''), "reading.answer", "missing"),
    (('answer = "answer"', 'answer = "answer"\npending = "p"'), "reading.pending", "takes no reading field"),
    (('answer = "answer"', 'answer = 3'), "reading.answer", "dotted path"),
    (('"process-crash"', '"fire"'), "promises.durable", "power-loss, process-crash"),
    (('"{state_home}/graph"', '"{state_home}/graph/*.db"'), "journal.path", "takes no *"),
    (('[reading]', '[other]'), "other", "unknown key"),
])
def test_an_opaque_store_is_a_directory_seen_through_its_reading_and_its_mistakes_are_named(tmp_path, edit, key,
                                                                                             message):
    path = tmp_path / "opaque.toml"
    path.write_text(OPAQUE_STORE)
    s = load_profile(path)
    assert s.journal_format == "opaque" and s.caps.journal.is_store and s.caps.reading
    assert s.status_fields == (("status", "run.status"), ("tool_results", "tool_results"), ("answer", "answer"))
    assert s.promises.durable == "process-crash" and Promises().durable == "power-loss"
    assert dict(s.caps.not_applicable)["I10"].startswith("its store is opaque")
    assert any(line.startswith("journal format opaque") for line in s.caps.limits())
    path.write_text(OPAQUE_STORE.replace(*edit))
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert message in str(info.value) and info.value.key == key and info.value.line is not None
    path.write_text(OPAQUE_STORE.split("[reading]")[0])
    with pytest.raises(ProfileError, match="needs a \\[reading\\]") as info:
        load_profile(path)
    assert info.value.key == "journal.format"


def _venv(root: Path) -> Path:
    """A virtual environment of this interpreter, no pip (its bin/python links to the base interpreter)."""
    import venv

    venv.create(root, with_pip=False, symlinks=True)
    return root / "bin" / "python"


def test_another_venvs_python_running_fiskj_is_not_the_reference_and_is_never_forked(tmp_path):
    """A venv's python resolves to the same interpreter file as the harness's, yet runs its own site-packages:
    a user's copy of fiskj installed there must run as itself (fresh legs, named in reports and reproducers)."""
    other = _venv(tmp_path / "v")
    assert os.path.realpath(other) == os.path.realpath(sys.executable)  # what used to make it "this python"
    mine = resolve_subject(f"{other} -m fiskj")
    assert not mine.is_reference and not mine.caps.forkable and not fork_server_enabled(mine)
    assert mine.caps.fiskj_based  # still read through fiskj's own reading command
    assert resolve_subject(f"{sys.executable} -m fiskj").is_reference


def test_a_module_the_working_folder_shadows_is_refused_before_any_trial(tmp_path, monkeypatch):
    other = _venv(tmp_path / "v")
    site = next((tmp_path / "v" / "lib").glob("python3*/site-packages"))
    (site / "shadowme.py").write_text("")
    (tmp_path / "work" / "shadowme").mkdir(parents=True)
    (tmp_path / "work" / "shadowme" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path / "work")
    with pytest.raises(ValueError, match=r"imports shadowme from .*work/shadowme/__init__.py .* not the shadowme its "
                                         r"environment holds \(.*site-packages/shadowme.py\)"):
        resolve_subject(f"{other} -m shadowme")
    monkeypatch.chdir(tmp_path)  # nothing of that name here: the environment's copy runs
    assert resolve_subject(f"{other} -m shadowme").argv[2] == "shadowme"
    assert module_shadowed(resolve_subject(f"{other} -m shadowme"), cwd=str(tmp_path / "work"))


def test_a_subject_folder_is_refused_naming_the_profiles_in_it(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "variant.toml").write_text("")
    (tmp_path / "mine" / "profile.toml").write_text("")
    with pytest.raises(ValueError, match=r"mine is a folder; --subject takes a profile file \(in it: profile.toml, "
                                         r"variant.toml; e.g. .*mine/profile.toml\)"):
        resolve_subject(str(tmp_path / "mine"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"empty is a folder; --subject takes a profile file \(PROFILE.toml\) or a"):
        resolve_subject(str(tmp_path / "empty"))
