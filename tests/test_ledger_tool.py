"""harness.workload.ledger_tool: each execution leaves one fsynced ledger line before it returns."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from harness.workload.build import ledger_tool_path, tool_definitions

TOOL = [os.path.realpath(sys.executable), "-I", "-S", ledger_tool_path()]


def run_tool(ledger, data, name="effect_a", leg="2", extra_env=None, **kw):
    env = {"PATH": os.environ.get("PATH", ""), "FISKJ_LEDGER": str(ledger), "FISKJ_HARNESS_LEG": leg}
    env.update(extra_env or {})
    payload = data if isinstance(data, bytes) else json.dumps(data).encode()
    return subprocess.run(TOOL + [name], input=payload, capture_output=True, env=env, timeout=30, **kw)


def lines(ledger):
    return [json.loads(x) for x in ledger.read_text().splitlines()]


def test_each_execution_appends_one_line_before_it_returns(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    before = time.monotonic_ns()
    proc = run_tool(ledger, {"tool_use_id": "toolu_1_0_0", "n": 5})
    assert proc.returncode == 0, proc.stderr
    [entry] = lines(ledger)
    assert set(entry) == {"tool_use_id", "attempt", "pid", "t", "leg", "tool"}
    assert entry["tool_use_id"] == "toolu_1_0_0" and entry["attempt"] == 1
    assert entry["leg"] == 2 and entry["tool"] == "effect_a" and entry["pid"] > 0
    assert before < entry["t"] < time.monotonic_ns()


def test_attempt_counts_the_earlier_executions_of_the_same_id(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    for tid in ("a", "b", "a", "a", "ab"):
        assert run_tool(ledger, {"tool_use_id": tid}).returncode == 0
    assert [(e["tool_use_id"], e["attempt"]) for e in lines(ledger)] == [
        ("a", 1), ("b", 1), ("a", 2), ("a", 3), ("ab", 1)]


def test_the_result_depends_only_on_the_input(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    outs = {run_tool(ledger, {"tool_use_id": "x", "n": 3}, leg=str(i)).stdout for i in range(2)}
    assert outs == {b"ok effect_a x n=3\n"}


def test_the_id_falls_back_to_the_agent_s_environment(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    assert run_tool(ledger, {}, extra_env={"FISKJ_TOOL_USE_ID": "from-env"}).returncode == 0
    assert lines(ledger)[0]["tool_use_id"] == "from-env"


def test_a_kill_while_the_tool_sleeps_leaves_its_effect_in_the_ledger(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    env = {"FISKJ_LEDGER": str(ledger), "FISKJ_HARNESS_LEG": "0"}
    proc = subprocess.Popen(TOOL + ["effect_b"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    proc.stdin.write(json.dumps({"tool_use_id": "slow", "sleep_ms": 20000}).encode())
    proc.stdin.close()
    deadline = time.monotonic() + 20
    while not (ledger.exists() and ledger.read_bytes().endswith(b"\n")):  # test-only wait for the effect
        assert time.monotonic() < deadline, "the tool never wrote its effect"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert [(e["tool_use_id"], e["attempt"]) for e in lines(ledger)] == [("slow", 1)]


@pytest.mark.parametrize("data,env_ok,code", [(b"{not json", True, 2), (b"[1]", True, 2), (b"{}", False, 2)])
def test_bad_input_or_a_missing_ledger_is_exit_2_and_no_effect(tmp_path, data, env_ok, code):
    ledger = tmp_path / "ledger.jsonl"
    env = {"FISKJ_LEDGER": str(ledger)} if env_ok else {}
    proc = subprocess.run(TOOL, input=data, capture_output=True, env=env, timeout=30)
    assert proc.returncode == code and proc.stderr
    assert not ledger.exists()


def test_a_failing_execution_still_records_its_effect(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    proc = run_tool(ledger, {"tool_use_id": "f", "fail": True})
    assert proc.returncode == 1 and b"failed" in proc.stderr
    assert lines(ledger)[0]["tool_use_id"] == "f"


def test_concurrent_executions_never_share_an_attempt_number(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    env = {"FISKJ_LEDGER": str(ledger)}
    procs = [subprocess.Popen(TOOL, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env) for _ in range(6)]
    for p in procs:
        p.communicate(b'{"tool_use_id": "same"}', timeout=30)
    assert sorted(e["attempt"] for e in lines(ledger)) == [1, 2, 3, 4, 5, 6]


def test_the_tool_definitions_run_the_ledger_tool_fast_and_isolated():
    defs = tool_definitions()
    assert [d["name"] for d in defs] == ["effect_a", "effect_b", "effect_c"]
    for d in defs:
        assert d["command"][1:3] == ["-I", "-S"] and d["command"][3] == ledger_tool_path()
        assert d["input_schema"]["required"] == ["tool_use_id"]
    # The tool must not import json (and with it re): that is most of its start-up time.
    probe = subprocess.run(TOOL[:3] + ["-c", f"import runpy, sys; sys.argv=['t']; "
                                       f"sys.stdin=open('/dev/null'); "
                                       f"import importlib.util as u; s=u.spec_from_file_location('lt', {ledger_tool_path()!r}); "
                                       f"m=u.module_from_spec(s); s.loader.exec_module(m); print('json' in sys.modules, 're' in sys.modules)"],
                           capture_output=True, text=True, timeout=30)
    assert probe.stdout.split() == ["False", "False"], probe.stderr
