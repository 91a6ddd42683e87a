"""The agent loop's thinking policy (docs/spec.md section 12, rule 8): thinking blocks go back only to the model that
signed them, and a tool loop keeps the configuration it started with (fiskj.loop; issue 15 item 7)."""

from __future__ import annotations

import json

from fake_anthropic import reply, text, tool_use, turns
from fiskj.loop import RunConfig
from loop_helpers import CONFIG, effect, fx, journal_bytes, resume, run, store  # noqa: F401

def thinking_turn(sig, *blocks, stop=None):
    return reply([{"type": "thinking", "thinking": f"thoughts {sig}", "signature": sig}, *blocks], stop=stop)


def test_a_forced_resume_with_another_model_sends_no_thinking_block_of_the_earlier_model_and_rewrites_nothing(
        store, fx):
    # Issue 15 item 7 (docs/spec.md section 12, rule 8): signatures are bound to the model that made them.
    leg1 = [thinking_turn("sig-A", stop="pause_turn"), thinking_turn("sig-A2", tool_use("s", "flag_suspend"))]
    config = RunConfig(model="model-a", max_tokens=10_000, max_iterations=10, thinking="enabled:2048")
    result, _ = run(store, fx, lambda request: leg1.pop(0), config=config)
    assert result.reason == "suspended"
    before = journal_bytes(store, "r1")
    other = RunConfig(model="model-b", max_tokens=10_000, max_iterations=10, thinking="enabled:2048")
    leg2 = [thinking_turn("sig-B", effect("b")), reply([text("done")])]
    result, model = resume(store, fx, lambda request: leg2.pop(0), config=other, force=True)
    assert result.reason == "completed"
    assert journal_bytes(store, "r1").startswith(before)  # earlier records byte for byte, sig-A included
    assert b'"signature":"sig-A"' in before
    first, second = model.requests
    sent = json.dumps(first["messages"])
    assert "sig-A" not in sent and "thoughts" not in sent
    assert first["messages"][1]["content"] == [text("(reasoning of an earlier model omitted)")]  # was thinking only
    assert first["messages"][2]["content"] == [tool_use("s", "flag_suspend")]
    assert "thinking" not in first  # it continues a tool loop whose last turn has no thinking block left
    assert first["max_tokens"] == CONFIG.call_max_tokens
    assert second["messages"][4]["content"][0]["signature"] == "sig-B"  # this leg's own turn, kept
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 2048}


def test_a_forced_resume_with_the_same_model_sends_the_journaled_thinking_blocks_verbatim(store, fx):
    config = RunConfig(model="model-a", max_tokens=10_000, max_iterations=10, thinking="enabled:2048")
    leg1 = [thinking_turn("sig-A", tool_use("s", "flag_suspend"))]
    assert run(store, fx, lambda request: leg1.pop(0), config=config)[0].reason == "suspended"
    larger = RunConfig(model="model-a", max_tokens=20_000, max_iterations=10, thinking="enabled:4096")
    result, model = resume(store, fx, lambda request: reply([text("done")]), config=larger, force=True)
    assert result.reason == "completed"
    sent = model.requests[0]
    assert sent["messages"][1]["content"][0] == {"signature": "sig-A", "thinking": "thoughts sig-A",
                                                 "type": "thinking"}
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 4096}  # the turn starts with thinking


def test_a_forced_switch_to_thinking_in_the_middle_of_a_tool_loop_continues_the_loop_without_thinking(store, fx):
    leg1 = turns([tool_use("s", "flag_suspend")])
    assert run(store, fx, leg1)[0].reason == "suspended"
    thinking = RunConfig(model="fake-1", system="be brief", max_tokens=10_000, max_iterations=10,
                         thinking="enabled:2048")
    result, model = resume(store, fx, lambda request: reply([text("done")]), config=thinking, force=True)
    assert result.reason == "completed" and "thinking" not in model.requests[0]  # one configuration per loop
