"""The agent loop: run a journaled agent, suspend it at a boundary, resume it.

Source: docs/spec.md sections 9, 12 and 13 (fisk-ai's sessions documentation,
"Suspend, crash, and resume" and "The resume guard", and its format notes,
"Durability rules"; docs/spec.md "Sources"); issue 4 items 1-4.  The rules, in the order the loop
applies them:

1. A *boundary* is the top of an iteration, where nothing is in flight.
   Only there is a suspend request honoured (a ``suspended`` terminal
   record), and there the iteration cap is checked (``max_iterations``).
2. The model is called with the committed conversation (after a forced
   resume with another model or thinking mode, filtered as docs/spec.md
   section 12, rule 8 says).  A transient failure of the call (a
   connection error, HTTP 408/409/429/5xx, a reply without a final
   ``stop_reason``) is retried with backoff (section 17); nothing is
   journaled for a failed call.  The turn is journaled as an assistant
   record *before* any of its tools runs.
3. Stop reason ``max_tokens`` (the reply was cut off; a truncated tool_use
   is never run) and ``refusal`` end the run with ``error``; a model error
   that is not transient, or still fails after the retries, ends the leg
   with ``error`` (a resume continues it, rule 6); a suspend requested
   while waiting to retry ends it ``suspended``.  A turn without tool_use
   blocks (and not ``pause_turn``) is the answer: the run ends
   ``completed``, or in a chat run one follow-up line is read and journaled
   as a user record (end of input suspends).  Before a turn's tools run (or a ``pause_turn`` is
   continued) the token budget is checked: all token kinds summed over the
   run, above the fingerprint's ``max_tokens``, end it with ``budget``.
4. The turn's tools run in tool_use order; each result is journaled the
   moment its tool returns (an output too large for one record is cut to a
   documented budget and journaled as an error result: docs/spec.md
   section 6).  The next model call sees one user message of all the
   batch's results in tool_use order.
5. Every end appends exactly one terminal record.  Signals only set a flag
   (:class:`SuspendFlag`), so they never interrupt an append.
6. Resume opens the run (lock, then fold: :meth:`FileStore.open`), refuses
   a ``completed`` run and a fingerprint mismatch (unless forced) before
   appending anything, settles the last journaled turn by rules 3-4 (running
   only the unanswered tools of a pending batch), then continues at
   ``next_iteration`` with counters from the fold.  As in fisk-ai v2, a run
   that ended in ``error``, ``budget`` or ``max_iterations`` is resumed like
   a suspended one; it ends again the same way unless what ended it changed
   (a forced resume with a larger budget, a model that now answers).
7. What the loop writes has the shape fisk-ai writes (docs/spec.md sections 3
   and 4): messages and the blocks it builds have their keys in the order
   Go's SDK marshals them (sorted), a tool's output is a tool_result whose
   ``content`` is a list of one text block (the Go SDK's ``NewToolResultBlock``),
   and ``created`` is Go's RFC 3339 time with nanoseconds (:func:`rfc3339_now`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import secrets
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TextIO

from . import probes
from .encode import fit_tool_result
from .errors import FingerprintMismatch, ModelError, ResumeRefused, StoreError
from .fingerprint import Fingerprint, diff, make_fingerprint
from .fold import FINAL, Folder, RunState
from .model import DEFAULT_RETRY, Model, RetryPolicy, complete_with_retries, thinking_param
from .records import (VERSION, AssistantRecord, MetaRecord, Record, TerminalRecord, ToolResultRecord, UserRecord,
                      go_block, text_block)
from .tools import ToolCall, ToolRegistry

__all__ = ["RunConfig", "RunResult", "SuspendFlag", "handle_signals", "MemoryJournal", "new_run_id", "make_meta",
           "rfc3339_now", "check_resumable", "start_run", "resume_run", "DEFAULT_MAX_TOKENS", "DEFAULT_MAX_ITERATIONS",
           "DEFAULT_CALL_MAX_TOKENS", "THINKING_BLOCK_TYPES", "OMITTED_THINKING_TEXT"]

#: Default token budget of a run (all kinds summed; fingerprint ``max_tokens``).
DEFAULT_MAX_TOKENS = 200_000
#: Default iteration cap (fingerprint ``max_iterations``).
DEFAULT_MAX_ITERATIONS = 25
#: Default ``max_tokens`` of one model call (not part of the fingerprint).
DEFAULT_CALL_MAX_TOKENS = 4096
#: Content block types that carry a model's signed reasoning (docs/spec.md section 12, rule 8).
THINKING_BLOCK_TYPES = ("thinking", "redacted_thinking")
#: The text block sent in place of an earlier turn that held only thinking blocks of another model (rule 8).
OMITTED_THINKING_TEXT = "(reasoning of an earlier model omitted)"

Log = Callable[[str], None]


@dataclass(frozen=True)
class RunConfig:
    """The configuration a run is started or resumed with.

    ``model`` is the model name as given to ``--model`` (stored verbatim in
    the fingerprint); ``system`` the system prompt text (stored as a hash);
    ``max_tokens`` the run's token budget, all kinds summed; ``thinking``
    a mode of :func:`fiskj.model.thinking_param`; ``call_max_tokens`` the
    per-call output limit (plus the thinking budget when thinking is on).
    """

    model: str
    system: str = ""
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    thinking: str = "off"
    call_max_tokens: int = DEFAULT_CALL_MAX_TOKENS

    def fingerprint(self, tools: ToolRegistry) -> Fingerprint:
        """Return the fingerprint of this configuration with ``tools``' definitions."""
        return make_fingerprint(model=self.model, system=self.system, tools=tools.definitions(),
                                thinking_mode=self.thinking, max_tokens=self.max_tokens,
                                max_iterations=self.max_iterations)

    def request(self, messages: list[dict[str, Any]], tools: ToolRegistry, *, with_thinking: bool = True
                ) -> dict[str, Any]:
        """Return the Messages API request body for ``messages`` (raises UsageError on a bad thinking mode).

        ``with_thinking=False`` leaves the ``thinking`` parameter out whatever the mode (docs/spec.md
        section 12, rule 8: a tool-use loop keeps one thinking configuration).
        """
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.call_max_tokens, "messages": messages}
        if self.system:
            body["system"] = self.system
        if len(tools):
            body["tools"] = tools.definitions()
        thinking = thinking_param(self.thinking)
        if thinking is not None and with_thinking:
            body["thinking"] = thinking
            body["max_tokens"] += thinking.get("budget_tokens", 0)
        return body


