"""The pure modules do no IO (docs/architecture.md: the pure core, and Jepsen's checker).

The harness's checkers and fault generators are held to the same standard in the second half of
this module (rules and allow-list there).

``fiskj.records``, ``codec``, ``fold`` and ``fingerprint`` (and ``errors``,
which they import) are records in, state out: no files, no sockets, no
processes, no clock, no randomness.  Checked two ways: statically (their
imports and calls, via ``ast``) and at run time (importing them in a fresh
interpreter loads none of fiskj's IO modules).

The one escape hatch is reviewed in the code itself: a line ending in a
comment ``# purity: <why this is not IO>`` is exempt (the reason must not be
empty).  Use it only where the result stays a pure function of the input.
"""

from __future__ import annotations

import ast
import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fiskj

PACKAGE = Path(fiskj.__file__).parent
PURE = ("records", "encode", "codec", "fold", "fingerprint", "errors")

#: Modules that do IO or bring in a clock or randomness (checked with their submodules).
FORBIDDEN_MODULES = frozenset({
    "os", "io", "socket", "subprocess", "time", "random", "pathlib", "shutil", "tempfile", "sys", "fcntl", "signal",
    "select", "selectors", "threading", "multiprocessing", "asyncio", "concurrent", "urllib", "http", "ssl",
    "datetime", "secrets", "uuid", "logging", "glob", "mmap", "importlib", "builtins", "ctypes", "sqlite3",
})
#: Builtins that do IO or import modules behind the checker's back.
FORBIDDEN_CALLS = frozenset({"open", "print", "input", "__import__", "breakpoint"})
_PRAGMA = re.compile(r"#\s*purity:\s*\S")


def impurities(source: str, pure: tuple[str, ...] = PURE) -> list[str]:
    """Return one line per impure import or call in ``source`` (a module of package fiskj).

    A line carrying a ``# purity: <reason>`` comment is exempt (see the module docstring).
    """
    exempt = {n for n, text in enumerate(source.splitlines(), 1) if _PRAGMA.search(text)}
    found = []
    for node in ast.walk(ast.parse(source)):
        if getattr(node, "lineno", None) in exempt:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FORBIDDEN_MODULES:
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if (node.module or "").split(".")[0] in FORBIDDEN_MODULES | {"fiskj"}:
                    found.append(f"line {node.lineno}: from {node.module} import ...")
            else:
                target = (node.module or "").split(".")[0]
                names = [a.name for a in node.names] if not node.module else [target]
                for name in names:
                    if name not in pure:
                        found.append(f"line {node.lineno}: from {'.' * node.level}{node.module or ''} import "
                                     f"{name} (not a pure module)")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            found.append(f"line {node.lineno}: call {node.func.id}()")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in ("__builtins__", "builtins"):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize("module", PURE)
def test_a_pure_module_imports_nothing_that_does_io_and_calls_no_io_builtin(module):
    found = impurities((PACKAGE / f"{module}.py").read_text())
    assert found == [], (f"fiskj/{module}.py must do no IO, read no clock and draw no randomness: {found}; "
                         f"remove it, or mark a line that keeps results pure with '# purity: <why>'")


