"""Bad input and hostile files (issue 9): one test per row of docs/robustness.md.

Rows B01-B21 are journals with bad bytes (or a disk that fails mid-read), read with :func:`fiskj.reader.read_state`
(and :func:`read_records`); W01-W02 are the writer's and ``verify``'s answer
to them; H01-H09 are hostile files and ids met by :class:`fiskj.store.FileStore`.
Every bad input must meet a typed error that says what and where, a file
that failed to read must not change, and nothing outside the store may be
touched.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import signal
import stat
import tracemalloc

import pytest

import fiskj.reader
from fiskj.cli import main as fiskj_main
from fiskj.codec import MAX_NESTING, MAX_RECORD_BYTES, decode_record, encode_record
from fiskj.errors import (ConsistencyError, CorruptJournal, FiskjError, InvalidRecord, InvalidRunID, RecordTooLarge,
                          RunExists, RunNeverCreated, StoreIOError, UnsafeFile, UnsupportedVersion)
from fiskj.reader import read_records, read_state
from fiskj.store import FileStore

from builders import A, M, R, T, journal, lines, numbered

GOOD = [M(), A("a"), R("a"), A(text="done", iteration=1), T("completed")]
LS = lines(*GOOD)
P = "io.choria.fisk-ai.v1.session."


def at(i: int) -> int:
    """Byte offset of line ``i`` (1-based) of the GOOD journal."""
    return sum(len(x) for x in LS[: i - 1])


def write(tmp_path, data: bytes, name: str = "r1.json"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


pytestmark = pytest.mark.usefixtures("plain_seam")


# --- B01-B20: bad bytes ----------------------------------------------------------------------


def test_b01_invalid_utf8_is_corruption_inside_and_a_torn_tail_at_the_end(tmp_path):
    bad = LS[2].replace(b"result of a", b"result \xff\xfe of a")
    with pytest.raises(CorruptJournal, match="UTF-8") as info:
        read_state(write(tmp_path, LS[0] + LS[1] + bad + LS[3] + LS[4]))
    assert (info.value.line, info.value.offset) == (3, at(3))
    state = read_state(write(tmp_path, LS[0] + LS[1] + bad))
    assert state.records == 2 and (state.torn_tail.offset, state.torn_tail.length) == (at(3), len(bad))


def test_b02_nul_bytes_are_corruption_inside_and_a_torn_tail_at_the_end(tmp_path):
    for data, line in [(LS[0] + b"\x00" * 64 + b"\n" + LS[1], 2),
                       (LS[0] + LS[1] + LS[2].replace(b"result of", b"result\x00of") + LS[3], 3)]:
        with pytest.raises(CorruptJournal) as info:
            read_state(write(tmp_path, data))
        assert info.value.line == line
    for tail in (b"\x00" * 4096, b"\x00" * 4096 + b"\n"):
        state = read_state(write(tmp_path, LS[0] + LS[1] + tail))
        assert state.records == 2 and state.torn_tail.length == len(tail)


def test_b03_a_byte_order_mark_is_corruption(tmp_path):
    bom = b"\xef\xbb\xbf"
    for data, line, offset in [(bom + journal(*GOOD), 1, 0), (LS[0] + bom + LS[1] + LS[2], 2, at(2))]:
        with pytest.raises(CorruptJournal) as info:
            read_state(write(tmp_path, data))
        assert (info.value.line, info.value.offset) == (line, offset)
    # On the last line it is not JSON at all: a torn tail, like any garbage tail.
    state = read_state(write(tmp_path, LS[0] + LS[1] + bom + LS[2]))
    assert state.records == 2 and state.torn_tail.offset == at(3)


def test_b04_crlf_line_ends_read_like_lf_line_ends(tmp_path):
    lf = read_state(journal(*GOOD))
    data = journal(*GOOD).replace(b"\n", b"\r\n")
    crlf = read_state(write(tmp_path, data))
    assert crlf.torn_tail is None and crlf.good_size == len(data)
    assert (crlf.messages, crlf.counters, crlf.status, crlf.records) == (lf.messages, lf.counters, lf.status, 5)


def test_b05_an_empty_file_is_corrupt_with_no_meta_record(tmp_path):
    path = write(tmp_path, b"")
    with pytest.raises(CorruptJournal, match="empty") as info:
        read_state(path)
    assert (info.value.line, info.value.offset, info.value.path) == (1, 0, str(path))
    assert read_records(path) == ([], None)


def test_b06_a_file_of_only_a_torn_line_is_corrupt_naming_its_length(tmp_path):
    with pytest.raises(CorruptJournal, match="only a torn line of 30 bytes") as info:
        read_state(write(tmp_path, LS[0][:30]))
    assert (info.value.line, info.value.offset) == (1, 0)


@contextlib.contextmanager
def peak_memory():
    tracemalloc.start()
    box = {}
    try:
        yield box
    finally:
        box["peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


@pytest.mark.parametrize("where", ["interior", "final", "only line"])
def test_b07_a_64_mib_line_is_read_in_bounded_memory(tmp_path, where):
    # The line's 64 MiB body is a hole in a sparse file (it reads as zeros): no 64 MiB to write.
    start = b'{"seq":3,"protocol":"' + P.encode() + b'terminal","terminal":{"reason":"'
    end = b'"}}\n'
    length = 64 << 20
    head = b"" if where == "only line" else LS[0] + LS[1]
    path = tmp_path / "r1.json"
    with open(path, "wb") as f:
        f.write(head + start)
        f.seek(len(head) + length - len(end))
        f.write(end + (journal(T("error"), start=4) if where == "interior" else b""))
    with peak_memory() as mem:
        if where == "interior":
            with pytest.raises(RecordTooLarge, match="limit") as info:
                read_state(path)
            assert (info.value.line, info.value.offset) == (3, len(head))
        elif where == "final":
            state = read_state(path)
            assert state.records == 2 and state.torn_tail.offset == len(head)
            assert state.torn_tail.length == length
        else:
            with pytest.raises(CorruptJournal, match="only a torn line"):
                read_state(path)
    assert mem["peak"] < 3 * MAX_RECORD_BYTES < length  # one line of at most the limit, never the whole line


def test_b08_json_nested_100000_deep_is_corruption_inside_and_a_torn_tail_at_the_end(tmp_path):
    deep = (b'{"seq":3,"protocol":"' + P.encode() + b'tool_result","tool_result":{"tool_use_id":"a","result":'
            b'{"type":"tool_result","tool_use_id":"a","content":' + nested(100_000) + b"}}}\n")
    with pytest.raises(CorruptJournal, match="nested too deeply") as info:
        read_state(write(tmp_path, LS[0] + LS[1] + deep + LS[3]))
    assert (info.value.line, info.value.offset) == (3, at(3))
    state = read_state(write(tmp_path, LS[0] + LS[1] + deep))
    assert state.records == 2 and state.torn_tail.length == len(deep)


def _deep_content(depth: int):
    value = "x"
    for _ in range(depth):
        value = [value]
    return value


def _call_deep(frames: int, fn):
    return fn() if frames == 0 else _call_deep(frames - 1, fn)


def test_b08_regression_the_writer_refuses_what_the_reader_could_not_read(tmp_path):
    # Found while building this catalog: encode_record raised a bare RecursionError
    # past ~990 levels, and wrote 990-level records that decode_record could not
    # parse (an acknowledged record read back as a torn tail).  Now the writer's
    # limit is MAX_NESTING (the envelope is level 1; a tool result's content is level 4).
    (ok,) = numbered(R("a", content=_deep_content(MAX_NESTING - 3)), start=3)
    (deeper,) = numbered(R("a", content=_deep_content(MAX_NESTING - 2)), start=3)
    (far,) = numbered(R("a", content=_deep_content(100_000)), start=3)
    line = encode_record(ok)
    data = journal(M(), A("a")) + line
    state = _call_deep(300, lambda: read_state(write(tmp_path, data)))  # read back even from a deep stack
    assert state.torn_tail is None and state.records == 3
    for record in (deeper, far):
        with pytest.raises(InvalidRecord, match="MAX_NESTING"):
            encode_record(record)


def test_b09_duplicate_keys_resolve_to_the_last_value_at_every_level(tmp_path):
    line = (b'{"seq":9,"protocol":"' + P.encode() + b'terminal","terminal":{"reason":"error"},"seq":5,'
            b'"terminal":{"reason":"suspended","reason":"completed","message":"m"}}\n')
    state = read_state(write(tmp_path, b"".join(LS[:4]) + line))
    assert state.status == "completed" and state.terminal.seq == 5 and state.terminal.message == "m"
    assert json.loads(encode_record(state.terminal)) == json.loads(line)  # the re-encoded line keeps the last values


@pytest.mark.parametrize("line, old, new, field", [
    (2, b'"seq":2', b'"seq":"2"', "seq"),
    (1, b'"version":2', b'"version":"2"', "meta.version"),
    (2, b'"seq":2', b'"seq":0', "seq"),
    (2, b'"seq":2', b'"seq":-2', "seq"),
    (2, b'"seq":2', b'"seq":2.0', "seq"),
    (2, b'"seq":2', b'"seq":2e0', "seq"),
    (1, b'"version":2', b'"version":2.0', "meta.version"),
    (2, b'"in_tokens":10', b'"in_tokens":10.5', "assistant.in_tokens"),
    (2, b'"out_tokens":5', b'"out_tokens":-5', "assistant.out_tokens"),
    (2, b'"iteration":0', b'"iteration":false', "assistant.iteration"),
    (2, b'"stop_reason":"tool_use"', b'"stop_reason":null', "assistant.stop_reason"),
    (1, b'"prompt":"do it"', b'"prompt":5', "meta.prompt"),
    (1, b'"max_tokens":100000', b'"max_tokens":"100000"', "meta.fingerprint.max_tokens"),
    (3, b'"tool_use_id":"a","result"', b'"tool_use_id":7,"result"', "tool_result.tool_use_id"),
    (5, b'"reason":"completed"', b'"reason":""', "terminal.reason"),
], ids=["seq-string", "version-string", "seq-zero", "seq-negative", "seq-float", "seq-exponent", "version-float",
        "tokens-float", "tokens-negative", "iteration-bool", "optional-null", "prompt-number", "fingerprint-string",
        "tool-use-id-number", "reason-empty"])
def test_b10_wrong_types_are_corruption_naming_the_field_line_and_offset(tmp_path, line, old, new, field):
    ls = list(LS)
    assert old in ls[line - 1]
    ls[line - 1] = ls[line - 1].replace(old, new, 1)
    with pytest.raises(CorruptJournal) as info:
        read_state(write(tmp_path, b"".join(ls) + journal(T("x"), start=6)))  # the bad line is never the last
    err = info.value
    assert (err.line, err.offset, err.field) == (line, at(line), field)
    assert f"line {line}" in str(err) and field in str(err)


def test_b10_regression_a_number_beyond_a_float_is_corruption_not_infinity():
    # Found by tests/test_fuzz.py: 1e400 decoded to inf, so the record could not be re-encoded
    # and show --json printed Infinity.  Go refuses it too.
    line = LS[1].replace(b'"input":{"id":"a"}', b'"input":{"id":"a","n":1e400}')
    assert line != LS[1]
    with pytest.raises(CorruptJournal, match="range"):
        decode_record(line)
    big_but_finite = LS[1].replace(b'"input":{"id":"a"}', b'"input":{"id":"a","n":1e300}')
    assert json.loads(encode_record(decode_record(big_but_finite))) == json.loads(big_but_finite)


@pytest.mark.parametrize("bad, field, match", [
    (b'{"seq":5,"protocol":"' + P.encode() + b'terminal"}', "terminal", "needs payload key"),
    (b'{"seq":5,"protocol":"' + P.encode() + b'terminal","terminal":{"reason":"completed"},"user":{}}', "terminal",
     "exactly one payload key"),
    (b'{"seq":5,"protocol":"' + P.encode() + b'terminal","terminal":{"reason":"completed"},"note":1}', "terminal",
     "exactly one payload key"),
], ids=["no-payload", "two-payloads", "extra-member"])
def test_b11_a_record_with_two_payloads_or_none_is_corruption(tmp_path, bad, field, match):
    with pytest.raises(CorruptJournal, match=match) as info:
        read_state(write(tmp_path, b"".join(LS[:4]) + bad + b"\n" + journal(T(), start=6)))
    assert (info.value.line, info.value.field) == (5, field)


@pytest.mark.parametrize("protocol", [b'"' + P.encode() + b'nope"', b'"io.choria.fisk-ai.v9.session.terminal"', b"5",
                                      b"null"])
def test_b12_an_unknown_protocol_is_corruption(tmp_path, protocol):
    bad = b'{"seq":5,"protocol":' + protocol + b',"terminal":{"reason":"completed"}}\n'
    with pytest.raises(CorruptJournal, match="unknown protocol") as info:
        read_state(write(tmp_path, b"".join(LS[:4]) + bad + journal(T(), start=6)))
    assert (info.value.line, info.value.field) == (5, "protocol")


def test_b13_a_payload_that_does_not_match_its_protocol_is_corruption(tmp_path):
    wrong_key = b'{"seq":5,"protocol":"' + P.encode() + b'terminal","user":{"message":{"role":"user","content":[]}}}\n'
    wrong_shape = b'{"seq":5,"protocol":"' + P.encode() + b'assistant","assistant":{"reason":"completed"}}\n'
    for bad, field in [(wrong_key, "terminal"), (wrong_shape, "assistant.iteration")]:
        with pytest.raises(CorruptJournal) as info:
            read_state(write(tmp_path, b"".join(LS[:4]) + bad))  # the last line, yet not torn: it is JSON
        assert (info.value.line, info.value.field) == (5, field)


def test_b14_a_seq_gap_or_a_repeated_seq_is_a_consistency_error(tmp_path):
    gap = LS[0] + LS[1] + lines(R("a"), start=4)[0]
    again = LS[0] + LS[1] + lines(R("a"), start=2)[0]
    for data, match in [(gap, "seq 4 skips ahead: expected 3"), (again, "seq 2 repeated: expected 3")]:
        with pytest.raises(ConsistencyError, match=match) as info:
            read_state(write(tmp_path, data))
        assert (info.value.line, info.value.offset, info.value.field) == (3, at(3), "seq")


def test_b15_the_bare_reader_does_not_compare_meta_run_id_with_the_file_name(tmp_path):
    # Decision (docs/spec.md section 2): reading by path inspects any journal, even a copy.
    state = read_state(write(tmp_path, journal(*GOOD), name="a-copy.json"))
    assert state.run_id == "r1"


def test_b15_the_store_refuses_a_journal_whose_meta_names_another_run(tmp_path):
    store = plant(tmp_path, journal(M(run_id="someone-else"), A("a")), run_id="r1")
    before = snapshot(tmp_path)
    for call in (lambda: store.load("r1"), lambda: store.open("r1")):
        with pytest.raises(ConsistencyError) as info:
            call()
        assert "someone-else" in info.value.message and "r1" in info.value.message
        assert info.value.field == "meta.run_id"
    (info,) = store.list()
    assert info.status == "unreadable" and isinstance(info.error, ConsistencyError)
    assert snapshot(tmp_path) == before


def test_b16_a_newer_version_is_refused_naming_both_numbers_even_as_the_only_line(tmp_path):
    newer = LS[0].replace(b'"version":2', b'"version":3')
    for data in (newer + b"".join(LS[1:]), newer):
        with pytest.raises(UnsupportedVersion) as info:
            read_state(write(tmp_path, data))
        err = info.value
        assert (err.line, err.offset, err.field) == (1, 0, "meta.version")
        assert "version 3" in err.message and "2" in err.message.replace("version 3", "")


def test_b17_a_tool_result_for_an_unknown_tool_use_id_is_a_consistency_error(tmp_path):
    ls = lines(M(), A("a"), R("a"), R("z"), T("error"))
    for data in (b"".join(ls), b"".join(ls[:4])):  # inside, and as the last line (not a torn tail)
        with pytest.raises(ConsistencyError, match="orphan tool_result: 'z'") as info:
            read_state(write(tmp_path, data))
        assert (info.value.line, info.value.offset) == (4, sum(map(len, ls[:3])))


def test_b18_a_second_meta_is_a_consistency_error(tmp_path):
    ls = lines(M(), A("a"), M())
    with pytest.raises(ConsistencyError, match="duplicate meta") as info:
        read_state(write(tmp_path, b"".join(ls)))
    assert (info.value.line, info.value.offset) == (3, len(ls[0]) + len(ls[1]))


@pytest.mark.parametrize("reason", ["completed", "error", "budget", "max_iterations", "suspended", "a_future_reason"])
def test_b19_records_after_a_terminal_record_are_refused_only_after_completed(tmp_path, reason):
    # fisk-ai resumes every run that is not completed, so its journals go on after error, budget and
    # max_iterations terminal records (each leg writes its own); only `completed` ends a run for good.
    ls = lines(M(), A("a"), R("a"), T(reason), A(text="more", iteration=1))
    path = write(tmp_path, b"".join(ls))
    if reason != "completed":
        state = read_state(path)
        assert state.status == "open" and state.terminal.reason == reason and state.records == 5
        assert state.final_answer() == "more" and state.resumable
    else:
        with pytest.raises(ConsistencyError, match="after a 'completed' terminal record") as info:
            read_state(path)
        assert (info.value.line, info.value.offset) == (5, sum(map(len, ls[:4])))
        assert "a completed run is never continued" in info.value.message


@pytest.mark.parametrize("garbage", [b"\x8f\x02garbage{", b"\x8f\x02garbage{\n", b'{"seq":6,"proto\n', b"]]]\n",
                                     b"null\n", b"  \n", b"\n"])
def test_b20_a_garbage_final_line_is_a_torn_tail_and_garbage_inside_is_corruption(tmp_path, garbage):
    state = read_state(write(tmp_path, journal(*GOOD) + garbage))
    assert state.records == 5 and state.torn_tail.offset == at(6) and state.torn_tail.length == len(garbage)
    inside = journal(*GOOD[:4]) + garbage.rstrip(b"\n") + b"\n" + LS[4]
    with pytest.raises(CorruptJournal) as info:
        read_state(write(tmp_path, inside))
    assert (info.value.line, info.value.offset) == (5, at(5))


def test_b21_a_read_error_midway_is_a_typed_error_naming_the_path(tmp_path, monkeypatch):
    # An EIO from the disk while reading (not while opening) used to escape as a bare OSError.
    path = write(tmp_path, journal(*GOOD))

    class FailingFile(io.BufferedReader):
        def readline(self, size=-1):
            if self.tell() > 0:
                raise OSError(errno.EIO, "Input/output error")
            return super().readline(size)

    monkeypatch.setattr(fiskj.reader, "open", lambda p, mode, buffering: FailingFile(io.FileIO(p, "rb")),
                        raising=False)
    with pytest.raises(StoreIOError, match="Input/output error") as info:
        read_state(path)
    assert info.value.path == str(path) and info.value.errno == errno.EIO


# --- W01-W02: the writer and verify meet bad journals -------------------------------------------

BAD_JOURNALS = {
    "not-utf8": (LS[0] + LS[1] + LS[2].replace(b"result of a", b"\xff") + LS[3], CorruptJournal),
    "nul-line": (LS[0] + b"\x00" * 64 + b"\n" + LS[1], CorruptJournal),
    "bom": (b"\xef\xbb\xbf" + journal(*GOOD), CorruptJournal),
    "deep": (LS[0] + b'{"seq":2,"a":' + nested(100_000) + b"}\n" + LS[1], CorruptJournal),
    "wrong-type": (LS[0].replace(b'"version":2', b'"version":"2"') + LS[1], CorruptJournal),
    "two-payloads": (LS[0] + LS[1][:-2] + b',"user":{}}\n' + LS[2], CorruptJournal),
    "unknown-protocol": (LS[0] + LS[1].replace(b"session.assistant", b"session.nope") + LS[2], CorruptJournal),
    "seq-gap": (LS[0] + LS[2], ConsistencyError),
    "newer-version": (LS[0].replace(b'"version":2', b'"version":3') + LS[1], UnsupportedVersion),
    "orphan": (journal(M(), A("a"), R("a"), R("z")), ConsistencyError),
    "second-meta": (journal(M(), A("a"), M()), ConsistencyError),
    "after-completed": (journal(M(), A(text="x"), T("completed"), A(text="y", iteration=1)), ConsistencyError),
    # No complete record: to the store, a create that crashed before meta was acknowledged.
    "empty": (b"", RunNeverCreated),
    "only-torn": (LS[0][:30], RunNeverCreated),
}


def plant(tmp_path, data: bytes, run_id: str = "r1") -> FileStore:
    store = FileStore(tmp_path / "runs")
    os.makedirs(store.directory, mode=0o700, exist_ok=True)
    path = os.path.join(store.directory, run_id + ".json")
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)
    return store


def plant_entry(tmp_path, make) -> FileStore:
    """A store whose journal entry ``r1.json`` is what ``make(path)`` puts there (a symlink, a FIFO, a directory)."""
    store = plant(tmp_path, b"")
    path = os.path.join(store.directory, "r1.json")
    os.unlink(path)
    make(path)
    return store


def snapshot(root) -> dict:
    """Every path under ``root`` (symlinks not followed) with its kind, mode, owner, and a file's bytes and mtime.

    Lock files (``*.lock``) are left out: taking a run's lock may create its lock file in the
    store, which is allowed; any other new, changed or removed entry shows.
    """
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if name.endswith(".lock") and stat.S_ISREG(st.st_mode):
                continue
            content = mtime = None
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    content = f.read()
                mtime = st.st_mtime_ns
            out[p] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, mtime, content,
                      os.readlink(p) if stat.S_ISLNK(st.st_mode) else None)
    return out


@pytest.mark.parametrize("name", sorted(BAD_JOURNALS))
def test_w01_the_writer_refuses_a_bad_journal_and_changes_nothing(tmp_path, name):
    data, error = BAD_JOURNALS[name]
    store = plant(tmp_path, data)
    before = snapshot(tmp_path)
    for _ in range(2):  # the refusal releases the lock: the second try gets the same error, not RunLocked
        with pytest.raises(error) as info:
            store.open("r1")
        assert info.value.path == os.path.join(store.directory, "r1.json")
        assert info.value.line is not None and info.value.offset is not None
    with pytest.raises(error):
        store.load("r1")
    assert snapshot(tmp_path) == before


def test_w02_verify_explains_the_damage_with_line_offset_and_what_was_expected(tmp_path, capsys):
    path = write(tmp_path, LS[0] + LS[1].replace(b'"in_tokens":10', b'"in_tokens":"10"') + LS[2])
    assert fiskj_main(["session", "verify", "--json", str(path)]) == 1
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["ok"] is False and entry["path"] == str(path)
    error = entry["error"]
    assert (error["kind"], error["line"], error["offset"]) == ("CorruptJournal", 2, at(2))
    assert "assistant.in_tokens" in error["message"] and "expected an integer" in error["message"]


# --- H01-H09: hostile files and ids --------------------------------------------------------------


@contextlib.contextmanager
def no_hang(seconds: int = 10):
    """Fail instead of hanging (a FIFO opened for reading without O_NONBLOCK blocks forever)."""
    def expire(signum, frame):
        raise AssertionError(f"the store blocked for {seconds} s")
    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def refused_everywhere(store: FileStore, error: type, calls=("load", "open", "delete")) -> None:
    for call in calls:
        with no_hang(), pytest.raises(error) as info:
            getattr(store, call)("r1")
        assert info.value.run_id == "r1" and info.value.path
        assert isinstance(info.value, FiskjError) and info.value.message


def test_h01_a_symlinked_journal_is_refused_and_its_target_is_untouched(tmp_path):
    outside = write(tmp_path, journal(M(), A("a")), name="outside.json")
    os.chmod(outside, 0o600)
    store = plant_entry(tmp_path, lambda path: os.symlink(outside, path))
    before = snapshot(tmp_path)
    refused_everywhere(store, UnsafeFile)
    with pytest.raises(RunExists):
        store.create("r1", M(run_id="r1"))
    assert snapshot(tmp_path) == before


def test_h02_a_fifo_journal_is_refused_without_blocking(tmp_path):
    store = plant_entry(tmp_path, lambda path: os.mkfifo(path, 0o600))
    before = snapshot(tmp_path)
    refused_everywhere(store, UnsafeFile)
    assert snapshot(tmp_path) == before


def test_h03_a_directory_journal_is_refused(tmp_path):
    store = plant_entry(tmp_path, lambda path: os.mkdir(path, 0o700))
    before = snapshot(tmp_path)
    refused_everywhere(store, UnsafeFile)
    with pytest.raises(RunExists):
        store.create("r1", M(run_id="r1"))
    assert snapshot(tmp_path) == before


root_only = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root (chown)")


@root_only
def test_h04_a_journal_owned_by_another_user_is_refused_for_writing(tmp_path):
    store = plant(tmp_path, journal(M(), A("a")))
    os.chown(os.path.join(store.directory, "r1.json"), 65534, 65534)
    before = snapshot(tmp_path)
    with pytest.raises(UnsafeFile, match="not owned by this user"):
        store.open("r1")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("dangling", [False, True])
def test_h05_a_symlinked_lock_file_is_refused_and_nothing_is_created_through_it(tmp_path, dangling):
    target = tmp_path / "planted.lock"
    if not dangling:
        target.write_bytes(b"")
    store = plant(tmp_path, journal(M(), A("a")))
    os.symlink(target, os.path.join(store.directory, "r1.lock"))
    before = snapshot(tmp_path)
    for call in (lambda: store.open("r1"), lambda: store.delete("r1")):
        with pytest.raises(UnsafeFile, match="lock file"):
            call()
    os.unlink(os.path.join(store.directory, "r1.json"))
    with pytest.raises(UnsafeFile, match="lock file"):
        store.create("r1", M(run_id="r1"))
    assert not os.path.lexists(os.path.join(store.directory, "r1.json"))
    assert target.exists() == (not dangling)
    del before[os.path.join(store.directory, "r1.json")]  # removed by the test itself
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_h06_a_lock_file_that_is_a_fifo_or_a_directory_is_refused(tmp_path, kind):
    store = plant(tmp_path, journal(M(), A("a")))
    lock = os.path.join(store.directory, "r1.lock")
    os.mkfifo(lock, 0o600) if kind == "fifo" else os.mkdir(lock, 0o700)
    before = snapshot(tmp_path)
    for call in (lambda: store.open("r1"), lambda: store.delete("r1")):
        with no_hang(), pytest.raises(UnsafeFile, match="lock file"):
            call()
    assert snapshot(tmp_path) == before


@root_only
def test_h07_a_lock_file_owned_by_another_user_is_refused(tmp_path):
    store = plant(tmp_path, journal(M(), A("a")))
    lock = os.path.join(store.directory, "r1.lock")
    open(lock, "wb").close()
    os.chown(lock, 65534, 65534)
    before = snapshot(tmp_path)
    with pytest.raises(UnsafeFile, match="lock file of run r1 is owned by uid 65534"):
        store.open("r1").close()
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("perm", [0o777, 0o1777, 0o770, 0o722])
def test_h08_a_store_directory_writable_by_others_is_refused_for_every_operation(tmp_path, perm):
    store = plant(tmp_path, journal(M(), A("a")))
    os.chmod(store.directory, perm)
    before = snapshot(tmp_path)
    for call in (lambda: store.load("r1"), lambda: store.open("r1"), lambda: store.delete("r1"), store.list,
                 lambda: store.create("r2", M(run_id="r2"))):
        with pytest.raises(UnsafeFile, match="writable by group or others"):
            call()
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("run_id", ["../escape", "a/../../escape", "/etc/passwd", "..", ".", "a\x00b", "x" * 129, "",
                                    "-rf", "_x", "caf\u00e9", "a b", "a\nb"],
                         ids=["dotdot", "nested-dotdot", "absolute", "parent", "dot", "nul", "129-chars", "empty",
                              "leading-dash", "leading-underscore", "non-ascii", "space", "newline"])
def test_h09_a_run_id_with_traversal_nul_or_129_characters_is_refused_before_any_path_is_touched(tmp_path, run_id):
    store = FileStore(tmp_path / "state" / "runs")
    before = snapshot(tmp_path)
    for call in (lambda: store.create(run_id, M(run_id=run_id)), lambda: store.open(run_id),
                 lambda: store.load(run_id), lambda: store.delete(run_id)):
        with pytest.raises(InvalidRunID, match="run id") as info:
            call()
        assert info.value.field == "run_id"
    assert snapshot(tmp_path) == before  # not even the store directory was made


def test_h09_a_run_id_of_exactly_128_characters_is_accepted(tmp_path):
    store = FileStore(tmp_path / "runs")
    run_id = "a" + "-_9Z" * 31 + "bcd"
    assert len(run_id) == 128
    store.create(run_id, M(run_id=run_id)).close()
    assert store.load(run_id).run_id == run_id