@dataclass(frozen=True)
class RunResult:
    """How one leg of a run ended: the terminal ``reason`` and ``message`` it wrote.

    ``answer`` is the last answer text (``None`` if none yet), ``state``
    the fold after the terminal record, ``exit_code`` the CLI status.
    """

    run_id: str
    reason: str
    message: str | None
    answer: str | None
    state: RunState

    @property
    def exit_code(self) -> int:
        """0 for ``completed``, 3 for ``suspended``, 1 for every other reason."""
        return {"completed": 0, "suspended": 3}.get(self.reason, 1)


class _SuspendNow(BaseException):
    """Raised by the signal handler only while the loop waits for chat input."""


class SuspendFlag:
    """A suspend request, set by a signal or by :meth:`request`.

    The handler only sets ``requested`` (and counts ``signals``), so a
    signal never interrupts an append; a second signal is harmless.  The
    one exception: while the loop blocks reading a chat follow-up (nothing
    in flight) the handler breaks the read so the run suspends at once.
    """

    def __init__(self) -> None:
        self.requested, self.signals, self.signum, self.interruptible = False, 0, None, False

    def request(self) -> None:
        """Ask the loop to suspend at its next boundary."""
        self.requested = True

    def handler(self, signum: int, frame: Any) -> None:
        """Signal handler: set the flag; break a pending chat read, once."""
        self.requested, self.signum = True, signum
        self.signals += 1
        if self.interruptible:
            self.interruptible = False
            raise _SuspendNow()


