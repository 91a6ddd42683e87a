"""Fold: replay a record stream into a resumable :class:`RunState`.  Pure: no IO.

Source: seed "A run is a record stream" / "Fold replays a record set" and
FORMAT.md "Fold"; docs/spec.md "Fold rules" is normative.  The rules:

1. The first record is the meta record (seq 1); a second meta is an error.
   Every seq is the previous seq + 1.
2. Messages start as one user message holding the meta prompt as a text
   block (none when the prompt is absent or empty).
3. An assistant record commits the current turn (its message, then one user
   message of its tool_result blocks in journal order, if any) and opens a
   new current turn.  It is an error while the current turn still has an
   unanswered tool_use (the conversation would be ill-formed).
4. A tool_result answers a tool_use id of the current turn; an id the turn
   did not issue (orphan) or already answered (duplicate) is an error.
5. A user record commits the current turn (same rule as 3) and appends its
   message, merged into the last message when that is a user message.
6. A terminal record sets the terminal state.  Only a ``suspended`` terminal
   may be followed by more records (a resumed run appends after it).
7. Counters are sums over the records; they are never stored.
8. At the end the current turn is committed when all its tool_use ids are
   answered, else it is the pending turn.  ``status`` is the reason of the
   terminal record when it is the last record, else ``open`` (this fixes
   fisk-ai defect 5, where a resumed run kept reading ``suspended``).

Errors are :class:`ConsistencyError` with ``line`` = the record's position
(1-based; the reader's line number), or :class:`UnsupportedVersion`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from .errors import ConsistencyError, UnsupportedVersion
from .fingerprint import Fingerprint
from .records import (
    VERSION,
    AssistantRecord,
    MetaRecord,
    Record,
    TerminalRecord,
    ToolResultRecord,
    UserRecord,
    tool_use_ids,
)

__all__ = ["Counters", "PendingTurn", "RunState", "Folder", "fold", "TornTail", "RESUMABLE"]

#: Statuses from which a run may be resumed (docs/spec.md "Resume rules").
RESUMABLE = ("open", "suspended")


@dataclass(frozen=True, slots=True)
class TornTail:
    """An incomplete or unparsable final line the reader dropped: byte ``offset`` and ``length``."""

    offset: int
    length: int

    def to_json(self) -> dict[str, int]:
        """Return ``{"offset": int, "length": int}``."""
        return {"offset": self.offset, "length": self.length}


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
    """The resumable state of a run: what a fold of its journal yields.

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
    torn_tail: TornTail | None = None
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
        """True when the status is one of :data:`RESUMABLE` (``open`` or ``suspended``)."""
        return self.status in RESUMABLE

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
        """Return the ``fiskj session show --json`` object (keys: docs/spec.md "show --json")."""
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
        messages[-1] = {**last, "content": merged}
    else:
        messages.append(message)


def _as_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


