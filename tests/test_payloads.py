"""The payload keys of ``[workload]`` (issue 15, class 2): what the script holds, what the tools print,
what the parser refuses, and that the reference engine runs the bundled payload scenarios.

harness/workload/payloads.py (pure), harness/workload/build.py, harness/workload/ledger_tool.py,
harness/scenario/parse.py; docs/scenarios.md ``[workload]``.  The server side is tests/test_payload_server.py.
"""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fiskj.encode import MAX_RECORD_BYTES, TOOL_OUTPUT_KEEP_BYTES, encode_record, fit_tool_result
from fiskj.errors import RecordTooLarge
from fiskj.records import ToolResultRecord, tool_result_block
from harness.scenario.model import OUTPUT_KINDS, WorkloadSpec
from harness.scenario.parse import ScenarioError, bundled_scenario_dir, bundled_scenarios, load_scenario, \
    parse_scenario
from harness.workload import payloads
from harness.workload.build import MODEL_NAME, TOOL_NAMES, build_workload, ledger_tool_path
from harness.workload.ledger_tool import render_out
from harness.workload.server import STOP_SEQUENCE, Script, Session, ToolCall, Turn

PAYLOADS = """
[workload]
seed = 3
turns = 3
tools_per_turn = 3
outputs = ["unicode", "separators", "controls", "json", "binary", "error"]
limit_outputs = ["under", "over"]
reply_blocks = [["thinking"], ["redacted_thinking", "web_search"], []]
answer_stop_reasons = ["stop_sequence", "end_turn"]
pause_turn = true
cache_tokens = 1000
chat_followups = 1
"""


def scenario(workload: str = PAYLOADS, name: str = "p"):
    return parse_scenario(f'name = "{name}"\npurpose = "payloads"\n{workload}', f"{name}.toml")


def legacy_script(spec: WorkloadSpec, name: str) -> Script:
    """The script build_workload made before the payload keys existed (its loop, copied)."""
    rng = random.Random(spec.seed)
    turns = []
    lo, hi = spec.tool_ms
    for segment in range(spec.chat_followups + 1):
        for j in range(spec.turns):
            k = rng.randint(1, spec.tools_per_turn)
            calls = []
            for i in range(k):
                sleep = lo if hi == lo else round(rng.uniform(lo, hi), 3)
                calls.append(ToolCall(name=TOOL_NAMES[(j + i) % len(TOOL_NAMES)], sleep_ms=sleep,
                                      n=rng.randint(0, 999)))
            turns.append(Turn(tools=tuple(calls)))
        turns.append(Turn(text=f"Final answer {segment} of {name}: all ledger work done."))
    return Script(seed=spec.seed, turns=tuple(turns), delay_ms=spec.model_ms, vary_on_repeat=spec.vary_on_repeat,
                  model=MODEL_NAME)


# --- defaults: the scripts of every earlier scenario are unchanged ---------------------------------------

