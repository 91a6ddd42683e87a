"""harness.families.tail.mutations: labelled journal mutations (pure), each answered by the reference reader.

A reader's answer is judged by the I5 checker (harness.checkers.i5_reader_answers); :func:`problem` asks it
about one answer (None: the answer is right).
"""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import A, M, R, T, journal
from harness.checkers.i5_reader_answers import answer_problem
from harness.families.journal_state.reader_child import Answer, answer_for
from harness.families.tail.family import damage
from harness.families.tail.mutations import line_spans, mutation_by_id, mutations

J = journal(M(), A("a", "b"), R("a"), R("b", content="x" * 700), A(text="two files"), T())


def ask(data: bytes) -> Answer:
    """The reference reader's answer, in process (the tail family's own question)."""
    return answer_for(io.BufferedReader(io.BytesIO(data)))


def problem(m, answer: Answer) -> str | None:
    """What the I5 checker finds wrong with ``answer`` to mutation ``m`` (None: right)."""
    return answer_problem(m.id, m.expected(), answer.to_json())


def test_the_reference_reader_answers_every_mutation_as_labelled():
    muts = list(mutations(J, seed=3))
    wrong = [problem(m, ask(m.data)) for m in muts if problem(m, ask(m.data)) is not None]
    assert wrong == []
    assert {m.kind for m in muts} == {"intact", "cut", "zeros", "garbage", "mid-run", "flip", "interior"}
    assert {m.expect for m in muts} == {"clean", "torn", "corrupt"}


def test_the_last_record_is_cut_at_every_byte_offset():
    start, end = line_spans(J)[-1]
    cuts = [m for m in mutations(J, random_cuts=0) if m.kind == "cut"]
    assert sorted(len(m.data) for m in cuts) == list(range(start, end))
    first = next(m for m in cuts if len(m.data) == start)
    assert first.expect == "clean" and first.seqs == (1, 2, 3, 4, 5) and first.torn is None
    whole_but_newline = next(m for m in cuts if len(m.data) == end - 1)
    assert whole_but_newline.expect == "torn" and whole_but_newline.torn == (start, end - 1 - start)


def test_random_cuts_fall_before_the_last_record_and_keep_the_records_before_them():
    cuts = [m for m in mutations(J, random_cuts=12, cut_every_offset_of_last_record=False) if m.kind == "cut"]
    assert len(cuts) == 12 and all(len(m.data) < line_spans(J)[-1][0] for m in cuts)
    for m in cuts:
        assert m.good_size == sum(len(x) for x in J.split(b"\n")[: len(m.seqs)]) + len(m.seqs)


def test_a_zero_filled_tail_is_torn_with_and_without_a_final_newline():
    zeros = {m.id: m for m in mutations(J) if m.kind == "zeros"}
    assert zeros["zeros4096"].torn == (len(J), 4096) and zeros["zeros4096"].seqs == (1, 2, 3, 4, 5, 6)
    assert zeros["zeros4096+nl"].torn == (len(J), 4097)
    start = line_spans(J)[-1][0]
    assert zeros["zeroed-last+nl"].data.endswith(b"\0\n") and zeros["zeroed-last+nl"].torn == (start, len(J) - start)


def test_garbage_tails_are_torn_and_two_garbage_lines_are_corruption_at_the_first():
    garbage = [m for m in mutations(J, garbage_tails=3) if m.kind == "garbage"]
    assert len(garbage) == 9
    assert all(m.data.startswith(J) for m in garbage)
    two = [m for m in garbage if m.id.endswith("2lines")]
    assert all(m.expect == "corrupt" and m.line == 7 and m.offset == len(J) for m in two)


def test_byte_flips_inside_an_interior_line_are_corruption_naming_that_line():
    flips = [m for m in mutations(J, flips=40, seed=1) if m.kind == "flip"]
    interior = [m for m in flips if m.expect == "corrupt"]
    assert interior and all(1 <= m.line <= 6 for m in interior)
    for m in interior:
        assert ask(m.data).line == m.line


def test_mutations_are_deterministic_for_a_seed():
    one = [(m.id, m.data) for m in mutations(J, seed=9)]
    assert one == [(m.id, m.data) for m in mutations(J, seed=9)]
    assert one != [(m.id, m.data) for m in mutations(J, seed=10)]


def test_a_journal_that_is_not_clean_is_refused():
    with pytest.raises(ValueError, match="newline"):
        list(mutations(J[:-1]))
    with pytest.raises(ValueError, match="not a record"):
        list(mutations(J + b"junk\n"))
    with pytest.raises(ValueError, match="empty"):
        list(mutations(b""))


def test_the_judge_catches_a_reader_that_tolerates_interior_corruption():
    m = next(m for m in mutations(J) if m.expect == "corrupt")
    reason = problem(m, Answer("read", seqs=(1, 2, 3, 4, 5, 6)))
    assert reason is not None and f"line {m.line}" in reason
    assert problem(m, Answer("corrupt", line=m.line + 1)) is not None
    assert problem(m, Answer("corrupt", line=m.line)) is None


def test_the_judge_catches_a_reader_that_drops_a_complete_final_record():
    intact = next(m for m in mutations(J) if m.kind == "intact")
    start = line_spans(J)[-1][0]
    reason = problem(intact, Answer("read", (1, 2, 3, 4, 5), (start, len(J) - start), start))
    assert reason is not None and "1..6" in reason