@contextlib.contextmanager
def handle_signals(flag: SuspendFlag, signums: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[SuspendFlag]:
    """Route ``signums`` to ``flag.handler`` for the block; restore the old handlers after.

    Outside the main thread (where Python cannot set handlers) it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    old = {s: signal.signal(s, flag.handler) for s in signums}
    try:
        yield flag
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class MemoryJournal:
    """An in-memory journal (a run without ``--checkpoint``): ``append``, ``state``, ``close``.

    ``records`` holds the records with their seqs; ``state`` folds them.
    """

    def __init__(self, meta: MetaRecord) -> None:
        self.records: list[Record] = []
        self._folder = Folder()
        self.append(meta)

    def append(self, record: Record) -> int:
        """Assign the next seq, fold the record and keep it; return the seq."""
        record = dataclasses.replace(record, seq=len(self.records) + 1)
        self._folder.add(record)
        self.records.append(record)
        return record.seq

    @property
    def state(self) -> RunState:
        """The fold of the records appended so far."""
        return self._folder.state()

    def close(self) -> None:
        """Nothing to release."""


def new_run_id() -> str:
    """Return a fresh run id: ``YYYYMMDD-HHMMSS-`` and 6 random hex digits (UTC)."""
    return f"{datetime.datetime.now(datetime.timezone.utc):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def rfc3339_now(now_ns: int | None = None) -> str:
    """Return the time ``now_ns`` (ns since the epoch; default: now) as Go's ``time.Time`` marshals it.

    That is ``time.RFC3339Nano`` in the local zone (docs/spec.md section 4, meta): the
    nanoseconds with trailing zeros trimmed (no fraction at all when they are
    zero) and the offset as ``+hh:mm`` / ``-hh:mm``, or ``Z`` when it is zero,
    e.g. ``2026-05-30T10:11:12.123456789+03:00``.  Python's own ``isoformat``
    stops at microseconds and writes ``+00:00``.
    """
    ns = time.time_ns() if now_ns is None else now_ns
    seconds, frac = divmod(ns, 1_000_000_000)
    local = datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc).astimezone()
    offset = local.utcoffset()
    secs = int(offset.total_seconds()) if offset is not None else 0
    if secs == 0:
        zone = "Z"
    else:  # Go: the sign, then the absolute offset in whole minutes as hh:mm (seconds of an offset dropped)
        sign, minutes = ("-", -secs // 60) if secs < 0 else ("+", secs // 60)
        zone = f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    fraction = f".{frac:09d}".rstrip("0") if frac else ""
    return f"{local:%Y-%m-%dT%H:%M:%S}{fraction}{zone}"


def make_meta(run_id: str, prompt: str, fingerprint: Fingerprint, interactive: bool = False) -> MetaRecord:
    """Return the meta record of a new run (version 2, ``created`` = :func:`rfc3339_now`)."""
    return MetaRecord(version=VERSION, run_id=run_id, created=rfc3339_now(), fingerprint=fingerprint,
                      prompt=prompt or None, interactive=True if interactive else None)


class _End(Exception):
    def __init__(self, reason: str, message: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.message = reason, message


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


def _without_thinking(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` without its thinking and redacted_thinking blocks (a new dict; the journal's is untouched).

    A message left with no block gets one text block :data:`OMITTED_THINKING_TEXT`, since the
    Messages API refuses an empty assistant message.  docs/spec.md section 12, rule 8.
    """
    content = message.get("content")
    if not isinstance(content, list):
        return message
    kept = [b for b in content if not (isinstance(b, dict) and b.get("type") in THINKING_BLOCK_TYPES)]
    if len(kept) == len(content):
        return message
    return {**message, "content": kept or [text_block(OMITTED_THINKING_TEXT)]}


def _continues_tool_loop(messages: list[dict[str, Any]]) -> bool:
    """True when ``messages`` end with a user message of tool results after an assistant turn (a tool-use loop)."""
    last, before = messages[-1], messages[-2]
    content = last.get("content")
    return (last.get("role") == "user" and before.get("role") == "assistant" and isinstance(content, list)
            and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content))