def test_without_payload_keys_every_bundled_scenario_gets_the_script_and_replies_it_always_got():
    paths = [p for p in bundled_scenarios() + sorted((bundled_scenario_dir() / "regressions").glob("*.toml"))
             if not p.stem.startswith(("payload-", "thinking-", "generated-", "max-tokens-"))]  # those set payload keys
    assert len(paths) > 20
    for path in paths:
        s = load_scenario(path)
        script = build_workload(s).script
        # the one new knob: a scenario whose resume turns thinking on gets a model that does not think unasked-for
        assert script.thinks_when_asked == ("thinking" not in s.workload.drift), path
        assert replace(script, thinks_when_asked=True) == legacy_script(s.workload, s.name), path
        for turn in range(len(script.turns) + 1):
            blocks, stop, usage = script.reply(turn)
            assert [b["type"] for b in blocks] == ["text"] + ["tool_use"] * (len(blocks) - 1)
            assert all(set(b["input"]) <= {"tool_use_id", "n", "sleep_ms"} for b in blocks[1:])
            assert usage == {"input_tokens": 100 + 10 * turn, "output_tokens": 20 + 7 * (len(blocks) - 1),
                             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
            assert stop == ("tool_use" if len(blocks) > 1 else "end_turn")
        _, body = Session("t", script).answer([{"role": "user", "content": "go"}], 0)
        assert body["stop_sequence"] is None


def test_a_regression_file_written_with_the_new_keys_at_their_defaults_parses_to_the_same_workload():
    from dataclasses import asdict

    from harness.campaign.regressions import toml_value

    spec = load_scenario(bundled_scenario_dir() / "kill-random.toml").workload
    lines = [f"{k} = {toml_value(list(v) if isinstance(v, tuple) else v)}" for k, v in asdict(spec).items()
             if k not in ("tool_ms", "drift")]
    assert scenario("[workload]\n" + "\n".join(lines) + "\ntool_ms = [" + ", ".join(map(str, spec.tool_ms)) + "]\n"
                    ).workload == spec


# --- the script the payload keys make --------------------------------------------------------------------

def test_the_payload_keys_lay_outputs_blocks_stops_a_limit_turn_and_a_pause_turn_over_the_script():
    s = scenario()
    w = build_workload(s)
    turns = w.script.turns
    plain = build_workload(replace(s.workload, outputs=(), limit_outputs=(), reply_blocks=(), answer_stop_reasons=(),
                                   pause_turn=False, cache_tokens=0), "p").script.turns
    # segment 0: a pause turn, 3 tool turns + answer; segment 1: 3 tool turns, the limit turn, the pause turn,
    # the answer
    assert len(turns) == len(plain) + 3
    assert [t.works for t in turns] == [True] * 4 + [False] + [True] * 5 + [False]
    first, limit, pause = turns[0], turns[8], turns[9]
    assert [json.loads(c.out) for c in limit.tools] == [payloads.limit_spec("under", "toolu_3_8_0"),
                                                        payloads.limit_spec("over", "toolu_3_8_1")]
    assert pause.pause and not pause.tools and first.pause and not first.tools
    # outputs cycle over the other tool calls, in script order
    calls = [c for t in turns if t.tools and t is not limit for c in t.tools]
    assert [c.name for c in calls] == [c.name for t in plain for c in t.tools]       # the same calls ...
    kinds = [next(iter(json.loads(c.out))) for c in calls]                            # ... with outputs
    want = {"unicode": "text", "separators": "text", "controls": "text", "json": "text", "binary": "base64",
            "error": "error"}
    assert kinds == [want[s.workload.outputs[i % 6]] for i in range(len(calls))]
    # reply blocks cycle over every reply; stop reasons over the final answers
    for i, turn in enumerate(turns):
        entry = s.workload.reply_blocks[i % 3]
        assert (bool(turn.thinking), turn.redacted, turn.web_search) == \
            ("thinking" in entry, "redacted_thinking" in entry, "web_search" in entry)
    assert [t.stop for t in turns if not t.works] == ["stop_sequence", "end_turn"]
    assert w.script.cache_tokens == 1000 and w.script.stop_sequence(4) == STOP_SEQUENCE
    assert w.script.stop_sequence(10) is None
    assert build_workload(s) == w                                                      # a function of the spec
    other = build_workload(replace(s.workload, seed=4)).script.turns
    assert [c.out for t in other for c in t.tools] != [c.out for t in turns for c in t.tools]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2 ** 32), kind=st.sampled_from(OUTPUT_KINDS))
def test_every_output_kind_always_holds_what_it_is_named_for(seed, kind):
    spec = payloads.output_spec(kind, random.Random(seed))
    if kind == "plain":
        assert spec is None
        return
    stdout, stderr, status = render_out(json.loads(json.dumps(spec)))  # as the tool gets it, through JSON
    text = stdout.decode("utf-8", "surrogatepass") if kind != "binary" else ""
    if kind == "unicode":
        assert "𝄞" in text and "\u0301" in text and not text.isascii()
    elif kind == "separators":
        assert {"\u2028", "\u2029", "\u0085"} <= set(text) and len(text.splitlines()) > len(text.split("\n"))
    elif kind == "controls":
        assert {chr(c) for c in range(0x20)} | {"\x7f"} <= set(text)
    elif kind == "json":  # the tool emits the escapes; the model's JSON holds no lone surrogate
        assert stdout.isascii() and "\\u0000" in text and "\\ud800" in text and "\\udfff" in text
        assert json.loads(text)["lone_high"] == "\ud800" and json.loads(text)["nul"] == "a\x00b"
        json.dumps(spec, ensure_ascii=False).encode("utf-8")
    elif kind == "surrogates":  # the model's JSON holds them; the tool prints their three bytes
        assert {"\ud800", "\udfff"} <= set(text) and b"\xed\xa0\x80" in stdout
    elif kind == "binary":
        assert b"\xff" in stdout and b"\xed\xa0\x80" in stdout
        with pytest.raises(UnicodeDecodeError):
            stdout.decode("utf-8")
    if kind == "error":
        assert (stdout, status) == (b"", 1) and "\u0085" in stderr.decode("utf-8")
    else:
        assert (stderr, status) == (b"", 0)


