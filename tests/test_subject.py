"""harness.subject: the --subject prefix, its variables, a leg's environment and preload, the fork server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.subject.contract import default_subject, fork_server_enabled, parse_subject
from harness.runner.starter import LegStarter
from harness.subject.forkserver import ForkedProcess, ForkRefused, ForkServer
from harness.subject.profile import parse_profile
from harness.subject.preload import load_preload, preload_name

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
MUTANT_SUBJECT = [sys.executable, "-m", "harness.selftest.subject"]
#: A preload whose hook shows (it prints the Zen of Python): the preload's effect, seen from outside (tests/data).
VISIBLE = "zen_preload"
ZEN = "Beautiful is better than ugly."


def test_leading_name_value_words_of_a_subject_are_variables_for_every_leg():
    s = parse_subject("FISKJ_MUTANT=no-fsync X_Y='a b' python3 -m agent --quiet")
    assert s.argv == ("python3", "-m", "agent", "--quiet")
    assert s.extra_env == (("FISKJ_MUTANT", "no-fsync"), ("X_Y", "a b"))
    env = s.env(base={"PATH": "/bin"}, base_url="u", api_key="k", state_home="/s", ledger="/l", leg=0, trace=None)
    assert env["FISKJ_MUTANT"] == "no-fsync" and env["X_Y"] == "a b"


def test_a_subject_command_line_reads_back_the_same_subject():
    s = parse_subject(["A=1", "/opt/agent bin/run", "--x=y"])
    assert parse_subject(s.command_line()) == s
    assert s.command_line() == "A=1 '/opt/agent bin/run' --x=y"


def test_variables_without_a_command_are_refused_and_nothing_is_the_reference():
    with pytest.raises(ValueError, match="names no command"):
        parse_subject("A=1 B=2")
    assert parse_subject(None) == parse_subject("") == default_subject()


def test_the_mutant_subject_is_forked_like_the_reference_and_other_agents_are_not(monkeypatch):
    monkeypatch.delenv("FISKJ_HARNESS_FORKSERVER", raising=False)
    monkeypatch.delenv("FISKJ_PRELOAD", raising=False)
    monkeypatch.delenv("FISKJ_MUTANT", raising=False)
    assert fork_server_enabled(default_subject())
    assert fork_server_enabled(parse_subject(MUTANT_SUBJECT))
    assert not fork_server_enabled(parse_subject("python3 -m myagent"))
    assert default_subject().caps.fiskj_based and parse_subject(MUTANT_SUBJECT).caps.fiskj_based
    assert not parse_subject("python3 -m myagent").caps.fiskj_based


def test_a_leg_is_forked_only_when_the_fork_child_does_what_the_fresh_process_would(monkeypatch):
    monkeypatch.delenv("FISKJ_HARNESS_FORKSERVER", raising=False)
    mutant = parse_subject(MUTANT_SUBJECT)
    # the mutant subject with its preload named: the fork child imports it, as the subject would
    assert fork_server_enabled(mutant, {"FISKJ_PRELOAD": "m", "FISKJ_MUTANT": "x"})
    # a mutant named alone is resolved by the subject itself (harness.selftest): a fresh process
    assert not fork_server_enabled(mutant, {"FISKJ_MUTANT": "no-fsync"})
    assert not fork_server_enabled(parse_subject(["FISKJ_MUTANT=no-fsync", *MUTANT_SUBJECT]), {})
    # `python -m fiskj` never imports a preload: its legs are not forked when one is named
    assert not fork_server_enabled(default_subject(), {"FISKJ_PRELOAD": "m"})
    assert fork_server_enabled(default_subject(), {"FISKJ_MUTANT": "no-fsync"})
    assert not fork_server_enabled(default_subject(), {"FISKJ_HARNESS_FORKSERVER": "0"})


def test_the_preload_is_the_module_named_in_the_environment_imported_by_name_and_its_hook_called(monkeypatch):
    monkeypatch.syspath_prepend(str(DATA))
    assert preload_name({}) is None and preload_name({"FISKJ_PRELOAD": " "}) is None
    assert load_preload({}) is None
    env = {"FISKJ_PRELOAD": VISIBLE, "X_Y": "1"}
    assert load_preload(env) == VISIBLE and VISIBLE in sys.modules
    assert sys.modules[VISIBLE].CALLS[-1] == env                     # called with the child's environment
    with pytest.raises(ImportError):
        load_preload({"FISKJ_PRELOAD": "harness.no_such_module"})
    with pytest.raises(ImportError, match="no preload"):                # a module that is not a preload
        load_preload({"FISKJ_PRELOAD": "json.tool"})


def _env(**extra: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}{os.pathsep}{DATA}", **extra}


def test_the_mutant_subject_imports_its_preload_before_fiskj_runs():
    out = subprocess.run([*MUTANT_SUBJECT, "--help"], env=_env(FISKJ_PRELOAD=VISIBLE), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.index(ZEN) < out.stdout.index("usage:")
    plain = subprocess.run([*MUTANT_SUBJECT, "--help"], env=_env(), capture_output=True, text=True, timeout=60)
    assert plain.returncode == 0 and ZEN not in plain.stdout
    bad = subprocess.run([*MUTANT_SUBJECT, "--help"], env=_env(FISKJ_MUTANT="no-such-mutant"), capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "unknown mutant 'no-such-mutant'" in bad.stderr


def test_a_forked_leg_imports_its_preload_in_itself_only(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(DATA))
    server = ForkServer().start()
    try:
        legs = {}
        for name, env in (("preloaded", _env(FISKJ_PRELOAD=VISIBLE)), ("plain", _env())):
            out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
            proc = server.spawn(["--help"], env, stdin=None, stdout=str(out), stderr=str(err))
            assert proc.wait(timeout=30) == 0, err.read_text()
            legs[name] = out.read_text()
        assert legs["preloaded"].index(ZEN) < legs["preloaded"].index("usage:")
        assert ZEN not in legs["plain"]                       # the next leg of the same server: no preload
        missing = tmp_path / "missing"
        proc = server.spawn(["--help"], _env(FISKJ_PRELOAD="harness.no_such_module"), stdin=None,
                            stdout=str(missing) + ".out", stderr=str(missing) + ".err")
        assert proc.wait(timeout=30) == 1                     # a leg never runs without the preload it was given
        assert "harness.no_such_module" in Path(str(missing) + ".err").read_text()
    finally:
        server.close()


def test_a_forked_leg_starts_with_every_module_a_run_loads_lazily_already_imported(tmp_path, monkeypatch):
    # fiskj imports its HTTP client at the first model call and its store at the first journal open: a leg forked
    # from the server must find them imported (a leg that imports them pays 25-50 ms, most of a leg)
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent / "data"))
    server = ForkServer().start()
    try:
        out, err = tmp_path / "leg.out", tmp_path / "leg.err"
        proc = server.spawn(["--help"], _env(FISKJ_PRELOAD="loaded_modules"), stdin=None, stdout=str(out),
                            stderr=str(err))
        assert proc.wait(timeout=30) == 0, err.read_text()
    finally:
        server.close()
    loaded = set(json.loads(out.read_text().splitlines()[0]))
    assert {"fiskj.store", "fiskj.journal", "fiskj.loop", "http.client", "urllib.request", "email.utils"} <= loaded


#: A Python agent for the fork server's second mode: what it saw, then the exit its first argument asks for.
AGENT = """import atexit, os, sys
import envy
print(__name__, sys.argv[1:], os.environ.get("LEG"), sys.path[0] == os.path.dirname(os.path.realpath(__file__)),
      envy.AT_IMPORT, flush=True)