class _Run:
    """One leg of a run, from a folded state to one terminal record."""

    def __init__(self, journal: Any, state: RunState, config: RunConfig, model: Model, tools: ToolRegistry,
                 suspend: SuspendFlag, input_stream: TextIO | None, output: TextIO | None, log: Log | None,
                 retry: RetryPolicy | None = None) -> None:
        self.journal, self.config, self.model, self.tools = journal, config, model, tools
        self.suspend, self.input, self.output, self.log = suspend, input_stream, output, log or (lambda s: None)
        self.retry = retry or DEFAULT_RETRY
        self.run_id, self.interactive = state.run_id, state.interactive
        self.messages = list(state.messages)
        self.tokens = state.counters.total_tokens
        self.iteration = state.next_iteration
        self.answer: str | None = None
        # docs/spec.md section 12, rule 8: the messages before index ``inherited`` are earlier legs' turns
        # (the pending turn, if any, is appended next, at that index).  When this leg's model is not the
        # journal's, their thinking blocks are not sent; when its model or thinking mode differs, a request
        # that continues a tool-use loop whose last turn does not start with a thinking block goes without
        # ``thinking``.
        fp = state.fingerprint
        self.inherited = len(state.messages) + (1 if state.pending is not None else 0)
        self.other_model = config.model != fp.model
        self.changed = self.other_model or config.thinking != fp.thinking_mode

    def drive(self, state: RunState) -> RunResult:
        try:
            self._settle_state(state)
            while True:
                self._boundary()
                self._settle(*self._call_model(), fresh=True)
        except _End as end:  # rule 5: exactly one terminal record
            self.journal.append(TerminalRecord(reason=end.reason, message=end.message))
            self.log(f"run {self.run_id} ended: {end.reason}" + (f" ({end.message})" if end.message else ""))
            return RunResult(self.run_id, end.reason, end.message, self.answer, self.journal.state)
        except StoreError:
            raise  # the journal refuses appends (poisoned, lost lock): no terminal can be written
        except Exception as exc:  # a bug, or a resource limit (MemoryError): end the leg with error, resumable
            probes.hit("run.error_terminal")
            why = "out of memory (MemoryError)" if isinstance(exc, MemoryError) else \
                f"internal error: {type(exc).__name__}: {exc}"
            with contextlib.suppress(Exception):
                self.journal.append(TerminalRecord(reason="error", message=why))
            raise

    def _settle_state(self, state: RunState) -> None:
        """Apply rules 3-4 to the last journaled turn (a resume), if it is not settled yet."""
        if state.pending is not None:
            done = {r.get("tool_use_id"): r for r in state.pending.results}
            probes.hit("resume.pending_batch_partial" if done else "resume.pending_batch")
            self._settle(state.pending.assistant, state.last_stop_reason, done=done, fresh=False)
        elif self.messages and self.messages[-1].get("role") == "assistant":
            probes.hit("resume.unsettled_turn")
            self._settle(self.messages.pop(), state.last_stop_reason, fresh=False)

    def _boundary(self) -> None:
        if self.suspend.requested:
            how = f"signal {signal.Signals(self.suspend.signum).name}" if self.suspend.signum else "request"
            raise _End("suspended", f"suspended by {how}")
        if self.iteration >= self.config.max_iterations:
            raise _End("max_iterations", f"reached the iteration cap of {self.config.max_iterations}")

    def _request(self) -> dict[str, Any]:
        """The request of the next model call: the committed conversation, filtered by rule 8 (section 12)."""
        messages = self.messages
        if self.other_model:
            messages = [_without_thinking(m) if i < self.inherited and m.get("role") == "assistant" else m
                        for i, m in enumerate(messages)]
        with_thinking = True
        if self.changed and len(messages) >= 2 and _continues_tool_loop(messages):
            first = next(iter(messages[-2].get("content") or []), None)
            with_thinking = isinstance(first, dict) and first.get("type") in THINKING_BLOCK_TYPES
        return self.config.request(messages, self.tools, with_thinking=with_thinking)

    def _call_model(self) -> tuple[dict[str, Any], str | None]:
        request = self._request()
        try:  # docs/spec.md section 17: transient failures are retried; nothing is journaled for a failed call
            response = complete_with_retries(self.model, request, self.retry,
                                             interrupted=lambda: self.suspend.requested, log=self.log)
        except ModelError as exc:
            if getattr(exc, "interrupted", False):
                raise _End("suspended", f"suspended while waiting to retry a failed model call ({exc.message})"
                           ) from None
            raise _End("error", f"model error: {exc}") from None
        usage = response["usage"]
        message = {"content": [go_block(b) for b in response["content"]], "role": "assistant"}
        record = AssistantRecord(
            iteration=self.iteration, message=message, stop_reason=response.get("stop_reason") or None,
            in_tokens=usage["input_tokens"], out_tokens=usage["output_tokens"],
            cache_read_tokens=usage.get("cache_read_input_tokens") or None,
            cache_create_tokens=usage.get("cache_creation_input_tokens") or None)
        self.journal.append(record)  # rule 2: before any tool runs
        self.iteration += 1
        self.tokens += record.in_tokens + record.out_tokens + (record.cache_read_tokens or 0) \
            + (record.cache_create_tokens or 0)
        calls = sum(1 for b in message["content"] if b.get("type") == "tool_use")
        self.log(f"iteration {record.iteration}: {record.stop_reason}, {calls} tool call(s), {self.tokens} tokens")
        return message, record.stop_reason

    def _settle(self, message: dict[str, Any], stop: str | None, *, done: dict[Any, dict] | None = None,
                fresh: bool) -> None:
        """Rule 3: decide what a journaled assistant turn means; run its tools (rule 4)."""
        if stop == "max_tokens":
            raise _End("error", "model reply cut off (stop_reason max_tokens); its tool calls were not run")
        if stop == "refusal":
            raise _End("error", "the model refused (stop_reason refusal)")
        blocks = [b for b in message.get("content") or []
                  if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("id"), str)]
        if not blocks and stop != "pause_turn":
            self.messages.append(message)
            self.answer = _text(message)
            if self.output is not None and (fresh or not self.interactive):
                self.output.write(self.answer + "\n")
                self.output.flush()
            if not self.interactive:
                raise _End("completed")
            self._follow_up()
            return
        if self.tokens > self.config.max_tokens:
            raise _End("budget", f"{self.tokens} tokens used, over the budget of {self.config.max_tokens}")
        self.messages.append(message)
        if blocks:
            self.messages.append({"role": "user", "content": self._run_batch(blocks, done or {})})

    def _run_batch(self, blocks: list[dict[str, Any]], done: dict[Any, dict]) -> list[dict[str, Any]]:
        """Run the unanswered tools in tool_use order, journaling each result as it returns."""
        results: dict[str, dict[str, Any]] = {}
        for block in blocks:
            tid = block.get("id")
            if tid in results:
                continue
            if tid in done:
                results[tid] = done[tid]
                continue
            name = block.get("name")
            outcome = self.tools.run(name, block.get("input", {}), ToolCall(tid, self.run_id))
            result, dropped = fit_tool_result(tid, outcome.content, outcome.is_error)  # spec section 6
            self.journal.append(ToolResultRecord(tool_use_id=tid, result=result))
            results[tid] = result
            note = f" (output truncated: {dropped} bytes dropped)" if dropped else ""
            self.log(f"  tool {name} ({tid}): {'error' if result['is_error'] else 'ok'}{note}")
        return list(results.values())

    def _follow_up(self) -> None:
        """Chat: read one non-blank line and journal it as a user record; EOF suspends."""
        while True:
            line = self._read_line()
            if line is None:
                raise _End("suspended", "end of input" if not self.suspend.requested else "suspended by signal")
            if line.strip():
                break
        message = {"content": [text_block(line.rstrip("\r\n"))], "role": "user"}
        self.journal.append(UserRecord(message=message))
        self.messages.append(message)

    def _read_line(self) -> str | None:
        """One line of chat input, or None at end of input or on a signal.  (A signal landing in the
        instant before the read blocks is seen when the read returns; a second signal breaks it.)"""
        flag = self.suspend
        if self.input is None:
            return None
        try:
            flag.interruptible = True  # nothing in flight: a signal may break the read
            if flag.requested:
                flag.interruptible = False
                return None
            line = self.input.readline()
            flag.interruptible = False
        except _SuspendNow:
            return None
        except BaseException:
            flag.interruptible = False
            raise
        return line or None


