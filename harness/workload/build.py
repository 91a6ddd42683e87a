"""The workload role: what the agent is asked to do, and with which tools.

:func:`build_workload` turns a scenario's ``[workload]`` table into a
:class:`Workload`: the fake model's :class:`harness.workload.server.Script`, the
ledger tool definitions (fiskj's ``--tools FILE`` format), the prompt, the
chat follow-ups and the run configuration (model, budgets).  It knows no
faults.  Everything is a pure function of the workload spec and its seed,
so a reference run and every trial of a scenario see the same script.
"""

from __future__ import annotations

import json
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.scenario.model import Scenario, WorkloadSpec
from harness.workload.server import Script, ToolCall, Turn

__all__ = ["TOOL_NAMES", "MODEL_NAME", "Workload", "build_workload", "ledger_tool_path", "tool_definitions", "write_tools_file"]

#: The ledger tools an agent is given; turns draw from them in order.
TOOL_NAMES = ("effect_a", "effect_b", "effect_c")

#: The model name the agent is configured with (stored in the fingerprint).
MODEL_NAME = "claude-fiskj-fake"


def ledger_tool_path() -> str:
    """Absolute path of :mod:`harness.workload.ledger_tool` (a standalone script)."""
    return str(Path(__file__).resolve().parent / "ledger_tool.py")


def _interpreter() -> str:
    # The real binary, not a wrapper script (a pyenv shim costs ~60 ms per start).
    return os.path.realpath(sys.executable)


def tool_definitions(interpreter: str | None = None, drifted: bool = False) -> list[dict[str, Any]]:
    """Return the ledger tools as fiskj ``--tools`` entries.

    Each is ``{"name", "description", "input_schema", "command"}``; the
    command is ``[python, "-I", "-S", ledger_tool.py, NAME]`` (input JSON on
    stdin, result on stdout).  ``drifted``: the descriptions say so, which
    changes the tool set's hash (fingerprint drift ``"tools"``) and nothing else.
    """
    python = interpreter or _interpreter()
    schema = {
        "type": "object",
        "properties": {
            "tool_use_id": {"type": "string", "description": "the id of this tool_use block"},
            "sleep_ms": {"type": "number", "description": "milliseconds to work after the effect"},
            "n": {"type": "integer", "description": "a payload number echoed in the result"},
        },
        "required": ["tool_use_id"],
    }
    return [
        {
            "name": name,
            "description": f"Record one side effect in the harness ledger ({name})."
                           + (" Drifted description." if drifted else ""),
            "input_schema": schema,
            "command": [python, "-I", "-S", ledger_tool_path(), name],
        }
        for name in TOOL_NAMES
    ]


def write_tools_file(path: str | os.PathLike[str], interpreter: str | None = None, drifted: bool = False) -> str:
    """Write :func:`tool_definitions` as JSON to ``path``; returns ``str(path)``."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tool_definitions(interpreter, drifted), f, indent=1)
    return str(path)


@dataclass(frozen=True)
class Workload:
    """A scenario's workload, ready to run.

    ``script``: what the fake model answers; ``prompt``: the initial user
    prompt; ``followups``: chat lines fed on stdin (``chat`` is true when any);
    ``model``, ``max_tokens``, ``max_iterations``: the run configuration (the
    fingerprint); ``tool_calls``: total tool_use blocks of the script.
    """

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
    def tool_calls(self) -> int:
        """Total number of scripted tool_use blocks."""
        return sum(len(t.tools) for t in self.script.turns)

    def stdin_for(self, consumed: int) -> bytes:
        """Stdin bytes for a leg after ``consumed`` follow-ups were journaled: the rest, one per line."""
        return "".join(line + "\n" for line in self.followups[consumed:]).encode("utf-8")


def build_workload(spec: WorkloadSpec | Scenario, name: str = "scenario") -> Workload:
    """Build the :class:`Workload` of a workload spec (or of a scenario's).

    The script has ``chat_followups + 1`` segments; each is ``turns``
    tool-calling turns (1..``tools_per_turn`` tool_use blocks each, tools
    taken round-robin from :data:`TOOL_NAMES`, sleep drawn from ``tool_ms``)
    then a final text answer.  Draws come from ``random.Random(spec.seed)``.
    ``max_iterations`` 0 means: every scripted turn + 5.
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
    script = Script(seed=spec.seed, turns=tuple(turns), delay_ms=spec.model_ms, vary_on_repeat=spec.vary_on_repeat,
                    model=MODEL_NAME)
    followups = tuple(f"follow-up {i + 1}: do the next batch" for i in range(spec.chat_followups))
    max_iterations = spec.max_iterations or (len(turns) + 5)
    return Workload(
        spec=spec,
        script=script,
        prompt=f"Scenario {name}: do the scripted ledger work with the tools you have.",
        followups=followups,
        model=MODEL_NAME,
        max_tokens=spec.max_tokens,
        max_iterations=max_iterations,
    )