def test_the_judge_catches_a_reader_that_blanks_the_run_or_raises_on_a_torn_tail():
    torn = next(m for m in mutations(J) if m.expect == "torn")
    assert problem(torn, Answer("read", (), None, 0)) is not None
    assert problem(torn, Answer("corrupt", line=6)) is not None
    assert problem(torn, Answer("read", torn.seqs, None, torn.good_size)) is not None  # tail not reported


def test_a_label_and_an_answer_are_json_facts():
    m = next(m for m in mutations(J) if m.expect == "torn")
    assert m.expected() == {"kind": "torn", "seqs": list(m.seqs), "good_size": m.good_size, "torn": list(m.torn),
                            "line": None, "offset": None}
    assert Answer("read", (1, 2), (5, 3), 5).to_json() == {"kind": "read", "seqs": [1, 2], "torn": [5, 3],
                                                           "good_size": 5, "line": None, "message": "",
                                                           "via": "reader", "records": None}


def _journal_of(contents: list[str]) -> bytes:
    recs = [M()]
    for i, c in enumerate(contents):
        recs += [A(f"t{i}", iteration=i), R(f"t{i}", content=c)]
    return journal(*recs, T())


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(max_size=60), min_size=1, max_size=4), st.integers(0, 1000))
def test_for_any_journal_every_mutation_is_answered_as_labelled(contents, seed):
    data = _journal_of(contents)
    for m in mutations(data, seed=seed, random_cuts=8, garbage_tails=2, flips=6):
        reason = problem(m, ask(m.data))
        assert reason is None, reason


def test_a_status_command_s_answer_is_judged_by_what_it_can_say():
    # another agent's status command: it reads a clean or torn journal with the right record count, and
    # refuses a corrupt one; it cannot name a line or a tail's offset, so those are not asked of it
    corrupt = next(m for m in mutations(J) if m.expect == "corrupt")
    torn = next(m for m in mutations(J) if m.expect == "torn" and m.seqs)
    assert problem(corrupt, Answer("error", message="exit 1", via="status")) is None
    assert "read the journal anyway (5 records)" in problem(corrupt, Answer("read", via="status", records=5))
    assert problem(torn, Answer("read", via="status", records=len(torn.seqs))) is None
    assert problem(torn, Answer("read", via="status")) is None                     # no record count mapped
    assert f"read {len(torn.seqs) + 1}" in problem(torn, Answer("read", via="status", records=len(torn.seqs) + 1))
    assert "status command failed" in problem(torn, Answer("error", message="RunLocked", via="status"))


def test_a_tail_mutation_named_by_a_shrink_is_the_one_the_nemesis_makes_and_its_damage_is_measured():
    journal = b"".join(json.dumps({"seq": i, "x": "a" * (10 + i)}).encode() + b"\n" for i in range(1, 6))
    made = {m.id: m for m in mutations(journal, seed=3)}
    cut = next(m for m in made.values() if m.kind == "cut" and m.expect == "torn")
    again = mutation_by_id(journal, cut.id)
    assert (again.data, again.expect, again.torn, again.seqs) == (cut.data, cut.expect, cut.torn, cut.seqs)
    assert damage(journal, cut.data) == ((len(journal) - len(cut.data), 0), f"cut {len(journal) - len(cut.data)} byte(s)")
    zeroed = made["zeroed-last+nl"]
    last = len(journal) - journal.rfind(b"\n", 0, len(journal) - 1) - 2  # the last record without its newline
    assert damage(journal, zeroed.data)[0] == (last, 1)
    one = mutation_by_id(journal, f"flip@{len(journal) - 2}:00")  # one NUL byte, the last before the newline
    assert one.expect == zeroed.expect == "torn" and one.torn == zeroed.torn
    assert damage(journal, one.data)[0] == (1, 1) < damage(journal, zeroed.data)[0]
    with pytest.raises(ValueError, match="no tail mutation"):
        mutation_by_id(journal, "garbage0")


def test_a_store_is_cut_at_every_page_and_sector_boundary_of_its_last_write_and_zeroed_where_last_written():
    from harness.families.tail.bound import form
    from harness.families.tail.mutations import store_mutations

    db, wal = bytes(range(256)) * 48, b"w" * 1000  # 12288 bytes; the last write: 4096..8292 (a page and 100 bytes)
    muts = list(store_mutations({"t.db": db, "t.db-wal": wal}, [("t.db", 4096, 8292), ("t.db-wal", 400, 1000)]))
    cuts = {m.id: m for m in muts if m.kind == "cut"}
    assert [len(m.data) for m in cuts.values() if m.file == "t.db"] == list(range(4096, 8292, 512))
    assert {form(i) for i in cuts} == {"t.db/cut-page", "t.db/cut-sector", "t.db-wal/cut-sector"}
    assert all(db.startswith(m.data) for m in cuts.values() if m.file == "t.db")
    assert [len(m.data) for m in cuts.values() if m.file == "t.db-wal"] == [512]  # the one boundary in 400..1000
    zero = {m.id: m.data for m in muts if m.kind == "zeros"}
    assert zero["t.db/zero-page@8192:8292"] == db[:8192] + bytes(100) + db[8292:]
    assert zero["t.db/zero-write@4096:8292"] == db[:4096] + bytes(4196) + db[8292:]
    assert zero["t.db-wal/zero-write@400:1000"] == wal[:400] + bytes(600)
    assert all(m.expect == "damaged" and m.file in ("t.db", "t.db-wal") for m in muts)
