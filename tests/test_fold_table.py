"""The fold's transition table (fiskj/fold.py, docs/spec.md section 8) against a plain model.

A ``RuleBasedStateMachine`` feeds :class:`fiskj.fold.Folder` random records, valid and
invalid (wrong seqs, records before meta, a second meta, orphan and duplicate results,
new turns over unanswered tool_use ids, records after a ``completed`` terminal, repeated
tool_use ids, newer versions), next to a model written out plainly below.  Each step
checks that an allowed record folds and a refused one raises the model's error type,
line and field with the text "<kind> record not allowed in state <PHASE>: ...", and
``check`` raises what ``add`` raises without changing anything.  After every step the
folder's phase, seq, record count, counters, messages and pending turn equal the model's.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from fiskj.errors import ConsistencyError, JournalError, UnsupportedVersion
from fiskj.fold import ALLOWED, KINDS, PHASES, TRANSITIONS, Folder
from fiskj.records import AssistantRecord, MetaRecord, TerminalRecord, ToolResultRecord, UserRecord

from budget import examples
from builders import FP

# --- the model's table: which (phase, kind) cells may fold a record at all ---------------------

MODEL_ALLOWED = {
    ("START", "meta"),
    ("IDLE", "assistant"), ("IDLE", "user"), ("IDLE", "terminal"),
    ("AWAITING_RESULTS", "tool_result"), ("AWAITING_RESULTS", "terminal"),
    ("TURN_DONE", "assistant"), ("TURN_DONE", "user"), ("TURN_DONE", "terminal"),
}

IDS = ["t0", "t1", "t2", "t3", "t4"]
#: How a record's seq differs from the one expected: mostly right.
seq_shifts = st.sampled_from([0] * 30 + [-1, 1, 7])
#: Mostly False: an assistant message that repeats a tool_use id.
rarely = st.sampled_from([False] * 7 + [True])


def test_the_table_has_one_rule_for_every_phase_and_record_kind():
    assert set(TRANSITIONS) == set(PHASES) == {"START", "IDLE", "AWAITING_RESULTS", "TURN_DONE", "ENDED"}
    assert all(len(row) == len(KINDS) for row in TRANSITIONS.values())
    allowed = {(p, k) for p, row in TRANSITIONS.items() for k, r in zip(KINDS, row) if r in ALLOWED}
    assert allowed == MODEL_ALLOWED


def test_a_refused_record_names_its_kind_and_the_phase():
    f = Folder()
    f.add(MetaRecord(version=2, run_id="r", created="c", fingerprint=FP, seq=1))
    with pytest.raises(ConsistencyError) as info:
        f.check(ToolResultRecord(tool_use_id="a", result={"type": "tool_result", "tool_use_id": "a"}, seq=2))
    assert info.value.message.startswith("tool_result record not allowed in state IDLE: ")
    assert "no open assistant turn" in info.value.message and info.value.line == 2


class Model:
    """The fold written out plainly: what each record does, and the error a refused one raises."""

    def __init__(self) -> None:
        self.phase = "START"
        self.n = 0
        self.last_seq = 0
        self.messages: list[dict[str, Any]] = []
        self.turn: AssistantRecord | None = None
        self.turn_ids: list[str] = []
        self.answered: list[str] = []
        self.results: list[dict[str, Any]] = []
        self.terminal: TerminalRecord | None = None
        self.last_is_terminal = False
        self.counters = dict.fromkeys(["llm_calls", "tool_calls", "remote_tool_calls", "in_tokens", "out_tokens",
                                       "cache_read_tokens", "cache_create_tokens"], 0)
        self.next_iteration = 0
        self.stop: str | None = None

    def refusal(self, record: Any) -> tuple[type, str | None, str] | None:
        """``(error class, field, a phrase of the message)`` when ``record`` is refused, else ``None``."""
        kind = record.key
        if self.phase == "START":
            if kind != "meta":
                return ConsistencyError, "protocol", "expected meta"
            if record.seq != 1:
                return ConsistencyError, "seq", "expected 1"
            if record.version > 2:
                return UnsupportedVersion, "meta.version", f"version {record.version}"
            return None
        expected = self.last_seq + 1
        if record.seq != expected:
            how = "repeated" if record.seq < expected else "skips ahead"
            return ConsistencyError, "seq", f"seq {record.seq} {how}: expected {expected}"
        if self.phase == "ENDED":
            return ConsistencyError, None, f"after a {self.terminal.reason!r} terminal record"
        if kind == "meta":
            return ConsistencyError, "protocol", "duplicate meta"
        if kind == "tool_result":
            if self.turn is None:
                return ConsistencyError, "tool_result.tool_use_id", "no open assistant turn"
            if record.tool_use_id in self.answered:
                return ConsistencyError, "tool_result.tool_use_id", f"duplicate tool_result for {record.tool_use_id!r}"
            if record.tool_use_id not in self.turn_ids:
                return ConsistencyError, "tool_result.tool_use_id", f"orphan tool_result: {record.tool_use_id!r}"
        if kind in ("assistant", "user") and len(self.answered) < len(self.turn_ids):
            return ConsistencyError, None, "unanswered"
        if kind == "assistant":
            ids = [b["id"] for b in record.message["content"] if b["type"] == "tool_use"]
            if len(set(ids)) != len(ids):
                return ConsistencyError, "assistant.message", "repeats a tool_use id"
        return None

    def commit(self) -> None:
        if self.turn is not None:
            self.messages.append(self.turn.message)
            if self.results:
                self.messages.append({"role": "user", "content": list(self.results)})
        self.turn, self.turn_ids, self.answered, self.results = None, [], [], []

    def apply(self, record: Any) -> None:
        """Fold an allowed record."""
        self.n += 1
        self.last_seq = record.seq
        self.last_is_terminal = False
        if isinstance(record, MetaRecord):
            # An absent or empty prompt is one text block with empty text, as fisk-ai folds it.
            self.messages.append({"role": "user", "content": [{"type": "text", "text": record.prompt or ""}]})
            self.phase = "IDLE"
        elif isinstance(record, AssistantRecord):
            self.commit()
            self.turn = record
            self.turn_ids = [b["id"] for b in record.message["content"] if b["type"] == "tool_use"]
            self.next_iteration, self.stop = record.iteration + 1, record.stop_reason
            self.counters["llm_calls"] += 1
            self.counters["in_tokens"] += record.in_tokens
            self.counters["out_tokens"] += record.out_tokens
            self.counters["cache_read_tokens"] += record.cache_read_tokens or 0
            self.phase = "AWAITING_RESULTS" if self.turn_ids else "TURN_DONE"
        elif isinstance(record, ToolResultRecord):
            self.answered.append(record.tool_use_id)
            self.results.append(record.result)
            self.counters["tool_calls"] += 1
            self.counters["remote_tool_calls"] += bool(record.remote)
            self.phase = "TURN_DONE" if len(self.answered) == len(self.turn_ids) else "AWAITING_RESULTS"
        elif isinstance(record, UserRecord):
            self.commit()
            if self.messages and self.messages[-1]["role"] == "user":
                self.messages[-1] = {**self.messages[-1],
                                     "content": self.messages[-1]["content"] + record.message["content"]}
            else:
                self.messages.append(record.message)
            self.phase = "IDLE"
        else:
            self.terminal, self.last_is_terminal = record, True
            if record.reason == "completed":  # every other reason ends one leg; the next appends after it
                self.phase = "ENDED"

    def expected_messages(self) -> list[dict[str, Any]]:
        out = list(self.messages)
        if self.turn is not None and len(self.answered) == len(self.turn_ids):
            out.append(self.turn.message)
            if self.results:
                out.append({"role": "user", "content": list(self.results)})
        return out


class FoldTable(RuleBasedStateMachine):
    """Random records through :class:`Folder` next to :class:`Model`."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Folder()
        self.model = Model()
        self.accepted: list[Any] = []

    def feed(self, record: Any) -> None:
        record = dataclasses.replace(record, seq=self.model.last_seq + 1 + record.seq)  # record.seq: the shift
        want = self.model.refusal(record)
        if want is None:
            self.folder.check(record)
            self.folder.add(record)
            self.model.apply(record)
            self.accepted.append(record)
            return
        cls, field, phrase = want
        before = copy.deepcopy(self.folder.__dict__)
        with pytest.raises(JournalError) as checked:
            self.folder.check(record)
        assert self.folder.__dict__ == before, "check changed the folder"
        err = checked.value
        assert type(err) is cls, err
        assert err.message.startswith(f"{record.key} record not allowed in state {self.model.phase}: "), err.message
        assert phrase in err.message, (phrase, err.message)
        assert (err.line, err.field) == (self.model.n + 1, field), err
        replay = Folder()  # add raises the same error (and the folder is not used after it)
        for r in self.accepted:
            replay.add(r)
        with pytest.raises(JournalError) as added:
            replay.add(record)
        assert (type(added.value), added.value.message, added.value.line, added.value.field) == \
            (type(err), err.message, err.line, err.field)

    @initialize(meta_first=st.sampled_from([True] * 5 + [False]), version=st.sampled_from([1, 2]),
                prompt=st.sampled_from([None, "", "go"]))
    def start(self, meta_first, version, prompt):
        if meta_first:  # most runs start with a valid meta record; the others explore START
            self.meta(0, version, prompt)

    @rule(shift=seq_shifts, version=st.sampled_from([1, 2, 2, 3]), prompt=st.sampled_from([None, "", "go"]))
    def meta(self, shift, version, prompt):
        self.feed(MetaRecord(version=version, run_id="r", created="c", fingerprint=FP, prompt=prompt,
                             interactive=None, seq=shift))

    @rule(shift=seq_shifts, ids=st.lists(st.sampled_from(IDS), max_size=3, unique=True), repeat=rarely,
          text=st.booleans(), tokens=st.integers(0, 9), cache=st.none() | st.integers(0, 9))
    def assistant(self, shift, ids, repeat, text, tokens, cache):
        ids = ids + ids[:1] if repeat else ids
        content = [{"type": "text", "text": "x"}] if text or not ids else []
        content += [{"type": "tool_use", "id": i, "name": "t", "input": {}} for i in ids]
        self.feed(AssistantRecord(iteration=self.model.next_iteration, message={"role": "assistant", "content": content},
                                  in_tokens=tokens, out_tokens=1, stop_reason="tool_use" if ids else "end_turn",
                                  cache_read_tokens=cache, seq=shift))

    @precondition(lambda self: len(self.model.answered) < len(self.model.turn_ids))
    @rule(shift=seq_shifts, pick=st.integers(0, 9), remote=st.none() | st.booleans())
    def answer(self, shift, pick, remote):
        self.tool_result(shift, "unanswered", pick, remote)

    @rule(shift=seq_shifts, which=st.sampled_from(["unanswered", "answered", "any"]), pick=st.integers(0, 9),
          remote=st.none() | st.booleans())
    def tool_result(self, shift, which, pick, remote):
        m = self.model
        pool = {"unanswered": [i for i in m.turn_ids if i not in m.answered], "answered": m.answered}.get(which) or IDS
        tid = pool[pick % len(pool)]
        self.feed(ToolResultRecord(tool_use_id=tid, result={"type": "tool_result", "tool_use_id": tid,
                                                            "content": f"r{pick}", "is_error": False},
                                   remote=remote, seq=shift))

    @rule(shift=seq_shifts, text=st.sampled_from(["more", "again"]))
    def user(self, shift, text):
        self.feed(UserRecord(message={"role": "user", "content": [{"type": "text", "text": text}]}, seq=shift))

    @rule(shift=seq_shifts, reason=st.sampled_from(["suspended"] * 6 + ["error", "budget", "max_iterations", "x_new"]
                                                   + ["completed"] * 2))
    def terminal(self, shift, reason):
        self.feed(TerminalRecord(reason=reason, seq=shift))

    @invariant()
    def the_folder_agrees_with_the_model(self):
        m = self.model
        assert self.folder.phase == m.phase
        if m.n == 0:
            with pytest.raises(ConsistencyError, match="empty"):
                self.folder.state()
            return
        state = self.folder.state()
        assert (state.last_seq, state.records) == (m.last_seq, m.n)
        assert state.counters.to_json() == m.counters
        assert (state.next_iteration, state.last_stop_reason) == (m.next_iteration, m.stop)
        assert state.terminal == m.terminal
        assert state.status == (m.terminal.reason if m.last_is_terminal else "open")
        assert state.messages == m.expected_messages()
        unanswered = [i for i in m.turn_ids if i not in m.answered]
        if m.turn is None or not unanswered:
            assert state.pending is None
        else:
            p = state.pending
            assert (p.iteration, p.assistant, p.record) == (m.turn.iteration, m.turn.message, m.turn)
            assert (p.answered, p.unanswered, p.tool_use_ids, p.results) == (m.answered, unanswered, m.turn_ids,
                                                                               m.results)


# 60 runs of 40 steps in the default suite, 120 under --long (tests/budget.py).
FoldTable.TestCase.settings = settings(max_examples=examples(60, 120), stateful_step_count=40, deadline=None)
test_the_fold_follows_its_transition_table = FoldTable.TestCase