def test_importing_the_pure_modules_loads_no_io_module_of_fiskj():
    code = ("import sys\n"
            "import fiskj.records, fiskj.codec, fiskj.fold, fiskj.fingerprint\n"
            "print(sorted(m for m in sys.modules if m.startswith('fiskj')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert ast.literal_eval(out) == sorted(["fiskj"] + [f"fiskj.{m}" for m in PURE])


@pytest.mark.parametrize("source", [
    "import os",
    "import os.path as p",
    "from time import monotonic",
    "import random",
    "from pathlib import Path",
    "import socket, json",
    "from subprocess import run",
    "import io",
    "from . import ioseam",
    "from .store import FileStore",
    "from .reader import read_state",
    "from fiskj.lock import acquire",
    "data = open('x').read()",
    "print('hello')",
    "__import__('os').remove('x')",
    "import random  # purity:",
    "__builtins__.open('x')",
])
def test_the_purity_check_catches_an_impure_module(source):
    # The checker must be able to fail: each of these is one impurity.
    assert len(impurities("import json\n" + source)) >= 1


def test_a_purity_pragma_with_a_reason_exempts_its_line_only():
    assert impurities("import json\nimport random  # purity: a nonce; results do not depend on it\n") == []
    assert impurities("import json\nimport random  # purity:\n") == ["line 2: import random"]
    assert impurities("import random  # purity: nonce\nimport time\n") == ["line 2: import time"]


def test_the_purity_check_passes_pure_code():
    assert impurities("from __future__ import annotations\nimport json, hashlib\nfrom dataclasses import field\n"
                      "from .errors import ConsistencyError\nfrom .records import tool_use_ids\n"
                      "def f(x):\n    return json.dumps(sorted(x))\n") == []


# --- the harness's pure modules: the checkers and the fault generators ------------------------------------
#
# docs/architecture.md (Jepsen): the checker judges the history and does no IO; the nemesis's generators are pure
# functions of their input and seed.  The rules, checked statically on each module's own source (imports
# under ``if TYPE_CHECKING:`` are annotations only, and exempt; so is a line with a ``# purity:`` reason):
#
# * standard library: only :data:`HARNESS_STDLIB` (no os, io, sys, time, subprocess, socket, shutil,
#   tempfile, pathlib, threading, importlib, traceback, ...);
# * ``random`` only in a generator (:data:`GENERATORS`), and only as a seeded ``random.Random(seed)``
#   (never the module's global generator);
# * named in-memory helpers only (:data:`HARNESS_NAMES`): ``io.BytesIO`` / ``io.BufferedReader`` and
#   ``fiskj.reader.read_state`` / ``JournalReader``, which the checkers hand journal bytes, never a
#   path (fiskj/reader.py: given bytes or a buffer it opens nothing);
# * fiskj: its pure modules (:data:`PURE`), plus the names above;
# * harness: modules that are pure by these same rules (followed transitively);
# * third party: only :data:`HARNESS_THIRD_PARTY` in a generator (hypothesis draws schedules with
#   ``database=None``: no example database on disk).

HARNESS = PACKAGE.parent / "harness"
#: The checkers (every module of harness/checkers) and the history they read.
CHECKERS = tuple(sorted(f"harness.checkers.{p.stem}" for p in (HARNESS / "checkers").glob("*.py")
                        if p.stem != "__init__")) + ("harness.checkers", "harness.history.model", "harness.history.jsonl", "harness.history.journal_location", "harness.history.promises", "harness.history.ending", "harness.names")
#: The pure fault generators of the families.
GENERATORS = ("harness.families.power_loss.crashstates", "harness.families.tail.mutations", "harness.families.tail.bound",
              "harness.families.signals.schedules", "harness.families.race.plan",
              "harness.families.trace_points", "harness.draws")
HARNESS_STDLIB = frozenset({"__future__", "base64", "binascii", "collections", "copy", "dataclasses", "enum",
                            "functools", "hashlib", "itertools", "json", "math", "operator", "re", "statistics",
                            "string", "typing", "zlib"})
HARNESS_NAMES = {"io": {"BytesIO", "BufferedReader"}, "fiskj.reader": {"read_state", "JournalReader"}}
HARNESS_THIRD_PARTY = frozenset({"hypothesis"})
FISKJ_PURE = frozenset(f"fiskj.{m}" for m in PURE)


def _source_of(module: str) -> Path:
    path = PACKAGE.parent.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                lines.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return lines


def harness_impurities(module: str, generator: bool = False, source: str | None = None) -> list[str]:
    """One line per import or call of ``module`` (a harness module name) that breaks the rules above.

    ``source`` overrides the module's file (for the self-tests); harness modules it imports are checked
    by the same rules, each as a generator when it is one of :data:`GENERATORS`.
    """
    return _harness_impurities(module, generator, source, set())


def _harness_impurities(module: str, generator: bool, source: str | None, seen: set[str]) -> list[str]:
    seen.add(module)
    text = source if source is not None else _source_of(module).read_text()
    tree = ast.parse(text)
    exempt = {n for n, line in enumerate(text.splitlines(), 1) if _PRAGMA.search(line)} | _type_checking_lines(tree)
    found: list[str] = []

    def imported(name: str, names: list[str], line: int) -> None:
        top = name.split(".")[0]
        if name in HARNESS_NAMES:
            bad = [n for n in names if n not in HARNESS_NAMES[name]]
            if bad or not names:
                found.append(f"{module} line {line}: {name} (only {sorted(HARNESS_NAMES[name])})")
        elif top == "fiskj":
            if name not in FISKJ_PURE and not (name == "fiskj" and names and all(f"fiskj.{n}" in FISKJ_PURE
                                                                                   for n in names)):
                found.append(f"{module} line {line}: {name} (not a pure fiskj module)")
        elif top == "harness":
            targets = [f"{name}.{n}" for n in names if _source_of(f"{name}.{n}").exists()] or [name]
            for target in targets:
                if target not in seen:
                    sub = _harness_impurities(target, target in GENERATORS, None, seen)
                    if sub:
                        found.append(f"{module} line {line}: {target}, which is not pure: {sub[0]}")
        elif top == "random" and generator:
            if names and names != ["Random"]:
                found.append(f"{module} line {line}: from random import {names} (only a seeded Random)")
        elif top in HARNESS_THIRD_PARTY and generator:
            pass
        elif top not in HARNESS_STDLIB:
            found.append(f"{module} line {line}: import {name}")

    for node in ast.walk(tree):
        line = getattr(node, "lineno", None)
        if line in exempt:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported(alias.name, [], node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                found.append(f"{module} line {node.lineno}: relative import (write it absolute)")
            else:
                imported(node.module or "", [a.name for a in node.names], node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            found.append(f"{module} line {node.lineno}: call {node.func.id}()")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in ("__builtins__", "builtins"):
                found.append(f"{module} line {node.lineno}: {node.value.id}.{node.attr}")
            elif node.value.id == "random" and node.attr != "Random":
                found.append(f"{module} line {node.lineno}: random.{node.attr} (the global generator; "
                             f"draw from a seeded random.Random)")
    return found


@pytest.mark.parametrize("module", CHECKERS)
def test_a_checker_imports_nothing_that_does_io(module):
    found = harness_impurities(module)
    assert found == [], (f"{module} judges a history and must do no IO (docs/architecture.md, Jepsen): {found}; work from "
                         f"the bytes in the History instead")


@pytest.mark.parametrize("module", GENERATORS)
def test_a_fault_generator_imports_nothing_that_does_io_and_draws_only_seeded_randomness(module):
    found = harness_impurities(module, generator=True)
    assert found == [], f"{module} must be a pure function of its input and seed: {found}"


def test_importing_the_checkers_loads_no_harness_module_that_does_io():
    code = ("import sys\n"
            "import harness.checkers\n"
            "print(sorted(m for m in sys.modules if m.startswith('harness')))\n"
            "io = ('subprocess', 'socket', 'tempfile', 'shutil', 'threading')\n"
            "print(sorted(m for m in io if m in sys.modules))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}  # `make coverage` imports more
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent, env=env).stdout.splitlines()
    loaded, io_modules = ast.literal_eval(out[0]), ast.literal_eval(out[1])
    packages = {"harness", "harness.checkers", "harness.history", "harness.families", "harness.families.power_loss"}
    assert set(loaded) - set(CHECKERS) - set(GENERATORS) - packages == set()
    assert io_modules == []


def test_the_checkers_judge_every_kind_of_history_without_touching_a_file():
    # Run in a fresh interpreter: the histories are built first, then every way to reach a file is
    # replaced by one that raises, and every checker judges.  A checker that tried IO would be unknown.
    code = r'''
import builtins, io, json, os, sys
sys.path.insert(0, "tests")
from synth import Engine
from test_checker_i4 import _crash_history
from test_checker_i5 import _reader_history, _reference_answer
from test_crashstates import D, Trace, rec
from harness.checkers import check_all
from harness.families.power_loss.crashstates import crash_states

eng = Engine([["a", "b"], []])
eng.leg(kill_after=5, torn=True)
eng.leg(suspend_at=0)
histories = [(eng.finish(), None), (_reader_history(_reference_answer), ["I5"])]
histories += [(_crash_history(s), ["I4"]) for s in crash_states(
    Trace().create().append(rec(1), sync_dir=True).close().events, {}, {"/s", D})]

def refuse(*args, **kwargs):
    raise AssertionError("IO during a check")

for mod, names in ((builtins, ("open",)), (io, ("open", "open_code")),
                   (os, ("open", "stat", "lstat", "listdir", "scandir", "read", "write", "remove", "unlink",
                         "fork", "system", "popen", "execv", "execve"))):
    for name in names:
        setattr(mod, name, refuse)
out = [[v.invariant, v.status, v.summary] for h, ids in histories for v in check_all(h, ids)]
sys.stdout.write(json.dumps(out))
'''
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout)
    assert len(rows) > 20
    assert [r for r in rows if r[1] != "valid"] == []


@pytest.mark.parametrize("source", [
    "import os",
    "import io",
    "from io import open",
    "import io as memory",
    "from pathlib import Path",
    "import time",
    "import traceback",
    "import importlib",
    "from subprocess import run",
    "import random",
    "from fiskj.store import FileStore",
    "from fiskj.reader import read_records",
    "from fiskj import store",
    "from harness.runner.trial import Runner",
    "from .verdict import make",
    "import hypothesis",
    "data = open('x').read()",
    "print('hello')",
])
def test_the_harness_purity_check_catches_an_impure_checker(source):
    assert len(harness_impurities("harness.checkers.probe", source="import json\n" + source)) >= 1


@pytest.mark.parametrize("source", ["import random\nx = random.random()", "from random import shuffle",
                                    "import random\nrandom.seed(1)"])
def test_a_generator_may_draw_only_from_a_seeded_generator(source):
    assert harness_impurities("harness.families.probe", generator=True, source=source) != []
    ok = "import random\nrng = random.Random('tails:1')\nimport hypothesis\n"
    assert harness_impurities("harness.families.probe", generator=True, source=ok) == []


def test_the_harness_purity_check_passes_pure_code_and_annotation_only_imports():
    assert harness_impurities("harness.checkers.probe", source=(
        "from __future__ import annotations\nimport json, hashlib\nfrom typing import TYPE_CHECKING\n"
        "from io import BytesIO\nfrom fiskj.reader import read_state\nfrom fiskj.codec import decode_record\n"
        "from harness.history.model import History\nfrom harness.checkers.verdict import make\n"
        "if TYPE_CHECKING:\n    from harness.runner.trial import Runner\n")) == []
