import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fiskj.codec import MAX_RECORD_BYTES
from fiskj.errors import CorruptJournal, RecordTooLarge, UnsupportedVersion
from fiskj.reader import JournalReader, read_records, read_state

from builders import A, M, R, T, U, journal, lines, numbered

GOOD = [M(), A("a"), R("a"), A(text="done", iteration=1), T("completed")]


def write(tmp_path, data: bytes, name="r1.json"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_a_valid_journal_reads_every_record_with_no_torn_tail(tmp_path):
    records, torn = read_records(write(tmp_path, journal(*GOOD)))
    assert records == numbered(*GOOD)
    assert torn is None


@pytest.mark.parametrize("variant", ["inside a string", "inside utf-8", "complete object without newline"])
def test_field_case_f01_a_torn_tail_keeps_the_good_records_and_reports_the_tail(tmp_path, variant):
    good = journal(M(), A("a"), R("a"), A(text="caf\u00e9 done", iteration=1))
    last = lines(M(), A("a"), R("a"), A(text="caf\u00e9 done", iteration=1), A(text="caf\u00e9 again", iteration=2))[-1]
    if variant == "inside a string":
        torn = last[: last.index(b"again") + 2]
    elif variant == "inside utf-8":
        torn = last[: last.index("\u00e9".encode()) + 1]
    else:
        torn = last[:-1]
    state = read_state(write(tmp_path, good + torn))
    assert state.records == 4
    assert state.torn_tail.offset == len(good) and state.torn_tail.length == len(torn)
    assert state.good_size == len(good)


@pytest.mark.parametrize("newline", [b"", b"\n"])
def test_field_case_f03_a_zero_filled_tail_is_a_torn_tail(tmp_path, newline):
    good = journal(M(), A("a"), R("a"))
    state = read_state(write(tmp_path, good + b"\x00" * 4096 + newline))
    assert state.records == 3
    assert state.torn_tail.offset == len(good)
    assert state.torn_tail.length == 4096 + len(newline)


def test_an_unparsable_interior_line_is_corruption_naming_line_and_offset(tmp_path):
    ls = lines(*GOOD)
    data = ls[0] + ls[1] + b'{"seq": 3, garbage\n' + ls[3] + ls[4]
    with pytest.raises(CorruptJournal) as info:
        read_records(write(tmp_path, data))
    err = info.value
    assert err.line == 3 and err.offset == len(ls[0]) + len(ls[1])
    assert str(tmp_path) in str(err) and "line 3" in str(err)


def test_a_zero_filled_interior_line_is_corruption(tmp_path):
    ls = lines(*GOOD)
    data = ls[0] + b"\x00" * 50 + b"\n" + ls[2]
    with pytest.raises(CorruptJournal) as info:
        read_records(write(tmp_path, data))
    assert info.value.line == 2


def test_a_valid_json_final_line_that_is_not_a_record_is_corruption_not_a_torn_tail(tmp_path):
    data = journal(M(), A("a")) + b'{"seq": 3, "protocol": "io.choria.fisk-ai.v1.session.terminal", "terminal": {}}\n'
    with pytest.raises(CorruptJournal) as info:
        read_records(write(tmp_path, data))
    assert info.value.line == 3 and info.value.field == "terminal.reason"


def test_a_complete_final_record_is_never_dropped(tmp_path):
    records, torn = read_records(write(tmp_path, journal(M(), A("a"), R("a"))))
    assert len(records) == 3 and torn is None


def test_field_case_f05_the_reader_splits_on_the_newline_byte_only(tmp_path):
    data = journal(M(), A("a"), R("a", content="x\u2028y\u2029z\u0085w\x0b\x0c\x1c\x1d\x1e\r"))
    records, torn = read_records(write(tmp_path, data))
    assert len(records) == 3 and torn is None


def test_a_newer_version_is_refused_with_location(tmp_path):
    data = journal(M()).replace(b'"version":2', b'"version":9')
    with pytest.raises(UnsupportedVersion) as info:
        read_records(write(tmp_path, data))
    assert info.value.line == 1 and "9" in info.value.message


def test_an_empty_file_is_corrupt_with_a_clear_message(tmp_path):
    with pytest.raises(CorruptJournal, match="empty"):
        read_state(write(tmp_path, b""))


def test_a_file_of_only_a_torn_line_is_corrupt_with_a_clear_message(tmp_path):
    with pytest.raises(CorruptJournal, match="only a torn line"):
        read_state(write(tmp_path, journal(M())[:30]))


def test_fold_errors_name_the_path_line_and_offset(tmp_path):
    ls = lines(M(), A("a"), R("a"), R("z"))
    with pytest.raises(CorruptJournal.__mro__[1]) as info:  # JournalError
        read_state(write(tmp_path, b"".join(ls)))
    err = info.value
    assert err.line == 4 and err.offset == len(ls[0] + ls[1] + ls[2]) and err.path == str(tmp_path / "r1.json")


def test_field_case_f06_a_20_mb_torn_tail_is_dropped_in_bounded_memory(tmp_path):
    good = journal(M(), A("a"))
    path = write(tmp_path, good + b'{"seq":3,"x":"' + b"z" * (20 * 1024 * 1024))
    state = read_state(path)
    assert state.records == 2 and state.torn_tail.offset == len(good)


def test_an_oversized_interior_line_is_record_too_large(tmp_path):
    data = journal(M()) + b"[" + b" " * MAX_RECORD_BYTES + b"]\n" + journal(T("error"), start=2)
    with pytest.raises(RecordTooLarge) as info:
        read_records(write(tmp_path, data))
    assert info.value.line == 2


def test_reading_from_a_binary_file_object_and_from_bytes_agree():
    data = journal(*GOOD)
    assert read_state(data).to_json() == read_state(io.BufferedReader(io.BytesIO(data))).to_json()


def test_the_reader_streams_records_lazily(tmp_path):
    path = write(tmp_path, journal(*GOOD))
    it = iter(JournalReader(path))
    assert next(it).seq == 1


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_valid_journal_cut_at_any_byte_returns_exactly_the_complete_records_before_the_cut(data):
    records = [M(), A("a", "b"), R("b", content="\u00e9\n"), R("a"), A(text="x", iteration=1), U(), T("suspended"),
               A(text="y", iteration=2), T("completed")]
    ls = lines(*records)
    blob = b"".join(ls)
    cut = data.draw(st.integers(0, len(blob)))
    reader = JournalReader(io.BufferedReader(io.BytesIO(blob[:cut])))
    got = list(reader)
    ends = [sum(len(x) for x in ls[: i + 1]) for i in range(len(ls))]
    complete = sum(1 for e in ends if e <= cut)
    assert got == numbered(*records)[:complete]
    assert reader.good_size == (ends[complete - 1] if complete else 0)
    if cut == reader.good_size:
        assert reader.torn_tail is None
    else:
        assert reader.torn_tail.offset == reader.good_size and reader.torn_tail.length == cut - reader.good_size