def start_run(prompt: str, *, config: RunConfig, model: Model, tools: ToolRegistry, store: Any = None,
              run_id: str | None = None, interactive: bool = False, suspend: SuspendFlag | None = None,
              input_stream: TextIO | None = None, output: TextIO | None = None, log: Log | None = None,
              on_open: Callable[[RunState], None] | None = None, retry: RetryPolicy | None = None) -> RunResult:
    """Start a run and drive it to its first terminal record.

    With ``store`` (a :class:`fiskj.store.FileStore`) the run is journaled
    as ``run_id`` (default :func:`new_run_id`); without, it lives in a
    :class:`MemoryJournal`.  ``on_open(state)`` is called once the journal
    exists.  ``output`` receives each answer; ``log`` progress lines;
    ``input_stream`` chat follow-ups; ``retry`` is how failed model calls are
    retried (default :data:`fiskj.model.DEFAULT_RETRY`; docs/spec.md section 17).
    Raises the store's errors
    (``RunExists``, ``InvalidRunID``, ``StoreIOError``, ...); model and tool
    failures end the run instead (see the module docstring).
    """
    run_id = new_run_id() if run_id is None else run_id
    meta = make_meta(run_id, prompt, config.fingerprint(tools), interactive)
    config.request([], tools)  # a bad thinking mode is a usage error before anything is written
    journal = store.create(run_id, meta) if store is not None else MemoryJournal(meta)
    with contextlib.closing(journal):
        state = journal.state
        if on_open is not None:
            on_open(state)
        return _Run(journal, state, config, model, tools, suspend or SuspendFlag(), input_stream, output,
                    log, retry).drive(state)


