"""Shared by the outside observer's tests (tests/test_observer*.py): the target program, the tracer check, the
``root`` fixture and :func:`observe` (one run of the target under the tracer, to its end).

A test module takes the fixtures by importing them from here
(``from observer_helpers import root, tracer_works  # noqa: F401``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.runner.process import kill_tree
from harness.observer import ObservedProcess, Op, entry_order, observer_binary, spawn_observed

TARGET = str(Path(__file__).parent / "data" / "observer_target.py")
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module", autouse=True)
def tracer_works(tmp_path_factory):
    """Build the tracer once; skip the module where ptrace is not permitted (a container without the privilege)."""
    binary = observer_binary()
    d = tmp_path_factory.mktemp("probe")
    proc = subprocess.run([str(binary), "--log", str(d / "log"), "--root", str(d), "--", "/bin/true"],
                          capture_output=True, text=True, timeout=30)
    if proc.returncode != 0 and ("PTRACE_SEIZE" in proc.stderr or "seccomp" in proc.stderr):
        pytest.skip(f"ptrace or seccomp not permitted here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "root"
    r.mkdir()
    return r


def observe(mode: str, root: Path, *args: str, faults=(), control=False, stdout=subprocess.PIPE,
            timeout: float = 30) -> tuple[ObservedProcess, list[Op]]:
    """Run the target in ``mode`` under the tracer to its end; return the process and its log."""
    proc = spawn_observed([sys.executable, TARGET, mode, str(root), *args], env=None, log=root.parent / "log",
                          roots=[root], faults=faults, control=control, stdout=stdout, stderr=subprocess.PIPE)
    try:
        proc.wait(timeout)
    finally:
        kill_tree(proc)
    return proc, proc.ops()


def ops_only(log: list[Op]) -> list[Op]:
    return entry_order(log)


def rel(op: Op, root: Path) -> str:
    return os.path.relpath(op.path, root)


def records(n: int) -> bytes:
    """The file the target's ``alternate`` mode writes after n records (A0, B1, A2, ...)."""
    return b"".join(f"{'AB'[i % 2]}{i}\n".encode() for i in range(n))
