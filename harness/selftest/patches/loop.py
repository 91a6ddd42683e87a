"""Patches of the agent loop and its fold: what a leg journals, runs, counts and settles (docs/spec.md
sections 8 and 12)."""

from __future__ import annotations

from typing import Any, Callable

from fiskj import fold, loop
from fiskj.records import AssistantRecord, TerminalRecord, ToolResultRecord, tool_use_ids
from fiskj.tools import ToolCall

from harness.selftest.patches import StandIn, swapped, wrap

__all__ = ["result_before_tool", "assistant_after_tools", "suspend_mid_batch", "rerun_answered_tools",
           "counters_from_zero", "pending_turn_not_counted", "completed_never_written", "resume_skips_completed",
           "recall_final_answer", "settled_answer_not_printed", "run_cut_off_turn", "strip_inherited_thinking",
           "cache_counters_not_folded", "cache_usage_ignored", "budget_one_turn_late"]


def _on_new_run(change: Callable[[Any, Any, Any], None]) -> Callable[[Any, Any, Any], None]:
    """Decorator: every ``loop._Run`` calls ``change(run, journal, state)`` once it is built (``state``: the
    fold it resumes from, only its meta record for a fresh run)."""

    @wrap(loop._Run, "__init__")
    def __init__(original: Any, self: Any, journal: Any, state: Any, *args: Any, **kwargs: Any) -> None:
        original(self, journal, state, *args, **kwargs)
        change(self, journal, state)

    return change


