"""Coverage, measured (issue 15): pyproject.toml's ``[tool.coverage.run]`` measures the code that runs inside agent legs.

``make coverage`` (scripts/coverage.sh, tests/README.md "Coverage") runs the suite under that configuration.
These tests prove, cheaply, that a leg's own lines reach the data.  One child process runs this file's
:func:`drive` under ``coverage run`` with the project's configuration (only the data file moved to a temporary
folder): as the harness does for the reference agent, it starts a fork server
(:class:`harness.subject.forkserver.ForkServer`, a ``subprocess``) and forks three legs from it: one that
completes, one suspended by SIGTERM inside its model call, one killed by SIGTERM before fiskj's handler
exists (held there by a preload).  Each signal is sent at a sequence point (a request, a socket), not after
a sleep.  Then each process's data file is read on its own (coverage names it ``.coverage.HOST.pidPID.RANDOM``:
the pid says whose it is).

A line is "the leg's only" when no other process runs it: the first statement of the agent loop
(``fiskj.loop._Run.drive``), of the journal's creation (``fiskj.store.FileStore.create``), of fiskj's suspend
handler (``fiskj.loop.SuspendFlag.handler``, run only when a signal arrives), of ``fiskj.cli.main`` and of the
fork server's child (``_fork_child``).  Without ``patch = subprocess`` the fork server is not measured, without
``_exit`` (a forked leg ends with ``os._exit``) a forked leg saves nothing, without ``sigterm`` a leg killed by
SIGTERM saves nothing: the tests below then fail.
"""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import coverage
import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Variables through which an outer coverage run (``make coverage``) would measure the child instead.
OUTER = ("COVERAGE_PROCESS_CONFIG", "COVERAGE_PROCESS_START", "COVERAGE_FILE", "COVERAGE_RCFILE")

DRIVE = (ROOT / "fiskj" / "loop.py", "_Run.drive")
CREATE = (ROOT / "fiskj" / "store.py", "FileStore.create")
SUSPEND = (ROOT / "fiskj" / "loop.py", "SuspendFlag.handler")
CLI_MAIN = (ROOT / "fiskj" / "cli.py", "main")
FORK_CHILD = (ROOT / "harness" / "subject" / "forkserver_main.py", "_fork_child")


# -- the child: legs forked from a fork server, as the harness runs them ------------------------------------

def drive(work: Path) -> dict[str, dict[str, int]]:
    """Fork three legs of the reference agent from one fork server; returns ``{leg: {"pid", "code"}}``
    (``code``: the exit status, ``-15`` for a death by SIGTERM).  Runs in the child, under ``coverage run``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fake_anthropic import FakeAnthropic, reply, tool_use
    from harness.subject.forkserver import ForkServer

    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["XDG_STATE_HOME"] = str(work / "xdg")
    legs: dict[str, dict[str, int]] = {}
    server = ForkServer().start()
    try:
        def spawn(name: str, argv: list[str], **extra: str):
            return server.spawn(["run", "--checkpoint", "--name", name, "-q", *argv, "count"], {**env, **extra},
                                stdin=None, stdout=str(work / f"{name}.out"), stderr=str(work / f"{name}.err"))

        done = spawn("done", ["--model", "scripted:1:2"])
        legs["done"] = {"pid": done.pid, "code": done.wait(timeout=60)}

        known = threading.Event()
        pids: list[int] = []

        def answer(body):
            # The sequence point: once the leg's request is here, the leg is inside its model call, with
            # fiskj's SIGTERM handler installed.  The wait guards against a hang; it orders nothing by time.
            assert known.wait(30)
            os.kill(pids[0], signal.SIGTERM)
            return reply([tool_use("toolu_1", "echo", {"text": "x"})])  # more to do: the run suspends

        with FakeAnthropic(answer) as api:
            term = spawn("term", ["--base-url", api.url, "--model", "m1", "--max-retries", "0"], ANTHROPIC_API_KEY="k")
            pids.append(term.pid)
            known.set()
            legs["term"] = {"pid": term.pid, "code": term.wait(timeout=60)}

        # A preload holds the leg after the fork server's own setup and before fiskj.cli.main: it says so on a
        # socket (the sequence point) and waits; the SIGTERM lands before fiskj's suspend handler exists.
        (work / "coverage_hold.py").write_text(HOLD)  # importable: the fork server's sys.path[0] is its folder
        with socket.create_server(("127.0.0.1", 0)) as hold:
            hold.settimeout(30)  # a guard against a hang
            early = spawn("early", ["--model", "scripted:1"], FISKJ_PRELOAD="coverage_hold",
                          FISKJ_TEST_HOLD="%s:%d" % hold.getsockname())
            conn, _ = hold.accept()
            with conn:
                conn.settimeout(30)
                assert conn.recv(64).strip() == str(early.pid).encode()
                os.kill(early.pid, signal.SIGTERM)
                legs["early"] = {"pid": early.pid, "code": early.wait(timeout=60)}
    finally:
        server.close()
    return legs


#: The preload of the "early" leg: connect to $FISKJ_TEST_HOLD, send the pid, wait for a signal (SIGALRM after
#: 60 s: a guard, so that a leg nobody signals does not wait for ever).
HOLD = """import os, signal, socket
def preload(environ):
    host, port = environ["FISKJ_TEST_HOLD"].rsplit(":", 1)
    conn = socket.create_connection((host, int(port)), timeout=30)
    conn.sendall(b"%d\\n" % os.getpid())
    signal.alarm(60)
    while True:
        signal.pause()
