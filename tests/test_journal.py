import base64
import errno
import json
import os

import pytest

from fiskj import ioseam
from fiskj.codec import MAX_RECORD_BYTES, encode_record
from fiskj.errors import InvalidRecord, JournalPoisoned, RecordTooLarge, StoreIOError, UsageError
from fiskj.reader import read_records, read_state

from builders import A, M, R, T, U, journal as journal_bytes, numbered


pytestmark = pytest.mark.usefixtures("plain_seam")


def trace_ops(path):
    return [json.loads(line) for line in open(path, "rb")]


def test_append_assigns_the_next_seq_whatever_seq_the_record_carries(store):
    with store.create("r1", M()) as j:
        assert j.last_seq == 1
        assert j.append(numbered(A("a"), start=99)[0]) == 2
        assert j.append(R("a")) == 3
    records, torn = read_records(store.directory + "/r1.json")
    assert [r.seq for r in records] == [1, 2, 3] and torn is None


def test_each_append_is_one_write_of_the_whole_line_then_an_fsync(store, tmp_path):
    j = store.create("r1", M())
    ioseam.configure(trace=str(tmp_path / "t"))
    j.append(A("a"))
    j.append(R("a", content="x" * 100_000))
    ops = trace_ops(tmp_path / "t")
    assert [o["op"] for o in ops] == ["write", "fsync", "write", "fsync"]
    line = encode_record(numbered(M(), A("a"), R("a", content="x" * 100_000))[2])
    assert base64.b64decode(ops[2]["data"]) == line and ops[2]["len"] == len(line)
    j.close()


def test_field_case_f09_the_first_append_of_a_new_journal_fsyncs_the_store_directory_before_returning(store, tmp_path):
    ioseam.configure(trace=str(tmp_path / "t"))
    with store.create("r1", M()) as j:
        j.append(A(text="x"))
    ops = [(o["op"], os.path.basename(o["path"])) for o in trace_ops(tmp_path / "t")]
    first_write = ops.index(("write", "r1.json"))
    assert ops[first_write:first_write + 3] == [("write", "r1.json"), ("fsync", "r1.json"), ("fsync_dir", "runs")]
    assert ops.count(("fsync_dir", "runs")) == 1  # later appends do not


def test_a_reopened_journal_does_not_fsync_the_directory_again(store, tmp_path):
    store.create("r1", M()).close()
    ioseam.configure(trace=str(tmp_path / "t"))
    with store.open("r1") as j:
        j.append(A(text="x"))
    assert "fsync_dir" not in [o["op"] for o in trace_ops(tmp_path / "t")]


def test_the_state_follows_every_append_and_equals_the_fold_of_the_file(store):
    with store.create("r1", M()) as j:
        j.append(A("a", "b"))
        j.append(R("a"))
        assert j.state.pending.unanswered == ["b"]
        j.append(R("b"))
        j.append(U("and then?"))
        j.append(T("suspended"))
        state = j.state
    on_disk = read_state(store.directory + "/r1.json")
    assert state.messages == on_disk.messages and state.counters == on_disk.counters
    assert state.status == on_disk.status == "suspended" and state.last_seq == on_disk.last_seq == 6


@pytest.mark.parametrize("bad, why", [
    (R("z"), "orphan"),                        # F11: z never issued
    (R("a"), "duplicate"),                     # F12: a already answered
    (M(), "meta"),                             # a second meta
])
def test_a_record_that_breaks_a_fold_rule_is_refused_and_nothing_is_written(store, bad, why):
    with store.create("r1", M()) as j:
        j.append(A("a", "b"))
        j.append(R("a"))
        size = os.path.getsize(j.path)
        with pytest.raises(InvalidRecord, match=why) as info:
            j.append(bad)
        assert "nothing was written" in str(info.value)
        assert os.path.getsize(j.path) == size and j.last_seq == 3 and not j.poisoned
        assert j.append(R("b")) == 4  # the journal goes on


def test_a_tool_result_with_no_open_turn_and_records_after_completion_are_refused(store):
    with store.create("r1", M()) as j:
        with pytest.raises(InvalidRecord):
            j.append(R("a"))
        j.append(A(text="done"))
        j.append(T("completed"))
        with pytest.raises(InvalidRecord, match="completed"):
            j.append(A(text="more", iteration=1))


def test_something_that_is_not_a_record_is_refused(store):
    with store.create("r1", M()) as j:
        with pytest.raises(InvalidRecord):
            j.append({"seq": 2})


def test_field_case_f06_a_record_over_the_limit_is_refused_before_any_byte_is_written(store):
    with store.create("r1", M()) as j:
        j.append(A("a"))
        size = os.path.getsize(j.path)
        with pytest.raises(RecordTooLarge):
            j.append(R("a", content="x" * MAX_RECORD_BYTES))
        assert os.path.getsize(j.path) == size and not j.poisoned
        j.append(R("a", content="small"))
    assert read_state(store.directory + "/r1.json").records == 3