class Folder:
    """Incremental fold: ``add`` records one at a time, ask for ``state()`` at any point.

    ``state()`` is O(messages) (it copies the message list); ``add`` is O(1)
    amortised.  Raises :class:`ConsistencyError` (``line`` = 1-based record
    position, ``field`` where one applies) on a rule break; after an error the
    folder must not be used further.
    """

    # The message list is shared copy-on-write between a folder and its copies (``copy`` is
    # O(1), so a writer's trial fold per append does not grow with the run): a folder's
    # messages are ``_messages[:_mlen]``; only the folder that ``_owns`` the list appends to it
    # in place, and it replaces an element in place only at or past ``_frozen`` (the length a
    # copy saw).  Any other mutation first takes a private copy of the folder's own view.

    def __init__(self) -> None:
        self._meta: MetaRecord | None = None
        self._messages: list[dict[str, Any]] = []
        self._mlen = 0
        self._owns = True
        self._frozen = 0
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

    # -- the shared message list ------------------------------------------------

    def _writable(self, replace_last: bool = False) -> list[dict[str, Any]]:
        """This folder's message list, made private first unless it may be changed in place."""
        messages, n = self._messages, self._mlen
        if not self._owns or len(messages) != n or (replace_last and n - 1 < self._frozen):
            messages = self._messages = messages[:n]
            self._owns = True
            self._frozen = 0
        return messages

    # -- rules --------------------------------------------------------------

    def _commit_turn(self) -> None:
        """Commit the current turn (its message, then its results); :meth:`_check` made sure it is answered."""
        turn = self._turn
        if turn is None:
            return
        messages = self._messages
        if not self._owns or len(messages) != self._mlen:
            messages = self._writable()
        messages.append(turn.message)
        if self._results:
            # The list itself is handed over: nothing else refers to it (copies and states copy it).
            messages.append({"role": "user", "content": self._results})
            self._results = []
        self._mlen = len(messages)
        self._turn = None
        self._turn_ids = []
        self._answered = {}

    def _check(self, record: Record, line: int) -> list[str] | None:
        """Every rule of :meth:`add`, changing nothing: raise its error (``line`` = the record's position).

        Returns the tool_use ids of an assistant record's message (``add`` keeps them), else ``None``.
        """
        seq = record.seq
        if self._meta is None:
            if not isinstance(record, MetaRecord):
                raise ConsistencyError(f"first record is {record.key}, expected meta", line=line, field="protocol")
            if seq != 1:
                raise ConsistencyError(f"meta record has seq {seq}, expected 1", line=line, field="seq")
            if record.version > VERSION:  # the codec refuses this too; records may be built in code
                raise UnsupportedVersion(f"journal version {record.version} is newer than this reader's {VERSION}",
                                         line=line, field="meta.version")
            return None
        if seq != self._last_seq + 1:
            kind = "repeated" if seq <= self._last_seq else "skips ahead"
            raise ConsistencyError(f"seq {seq} {kind}: expected {self._last_seq + 1}", line=line, field="seq")
        if self._last_is_terminal and self._terminal is not None and self._terminal.reason != "suspended":
            raise ConsistencyError(
                f"{record.key} record after a {self._terminal.reason!r} terminal record (seq {self._terminal.seq}); "
                f"only a 'suspended' run may be continued", line=line)
        # Most frequent kind first (the kinds are disjoint classes, so the order changes nothing else).
        if isinstance(record, ToolResultRecord):
            if self._turn is None:
                raise ConsistencyError(f"tool_result for {record.tool_use_id!r} with no open assistant turn",
                                       line=line, field="tool_result.tool_use_id")
            tid = record.tool_use_id
            if tid not in self._turn_ids:
                raise ConsistencyError(
                    f"orphan tool_result: {tid!r} is not a tool_use id of iteration {self._turn.iteration} "
                    f"(ids {self._turn_ids})", line=line, field="tool_result.tool_use_id")
            if tid in self._answered:
                raise ConsistencyError(f"duplicate tool_result for {tid!r}", line=line,
                                       field="tool_result.tool_use_id")
            return None
        if isinstance(record, AssistantRecord):
            self._check_turn_answered("assistant record", line)
            ids = tool_use_ids(record.message)
            if len(ids) > 1 and len(set(ids)) != len(ids):
                raise ConsistencyError(f"assistant message repeats a tool_use id: {ids}", line=line,
                                       field="assistant.message")
            return ids
        if isinstance(record, UserRecord):
            self._check_turn_answered("user record", line)
        elif isinstance(record, MetaRecord):
            raise ConsistencyError("duplicate meta record", line=line, field="protocol")
        elif not isinstance(record, TerminalRecord):  # pragma: no cover - codec never yields other types
            raise ConsistencyError(f"not a record: {type(record).__name__}", line=line)
        return None

    def _check_turn_answered(self, what: str, line: int) -> None:
        """The current turn (if any) may be committed: every tool_use id of it is answered."""
        turn = self._turn
        # Every answered id is one of the turn's ids, so equal counts mean none is missing.
        if turn is not None and len(self._answered) != len(self._turn_ids):
            missing = [i for i in self._turn_ids if i not in self._answered]
            raise ConsistencyError(
                f"{what} while tool_use ids {missing} of iteration {turn.iteration} "
                f"(seq {turn.seq}) are unanswered", line=line)

    def check(self, record: Record) -> None:
        """Raise the error :meth:`add` would raise for ``record``, changing nothing.

        A record that passes can then be added (to try a record before committing to it,
        as :class:`fiskj.journal.Journal` does before its write).
        """
        self._check(record, self._n + 1)

    def add(self, record: Record) -> None:
        """Fold one more record (see the module docstring for the rules)."""
        self._n += 1
        ids = self._check(record, self._n)
        if self._meta is None:
            self._meta = record  # type: ignore[assignment]  # _check: a meta record
            self._last_seq = 1
            if record.prompt:  # type: ignore[union-attr]
                self._writable().append({"role": "user", "content": [{"type": "text", "text": record.prompt}]})  # type: ignore[union-attr]
                self._mlen += 1
            return
        self._last_seq = record.seq
        self._last_is_terminal = False
        c = self._c
        if isinstance(record, ToolResultRecord):
            self._answered[record.tool_use_id] = None
            self._results.append(record.result)
            c["tool_calls"] += 1
            if record.remote:
                c["remote_tool_calls"] += 1
        elif isinstance(record, AssistantRecord):
            if self._turn is not None:
                self._commit_turn()
            self._turn = record
            self._turn_ids = ids  # type: ignore[assignment]
            self._stop = record.stop_reason
            self._next_iteration = record.iteration + 1
            c["llm_calls"] += 1
            c["in_tokens"] += record.in_tokens
            c["out_tokens"] += record.out_tokens
            c["cache_read_tokens"] += record.cache_read_tokens or 0
            c["cache_create_tokens"] += record.cache_create_tokens or 0
        elif isinstance(record, UserRecord):
            self._commit_turn()
            n = self._mlen
            merge = n > 0 and self._messages[n - 1].get("role") == "user"  # _merge_user replaces the last
            _merge_user(self._writable(replace_last=merge), record.message)
            self._mlen = len(self._messages)
        else:  # a terminal record (_check refused every other kind)
            self._terminal = record  # type: ignore[assignment]
            self._last_is_terminal = True

    # -- result ---------------------------------------------------------------

    def state(self, torn_tail: TornTail | None = None, good_size: int | None = None) -> RunState:
        """Return the :class:`RunState` of the records added so far.

        Raises :class:`ConsistencyError` when no record (no meta) was added.
        """
        if self._meta is None:
            raise ConsistencyError("journal is empty: no meta record", line=1)
        messages = self._messages[:self._mlen]
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

    def copy(self) -> "Folder":
        """Return an independent copy (to try a record without committing to it)."""
        other = Folder.__new__(Folder)
        other.__dict__.update(self.__dict__)
        # O(1) in the messages: the list is shared; the copy takes over appending in place and
        # this folder keeps its view, which nobody may change in place any more (docs on the class).
        other._frozen = self._mlen
        self._owns = False
        other._turn_ids = list(self._turn_ids)
        other._results = list(self._results)
        other._answered = dict(self._answered)
        other._c = dict(self._c)
        return other


def fold(records: Iterable[Record]) -> RunState:
    """Fold ``records`` (in journal order) into a :class:`RunState`.

    Raises :class:`ConsistencyError` (empty input, first record not meta,
    duplicate meta, seq not increasing by one, tool_result before any
    assistant, orphan or duplicate tool_result, records after a
    non-suspended terminal) with ``line`` set to the record's position, and
    :class:`UnsupportedVersion` for a newer meta version.
    """
    folder = Folder()
    for record in records:
        folder.add(record)
    return folder.state()