"""


# -- the test process ----------------------------------------------------------------------------------------

def _toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"pyproject.toml [tool.coverage.run]: a value this test cannot copy: {value!r}")


def project_config(folder: Path) -> Path:
    """pyproject.toml's ``[tool.coverage.run]`` as a config file of its own in ``folder``, the data file moved
    there and the ``source`` folders made absolute.  Returns its path."""
    run = dict(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["coverage"]["run"])
    run["data_file"] = str(folder / ".coverage")
    run["source"] = [str(ROOT / s) if (ROOT / s).is_dir() else s for s in run.get("source", [])]
    path = folder / "coverage.toml"
    path.write_text("[tool.coverage.run]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in run.items()))
    return path


def first_statement(path: Path, qualname: str) -> int:
    """The line of the first statement (docstring skipped) in the body of ``qualname`` (``Class.method``) in
    ``path``; raises ``LookupError`` when there is no such function."""
    body = ast.parse(path.read_text()).body
    for name in qualname.split("."):
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and n.name == name), None)
        if node is None:
            raise LookupError(f"{path}: no {qualname}")
        body = node.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and len(body) > 1:
        body = body[1:]
    return body[0].lineno


class Measured:
    """The data files coverage saved in a folder, by the pid that saved them."""

    def __init__(self, folder: Path) -> None:
        self.by_pid: dict[int, list[coverage.CoverageData]] = {}
        for f in sorted(folder.glob(".coverage.*")):
            m = re.search(r"\.pid(\d+)\.", f.name)
            if m:
                data = coverage.CoverageData(basename=str(f))
                data.read()
                self.by_pid.setdefault(int(m.group(1)), []).append(data)

    def lines(self, pid: int, path: Path) -> set[int]:
        """Lines of ``path`` that process ``pid`` ran (empty when it saved nothing)."""
        return {n for d in self.by_pid.get(pid, []) for n in d.lines(str(path)) or ()}

    def arcs(self, pid: int, path: Path) -> set[tuple[int, int]]:
        """Branch arcs of ``path`` that process ``pid`` took."""
        return {a for d in self.by_pid.get(pid, []) for a in d.arcs(str(path)) or ()}

    def ran(self, pid: int, where: tuple[Path, str]) -> bool:
        """True when ``pid`` ran the first statement of the function ``where`` = (file, qualname)."""
        return first_statement(*where) in self.lines(pid, where[0])


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Run :func:`drive` in a child under ``coverage run`` and the project's configuration; returns
    (legs, :class:`Measured`, the fork server's pid)."""
    work = tmp_path_factory.mktemp("coverage")
    folder = work / "data"
    folder.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in OUTER}
    proc = subprocess.run([sys.executable, "-m", "coverage", "run", "--rcfile", str(project_config(folder)),
                           __file__, str(work)], env=env, cwd=work, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    legs, data = out["legs"], Measured(folder)
    server = set(data.by_pid) - {leg["pid"] for leg in legs.values()} - {out["driver"]}
    assert len(server) == 1, f"the fork server saved no data (patch = subprocess?): {sorted(data.by_pid)}, {legs}"
    assert legs["done"]["pid"] in data.by_pid, f"a forked leg saved no data (patch = _exit?): {legs}"
    return legs, data, server.pop()


def test_a_forked_leg_that_completes_saves_the_agent_loop_and_journal_lines_only_it_ran(measured):
    legs, data, server = measured
    leg = legs["done"]
    assert leg["code"] == 0
    for where in (DRIVE, CREATE, CLI_MAIN, FORK_CHILD):
        assert data.ran(leg["pid"], where), f"{where[1]} ran in the leg but is not in its data"
        assert not data.ran(server, where), f"{where[1]} is in the fork server's data: it is not the leg's only"
    assert data.arcs(leg["pid"], DRIVE[0]), "no branch arcs recorded: is branch = true?"


def test_a_leg_suspended_by_sigterm_saves_its_data_with_the_suspend_handler_in_it(measured):
    legs, data, _ = measured
    leg = legs["term"]
    assert leg["code"] == 3  # fiskj's exit status for a suspend
    assert data.ran(leg["pid"], SUSPEND) and data.ran(leg["pid"], DRIVE)


def test_a_leg_killed_by_sigterm_before_fiskj_s_handler_saves_its_data_and_still_dies_of_it(measured):
    legs, data, _ = measured
    leg = legs["early"]
    assert leg["code"] == -signal.SIGTERM
    assert data.ran(leg["pid"], FORK_CHILD), "a leg killed by SIGTERM saved nothing (sigterm = true? forkserver_main._sigterm_until_fiskj?)"
    assert not data.ran(leg["pid"], CLI_MAIN)  # it died before fiskj ran (held by its preload)


def test_first_statement_skips_the_docstring_and_refuses_a_missing_function(tmp_path):
    src = tmp_path / "m.py"
    src.write_text('class C:\n    def f(self):\n        """doc."""\n        x = 1\n        return x\n')
    assert first_statement(src, "C.f") == 4
    with pytest.raises(LookupError):
        first_statement(src, "C.g")


if __name__ == "__main__":  # the child of the `measured` fixture
    print(json.dumps({"driver": os.getpid(), "legs": drive(Path(sys.argv[1]))}))