def test_the_limit_outputs_land_just_under_and_just_over_the_record_limit_as_fiskj_encodes_them():
    tid = "toolu_3_7_0"
    under = payloads.fill_text(payloads.limit_spec("under", tid))
    record = ToolResultRecord(tool_use_id=tid, result=tool_result_block(tid, under, False))
    assert len(encode_record(record, 10 ** 8)) == MAX_RECORD_BYTES - payloads.UNDER_BY
    block, dropped = fit_tool_result(tid, under, False)
    assert dropped == 0 and block["is_error"] is False              # journaled whole
    over = payloads.fill_text(payloads.limit_spec("over", tid))
    assert len(under) < len(over) and len(over.encode("utf-8")) < MAX_RECORD_BYTES  # over by its escapes alone
    with pytest.raises(RecordTooLarge, match=f"encodes to {MAX_RECORD_BYTES + payloads.OVER_BY} bytes"):
        encode_record(ToolResultRecord(tool_use_id=tid, result=tool_result_block(tid, over, False)), 1)
    block, dropped = fit_tool_result(tid, over, False)              # cut to an error result (spec section 6)
    kept = block["content"][0]["text"].split("\n[fiskj: tool output truncated")[0].encode("utf-8")
    assert block["is_error"] is True and over.encode("utf-8").startswith(kept)
    assert TOOL_OUTPUT_KEEP_BYTES - 4 < len(kept) <= TOOL_OUTPUT_KEEP_BYTES  # cut back to a character's start
    assert dropped == len(over.encode("utf-8")) - len(kept)
    with pytest.raises(ValueError, match="unknown limit output"):
        payloads.limit_spec("exactly", tid)


def test_the_payload_generator_and_the_event_stream_are_pure_by_the_harness_s_rules():
    from test_purity import harness_impurities

    assert harness_impurities("harness.workload.payloads", generator=True) == []   # seeded random only
    assert harness_impurities("harness.workload.sse") == []


def test_render_out_refuses_a_malformed_output_spec():
    for bad in ({}, {"text": 3}, {"base64": "%%%"}, {"fill": "x", "count": -1, "tail": ""}, {"fill": "x"}, ["text"],
                {"text": "a", "error": "b"}, {"json": {}}):
        with pytest.raises(ValueError):
            render_out(bad)
    assert render_out({"fill": "ab", "count": 2, "tail": "c"}) == (b"ababc", b"", 0)


# --- the ledger tool prints the payloads ---------------------------------------------------------------

def run_tool(tmp_path, data: bytes):
    env = {"PATH": os.environ.get("PATH", ""), "FISKJ_LEDGER": str(tmp_path / "ledger")}
    return subprocess.run([os.path.realpath(sys.executable), "-I", "-S", ledger_tool_path(), "effect_a"],
                          input=data, capture_output=True, env=env, timeout=30)


def test_the_ledger_tool_prints_its_output_spec_after_the_effect_and_reads_a_lone_surrogate_in_its_input(tmp_path):
    spec = {"text": "lone \ud800 sep \u2028 nul \x00 end"}
    # as fiskj sends a tool input: JSON, not ASCII, a lone surrogate as its three bytes
    data = json.dumps({"tool_use_id": "toolu_1_0_0", "out": spec}, ensure_ascii=False).encode("utf-8", "surrogatepass")
    out = run_tool(tmp_path, data)
    assert out.returncode == 0, out.stderr
    assert out.stdout == spec["text"].encode("utf-8", "surrogatepass")
    assert json.loads((tmp_path / "ledger").read_text())["tool_use_id"] == "toolu_1_0_0"
    err = run_tool(tmp_path, json.dumps({"tool_use_id": "toolu_1_0_1", "out": {"error": "nope ✗"}}).encode())
    assert (err.returncode, err.stdout, err.stderr.decode()) == (1, b"", "nope ✗")
    bad = run_tool(tmp_path, json.dumps({"tool_use_id": "toolu_1_0_2", "out": {"colour": 1}}).encode())
    assert bad.returncode == 2 and b"bad out" in bad.stderr
    assert len((tmp_path / "ledger").read_text().splitlines()) == 2  # a bad spec leaves no effect


