"""What a subject promises about its own semantics (a profile's ``[promises]``; docs/spec.md section 15
"Declared promises").  Pure.

The checkers judge against these, never against fisk-ai's rules assumed: a promise the agent breaks is a
violation, a behaviour it never promised is not.  :data:`FISK_AI` (the default) is fiskj's and fisk-ai's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Promises", "FISK_AI", "RESUME_COMPLETED", "INTERRUPTED_TOOL", "SUSPEND_SIGNALS", "COMPLETED_PROBE",
           "CUT_OFF_TURN", "DURABLE", "DRIFTED_RESUME"]

#: What a resume of a completed run does: refused (nothing appended), continued with a new turn, or nothing.
RESUME_COMPLETED = ("refuse", "new-turn", "no-op")
#: How a tool interrupted by a crash is treated on resume: re-run (at most one tool per crash), every tool of the
#: step in flight re-run (each at most once per crash: an agent that saves a batch's results together, as a
#: LangGraph ToolNode does), or answered with an "interrupted, outcome unknown" error result and never re-run.
INTERRUPTED_TOOL = ("rerun-at-most-once", "rerun-step", "reported")
#: What a reply stopped by max_tokens or refusal does: ends the run with error, its tools never run (fisk-ai);
#: or the agent goes on (runs the complete tool calls it holds, asks again after a refusal) and completes.
CUT_OFF_TURN = ("ends-run", "continues")
#: What a resume under a changed configuration (model, prompt, tools, budgets) does: refused (fisk-ai's
#: fingerprint, docs/spec.md section 7), or continued under the new one (an agent that keeps no fingerprint).
DRIFTED_RESUME = ("refuse", "continues")
#: What an opaque store promises to survive (docs/subject.md "Journal formats"): a power loss (its writes are
#: fsynced before the agent acts on them), or only a process crash (a power loss may lose what it acted on).
DURABLE = ("power-loss", "process-crash")
#: The signals a nemesis sends to suspend a leg (harness/runner/faults.py); one not promised aborts like a kill.
SUSPEND_SIGNALS = ("SIGINT", "SIGTERM")
#: The ``probe`` of the leg that resumes a completed run (``[check] resume_after_completed``).
COMPLETED_PROBE = "resume after completed"


@dataclass(frozen=True)
class Promises:
    """``resume_completed`` (:data:`RESUME_COMPLETED`), ``suspend_signals`` (those that suspend cleanly at a
    boundary; the others of :data:`SUSPEND_SIGNALS` abort the step in flight like a kill) and
    ``interrupted_tool`` (:data:`INTERRUPTED_TOOL`), ``cut_off_turn`` (:data:`CUT_OFF_TURN`), ``durable``
    (:data:`DURABLE`), ``drifted_resume`` (:data:`DRIFTED_RESUME`)."""

    resume_completed: str = "refuse"
    suspend_signals: tuple[str, ...] = SUSPEND_SIGNALS
    interrupted_tool: str = "rerun-at-most-once"
    cut_off_turn: str = "ends-run"
    durable: str = "power-loss"
    drifted_resume: str = "refuse"

    def aborts(self, leg: Any) -> bool:
        """True when ``leg`` (a :class:`harness.history.model.Leg`) got an injected suspend signal this
        subject promises to abort on, not suspend: judged like a kill."""
        f = leg.fault
        return f.kind == "suspend" and f.injected and bool(f.signal) and f.signal not in self.suspend_signals

    @property
    def expect_after_completed(self) -> str:
        """What the leg resuming a completed run must do: ``refused``, ``new-turn`` or ``no-op``."""
        return "refused" if self.resume_completed == "refuse" else self.resume_completed

    def describe(self) -> str:
        """One line for the report header."""
        aborts = [s for s in SUSPEND_SIGNALS if s not in self.suspend_signals]
        return (f"resume of a completed run: {self.resume_completed}; suspend on "
                f"{', '.join(self.suspend_signals) or 'no signal'}"
                + (f", abort like a kill on {', '.join(aborts)}" if aborts else "")
                + f"; interrupted tool: {self.interrupted_tool}"
                + (f"; cut-off turn: {self.cut_off_turn}" if self.cut_off_turn != "ends-run" else "")
                + (f"; durable against: {self.durable} only" if self.durable != "power-loss" else "")
                + (f"; drifted resume: {self.drifted_resume}" if self.drifted_resume != "refuse" else ""))

    @classmethod
    def from_json(cls, raw: dict[str, Any] | None) -> "Promises":
        """Inverse of ``dataclasses.asdict`` (``None`` or ``{}``: :data:`FISK_AI`)."""
        raw = dict(raw or {})
        if "suspend_signals" in raw:
            raw["suspend_signals"] = tuple(raw["suspend_signals"])
        return cls(**raw)


#: fiskj's and fisk-ai's rules (docs/spec.md sections 12 and 13): the default of every subject.
FISK_AI = Promises()
