"""The pure modules do no IO (STYLE.md "the pure core"; docs/architecture.md).

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
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fiskj

PACKAGE = Path(fiskj.__file__).parent
PURE = ("records", "codec", "fold", "fingerprint", "errors")

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
