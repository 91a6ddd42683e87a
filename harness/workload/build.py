"""A scenario's workload: script, tools file, prompt, follow-ups, run configuration (docs/workload.md)."""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, replace
from typing import Any

from harness.names import CUT_STOPS
from harness.scenario.model import Scenario, WorkloadSpec
from harness.workload.ledger_build import SCRIPT, ledger_tool
from harness.workload.payloads import limit_spec, output_spec, thinking_text
from harness.workload.server import Script, ToolCall, Turn
from harness.workload.tools import INPUT_SCHEMA, PLAIN, TOOL_NAMES, check_template, description

__all__ = ["TOOL_NAMES", "MODEL_NAME", "Workload", "build_workload", "ledger_tool", "ledger_tool_path",
           "tool_definitions", "write_tools_file"]

#: The model name the agent is configured with (stored in the fingerprint).
MODEL_NAME = "claude-fiskj-fake"


def ledger_tool_path() -> str:
    """Absolute path of :mod:`harness.workload.ledger_tool` (a standalone script)."""
    return str(SCRIPT)


def tool_definitions(interpreter: str | None = None, drifted: bool = False) -> list[dict[str, Any]]:
    """Return the ledger tools as fiskj ``--tools`` entries ``{"name", "description", "input_schema", "command"}``.

    The command is :func:`ledger_tool`'s.  ``drifted``: the descriptions say so, which changes the tool set's
    hash (fingerprint drift ``"tools"``) and nothing else.
    """
    choice = ledger_tool(interpreter)
    return [{"name": name, "description": description(name, drifted), "input_schema": INPUT_SCHEMA,
             "command": choice.command(name)} for name in TOOL_NAMES]


def write_tools_file(path: str | os.PathLike[str], interpreter: str | None = None, drifted: bool = False) -> str:
    """Write :func:`tool_definitions` as JSON to ``path``; returns ``str(path)``."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tool_definitions(interpreter, drifted), f, indent=1)
    return str(path)


@dataclass(frozen=True)
class Workload:
    """A scenario's workload, ready to run: the fake model's ``script``, the initial ``prompt``, chat
    ``followups`` fed on stdin, and the run configuration (``model``, ``max_tokens``, ``max_iterations``)."""

    spec: WorkloadSpec
    script: Script
    prompt: str
    followups: tuple[str, ...]
    model: str
    max_tokens: int
    max_iterations: int

    @property
    def chat(self) -> bool:
        """True when the run is a ``--chat`` run (it has follow-ups)."""
        return bool(self.followups)

    @property
    def thinking(self) -> str:
        """The run's thinking mode (``[workload] thinking``; empty: none given, thinking off)."""
        return self.spec.thinking

    @property
    def tool_calls(self) -> int:
        """Total number of scripted tool_use blocks."""
        return sum(len(t.tools) for t in self.script.turns)

    def stdin_for(self, consumed: int) -> bytes:
        """Stdin bytes for a leg after ``consumed`` follow-ups were journaled: the rest, one per line."""
        return "".join(line + "\n" for line in self.followups[consumed:]).encode("utf-8")