atexit.register(print, "atexit ran")
if sys.argv[1] == "fail":
    raise ValueError("boom")
sys.exit("bye" if sys.argv[1] == "text" else int(sys.argv[1]))
"""


def _agent(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A script agent and the server's environment: ``envy`` (pre-imported) reads $ENVY at import."""
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "envy.py").write_text("import os\nAT_IMPORT = os.environ.get('ENVY')\n")
    (mods / "threaded.py").write_text("import threading, time\nthreading.Thread(target=time.sleep, args=(30,), "
                                      "daemon=True, name='sleeper').start()\n")
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    return script, {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(mods), "ENVY": "a"}


def test_a_python_agent_s_forked_leg_runs_its_script_as_a_fresh_interpreter_would(tmp_path):
    script, env = _agent(tmp_path)
    server = ForkServer(sys.executable, agent=[str(script)], preimport=["envy"], env=env).start()
    try:
        for words in (["5"], ["0"], ["fail"], ["text"]):
            leg_env = {**env, "LEG": "-".join(words)}
            out, err = tmp_path / "leg.out", tmp_path / "leg.err"
            forked = server.spawn(words, leg_env, stdin=None, stdout=str(out), stderr=str(err))
            code = forked.wait(timeout=30)
            fresh = subprocess.run([sys.executable, str(script), *words], env=leg_env, capture_output=True, text=True,
                                   timeout=60)
            assert (code, out.read_text()) == (fresh.returncode, fresh.stdout), err.read_text()
            assert err.read_text().splitlines()[-1:] == fresh.stderr.splitlines()[-1:]
        assert code == 1 and "bye" in err.read_text()
        assert fresh.stdout.startswith("__main__ ['text'] text True a\n") and "atexit ran" in fresh.stdout
        # $ENVY was read at import: a leg with another value must not be forked (it would see the server's)
        with pytest.raises(ForkRefused, match="ENVY"):
            server.spawn(["0"], {**env, "ENVY": "b"}, stdin=None, stdout=str(out), stderr=str(err))
    finally:
        server.close()


