"""The outside observer's log format (parsing, torn lines, bad lines naming their field), its fault specs, its
bench, and how the tracer is built (cached by source hash, compile errors, a missing gcc, FISKJ_OBSERVER_BIN)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness.observer import (BuildError, CompileFailed, CompilerMissing, FaultSpecError, LogFormatError,
                              ObserverError, entry_order, observer_binary, parse_fault, parse_ops, spawn_observed)
from harness.observer import build as build_mod
from observer_helpers import REPO, root, tracer_works  # noqa: F401


# --- the log format ------------------------------------------------------------------------------------------


def _line(**fields) -> bytes:
    base = {"seq": 1, "pid": 10, "tid": 10, "op": "write", "path": "/r/f", "fd": 3, "off": 0, "len": 2,
            "data": "aGk=", "ret": 2, "errno": 0, "t0": 1, "t1": 2}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not ...}).encode() + b"\n"


def test_parse_ops_decodes_the_bytes_and_keeps_non_utf8_paths_exact():
    ops = parse_ops([_line(), _line(seq=2, path="/r/\udcff", data="", len=0, ret=0), b"\n",
                     b'{"op":"end","status":"exit","code":0,"t":5}\n'])
    assert ops[0].data == b"hi" and ops[1].path_bytes == b"/r/\xff" and ops[2].lifecycle and ops.torn is None


def test_a_torn_final_line_is_tolerated_and_reported():
    whole = _line()
    ops = parse_ops([whole, whole[:17]])
    assert len(ops) == 1 and ops.torn == whole[:17] and ops.torn_lineno == 2


@pytest.mark.parametrize(("line", "field"), [
    (_line(off="0"), "off"), (_line(data="!!"), "data"), (_line(op="frobnicate"), "op"),
    (_line(ret=...), "ret"), (_line(seq=...), "seq"), (b"[1]\n", "<line>"), (b"{nope\n", "<line>"),
    (_line(created=1), "created"),
])
def test_a_bad_line_is_an_error_naming_the_line_and_the_field(line, field):
    with pytest.raises(LogFormatError) as info:
        parse_ops([_line(), line, _line(seq=3)])
    assert (info.value.lineno, info.value.field) == (2, field) and isinstance(info.value, ValueError)


def test_fault_specs_are_validated_before_the_tracer_starts(root):
    assert str(parse_fault("kill-before@3:fsync")) == "kill-before@3:fsync" and parse_fault("eio@2").k == 2
    for bad in ("eio", "boom@1", "eio@0", "eio@x", "eio@2:sync", "pause@1:write,frob"):
        with pytest.raises(FaultSpecError):
            parse_fault(bad)
    for faults, control in ((["eio@0"], False), (["pause@1"], False), (["pause@1:write", "pause@1:fsync"], True)):
        with pytest.raises(FaultSpecError):
            spawn_observed(["/bin/true"], env=None, log=root.parent / "log", roots=[root], faults=faults,
                           control=control)


def test_the_bench_runs_on_tiny_sizes(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("fiskj_bench_observer", REPO / "bench" / "observer.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows, details = bench.bench_observer((str(tmp_path),), n=3, rounds=1, start_rounds=1)
    assert len(rows) == 5 and all(r["section"] == "observer" and r["subject"] > 0 for r in rows)
    assert set(details["observer_append"][str(tmp_path)]["median_us"]) == {"bare", "observed", "stopped", "seam"}


# --- building -------------------------------------------------------------------------------------------------


def test_the_build_is_cached_by_source_hash_and_concurrent_builds_agree(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("FISKJ_OBSERVER_BIN", raising=False)
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(observer_binary())) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = tmp_path / "cache" / "fiskj" / build_mod.binary_name()
    assert results == [expected] * 3 and os.access(expected, os.X_OK)
    assert sorted(p.name for p in expected.parent.iterdir()) == [expected.name]  # no temporary left
    mtime = expected.stat().st_mtime_ns
    assert observer_binary() == expected and expected.stat().st_mtime_ns == mtime


def test_a_compile_error_names_the_command_and_gccs_diagnostics(tmp_path):
    bad = tmp_path / "bad.c"
    bad.write_text("int main(void) { return nope; }\n")
    with pytest.raises(CompileFailed) as info:
        build_mod.compile_to(tmp_path / "out", bad)
    err = info.value
    assert isinstance(err, BuildError) and isinstance(err, RuntimeError) and isinstance(err, ObserverError)
    assert "gcc" in err.cmd[0] and "-Werror" in err.cmd and "nope" in err.stderr and "nope" in str(err)
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir()] == ["bad.c"]


def test_a_missing_gcc_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CompilerMissing, match="gcc"):
        build_mod.compile_to(tmp_path / "out")


def test_FISKJ_OBSERVER_BIN_names_the_binary(tmp_path, monkeypatch):
    monkeypatch.setenv("FISKJ_OBSERVER_BIN", str(tmp_path / "nothing"))
    with pytest.raises(BuildError):
        observer_binary()
    monkeypatch.setenv("FISKJ_OBSERVER_BIN", "/bin/true")
    assert observer_binary() == Path("/bin/true")


def test_python_dash_m_runs_the_tracer_with_its_arguments(tmp_path):
    done = subprocess.run([sys.executable, "-m", "harness.observer", "--log", str(tmp_path / "log"), "--root",
                           str(tmp_path), "--", "/bin/sh", "-c", f"echo x > {tmp_path}/f; exit 4"],
                          capture_output=True, timeout=30, cwd=tmp_path)
    assert done.returncode == 4
    with open(tmp_path / "log", "rb") as f:
        assert [(o.op, o.data) for o in entry_order(parse_ops(f)) if o.op == "write"] == [("write", b"x\n")]


def test_the_ops_module_is_pure():
    source = (REPO / "harness" / "observer" / "ops.py").read_text()
    assert not re.search(r"^\s*(import|from)\s+(os|subprocess|io|sys|time|socket|pathlib)\b", source, re.M)
