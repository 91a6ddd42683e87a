"""The store and journal against a plain in-memory model: a list of acknowledged lines plus a torn tail.

Steps: create, append (text turns, tool turns, results, user turns, suspends),
refused appends (orphan results), close, reopen, crash-cut (the writer dies
mid-append, leaving a prefix of its next line or zeros), load and list.
After every step the file must be exactly the acknowledged lines plus the
torn tail, and an open journal's seq must match the model.
"""

import dataclasses
import os
import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from fiskj import ioseam
from fiskj.codec import encode_record
from fiskj.errors import InvalidRecord
from fiskj.store import FileStore

from builders import A, M, R, T, U


class StoreMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        ioseam.configure()
        self.tmp = tempfile.mkdtemp(prefix="fiskj-stateful-")
        self.store = FileStore(os.path.join(self.tmp, "runs"))
        self.path = os.path.join(self.store.directory, "r1.json")
        self.journal = None
        self.lines: list[bytes] = []   # acknowledged lines (the model)
        self.torn = b""                # bytes of a crashed append not yet cut
        self.unanswered: list[str] = []
        self.iteration = 0
        self.ids = 0

    def teardown(self):
        if self.journal is not None:
            self.journal.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers ---------------------------------------------------------------------------

    def _append(self, record):
        seq = self.journal.append(record)
        assert seq == len(self.lines) + 1
        self.lines.append(encode_record(dataclasses.replace(record, seq=seq)))

    # -- rules ------------------------------------------------------------------------------

    @precondition(lambda self: not self.lines and not self.torn)
    @rule()
    def create(self):
        self.journal = self.store.create("r1", M())
        self.lines.append(encode_record(dataclasses.replace(M(), seq=1)))

    @precondition(lambda self: self.journal is not None and not self.unanswered)
    @rule(n=st.integers(0, 3), text=st.text(max_size=20))
    def assistant(self, n, text):
        ids = [f"t{self.ids + i}" for i in range(n)]
        self.ids += n
        self._append(A(*ids, text=text, iteration=self.iteration))
        self.iteration += 1
        self.unanswered = ids

    @precondition(lambda self: self.journal is not None and self.unanswered)
    @rule(content=st.text(max_size=30))
    def tool_result(self, content):
        self._append(R(self.unanswered.pop(0), content=content))

    @precondition(lambda self: self.journal is not None and not self.unanswered)
    @rule(text=st.text(min_size=1, max_size=20))
    def user(self, text):
        self._append(U(text))

    @precondition(lambda self: self.journal is not None and not self.unanswered)
    @rule()
    def suspend(self):
        self._append(T("suspended"))

    @precondition(lambda self: self.journal is not None)
    @rule(which=st.sampled_from(["orphan", "duplicate"]))
    def refused_result(self, which):
        answered = [f"t{i}" for i in range(self.ids) if f"t{i}" not in self.unanswered]
        tool_use_id = "never-issued" if which == "orphan" or not answered else answered[-1]
        try:
            self.journal.append(R(tool_use_id))
        except InvalidRecord:
            pass
        else:
            raise AssertionError(f"a {which} tool_result was appended")

    @precondition(lambda self: self.journal is not None)
    @rule()
    def close(self):
        self.journal.close()
        self.journal = None

    @precondition(lambda self: self.journal is None and self.lines)
    @rule()
    def reopen(self):
        self.journal = self.store.open("r1")
        if self.torn:
            assert self.journal.repaired_tail.offset == sum(map(len, self.lines))
            assert self.journal.repaired_tail.length == len(self.torn)
        else:
            assert self.journal.repaired_tail is None
        self.torn = b""
        assert self.journal.last_seq == len(self.lines)
        assert self.journal.state.pending is None or self.journal.state.pending.unanswered == self.unanswered

    @precondition(lambda self: self.journal is not None)
    @rule(data=st.data(), zeros=st.booleans())
    def crash_cut(self, data, zeros):
        """The writer dies mid-append: a prefix of its next line (or zeros) is left behind."""
        self.journal.close()  # the kernel drops the lock of a dead process
        self.journal = None
        line = encode_record(dataclasses.replace(T("suspended"), seq=len(self.lines) + 1))
        if zeros:
            torn = b"\0" * data.draw(st.integers(1, 64)) + data.draw(st.sampled_from([b"", b"\n"]))
        else:
            torn = line[: data.draw(st.integers(1, len(line) - 1))]
        with open(self.path, "ab") as f:
            f.write(torn)
        self.torn = torn

    @precondition(lambda self: self.lines)
    @rule()
    def load_and_list(self):
        state = self.store.load("r1")
        assert state.records == len(self.lines)
        if self.torn:
            assert (state.torn_tail.offset, state.torn_tail.length) == (sum(map(len, self.lines)), len(self.torn))
        else:
            assert state.torn_tail is None
        (info,) = self.store.list()
        assert info.error is None and info.records == len(self.lines)

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def the_file_is_the_acknowledged_lines_plus_the_torn_tail(self):
        if not self.lines:
            assert not os.path.exists(self.path)
            return
        with open(self.path, "rb") as f:
            assert f.read() == b"".join(self.lines) + self.torn

    @invariant()
    def an_open_journal_is_never_torn(self):
        if self.journal is not None:
            assert not self.torn and self.journal.last_seq == len(self.lines)


StoreMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
test_the_store_matches_a_plain_model_of_the_journal = StoreMachine.TestCase