def test_field_case_f08_eio_on_fsync_poisons_the_journal_and_the_fsync_is_never_retried(store, tmp_path):
    j = store.create("r1", M())
    j.append(A("a"))
    ioseam.configure(trace=str(tmp_path / "t"), fault="eio@1:fsync")
    with pytest.raises(StoreIOError) as info:
        j.append(R("a"))
    assert info.value.errno == errno.EIO and "poisoned" in str(info.value)
    assert j.poisoned
    with pytest.raises(JournalPoisoned, match="fsync of seq 3 failed"):
        j.append(R("a"))
    with pytest.raises(JournalPoisoned):
        j.append(T("error"))
    assert [o["op"] for o in trace_ops(tmp_path / "t")] == ["write", "fsync"]  # no retry, no later write
    j.close()
    assert read_state(j.path).records >= 2  # what is on disk stays readable


def test_eio_on_write_poisons_the_journal(store):
    j = store.create("r1", M())
    ioseam.configure(fault="eio@1:write")
    with pytest.raises(StoreIOError):
        j.append(A("a"))
    with pytest.raises(JournalPoisoned, match="write of seq 2 failed"):
        j.append(A("a"))
    j.close()
    assert read_state(j.path).records == 1


def test_a_failed_directory_fsync_on_the_first_append_fails_the_create(store, tmp_path):
    ioseam.configure(fault="eio@1:fsync_dir")  # the store dir exists, so the first fsync_dir is the journal's
    os.makedirs(store.directory, mode=0o700)
    with pytest.raises(StoreIOError, match="store directory fsync of seq 1"):
        store.create("r1", M())
    ioseam.configure()
    assert not os.path.exists(store.directory + "/r1.json")  # an unacknowledged create is undone
    store.create("r1", M()).close()


def test_field_case_f07_enospc_mid_write_leaves_a_torn_tail_and_nothing_after_it(store):
    j = store.create("r1", M())
    j.append(A("a"))
    good = os.path.getsize(j.path)
    ioseam.configure(fault="short-write@1:write")
    with pytest.raises(StoreIOError) as info:
        j.append(R("a"))
    assert info.value.errno == errno.ENOSPC
    ioseam.configure()
    with pytest.raises(JournalPoisoned):
        j.append(R("a"))
    j.close()
    state = read_state(j.path)
    assert state.records == 2 and state.torn_tail.offset == good and state.torn_tail.length > 0


def test_a_short_write_without_an_error_poisons_instead_of_looping(store, monkeypatch):
    j = store.create("r1", M())
    real_write = ioseam.write
    monkeypatch.setattr(ioseam, "write", lambda fd, data: real_write(fd, data[:7]))
    with pytest.raises(StoreIOError, match="short write: 7 of"):
        j.append(A("a"))
    monkeypatch.setattr(ioseam, "write", real_write)
    with pytest.raises(JournalPoisoned):
        j.append(A("a"))
    j.close()
    assert read_state(j.path).torn_tail.length == 7


def test_close_releases_the_lock_last_and_is_idempotent(store, tmp_path):
    j = store.create("r1", M())
    ioseam.configure(trace=str(tmp_path / "t"))
    j.close()
    j.close()
    assert [os.path.basename(o["path"]) for o in trace_ops(tmp_path / "t")] == ["r1.json", "r1.lock"]
    assert j.closed
    store.open("r1").close()  # the lock is free


def test_append_after_close_is_a_usage_error_that_says_how_to_reopen(store):
    j = store.create("r1", M())
    j.close()
    with pytest.raises(UsageError, match=r"FileStore.open\('r1'\)"):
        j.append(A("a"))


def test_the_context_manager_closes_the_journal_on_error(store):
    with pytest.raises(RuntimeError):
        with store.create("r1", M()) as j:
            raise RuntimeError("boom")
    assert j.closed
    store.open("r1").close()


def test_appended_bytes_are_exactly_the_encoded_records(store):
    records = [A("a", "b"), R("a"), R("b", content="l1\nl2\r\nl3\u2028\x00"), A(text="ok", iteration=1), T()]
    with store.create("r1", M()) as j:
        for r in records:
            j.append(r)
    with open(j.path, "rb") as f:
        assert f.read() == journal_bytes(M(), *records)


def test_running_out_of_memory_after_a_write_poisons_the_journal_so_no_seq_is_written_twice(store, monkeypatch):
    # Issue 15 item 1: a MemoryError between the write and the state update used to leave the writer
    # one seq behind the file, so its next append would have written a second seq 3.
    import fiskj.fold

    j = store.create("r1", M())
    j.append(A("a"))
    real = fiskj.fold.Folder.add

    def add(self, record):
        if record.seq == 3:
            raise MemoryError()
        return real(self, record)

    monkeypatch.setattr(fiskj.fold.Folder, "add", add)
    with pytest.raises(MemoryError):
        j.append(R("a"))
    monkeypatch.setattr(fiskj.fold.Folder, "add", real)
    with pytest.raises(JournalPoisoned, match="could not be updated"):
        j.append(T("error"))
    j.close()
    state = read_state(store.directory + "/r1.json")
    assert state.last_seq == 3 and state.counters.tool_calls == 1  # the written record stays, once
