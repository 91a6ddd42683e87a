"""Fold: replay a record stream into a resumable :class:`RunState` (docs/spec.md section 8).  Pure: no IO.

The fold is a state machine over (phase, record kind), in the manner of h11: every rule is
one cell of the table :data:`TRANSITIONS`, and each rule's guards and action are the
methods of :class:`Folder` named after it.  The rules:

* Phases.  ``START``: nothing folded.  ``IDLE``: no current assistant turn (right after
  the meta record, or after a user record).  ``AWAITING_RESULTS``: the current turn has
  a tool_use id with no result yet.  ``TURN_DONE``: every tool_use id of the current turn
  is answered (or it had none).  ``ENDED``: the last record is a ``completed`` terminal
  record: a completed run is never extended.  (fisk-ai resumes every other run, so a
  journal goes on after ``suspended``, ``error``, ``budget`` and ``max_iterations``.)
* Seq: in every phase but ``START`` a record's seq must be the previous seq + 1; this is
  checked before the table.
* ``start`` (meta in START): seq 1 and a version this reader knows -> IDLE.  The
  conversation starts as one user message holding the prompt as one text block; an
  absent or empty prompt is a text block with empty text (as fisk-ai folds it).
* ``open_turn`` (assistant in IDLE or TURN_DONE): commits the current turn (its message,
  then one user message of its tool_result blocks in journal order, if any) and becomes
  the current turn; a message that repeats a tool_use id is refused -> AWAITING_RESULTS,
  or TURN_DONE when it has no tool_use.
* ``answer`` (tool_result in AWAITING_RESULTS): answers one unanswered tool_use id of the
  current turn (an id it did not issue is an orphan, an answered one a duplicate) ->
  TURN_DONE once every id is answered.
* ``add_user`` (user in IDLE or TURN_DONE): commits the current turn and appends the
  message, merged into the last message when that is a user message -> IDLE.
* ``end`` (terminal in any phase but START and ENDED): remembered as the run's terminal
  -> ENDED when its reason is ``completed``; every other reason (``suspended``, ``error``,
  ``budget``, ``max_iterations``, one this reader does not know) keeps the phase: each
  leg of a run writes its own terminal record and a resumed leg appends after it.
* Every other cell refuses the record: ``not_first`` (START takes only meta), ``second_meta``,
  ``no_turn`` (a tool_result with no current turn), ``not_issued`` (a tool_result when every
  id is answered: orphan or duplicate), ``unanswered`` (an assistant or user record while a
  tool_use id of the current turn is unanswered: the conversation would be ill-formed),
  ``ended`` (any record after ``completed``).  A refusal, or a guard that fails, raises ``ConsistencyError``
  (``UnsupportedVersion`` for a newer meta) reading "<kind> record not allowed in state
  <PHASE>: <why>", with ``line`` = the record's 1-based position (the reader's line number)
  and ``field`` where one applies.
* Counters are sums over the records, never stored.  At the end the current turn is
  committed when all its tool_use ids are answered, else it is the pending turn;
  ``status`` is the reason of the last record when that is a terminal record, else
  ``open`` (so a resumed run that crashed reads ``open``, not ``suspended``).  A run is
  resumable unless its status is ``completed`` (docs/spec.md section 12).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from .errors import ConsistencyError, JournalError, UnsupportedVersion
from .fingerprint import Fingerprint
from .records import VERSION, AssistantRecord, MetaRecord, Record, TerminalRecord, tool_use_ids

__all__ = ["Counters", "PendingTurn", "RunState", "Folder", "fold", "FINAL", "PHASES", "KINDS", "TRANSITIONS",
           "ALLOWED", "START", "IDLE", "AWAITING_RESULTS", "TURN_DONE", "ENDED"]

#: The one terminal reason that ends a run for good: no record may follow it (docs/spec.md section 8,
#: rule 7) and a run of this status is not resumed (section 12, rule 2).  Every other reason ends one
#: leg of the run only, as in fisk-ai v2.
FINAL = "completed"

START, IDLE, AWAITING_RESULTS, TURN_DONE, ENDED = "START", "IDLE", "AWAITING_RESULTS", "TURN_DONE", "ENDED"
PHASES = (START, IDLE, AWAITING_RESULTS, TURN_DONE, ENDED)
#: Record kinds: the ``key`` of each record class, the columns of :data:`TRANSITIONS`.
KINDS = ("meta", "assistant", "user", "tool_result", "terminal")

#: The rules that fold a record (after their guards); every other rule refuses it.
ALLOWED = frozenset({"start", "open_turn", "answer", "add_user", "end"})

#: phase -> the rule for each record kind of :data:`KINDS`, in that order (docs/spec.md section 8).
TRANSITIONS: dict[str, tuple[str, str, str, str, str]] = {
    #                  meta            assistant       user            tool_result     terminal
    START:            ("start",       "not_first",    "not_first",    "not_first",    "not_first"),
    IDLE:             ("second_meta", "open_turn",    "add_user",     "no_turn",      "end"),
    AWAITING_RESULTS: ("second_meta", "unanswered",   "unanswered",   "answer",       "end"),
    TURN_DONE:        ("second_meta", "open_turn",    "add_user",     "not_issued",   "end"),
    ENDED:            ("ended",       "ended",        "ended",        "ended",        "ended"),
}


@dataclass(frozen=True, slots=True)
class Counters:
    """Cumulative counters, summed from the records (never stored, so they cannot drift)."""

    llm_calls: int = 0
    tool_calls: int = 0
    remote_tool_calls: int = 0
    in_tokens: int = 0
    out_tokens: int = 0
    cache_read_tokens: int = 0
    cache_create_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """All token kinds summed (the quantity the ``max_tokens`` budget limits)."""
        return self.in_tokens + self.out_tokens + self.cache_read_tokens + self.cache_create_tokens

    def to_json(self) -> dict[str, int]:
        """Return the counters as a dict with the seven keys of ``show --json``."""
        return {name: getattr(self, name) for name in self.__slots__}  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class PendingTurn:
    """An assistant turn whose tool batch was not finished (a crash or a suspend mid-batch).

    ``tool_use_ids`` are the turn's ids in tool_use order; ``answered`` the
    ids with a journaled result (journal order); ``unanswered`` the rest in
    tool_use order; ``results`` the journaled ``tool_result`` blocks in
    journal order.
    """

    iteration: int
    assistant: dict[str, Any]
    results: list[dict[str, Any]]
    answered: list[str]
    unanswered: list[str]
    tool_use_ids: list[str]
    record: AssistantRecord

    def to_json(self) -> dict[str, Any]:
        """Return ``{"iteration", "assistant", "results", "answered", "unanswered"}``."""
        return {"iteration": self.iteration, "assistant": self.assistant, "results": self.results,
                "answered": self.answered, "unanswered": self.unanswered}


@dataclass(frozen=True, slots=True)
class RunState:
    """The resumable state of a run: what a fold of its journal yields (docs/spec.md section 8).

    ``messages`` is the committed conversation in Messages API shape (the
    pending turn, if any, is not in it).  ``torn_tail`` and ``good_size``
    (bytes of complete valid lines) are set by the reader, ``None`` from a
    pure fold.
    """

    meta: MetaRecord
    messages: list[dict[str, Any]]
    counters: Counters
    next_iteration: int
    last_stop_reason: str | None
    pending: PendingTurn | None
    terminal: TerminalRecord | None
    status: str
    last_seq: int
    records: int
    torn_tail: Any = None  # a fiskj.reader.TornTail (the reader imports this module, not the reverse)
    good_size: int | None = None

    @property
    def run_id(self) -> str:
        return self.meta.run_id

    @property
    def version(self) -> int:
        return self.meta.version

    @property
    def fingerprint(self) -> Fingerprint:
        return self.meta.fingerprint

    @property
    def prompt(self) -> str | None:
        return self.meta.prompt

    @property
    def interactive(self) -> bool:
        return bool(self.meta.interactive)

    @property
    def resumable(self) -> bool:
        """True unless the status is :data:`FINAL` (``completed``): open, suspended, error, budget,
        max_iterations and reasons this reader does not know are all resumed (docs/spec.md section 12, rule 2)."""
        return self.status != FINAL

    def final_answer(self) -> str | None:
        """The text of the last committed assistant message, or ``None``.

        Text blocks are opaque on disk; a ``text`` field that is not a string is skipped.
        """
        for message in reversed(self.messages):
            if message.get("role") == "assistant":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                texts = [b["text"] for b in content or []
                         if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]
                return "".join(texts)
        return None

    def to_json(self) -> dict[str, Any]:
        """Return the ``fiskj session show --json`` object (keys: docs/spec.md section 14)."""
        terminal = None
        if self.terminal is not None:
            terminal = {"reason": self.terminal.reason, "message": self.terminal.message, "seq": self.terminal.seq}
        return {
            "run_id": self.run_id,
            "version": self.version,
            "status": self.status,
            "terminal": terminal,
            "fingerprint": self.fingerprint.to_json(),
            "prompt": self.prompt,
            "interactive": self.interactive,
            "created": self.meta.created,
            "messages": self.messages,
            "counters": self.counters.to_json(),
            "next_iteration": self.next_iteration,
            "last_stop_reason": self.last_stop_reason,
            "pending": None if self.pending is None else self.pending.to_json(),
            "torn_tail": None if self.torn_tail is None else self.torn_tail.to_json(),
            "records": self.records,
            "last_seq": self.last_seq,
        }


def _merge_user(messages: list[dict[str, Any]], message: dict[str, Any]) -> None:
    """Append a user message, merging into the last message when it is a user message."""
    if messages and messages[-1].get("role") == "user":
        last = messages[-1]
        merged = _as_blocks(last.get("content")) + _as_blocks(message.get("content"))
        messages[-1] = {**last, "content": merged}  # a new dict: states handed out keep the old one
    else:
        messages.append(message)


def _as_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


class Folder:
    """Incremental fold (docs/spec.md section 8): ``add`` records one at a time, ask for ``state()`` at any point.

    ``phase`` is the state of the table :data:`TRANSITIONS`.  ``add`` is O(1) amortised;
    ``state()`` is O(messages) (it copies the message list).  ``add`` and ``check`` raise
    :class:`ConsistencyError` (``line`` = 1-based record position, ``field`` where one
    applies) or :class:`UnsupportedVersion` on a rule break; after an error from ``add``
    the folder must not be used further (``check`` changes nothing).
    """

    def __init__(self) -> None:
        self._phase = START
        self._meta: MetaRecord | None = None
        self._messages: list[dict[str, Any]] = []
        self._n = 0
        self._last_seq = 0
        self._turn: AssistantRecord | None = None
        self._turn_ids: list[str] = []
        self._results: list[dict[str, Any]] = []
        self._answered: dict[str, None] = {}
        self._terminal: TerminalRecord | None = None
        self._last_is_terminal = False
        self._stop: str | None = None
        self._next_iteration = 0
        self._c = dict.fromkeys(Counters.__slots__, 0)  # type: ignore[attr-defined]

    @property
    def phase(self) -> str:
        """The current phase: one of :data:`PHASES`."""
        return self._phase

    # -- the table ----------------------------------------------------------------

    def _rule(self, record: Record, line: int) -> tuple[Any, Any]:
        """``record``'s cell of the table: its (guard, action) once the seq rule holds; raise a refused record's error.

        :meth:`add` runs the same steps inline (one call less per record).
        """
        phase = self._phase
        try:
            guard, action = _RULES[phase, record.key]
        except (KeyError, AttributeError, TypeError):  # pragma: no cover - the codec yields only records
            raise ConsistencyError(f"not a record: {type(record).__name__}", line=line) from None
        if action is None or (record.seq != self._last_seq + 1 and phase != START):
            raise self._refusal(record, line, guard)
        return guard, action

    def _refusal(self, record: Record, line: int, refuse: Any) -> JournalError:
        """The error of a refused record: its seq first (in every phase but START), else its cell's refusal."""
        seq, expected = record.seq, self._last_seq + 1
        if seq != expected and self._phase != START:
            how = "repeated" if seq < expected else "skips ahead"
            return self._error(record, line, f"seq {seq} {how}: expected {expected}", "seq")
        return self._error(record, line, *refuse(self, record))

    def _error(self, record: Record, line: int, why: str, field: str | None = None,
               cls: type[JournalError] = ConsistencyError) -> JournalError:
        """The error of a record refused in this phase: "<kind> record not allowed in state <PHASE>: <why>"."""
        return cls(f"{record.key} record not allowed in state {self._phase}: {why}", line=line, field=field)

    # -- refusals: (why, field) -------------------------------------------------------

    def _refuse_not_first(self, record: Record) -> tuple[str, str | None]:
        return "expected meta as the first record", "protocol"

    def _refuse_second_meta(self, record: Record) -> tuple[str, str | None]:
        return "duplicate meta record (a journal has one, its first record)", "protocol"

    def _refuse_no_turn(self, record: Record) -> tuple[str, str | None]:
        return (f"tool_result for {record.tool_use_id!r} with no open assistant turn",  # type: ignore[union-attr]
                "tool_result.tool_use_id")

    def _refuse_not_issued(self, record: Record) -> tuple[str, str | None]:
        tid, turn = record.tool_use_id, self._turn  # type: ignore[union-attr]
        assert turn is not None
        if tid in self._answered:
            return f"duplicate tool_result for {tid!r}", "tool_result.tool_use_id"
        return (f"orphan tool_result: {tid!r} is not a tool_use id of iteration {turn.iteration} "
                f"(ids {self._turn_ids})", "tool_result.tool_use_id")

    def _refuse_unanswered(self, record: Record) -> tuple[str, str | None]:
        turn = self._turn
        assert turn is not None
        missing = [i for i in self._turn_ids if i not in self._answered]
        return f"tool_use ids {missing} of iteration {turn.iteration} (seq {turn.seq}) are unanswered", None

    def _refuse_ended(self, record: Record) -> tuple[str, str | None]:
        terminal = self._terminal
        assert terminal is not None
        return (f"it comes after a {terminal.reason!r} terminal record (seq {terminal.seq}); "
                f"a completed run is never continued", None)

    # -- guards of the allowed rules (raise; may return a value for the action) --------------

    def _check_start(self, record: MetaRecord, line: int) -> None:
        if record.seq != 1:
            raise self._error(record, line, f"seq {record.seq}, expected 1", "seq")
        if record.version > VERSION:  # the codec refuses this too; records may be built in code
            raise self._error(record, line, f"journal version {record.version} is newer than this reader's "
                                f"{VERSION}", "meta.version", UnsupportedVersion)

    def _check_open_turn(self, record: AssistantRecord, line: int) -> list[str]:
        ids = tool_use_ids(record.message)
        if len(ids) > 1 and len(set(ids)) != len(ids):
            raise self._error(record, line, f"its message repeats a tool_use id: {ids}", "assistant.message")
        return ids

    def _check_answer(self, record: Record, line: int) -> None:
        tid = record.tool_use_id  # type: ignore[union-attr]
        if tid in self._answered or tid not in self._turn_ids:
            raise self._error(record, line, *self._refuse_not_issued(record))

    # -- actions of the allowed rules (the guard passed; they set the next phase) ---------------

    def _start(self, record: MetaRecord, _: None) -> None:
        self._meta = record
        # Always one user message: an absent or empty prompt is one text block with empty text (fisk-ai).
        self._messages.append({"role": "user", "content": [{"type": "text", "text": record.prompt or ""}]})
        self._phase = IDLE

    def _open_turn(self, record: AssistantRecord, ids: list[str]) -> None:
        if self._turn is not None:
            self._commit_turn()
        self._turn = record
        self._turn_ids = ids
        self._stop = record.stop_reason
        self._next_iteration = record.iteration + 1
        c = self._c
        c["llm_calls"] += 1
        c["in_tokens"] += record.in_tokens
        c["out_tokens"] += record.out_tokens
        c["cache_read_tokens"] += record.cache_read_tokens or 0
        c["cache_create_tokens"] += record.cache_create_tokens or 0
        self._phase = AWAITING_RESULTS if ids else TURN_DONE

    def _answer(self, record: Any, _: None) -> None:
        self._answered[record.tool_use_id] = None
        self._results.append(record.result)
        c = self._c
        c["tool_calls"] += 1
        if record.remote:
            c["remote_tool_calls"] += 1
        if len(self._answered) == len(self._turn_ids):  # every answered id is one of the turn's
            self._phase = TURN_DONE

    def _add_user(self, record: Any, _: None) -> None:
        self._commit_turn()
        _merge_user(self._messages, record.message)
        self._phase = IDLE

    def _end(self, record: TerminalRecord, _: None) -> None:
        self._terminal = record
        self._last_is_terminal = True
        if record.reason == FINAL:  # any other reason ends one leg: the next leg appends after it
            self._phase = ENDED

    def _commit_turn(self) -> None:
        """Append the current turn (its message, then its results) to the messages; the guards made sure it is answered."""
        turn = self._turn
        if turn is None:
            return
        self._messages.append(turn.message)
        if self._results:
            # The list itself is handed over: nothing else refers to it (states copy it).
            self._messages.append({"role": "user", "content": self._results})
            self._results = []
        self._turn = None
        self._turn_ids = []
        self._answered = {}

    # -- the public steps ---------------------------------------------------------------

    def check(self, record: Record) -> None:
        """Raise the error :meth:`add` would raise for ``record``, changing nothing.

        A record that passes can then be added (to try a record before committing to it,
        as :class:`fiskj.journal.Journal` does before its write).
        """
        line = self._n + 1
        guard, _ = self._rule(record, line)
        if guard is not None:
            guard(self, record, line)

    def add(self, record: Record) -> None:
        """Fold one more record by its cell of :data:`TRANSITIONS` (docs/spec.md section 8)."""
        self._n += 1
        line = self._n
        try:  # self._rule(record, line), inline
            guard, action = _RULES[self._phase, record.key]
        except (KeyError, AttributeError, TypeError):  # pragma: no cover - the codec yields only records
            guard, action = self._rule(record, line)
        if action is None or (record.seq != self._last_seq + 1 and self._phase != START):
            raise self._refusal(record, line, guard)
        value = None if guard is None else guard(self, record, line)
        self._last_seq = record.seq
        self._last_is_terminal = False
        action(self, record, value)

    # -- result ---------------------------------------------------------------------

    def state(self, torn_tail: Any = None, good_size: int | None = None) -> RunState:
        """Return the :class:`RunState` of the records added so far (docs/spec.md section 8, rules 9 and 10).

        ``torn_tail`` (a :class:`fiskj.reader.TornTail`) and ``good_size`` are the reader's.
        Raises :class:`ConsistencyError` when no record (no meta) was added.
        """
        if self._meta is None:
            raise ConsistencyError("journal is empty: no meta record", line=1)
        messages = list(self._messages)
        pending = None
        if self._turn is not None:
            unanswered = [i for i in self._turn_ids if i not in self._answered]
            if unanswered:
                pending = PendingTurn(
                    iteration=self._turn.iteration, assistant=self._turn.message, results=list(self._results),
                    answered=list(self._answered), unanswered=unanswered, tool_use_ids=list(self._turn_ids),
                    record=self._turn)
            else:
                messages.append(self._turn.message)
                if self._results:
                    messages.append({"role": "user", "content": list(self._results)})
        status = self._terminal.reason if (self._last_is_terminal and self._terminal) else "open"
        return RunState(
            meta=self._meta, messages=messages, counters=Counters(**self._c), next_iteration=self._next_iteration,
            last_stop_reason=self._stop, pending=pending, terminal=self._terminal, status=status,
            last_seq=self._last_seq, records=self._n, torn_tail=torn_tail, good_size=good_size)