def _drop_completed(journal: Any) -> None:
    """``journal`` writes no ``completed`` terminal record (the leg still ends as completed, exit 0)."""
    real = journal.append

    def append(record: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(record, TerminalRecord) and record.reason == "completed":
            return None
        return real(record, *args, **kwargs)

    journal.append = append


def result_before_tool() -> None:
    """During ``_Run._run_batch`` each tool's result record is appended before the tool runs (an empty
    placeholder: the tool has not run), and the real one after it is not; the model is sent the real output,
    kept only in memory."""

    @wrap(loop._Run, "_run_batch")
    def _run_batch(original: Any, self: Any, blocks: list[dict[str, Any]], done: dict[str, Any]) -> Any:
        tools, journal = self.tools, self.journal

        def run(name: str, arguments: Any, call: ToolCall) -> Any:
            placeholder = {"type": "tool_result", "tool_use_id": call.tool_use_id, "content": "", "is_error": False}
            journal.append(ToolResultRecord(tool_use_id=call.tool_use_id, result=placeholder))
            return tools.run(name, arguments, call)

        def append(record: Any, *args: Any, **kwargs: Any) -> Any:
            return None if isinstance(record, ToolResultRecord) else journal.append(record, *args, **kwargs)

        with swapped(self, tools=StandIn(tools, run=run), journal=StandIn(journal, append=append)):
            return original(self, blocks, done)


def assistant_after_tools() -> None:
    """A model call keeps back an assistant record that has tool_use blocks; the batch runs its tools, then
    appends that record and the results together: a crash mid-batch leaves no trace of the turn."""

    @wrap(loop._Run, "_call_model")
    def _call_model(original: Any, self: Any) -> Any:
        journal = self.journal

        def append(record: Any) -> Any:
            if isinstance(record, AssistantRecord) and tool_use_ids(record.message):
                self._mutant_deferred = record
                return 0
            return journal.append(record)

        with swapped(self, journal=StandIn(journal, append=append)):
            return original(self)

    @wrap(loop._Run, "_run_batch")
    def _run_batch(original: Any, self: Any, blocks: list[dict[str, Any]], done: dict[str, Any]) -> Any:
        deferred, self._mutant_deferred = getattr(self, "_mutant_deferred", None), None
        if deferred is None:  # a resumed pending batch: its assistant record is in the journal
            return original(self, blocks, done)
        journal, held = self.journal, [deferred]
        with swapped(self, journal=StandIn(journal, append=held.append)):
            results = original(self, blocks, done)
        for record in held:
            journal.append(record)
        return results


def suspend_mid_batch() -> None:
    """Inside ``_Run._run_batch`` a requested suspend is honoured before each tool, not only at the top of an
    iteration: the run ends ``suspended`` with tool_use ids of the batch unanswered."""

    @wrap(loop._Run, "_run_batch")
    def _run_batch(original: Any, self: Any, blocks: list[dict[str, Any]], done: dict[str, Any]) -> Any:
        tools = self.tools

        def run(*args: Any, **kwargs: Any) -> Any:
            if self.suspend.requested:
                raise loop._End("suspended", "suspended by signal (in the middle of a batch)")
            return tools.run(*args, **kwargs)

        with swapped(self, tools=StandIn(tools, run=run)):
            return original(self, blocks, done)


def rerun_answered_tools() -> None:
    """``_Run._run_batch`` runs the answered tools of a pending batch again (their journaled results are kept)."""

    @wrap(loop._Run, "_run_batch")
    def _run_batch(original: Any, self: Any, blocks: list[dict[str, Any]], done: dict[str, Any]) -> Any:
        for block in blocks:
            tid = block.get("id")
            if tid in done:
                self.tools.run(block.get("name"), block.get("input", {}), ToolCall(tid, self.run_id))
        return original(self, blocks, done)


def counters_from_zero() -> None:
    """A run's tokens spent and iteration start at zero, not at the fold's (``state.counters``,
    ``state.next_iteration``): a resumed run spends its budget and cap again."""

    @_on_new_run
    def change(run: Any, journal: Any, state: Any) -> None:
        run.tokens = 0
        run.iteration = 0


def pending_turn_not_counted() -> None:
    """A run resumed with a pending batch takes its next iteration one lower than the fold's."""

    @_on_new_run
    def change(run: Any, journal: Any, state: Any) -> None:
        if state.pending is not None:
            run.iteration = max(0, state.next_iteration - 1)


def completed_never_written() -> None:
    """No leg appends the ``completed`` terminal record: the uninterrupted run's journal ends on its answer."""
    _on_new_run(lambda run, journal, state: _drop_completed(journal))


def resume_skips_completed() -> None:
    """A resumed leg (its journal held more than the meta record) appends no ``completed`` terminal record."""

    @_on_new_run
    def change(run: Any, journal: Any, state: Any) -> None:
        if state.records > 1:
            _drop_completed(journal)


def recall_final_answer() -> None:
    """``_Run._settle_state`` drops a journaled final answer (the last message, an assistant turn with no
    tool_use) from the conversation, so the loop asks the model for it again."""

    @wrap(loop._Run, "_settle_state")
    def _settle_state(original: Any, self: Any, state: Any) -> Any:
        last = self.messages[-1] if self.messages else None
        final = (state.pending is None and isinstance(last, dict) and last.get("role") == "assistant"
                 and not any(isinstance(b, dict) and b.get("type") == "tool_use" for b in last.get("content") or []))
        if final:
            self.messages.pop()
            return None
        return original(self, state)


def settled_answer_not_printed() -> None:
    """``_Run._settle`` of a journaled reply (``fresh=False``) prints nothing unless the run is interactive."""

    @wrap(loop._Run, "_settle")
    def _settle(original: Any, self: Any, message: Any, stop: Any, *, done: Any = None, fresh: bool) -> Any:
        if fresh:
            return original(self, message, stop, done=done, fresh=fresh)
        with swapped(self, output=self.output if self.interactive else None):
            return original(self, message, stop, done=done, fresh=fresh)


def run_cut_off_turn(fresh_too: bool = False) -> None:
    """``_Run._settle`` of a journaled reply that stopped on ``max_tokens`` or ``refusal`` settles it as
    ``tool_use``: its tool calls run (section 12, rule 6 never runs them); ``fresh_too``: a reply just
    received too, so every run goes on past its cut-off reply and completes (what fisk-ai does)."""

    @wrap(loop._Run, "_settle")
    def _settle(original: Any, self: Any, message: Any, stop: Any, *, done: Any = None, fresh: bool) -> Any:
        if (fresh_too or not fresh) and stop in ("max_tokens", "refusal"):
            stop = "tool_use"
        return original(self, message, stop, done=done, fresh=fresh)


def strip_inherited_thinking() -> None:
    """``_Run._request`` sends every inherited assistant turn without its thinking blocks, the turn in flight
    included, on every resume (rule 8 strips them only when the resume runs another model)."""

    @wrap(loop._Run, "_request")
    def _request(original: Any, self: Any) -> Any:
        messages = [loop._without_thinking(m) if i < self.inherited and m.get("role") == "assistant" else m
                    for i, m in enumerate(self.messages)]
        with swapped(self, messages=messages):
            return original(self)


def cache_counters_not_folded() -> None:
    """``fold.Folder._open_turn`` takes an assistant record's ``cache_read_tokens`` and
    ``cache_create_tokens`` back out of the counters it summed (section 8, rule 8 counts them)."""

    @wrap(fold.Folder, "_open_turn")
    def _open_turn(original: Any, self: Any, record: Any, ids: Any) -> None:
        original(self, record, ids)
        self._c["cache_read_tokens"] -= record.cache_read_tokens or 0
        self._c["cache_create_tokens"] -= record.cache_create_tokens or 0

    fold._RULES = fold._compile(fold.TRANSITIONS)  # the table holds the methods it was compiled with


def cache_usage_ignored() -> None:
    """The loop reads a reply's usage without its cache counts (``cache_read_input_tokens``,
    ``cache_creation_input_tokens``): it journals and counts toward the budget only input and output tokens."""

    @wrap(loop, "complete_with_retries")
    def complete_with_retries(original: Any, *args: Any, **kwargs: Any) -> Any:
        response = original(*args, **kwargs)
        usage = {k: v for k, v in response["usage"].items() if not k.startswith("cache_")}
        return {**response, "usage": usage}


def budget_one_turn_late() -> None:
    """``_Run._settle`` checks the budget against the tokens spent before the reply it settles (the reply's own
    usage counts from the next check on): a run ends on its budget one reply late."""

    @wrap(loop._Run, "_call_model")
    def _call_model(original: Any, self: Any) -> Any:
        before = self.tokens
        out = original(self)
        self._mutant_turn_tokens = self.tokens - before
        return out

    @wrap(loop._Run, "_settle")
    def _settle(original: Any, self: Any, *args: Any, **kwargs: Any) -> Any:
        turn, self._mutant_turn_tokens = getattr(self, "_mutant_turn_tokens", 0), 0
        self.tokens -= turn
        try:
            return original(self, *args, **kwargs)
        finally:
            self.tokens += turn