def test_one_fork_server_forks_legs_side_by_side_from_one_import(tmp_path):
    """A campaign's threads share one server: the pre-imports ran once, it forks a leg while another runs (each
    leg here waits for the other: forked one at a time, the first would give up), every leg its child and as
    warm as it, and it refuses a leg where the pre-imports read the environment otherwise."""
    script, env = _agent(tmp_path)
    imports = tmp_path / "imports"
    (tmp_path / "mods" / "counted.py").write_text(f"open({str(imports)!r}, 'a').write('imported\\n')\n")
    script.write_text("import os, sys, time\nopen(sys.argv[1], 'w').close()\nend = time.monotonic() + 30\n"
                      "while not os.path.exists(sys.argv[2]):\n    if time.monotonic() > end: sys.exit(9)\n"
                      "    time.sleep(0.005)\nprint(os.getppid(), 'counted' in sys.modules)\n")
    server = ForkServer(sys.executable, agent=[str(script)], preimport=["envy", "counted"], env=env).start()
    try:
        marks = [str(tmp_path / "a.here"), str(tmp_path / "b.here")]
        legs = [server.spawn([marks[i], marks[1 - i]], env, stdin=None, stdout=str(tmp_path / f"{i}.out"),
                             stderr=str(tmp_path / f"{i}.err")) for i in (0, 1)]
        assert [leg.wait(timeout=60) for leg in legs] == [0, 0], [(tmp_path / f"{i}.err").read_text() for i in (0, 1)]
        parents = [(tmp_path / f"{i}.out").read_text().split() for i in (0, 1)]
        assert parents == [[str(server._proc.pid), "True"]] * 2             # the server's children, warm
        assert imports.read_text() == "imported\n"                         # the pre-imports ran once
        with pytest.raises(ForkRefused, match="ENVY"):
            server.spawn([], {**env, "ENVY": "b"}, stdin=None, stdout=str(tmp_path / "r.out"),
                         stderr=str(tmp_path / "r.err"))
        proc = server._proc
    finally:
        server.close()
    assert proc.poll() is not None and not server.running