def test_the_ledger_tool_prints_raw_bytes_and_a_fill(tmp_path):
    raw = b"\xff\xc0\x80ok"
    out = run_tool(tmp_path, json.dumps({"tool_use_id": "a", "out": {"base64": base64.b64encode(raw).decode()}}).encode())
    assert (out.returncode, out.stdout) == (0, raw)
    out = run_tool(tmp_path, json.dumps({"tool_use_id": "b", "out": {"fill": "é\x00", "count": 3, "tail": "!"}}).encode())
    assert (out.returncode, out.stdout) == (0, "é\x00é\x00é\x00!".encode())


# --- the parser ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,key,says", [
    ('[workload]\noutputs = ["unicode", "emoji"]\n', "workload.outputs", "items must be among"),
    ('[workload]\nlimit_outputs = ["huge"]\n', "workload.limit_outputs", "items must be among"),
    ('[workload]\nreply_blocks = ["thinking"]\n', "workload.reply_blocks", "list of lists"),
    ('[workload]\nreply_blocks = [["thinking", "thinking"]]\n', "workload.reply_blocks", "names a block twice"),
    ('[workload]\nreply_blocks = [["signed"]]\n', "workload.reply_blocks", "items must be among"),
    ('[workload]\nanswer_stop_reasons = ["max_tokens"]\n', "workload.answer_stop_reasons", "use final_stop"),
    ('[workload]\nanswer_stop_reasons = ["refusal"]\n', "workload.answer_stop_reasons", "ends the run with error"),
    ('[workload]\nanswer_stop_reasons = ["tool_use"]\n', "workload.answer_stop_reasons", "tools_per_turn"),
    ('[workload]\nanswer_stop_reasons = ["pause_turn"]\n', "workload.answer_stop_reasons", "pause_turn = true"),
    ('[workload]\nanswer_stop_reasons = ["done"]\n', "workload.answer_stop_reasons", "items must be among"),
    ('[workload]\npause_turn = 1\n', "workload.pause_turn", "true or false"),
    ('[workload]\ncache_tokens = -5\n', "workload.cache_tokens", ">= 0"),
])
def test_a_bad_payload_key_is_a_scenario_error_naming_the_file_the_line_and_the_key(text, key, says):
    with pytest.raises(ScenarioError) as info:
        parse_scenario('name = "x"\npurpose = "y"\n\n' + text, "bad.toml")
    assert (info.value.path, info.value.line, info.value.key) == ("bad.toml", 5, key)
    assert str(info.value).startswith(f"bad.toml:5: key {key!r}: ") and says in str(info.value)


# --- the reference engine runs the bundled payload scenarios -----------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name,event", [("payload-variety", 23), ("payload-cache-budget", 16)])
def test_the_reference_engine_holds_every_invariant_on_a_payload_scenario_killed_mid_run(name, event):
    from harness.campaign.campaign import Campaign

    s = load_scenario(bundled_scenario_dir() / f"{name}.toml")
    # killed mid-run (payload-variety: after its third reply's write, so the resume finishes that batch, runs
    # the over-limit tool and sends thinking back; payload-cache-budget: before its budget turn), then resumed
    schedule = [{"kind": "kill", "event": event, "when": "after"}]
    result = Campaign([s], schedules=[schedule], jobs=1, shrink_budget=0, keep_histories=True).run()
    assert not result.errors and len(result.trials) == 1
    trial = result.trials[0]
    legs = trial.history.legs
    assert len(legs) == 2 and legs[0].exit_code is None and legs[1].exit_code in (0, 1)  # killed, then resumed
    assert not trial.failed, [(v.invariant, v.summary) for v in trial.verdicts if v.status != "valid"]
    assert {v.invariant for v in trial.verdicts if v.status == "valid"} >= set(s.check.invariants)