def _compile(table: dict[str, tuple[str, ...]]) -> dict[tuple[str, str], tuple[Any, Any]]:
    """(phase, kind) -> (guard, action) of :class:`Folder`; a refused cell is (its ``_refuse_`` method, None)."""
    rules = {}
    for phase, row in table.items():
        for kind, rule in zip(KINDS, row, strict=True):
            if rule in ALLOWED:
                rules[phase, kind] = (getattr(Folder, f"_check_{rule}", None), getattr(Folder, f"_{rule}"))
            else:
                rules[phase, kind] = (getattr(Folder, f"_refuse_{rule}"), None)
    return rules


_RULES = _compile(TRANSITIONS)


def fold(records: Iterable[Record]) -> RunState:
    """Fold ``records`` (in journal order) into a :class:`RunState` (docs/spec.md section 8).

    Raises :class:`ConsistencyError` with ``line`` set to the record's position (empty
    input, and every refused cell of :data:`TRANSITIONS`: first record not meta,
    duplicate meta, seq not increasing by one, tool_result with no open turn, orphan or
    duplicate tool_result, a new turn over unanswered tool_use ids, records after a
    ``completed`` terminal) and :class:`UnsupportedVersion` for a newer meta version.
    """
    folder = Folder()
    for record in records:
        folder.add(record)
    return folder.state()