def test_a_python_agent_s_fork_server_refuses_pre_imports_that_leave_a_thread_running(tmp_path):
    script, env = _agent(tmp_path)
    with pytest.raises(RuntimeError, match="threads running .sleeper."):
        ForkServer(sys.executable, agent=[str(script)], preimport=["threaded"], env=env).start()
    with pytest.raises(ValueError, match="SCRIPT or -m MODULE"):
        ForkServer(sys.executable, agent=["-c", "pass"])


def test_a_profile_s_python_agent_is_forked_unless_its_leg_differs_where_the_pre_imports_read(tmp_path, monkeypatch):
    script, env = _agent(tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("FISKJ_HARNESS_FORKSERVER", raising=False)
    subject = parse_profile(f'name = "py"\ncommand = ["{{python}}", "{script}"]\n[fork_server]\npreimport = ["envy"]\n',
                            str(tmp_path / "py.toml"))
    assert fork_server_enabled(subject) and not fork_server_enabled(subject, {"FISKJ_HARNESS_FORKSERVER": "0"})
    starter = LegStarter(subject, fork_server=True)
    try:
        procs = {}
        for envy in ("a", "b"):
            out, err = tmp_path / f"{envy}.out", tmp_path / f"{envy}.err"
            procs[envy] = proc = starter.start([sys.executable, str(script), "7"], {**env, "ENVY": envy}, None, out, err)
            assert proc.wait(30) == 7 and out.read_text().split("\n")[0].endswith(f"True {envy}"), err.read_text()
        assert isinstance(procs["a"], ForkedProcess) and not isinstance(procs["b"], ForkedProcess)
    finally:
        starter.close()


def test_the_contract_s_exit_statuses_are_fiskj_s_own():
    import fiskj.cli

    from harness import names
    from harness.subject import contract

    assert (names.EXIT_COMPLETED, names.EXIT_ERROR, names.EXIT_USAGE, names.EXIT_SUSPENDED) == \
        (fiskj.cli.EXIT_OK, fiskj.cli.EXIT_ERROR, fiskj.cli.EXIT_USAGE, fiskj.cli.EXIT_SUSPENDED) == (0, 1, 2, 3)
    assert contract.EXIT_SUSPENDED is names.EXIT_SUSPENDED                   # re-exported, not redefined


def test_a_starter_s_threads_share_its_fork_server_which_is_started_again_when_it_died(tmp_path):
    import threading

    starter = LegStarter(default_subject(), fork_server=True)
    got: dict[str, object] = {}

    def use(name: str) -> None:
        out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        proc = starter.start([*default_subject().argv, "--version"], dict(os.environ), None, out, err)
        got[name] = (type(proc), proc.wait(30), starter._fork)

    try:
        threads = [threading.Thread(target=use, args=(name,)) for name in "ab"]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        first = starter._fork
        assert got["a"] == got["b"] == (ForkedProcess, 0, first)
        first._proc.kill()
        first._proc.wait()
        use("c")  # a new server, not a leg lost
        assert got["c"][:2] == (ForkedProcess, 0) and got["c"][2] is not first and starter._fork.running
    finally:
        starter.close()
    assert starter._fork is None and not got["c"][2].running


def test_a_leg_too_long_for_the_fork_server_s_socket_starts_fresh(tmp_path):
    # A request is one socket message (at most the socket's send buffer, about 200 KiB): a longer leg is refused
    # as one whose environment the server cannot take, and its starter starts it fresh.
    env = {**os.environ, **{f"BIG{i}": "x" * 100_000 for i in range(3)}}
    starter = LegStarter(default_subject(), fork_server=True)
    try:
        with pytest.raises(ForkRefused, match="too long"):
            starter._server().spawn(["--version"], env, stdin=None, stdout=str(tmp_path / "f.out"),
                                    stderr=str(tmp_path / "f.err"))
        proc = starter.start([*default_subject().argv, "--version"], env, None, tmp_path / "o", tmp_path / "e")
        assert not isinstance(proc, ForkedProcess) and proc.wait(30) == 0, (tmp_path / "e").read_text()
    finally:
        starter.close()