def build_workload(spec: WorkloadSpec | Scenario, name: str = "scenario", tool_name: str = PLAIN) -> Workload:
    """Build the :class:`Workload` of a workload spec (or of a scenario's): docs/workload.md.

    ``tool_name``: a template of :func:`harness.workload.tools.check_template`
    (default: the plain name); raises :class:`harness.workload.tools.ToolNameError`
    for one that cannot name the tools.  ``max_iterations`` 0 means every
    scripted turn + 5.
    """
    if isinstance(spec, Scenario):
        name = spec.name
        spec = spec.workload
    rng = random.Random(spec.seed)
    turns: list[Turn] = []
    lo, hi = spec.tool_ms
    for segment in range(spec.chat_followups + 1):
        for j in range(spec.turns):
            k = rng.randint(1, spec.tools_per_turn)
            calls = []
            for i in range(k):
                sleep = lo if hi == lo else round(rng.uniform(lo, hi), 3)
                calls.append(ToolCall(name=TOOL_NAMES[(j + i) % len(TOOL_NAMES)], sleep_ms=sleep, n=rng.randint(0, 999)))
            turns.append(Turn(tools=tuple(calls)))
        turns.append(Turn(text=f"Final answer {segment} of {name}: all ledger work done."))
    turns = _with_payloads(spec, turns)
    if spec.thinking:  # a model with thinking on starts every reply with a signed thinking block
        turns = [t if t.thinking else replace(t, thinking=f"Turn {i}: thinking it over first.")
                 for i, t in enumerate(turns)]
    script = Script(seed=spec.seed, turns=tuple(turns), delay_ms=spec.model_ms, vary_on_repeat=spec.vary_on_repeat,
                    model=MODEL_NAME, cache_tokens=spec.cache_tokens,
                    thinks_when_asked="thinking" not in spec.drift, tool_name=check_template(tool_name))
    followups = tuple(f"follow-up {i + 1}: do the next batch" for i in range(spec.chat_followups))
    max_iterations = spec.max_iterations or (len(turns) + 5)
    return Workload(spec=spec, script=script, followups=followups, model=MODEL_NAME, max_tokens=spec.max_tokens,
                    prompt=f"Scenario {name}: do the scripted ledger work with the tools you have.",
                    max_iterations=max_iterations)


def _with_payloads(spec: WorkloadSpec, turns: list[Turn]) -> list[Turn]:
    """Lay the payload keys of ``spec`` over ``turns`` (docs/scenarios.md ``[workload]``); returns new turns.

    With every payload key at its default, ``turns`` come back unchanged.
    """
    if spec.final_stop:  # the last reply stops so (a max_tokens cut carries a tool_use block that must never run)
        cut = random.Random(f"fiskj-final-stop/{spec.seed}").randint(0, 999)
        turns = turns[:-1] + [replace(turns[-1], stop=spec.final_stop, text=f"Answer cut short ({spec.final_stop}).",
                                      tools=(ToolCall(name=TOOL_NAMES[0], n=cut),) if spec.final_stop == "max_tokens"
                                      else ())]
    if not (spec.outputs or spec.limit_outputs or spec.reply_blocks or spec.answer_stop_reasons or spec.pause_turn):
        return turns
    rng = random.Random(f"fiskj-payloads/{spec.seed}")
    n = rng.randint(0, 999)
    if spec.pause_turn:  # a paused search first: every later request holds the paused turn and its continuation
        turns = [Turn(pause=True, text="Turn 0: searching the web before anything else (paused).")] + list(turns)
    last = len(turns) - 1  # the last final answer
    extra: list[Turn] = []
    if spec.limit_outputs:
        index = last
        extra.append(Turn(tools=tuple(
            ToolCall(name=TOOL_NAMES[k % len(TOOL_NAMES)], n=n,
                     out=json.dumps(limit_spec(which, f"toolu_{spec.seed}_{index}_{k}"), separators=(",", ":")))
            for k, which in enumerate(spec.limit_outputs)), text=f"Turn {index}: outputs at the record limit."))
    if spec.pause_turn:
        extra.append(Turn(pause=True, text=f"Turn {last + len(extra)}: searching the web first (paused)."))
    turns = turns[:last] + extra + turns[last:]
    limit_turn = last if spec.limit_outputs else -1
    out: list[Turn] = []
    calls = answers = 0
    for index, turn in enumerate(turns):
        if spec.outputs and turn.tools and index != limit_turn:
            tools = []
            for call in turn.tools:
                payload = output_spec(spec.outputs[calls % len(spec.outputs)], rng)
                calls += 1
                tools.append(call if payload is None else
                             replace(call, out=json.dumps(payload, separators=(",", ":"))))
            turn = replace(turn, tools=tuple(tools))
        if spec.reply_blocks:
            blocks = spec.reply_blocks[index % len(spec.reply_blocks)]
            turn = replace(turn, thinking=thinking_text(rng, index) if "thinking" in blocks else "",
                           redacted="redacted_thinking" in blocks, web_search="web_search" in blocks)
        if not turn.works and turn.stop not in CUT_STOPS:  # (a final_stop reply keeps its stop reason)
            if spec.answer_stop_reasons:
                turn = replace(turn, stop=spec.answer_stop_reasons[answers % len(spec.answer_stop_reasons)])
            answers += 1
        out.append(turn)
    return out
