"""A scenario as data: the frozen dataclasses a scenario file is parsed into (pure; the keys: docs/scenarios.md).

The ``[faults]`` keys other than ``family`` and ``schedule`` are the fields of the family's ``Params``
(:mod:`harness.families.registry`), held as ``FaultSpec.params``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from harness.names import CUT_STOPS, INVARIANTS, WORKLOAD_MAX_TOKENS

__all__ = ["WorkloadSpec", "FaultSpec", "TrialSpec", "CheckSpec", "Scenario", "DRIFT_FIELDS", "OUTPUT_KINDS",
           "FINAL_STOPS", "LIMIT_OUTPUTS", "REPLY_BLOCKS", "ANSWER_STOP_REASONS", "UNFINISHED_STOP_REASONS", "family_params"]

#: Fingerprint fields a scenario may change on resume (``[workload] drift``).
DRIFT_FIELDS = ("model", "system", "tools", "thinking", "max_tokens", "max_iterations")

#: Tool output kinds of ``[workload] outputs`` (docs/scenarios.md; :mod:`harness.workload.payloads`).
OUTPUT_KINDS = ("plain", "unicode", "separators", "controls", "json", "binary", "error", "surrogates")

#: Outputs at the record limit, ``[workload] limit_outputs``: a tool_result record just under / over it.
LIMIT_OUTPUTS = ("under", "over")

#: Extra blocks of a model reply, ``[workload] reply_blocks``.
REPLY_BLOCKS = ("thinking", "redacted_thinking", "web_search")

#: Stop reasons a final answer may end with, ``[workload] answer_stop_reasons``.
ANSWER_STOP_REASONS = ("end_turn", "stop_sequence")

#: Stop reasons the Messages API has that ``answer_stop_reasons`` does not take, and where they come from.
UNFINISHED_STOP_REASONS = {
    "tool_use": "a turn with tool_use blocks ends so; tool turns come from turns and tools_per_turn",
    "pause_turn": "a paused server-tool turn comes from pause_turn = true",
    "max_tokens": "a reply cut off at max_tokens ends the run with error (docs/spec.md section 12, rule 6): "
                  "use final_stop = \"max_tokens\"",
    "refusal": "a refusal ends the run with error (docs/spec.md section 12, rule 6): use final_stop = \"refusal\"",
}
#: ``[workload] final_stop``: the run's last reply stops so and the run ends with ``error``.
FINAL_STOPS = CUT_STOPS


@dataclass(frozen=True)
class WorkloadSpec:
    """What the agent does (the ``[workload]`` table: every key, its unit and default in docs/scenarios.md).

    Times in milliseconds, ``cache_tokens`` in tokens; the payload keys default to none, so a scenario without
    them gets the plain script.  ``generate`` N > 0: the scenario stands for N workloads drawn by hypothesis
    (:mod:`harness.scenario.generate`), which replace these keys.
    """

    turns: int = 3
    tools_per_turn: int = 2
    tool_ms: tuple[float, float] = (0.0, 0.0)
    model_ms: float = 0.0
    chat_followups: int = 0
    max_tokens: int = WORKLOAD_MAX_TOKENS
    max_iterations: int = 0
    vary_on_repeat: bool = False
    seed: int = 1
    drift: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    limit_outputs: tuple[str, ...] = ()
    reply_blocks: tuple[tuple[str, ...], ...] = ()
    answer_stop_reasons: tuple[str, ...] = ()
    pause_turn: bool = False
    cache_tokens: int = 0
    thinking: str = ""
    final_stop: str = ""
    generate: int = 0


@dataclass(frozen=True)
class FaultSpec:
    """Which faults the nemesis injects (the ``[faults]`` table): ``family``; ``schedule``, one explicit schedule
    every trial runs, or ``None``; ``params``, the family's ``Params`` (``None`` only in a hand-built scenario:
    the family's defaults); ``given``, the family keys the file gave, ``(key, value)`` pairs in file order."""

    family: str = "none"
    schedule: tuple[dict[str, Any], ...] | None = None
    params: Any = None
    given: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class TrialSpec:
    """How many trials, their seed and their budgets (the ``[trials]`` table)."""

    count: int = 20
    seed: int = 1
    timeout_s: float = 60.0
    max_legs: int = 0


@dataclass(frozen=True)
class CheckSpec:
    """Which invariants must hold, and ``resume_after_completed`` (a completed run resumed once more must be
    refused, judged as I9): the ``[check]`` table, docs/scenarios.md."""

    invariants: tuple[str, ...] = INVARIANTS
    resume_after_completed: bool = False


@dataclass(frozen=True)
class Scenario:
    """One scenario file, parsed and checked: ``path`` the file (``None`` when parsed from text), ``raw`` the TOML
    document as parsed, ``draw`` the number K of one draw of a generated scenario (named ``NAME.wK``)."""

    name: str
    purpose: str
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    faults: FaultSpec = field(default_factory=FaultSpec)
    trials: TrialSpec = field(default_factory=TrialSpec)
    check: CheckSpec = field(default_factory=CheckSpec)
    path: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    draw: int | None = None


def family_params(cls: type[Any], scenario: Scenario, defaults: dict[str, Any], overrides: dict[str, Any]) -> Any:
    """The parameters ``cls`` (a family's ``Params`` dataclass) for ``scenario``: ``defaults`` (from the scenario's
    other tables), then the ``[faults]`` keys the file gave that are fields of ``cls``, then the non-None
    ``overrides``, each over the one before; absent fields keep ``cls``'s defaults."""
    known = {f.name for f in fields(cls)}
    return cls(**{**defaults, **{k: v for k, v in scenario.faults.given if k in known},
                  **{k: v for k, v in overrides.items() if v is not None}})
