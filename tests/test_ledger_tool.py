"""The ledger tool: each execution leaves one fsynced ledger line before it returns.

The Python script is the contract (docs/workload.md "The ledger tool's
contract") and its one full implementation; the compiled ledger_tool.c is a
fast path for the inputs the harness's workload sends, which hands any other
input to the script before any effect.  The behaviour tests run both; the
differential tests feed both the same generated inputs (workload-shaped ones
the fast path answers; ids with non-ASCII, quotes, backslashes and lone
surrogates; output specs of every kind, bad ones included; broken JSON and
UTF-8, which the fallback answers) and compare stdout, stderr, exit status
and the ledger line (its pid and t aside).  ``FISKJ_LEDGER_DIFF_EXAMPLES``
raises the number of generated inputs (a deeper local run; the default keeps
the file at a few seconds of CPU).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.workload.build import ledger_tool, ledger_tool_path, tool_definitions
from harness.workload.ledger_build import ENV, SOURCE, BadChoice, CompilerMissing, LedgerBuildError, ledger_binary

PYTHON_TOOL = [os.path.realpath(sys.executable), "-I", "-S", ledger_tool_path()]


@pytest.fixture(scope="module")
def c_binary():
    try:
        return str(ledger_binary())
    except CompilerMissing as exc:  # pragma: no cover - gcc is on every machine and in CI
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def c_tool(c_binary):
    # The compiled tool's command: the binary, then the interpreter and the script of its fallback.
    return [c_binary, PYTHON_TOOL[0], PYTHON_TOOL[3]]


@pytest.fixture(params=["python", "c"])
def tool(request, c_tool):
    return PYTHON_TOOL if request.param == "python" else c_tool


def run_tool(tool, ledger, data, name="effect_a", leg="2", extra_env=None, **kw):
    env = {"PATH": os.environ.get("PATH", ""), "FISKJ_LEDGER": str(ledger), "FISKJ_HARNESS_LEG": leg}
    env.update(extra_env or {})
    payload = data if isinstance(data, bytes) else json.dumps(data).encode()
    return subprocess.run(tool + [name], input=payload, capture_output=True, env=env, timeout=30, **kw)


def lines(ledger):
    return [json.loads(x) for x in ledger.read_text().splitlines()]


# --- the contract, for both tools -----------------------------------------------------------------

def test_each_execution_appends_one_line_before_it_returns(tmp_path, tool):
    ledger = tmp_path / "ledger.jsonl"
    before = time.monotonic_ns()
    proc = run_tool(tool, ledger, {"tool_use_id": "toolu_1_0_0", "n": 5})
    assert proc.returncode == 0, proc.stderr
    [entry] = lines(ledger)
    assert set(entry) == {"tool_use_id", "attempt", "pid", "t", "leg", "tool"}
    assert entry["tool_use_id"] == "toolu_1_0_0" and entry["attempt"] == 1
    assert entry["leg"] == 2 and entry["tool"] == "effect_a" and entry["pid"] > 0
    assert before < entry["t"] < time.monotonic_ns()
    assert (ledger.stat().st_mode & 0o777) == 0o600


def test_attempt_counts_the_earlier_executions_of_the_same_id(tmp_path, c_tool):  # the script: the differential tests
    tool = c_tool
    ledger = tmp_path / "ledger.jsonl"
    for tid in ("a", "b", "a", "a", "ab"):
        assert run_tool(tool, ledger, {"tool_use_id": tid}).returncode == 0
    assert [(e["tool_use_id"], e["attempt"]) for e in lines(ledger)] == [
        ("a", 1), ("b", 1), ("a", 2), ("a", 3), ("ab", 1)]


def test_the_result_depends_only_on_the_input(tmp_path, c_tool):  # the script: the differential tests
    tool = c_tool
    ledger = tmp_path / "ledger.jsonl"
    outs = {run_tool(tool, ledger, {"tool_use_id": "x", "n": 3}, leg=str(i)).stdout for i in range(2)}
    assert outs == {b"ok effect_a x n=3\n"}


def test_the_id_falls_back_to_the_agent_s_environment(tmp_path, c_tool):  # the script: the differential tests
    tool = c_tool
    ledger = tmp_path / "ledger.jsonl"
    assert run_tool(tool, ledger, {}, extra_env={"FISKJ_TOOL_USE_ID": "from-env"}).returncode == 0
    assert lines(ledger)[0]["tool_use_id"] == "from-env"


def test_a_kill_while_the_tool_sleeps_leaves_its_effect_in_the_ledger(tmp_path, tool):
    ledger = tmp_path / "ledger.jsonl"
    env = {"FISKJ_LEDGER": str(ledger), "FISKJ_HARNESS_LEG": "0"}
    proc = subprocess.Popen(tool + ["effect_b"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
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
def test_bad_input_or_a_missing_ledger_is_exit_2_and_no_effect(tmp_path, data, env_ok, code, tool):
    # The compiled tool hands these to the script before any effect.
    ledger = tmp_path / "ledger.jsonl"
    env = {"FISKJ_LEDGER": str(ledger)} if env_ok else {}
    proc = subprocess.run(tool, input=data, capture_output=True, env=env, timeout=30)
    assert proc.returncode == code and proc.stderr
    assert not ledger.exists()


def test_a_failing_execution_still_records_its_effect(tmp_path, c_tool):  # the script: the differential tests
    tool = c_tool
    ledger = tmp_path / "ledger.jsonl"
    proc = run_tool(tool, ledger, {"tool_use_id": "f", "fail": True})
    assert proc.returncode == 1 and b"failed" in proc.stderr
    assert lines(ledger)[0]["tool_use_id"] == "f"


def test_concurrent_executions_never_share_an_attempt_number(tmp_path, c_tool):  # the script: the next test
    tool = c_tool
    ledger = tmp_path / "ledger.jsonl"
    env = {"FISKJ_LEDGER": str(ledger)}
    procs = [subprocess.Popen(tool, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env) for _ in range(3)]
    for p in procs:
        p.communicate(b'{"tool_use_id": "same"}', timeout=30)
    assert sorted(e["attempt"] for e in lines(ledger)) == [1, 2, 3]


def test_the_c_and_the_python_tool_running_at_once_on_one_ledger_take_attempts_1_and_2(tmp_path, c_tool):
    # Both hold the ledger's flock in turn: whichever is second counts the other's line.
    ledger = tmp_path / "ledger.jsonl"
    env = {"FISKJ_LEDGER": str(ledger)}
    procs = [subprocess.Popen(t + ["effect_c"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
             for t in (PYTHON_TOOL, c_tool)]
    outs = [p.communicate(b'{"tool_use_id": "both", "sleep_ms": 1}', timeout=30)[0] for p in procs]
    assert outs == [b"ok effect_c both n=0\n"] * 2
    assert sorted(e["attempt"] for e in lines(ledger)) == [1, 2]
    assert {e["pid"] for e in lines(ledger)} == {p.pid for p in procs}


def test_an_unwritable_ledger_is_exit_3_with_the_same_message(tmp_path, c_tool):
    missing = tmp_path / "no-such-dir" / "ledger.jsonl"
    procs = [run_tool(t, missing, {"tool_use_id": "x"}) for t in (PYTHON_TOOL, c_tool)]
    assert [p.returncode for p in procs] == [3, 3]
    assert procs[0].stderr == procs[1].stderr and procs[0].stderr.startswith(b"ledger_tool: cannot open ledger ")


# --- the choice of tool ---------------------------------------------------------------------------

def test_the_tool_definitions_run_the_compiled_tool_unless_told_otherwise(monkeypatch, c_tool):
    monkeypatch.delenv(ENV, raising=False)
    choice = ledger_tool()
    assert choice.kind == "c" and ENV in choice.reason
    defs = tool_definitions()
    assert [d["name"] for d in defs] == ["effect_a", "effect_b", "effect_c"]
    assert [d["command"] for d in defs] == [c_tool + [d["name"]] for d in defs]
    assert all(d["input_schema"]["required"] == ["tool_use_id"] for d in defs)
    monkeypatch.setenv(ENV, "python")
    assert [d["command"] for d in tool_definitions()] == [PYTHON_TOOL + [d["name"]] for d in defs]
    monkeypatch.setenv(ENV, "rust")
    with pytest.raises(BadChoice, match="FISKJ_LEDGER_TOOL='rust': expected auto, c or python"):
        tool_definitions()


def test_without_a_compiler_auto_falls_back_to_the_script_and_c_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # nothing cached there
    monkeypatch.setenv("PATH", str(tmp_path))  # and no gcc
    monkeypatch.setenv(ENV, "auto")
    choice = ledger_tool("/usr/bin/python3")
    assert choice.kind == "python" and choice.prefix == ("/usr/bin/python3", "-I", "-S", ledger_tool_path())
    assert "gcc is not on PATH" in choice.reason
    monkeypatch.setenv(ENV, "c")
    with pytest.raises(LedgerBuildError, match="gcc is not on PATH"):
        ledger_tool()


def test_the_script_does_not_import_json_or_re():
    # That is most of its start-up time.
    probe = subprocess.run(PYTHON_TOOL[:3] + ["-c", f"import runpy, sys; sys.argv=['t']; "
                                              f"sys.stdin=open('/dev/null'); "
                                              f"import importlib.util as u; s=u.spec_from_file_location('lt', {ledger_tool_path()!r}); "
                                              f"m=u.module_from_spec(s); s.loader.exec_module(m); print('json' in sys.modules, 're' in sys.modules)"],
                           capture_output=True, text=True, timeout=30)
    assert probe.stdout.split() == ["False", "False"], probe.stderr


# --- the fast path and the fallback -----------------------------------------------------------

def test_a_workload_input_is_answered_without_starting_python(tmp_path, c_binary):
    # The fallback's interpreter does not exist: only the fast path can answer, and it does.
    ledger = tmp_path / "ledger.jsonl"
    no_python = [c_binary, str(tmp_path / "no-such-python"), ledger_tool_path()]
    data = {"tool_use_id": "toolu_\u00e9", "n": 7, "sleep_ms": 1.5, "out": {"fill": "ab", "count": 3, "tail": "\ud800"}}
    proc = run_tool(no_python, ledger, encode(data, ascii_only=True))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"ababab\xed\xa0\x80", b"")
    assert [(e["tool_use_id"], e["attempt"], e["tool"]) for e in lines(ledger)] == [("toolu_\u00e9", 1, "effect_a")]
    # ... and an input off the fast path is handed over before any effect (here: to nothing).
    proc = run_tool(no_python, ledger, b'{"tool_use_id": "x", "n": 1.5}')
    assert proc.returncode == 2 and proc.stderr.startswith(b"ledger_tool: cannot run the Python tool ")
    assert len(lines(ledger)) == 1


def test_an_input_off_the_fast_path_is_the_script_s_to_answer(tmp_path, c_binary):
    # The fallback's interpreter is a wrapper that notes why it was run, then runs the real one.
    marks = tmp_path / "fallbacks"
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\necho "$FISKJ_LEDGER_FALLBACK" >> {marks}\nexec {PYTHON_TOOL[0]} "$@"\n')
    wrapper.chmod(0o755)
    tool = [c_binary, str(wrapper), ledger_tool_path()]
    ledger = tmp_path / "ledger.jsonl"
    assert run_tool(tool, ledger, {"tool_use_id": "fast"}).stdout == b"ok effect_a fast n=0\n"
    assert not marks.exists()
    proc = run_tool(tool, ledger, b'{"tool_use_id": "x", "n": 1.5}')  # a float n: the script reads its stdin
    assert (proc.returncode, proc.stdout) == (0, b"ok effect_a x n=1.5\n")
    proc = run_tool(tool, ledger, b'{"tool_use_id": "x", "n": 1,}')  # the script's own message, word for word
    script = run_tool(PYTHON_TOOL, tmp_path / "unused.jsonl", b'{"tool_use_id": "x", "n": 1,}')
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, b"", script.stderr)
    assert proc.stderr.startswith(b"ledger_tool: input is not JSON: ") and b"is not JSON" not in SOURCE.read_bytes()
    assert marks.read_text().splitlines() == ["input outside the fast path"] * 2
    assert [(e["tool_use_id"], e["attempt"]) for e in lines(ledger)] == [("fast", 1), ("x", 1)]


# --- the differential tests: the same input, the same bytes ---------------------------------------

EXAMPLES = int(os.environ.get("FISKJ_LEDGER_DIFF_EXAMPLES", "6"))
diff_settings = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 6,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                HealthCheck.data_too_large])
_LINE = re.compile(rb'("pid": )\d+(, "t": )\d+(, )')


def run_both(c_tool, tmp_path, stdin: bytes, name: str | bytes = "effect_a", env=None, seed_ledger=b""):
    """Run both tools at once, each on its own copy of one ledger; assert they answer the same bytes."""
    procs, ledgers = [], []
    for which, tool in (("py", PYTHON_TOOL), ("c", c_tool)):
        ledger = tmp_path / f"ledger-{which}.jsonl"
        ledger.write_bytes(seed_ledger)
        full_env = {"PATH": os.environ.get("PATH", ""), "FISKJ_LEDGER": str(ledger), "LANG": "C.UTF-8"}
        full_env.update(env or {})
        procs.append(subprocess.Popen(tool + [name], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, env=full_env))
        ledgers.append(ledger)
    (py_out, py_err), (c_out, c_err) = [p.communicate(stdin, timeout=30) for p in procs]
    py_line, c_line = [_LINE.sub(rb"\1PID\2T\3", ledger.read_bytes()[len(seed_ledger):]) for ledger in ledgers]
    context = f"input {stdin!r} name {name!r} env {env!r}"
    assert (procs[1].returncode, c_out, c_err, c_line) == (procs[0].returncode, py_out, py_err, py_line), context
    assert py_line.count(b"\n") <= 1 and (not py_line or b'"pid": PID, "t": T' in py_line), context


SURROGATES = st.sampled_from(["\ud800", "\udbff", "\udc00", "\udc80", "\udcff", "\udfff"])
ID_CHARS = st.one_of(st.characters(codec="utf-8"), st.sampled_from('"\\\'/\b\f\n\r\t\x00\x1f\x7f é€😀\u2028'),
                     SURROGATES)
TEXT = st.lists(ID_CHARS, max_size=12).map("".join)
PLAIN = st.text(st.characters(codec="utf-8"), max_size=8)  # no surrogates
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10**30, max_value=10**30),
                   st.floats(allow_nan=True, allow_infinity=True), TEXT)
VALUE = st.recursive(SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(TEXT, inner, max_size=3)), max_leaves=6)
BASE64 = st.one_of(st.binary(max_size=12).map(lambda b: __import__("base64").b64encode(b).decode()),
                   st.text(alphabet="AQgw=+/\n é", max_size=10))
SPECS = [  # the output specs of harness/workload/payloads.py, some of them bad
    st.builds(lambda s: {"text": s}, TEXT),
    st.builds(lambda s: {"base64": s}, BASE64),
    st.builds(lambda s: {"error": s}, TEXT),
    st.builds(lambda u, k, t: {"fill": u, "count": k, "tail": t}, TEXT,
              st.one_of(st.integers(min_value=-2, max_value=40), st.sampled_from([(1 << 26) + 1, True, 2.0, "3"])), TEXT),
]
OUT = st.one_of(*SPECS, st.dictionaries(st.sampled_from(["text", "base64", "error", "fill", "count", "tail", "x"]),
                                        SCALAR, max_size=3), SCALAR)
# What harness/workload/server.py sends (the fast path), and anything at all (the fallback too).
WORKLOAD_INPUT = st.fixed_dictionaries({"tool_use_id": PLAIN, "n": st.integers(-10**17, 10**17)}, optional={
    "sleep_ms": st.one_of(st.integers(-1, 2), st.floats(-1, 2.5)), "fail": st.booleans(),
    "out": st.one_of(*SPECS), "other": SCALAR})
INPUT = st.fixed_dictionaries({}, optional={
    "tool_use_id": st.one_of(TEXT, TEXT, SCALAR),
    "n": VALUE,
    "fail": SCALAR,
    "out": OUT,
    "sleep_ms": st.one_of(st.sampled_from([0, 1, 0.5, -3, None, True, "5", 1e300]), st.floats(max_value=1.5)),
})


def encode(value, ascii_only: bool) -> bytes:
    """JSON text as an agent sends it: escapes only, or raw UTF-8 with lone surrogates as their 3 bytes."""
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@diff_settings
@given(data=st.one_of(WORKLOAD_INPUT, INPUT), ascii_only=st.booleans(),
       name=st.sampled_from(["effect_a", "ef\u00e9\"\\", "x y"]))
def test_both_tools_answer_a_generated_input_alike(c_tool, tmp_path, data, ascii_only, name):
    seed = encode({"tool_use_id": str(data.get("tool_use_id", "")), "attempt": 1}, True)[:-1] + b", ...}\n"
    run_both(c_tool, tmp_path, encode(data, ascii_only), name=name, seed_ledger=seed * 2)


def _mutate(text: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    for at, cut, insert in edits:
        at %= len(text) + 1
        text = text[:at] + insert + text[at + cut:]
    return text


BROKEN = st.builds(_mutate, WORKLOAD_INPUT.map(lambda d: encode(d, False)),
                   st.lists(st.tuples(st.integers(0, 200), st.integers(0, 3),
                                      st.sampled_from([b"", b"{", b"[", b"]", b"}", b",", b":", b'"', b"\\", b"\\u",
                                                       b"\\ud800", b"\\udc00", b"1e", b"-", b".5", b"0", b" ", b"\t",
                                                       b"\x01", b"\xff", b"\xed\xa0", b"\xed\xa0\x80", b"\xf0\x9f",
                                                       b"\xe2\x82", b"\xc3", b"NaN", b"-Infinity", b"nul", b"tru"])),
                            min_size=1, max_size=3))


@diff_settings
@given(stdin=st.one_of(BROKEN, st.binary(max_size=16)))
def test_both_tools_refuse_or_read_broken_input_alike(c_tool, tmp_path, stdin):
    run_both(c_tool, tmp_path, stdin)


EDGE_CASES = [
    b"", b" {\"n\" :-0 ,\"fail\":false}\r\n", b'{"n": 123456789012345678, "x": [1]}',
    b'{"tool_use_id": "\\ud83d\\ude00\\ud800x\\udc80"}', b'{"tool_use_id": "\xed\xa0\xbd\xed\xb8\x80"}',
    b'{"tool_use_id": "\\u0000\\u001f\\u007f\\u2028\\"\\\\/\\ud83d\\uDE00", "n": -5}',
    b'{"tool_use_id": "a", "t\\u006fol_use_id": "b"}', b'{"sleep_ms": 1e-400, "z": null}',
    b'{"out": {"text": "\\ud83d\xed\xb8\x80\\ud800\\u0041"}}',
    b'{"out": {"fill": "", "count": 67108864, "tail": "t"}}', b'{"out": {"fill": "a", "count": 67108865, "tail": ""}}',
    b'{"out": {"base64": "QUJD="}}', b'{"out": {"base64": "QR=="}}',
]


def test_both_tools_answer_the_edge_cases_alike(c_tool, tmp_path):
    # What generated inputs rarely reach: integer-size limits, pad rules, sleeps too long, surrogates, escapes.
    for stdin in EDGE_CASES:
        run_both(c_tool, tmp_path, stdin)


def test_both_tools_read_the_environment_alike(c_tool, tmp_path):
    for env in ({"FISKJ_HARNESS_LEG": " +1_0 "}, {"FISKJ_HARNESS_LEG": "-007"}, {"FISKJ_HARNESS_LEG": "\u0663"},
                {"FISKJ_TOOL_USE_ID": "env-\u00e9"}, {"LANG": "C", "FISKJ_TOOL_USE_ID": "\u00e9"}, {"FISKJ_LEDGER": ""}):
        run_both(c_tool, tmp_path, b'{"n": 1, "tool_use_id": ""}', env=env)


def test_both_tools_name_themselves_alike(c_tool, tmp_path):
    # A name that is not UTF-8 is read with surrogateescape and printed back as its bytes.
    for name, fail in ((b"ef\xff\xed\xa0\x80", b"false"), ("\u00e9\u2028", b"true")):
        run_both(c_tool, tmp_path, b'{"tool_use_id": "\\u00e9", "fail": ' + fail + b"}", name=name)