#: The code probe (fiskj.probes) a resume reaches, by the status it found; any other status
#: (error, budget, max_iterations, an unknown reason) reaches ``resume.after_error``.
_RESUME_PROBES = {"open": "resume.after_crash", "suspended": "resume.after_suspend"}


def check_resumable(state: RunState, current: Fingerprint, force: bool = False) -> list[str]:
    """Raise :class:`ResumeRefused` when ``state.status`` is ``completed``, and
    :class:`FingerprintMismatch` (``changes`` = one line per field) when the
    fingerprints differ and ``force`` is false (docs/spec.md section 12, rules 2-3).
    Every other status (open, suspended, error, budget, max_iterations, an unknown
    reason) is resumed, as fisk-ai v2 does.  Returns the differences."""
    if state.status == FINAL:
        probes.hit("resume.refused.completed")
        raise ResumeRefused(f"run {state.run_id} is {state.status!r}; a completed run cannot be resumed",
                            run_id=state.run_id)
    changes = diff(state.fingerprint, current)
    if changes and not force:
        probes.hit("resume.refused.fingerprint")
        raise FingerprintMismatch(f"run {state.run_id} was started with another configuration: "
                                  f"{'; '.join(changes)} (pass --force to resume anyway)",
                                  run_id=state.run_id, changes=changes)
    return changes


def resume_run(run_id: str, *, store: Any, config: RunConfig, model: Model, tools: ToolRegistry, force: bool = False,
               suspend: SuspendFlag | None = None, input_stream: TextIO | None = None, output: TextIO | None = None,
               log: Log | None = None, on_open: Callable[[RunState], None] | None = None,
               retry: RetryPolicy | None = None) -> RunResult:
    """Resume run ``run_id`` of ``store`` and drive it to its next terminal record.

    Opens the run (lock, then fold), refuses per :func:`check_resumable`
    with nothing appended, calls ``on_open(state)``, finishes the pending
    batch (only unanswered tools run) and continues.  A forced resume with
    another model or thinking mode sends the earlier turns as docs/spec.md
    section 12, rule 8 says (the journal itself is never rewritten);
    ``retry`` as for :func:`start_run`.  Raises
    ``RunNotFound``, ``RunLocked``, ``ResumeRefused``,
    ``FingerprintMismatch`` and the store's IO errors.
    """
    config.request([], tools)  # a bad thinking mode is a usage error before the run is opened
    journal = store.open(run_id)
    with contextlib.closing(journal):
        state = journal.state
        changes = check_resumable(state, config.fingerprint(tools), force)
        probes.hit(_RESUME_PROBES.get(state.status, "resume.after_error"))
        if changes:
            probes.hit("resume.forced")
        if changes and log is not None:
            log(f"resuming despite a changed configuration (--force): {'; '.join(changes)}")
        if on_open is not None:
            on_open(state)
        return _Run(journal, state, config, model, tools, suspend or SuspendFlag(), input_stream, output,
                    log, retry).drive(state)
