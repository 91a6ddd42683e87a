import os
import signal
import stat
import subprocess
import sys

import pytest

import fiskj.store
from fiskj import ioseam
from fiskj.codec import encode_record
from fiskj.errors import (ConsistencyError, CorruptJournal, InvalidRecord, InvalidRunID, RunExists, RunLocked,
                          RunNeverCreated, RunNotFound, UnsafeFile)
from fiskj.reader import read_records, read_state
from fiskj.store import FileStore

from builders import A, M, R, T, journal, lines, numbered

TESTS = os.path.dirname(os.path.abspath(__file__))


pytestmark = pytest.mark.usefixtures("plain_seam")


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def put(store, data, run_id="r1"):
    os.makedirs(store.directory, mode=0o700, exist_ok=True)
    path = os.path.join(store.directory, run_id + ".json")
    with open(path, "wb") as f:
        f.write(data)
    return path


# --- the directory -------------------------------------------------------------------------


def test_the_default_store_is_under_xdg_state_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert FileStore().directory == str(tmp_path / "state" / "fisk-ai" / "runs")


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o277])
def test_directories_are_0700_and_journals_0600_whatever_the_umask(tmp_path, umask):
    store = FileStore(tmp_path / "state" / "fisk-ai" / "runs")
    old = os.umask(umask)
    try:
        store.create("r1", M()).close()
    finally:
        os.umask(old)
    for d in ("state", "state/fisk-ai", "state/fisk-ai/runs"):
        assert mode(tmp_path / d) == 0o700, d
    assert mode(tmp_path / "state/fisk-ai/runs/r1.json") == 0o600
    assert mode(tmp_path / "state/fisk-ai/runs/r1.lock") == 0o600


def test_defect_4_every_new_directory_is_made_durable_by_fsyncing_its_parent(tmp_path):
    trace = tmp_path / "t"
    ioseam.configure(trace=str(trace))
    FileStore(tmp_path / "a" / "b").create("r1", M()).close()
    ops = [line.split('"path":"')[1].split('"')[0] + " " + line.split('"op":"')[1].split('"')[0]
           for line in trace.read_text().splitlines()]
    assert ops[:4] == [f"{tmp_path}/a mkdir", f"{tmp_path} fsync_dir", f"{tmp_path}/a/b mkdir", f"{tmp_path}/a fsync_dir"]
    assert f"{tmp_path}/a/b fsync_dir" in ops  # the journal's own entry (F09)


def test_a_reader_leaves_a_store_directory_readable_by_others_as_it_is_and_a_writer_tightens_it_to_0700(store):
    # Issue 15 item 4: list and load used to chmod the directory to 0700; a read changes nothing.
    os.makedirs(store.directory)
    os.chmod(store.directory, 0o755)
    assert store.list() == []
    assert mode(store.directory) == 0o755
    store.create("r1", M()).close()
    os.chmod(store.directory, 0o750)
    before = os.stat(store.directory)
    assert store.load("r1").status == "open" and [i.id for i in store.list()] == ["r1"]
    after = os.stat(store.directory)
    assert (mode(store.directory), after.st_mtime_ns) == (0o750, before.st_mtime_ns)
    store.open("r1").close()  # a writer
    assert mode(store.directory) == 0o700


@pytest.mark.parametrize("perm", [0o777, 0o770, 0o702])
def test_a_store_directory_writable_by_group_or_others_is_refused(store, perm):
    os.makedirs(store.directory)
    os.chmod(store.directory, perm)
    with pytest.raises(UnsafeFile, match="writable by group or others"):
        store.create("r1", M())
    with pytest.raises(UnsafeFile):
        store.list()
    assert os.listdir(store.directory) == [] and mode(store.directory) == perm


def test_a_store_path_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "runs").write_text("")
    with pytest.raises(UnsafeFile):
        FileStore(tmp_path / "runs").create("r1", M())


def test_reading_a_missing_store_creates_nothing(store):
    assert store.list() == []
    with pytest.raises(RunNotFound):
        store.load("r1")
    with pytest.raises(RunNotFound):
        store.open("r1")
    assert not os.path.exists(store.directory)


# --- create ------------------------------------------------------------------------------------


def test_create_writes_meta_as_seq_1(store):
    with store.create("r1", M()) as j:
        assert j.last_seq == 1 and j.state.status == "open"
    assert read_records(store.directory + "/r1.json") == (numbered(M()), None)


def test_defect_3_a_second_create_of_one_id_gets_run_exists_and_changes_nothing(store):
    store.create("r1", M(prompt="first")).close()
    with pytest.raises(RunExists, match="run r1 already exists"):
        store.create("r1", M(prompt="second"))
    assert read_state(store.directory + "/r1.json").prompt == "first"
    with store.open("r1"):
        with pytest.raises(RunExists):  # held by a writer: exists too
            store.create("r1", M())


def test_create_refuses_a_meta_for_another_run_before_touching_the_disk(store):
    with pytest.raises(InvalidRecord, match="run_id"):
        store.create("r1", M(run_id="r2"))
    with pytest.raises(InvalidRecord):
        store.create("r1", A("a"))
    assert not os.path.exists(store.directory)


@pytest.mark.parametrize("run_id", ["../evil", "..", "a/b", "/tmp/evil", "x\x00y", "a" * 129])
def test_path_traversal_ids_are_refused_and_nothing_is_created(tmp_path, run_id):
    store = FileStore(tmp_path / "runs")
    for call in (lambda: store.create(run_id, M(run_id=run_id)), lambda: store.open(run_id),
                 lambda: store.load(run_id), lambda: store.delete(run_id)):
        with pytest.raises(InvalidRunID):
            call()
    assert os.listdir(tmp_path) == []


def test_two_processes_racing_create_of_one_id_exactly_one_wins_60_times(tmp_path):
    store = FileStore(tmp_path / "runs")
    os.makedirs(store.directory, mode=0o700)
    for i in range(60):  # each round a fresh race of two forked creators released by one pipe write
        run_id = f"race-{i}"
        go_r, go_w = os.pipe()
        res_r, res_w = os.pipe()
        pids = []
        for k in range(2):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - child
                code = 0
                try:
                    os.read(go_r, 1)  # the barrier
                    try:
                        store.create(run_id, M(run_id=run_id, prompt=f"creator {k}")).close()
                        out = f"{k} won\n"
                    except RunExists:
                        out = f"{k} exists\n"
                    except BaseException as exc:
                        out = f"{k} {type(exc).__name__}\n"
                    os.write(res_w, out.encode())
                finally:
                    os._exit(code)
            pids.append(pid)
        os.close(res_w)
        os.write(go_w, b"go")  # release both at once
        for pid in pids:
            os.waitpid(pid, 0)
        with os.fdopen(res_r) as f:
            results = sorted(f.read().split("\n")[:2])
        os.close(go_r)
        os.close(go_w)
        outcomes = sorted(r.split()[1] for r in results)
        assert outcomes == ["exists", "won"], results
        winner = next(r.split()[0] for r in results if r.endswith("won"))
        records, torn = read_records(f"{store.directory}/{run_id}.json")
        assert len(records) == 1 and torn is None and records[0].prompt == f"creator {winner}"


# --- open ---------------------------------------------------------------------------------------


def test_field_case_f02_a_torn_tail_is_cut_before_the_next_append(store):
    good = journal(M(), A("a"))
    torn = lines(M(), A("a"), R("a"))[-1][:25]
    path = put(store, good + torn)
    with store.open("r1") as j:
        assert j.repaired_tail.offset == len(good) and j.repaired_tail.length == len(torn)
        assert os.path.getsize(path) == len(good)  # cut before any append
        assert j.append(R("a")) == 3
    with open(path, "rb") as f:
        assert f.read() == journal(M(), A("a"), R("a"))


@pytest.mark.parametrize("newline", [b"", b"\n"])
def test_field_case_f03_a_zero_filled_tail_is_cut_on_open(store, newline):
    good = journal(M(), A("a"), R("a"))
    path = put(store, good + b"\0" * 4096 + newline)
    with store.open("r1") as j:
        assert j.repaired_tail.length == 4096 + len(newline)
        j.append(A(text="ok", iteration=1))
    state = read_state(path)
    assert state.records == 4 and state.torn_tail is None


@pytest.mark.parametrize("data, error", [
    (journal(M(), A("a")) + b"not json\n" + journal(R("a"), start=3), CorruptJournal),
    (journal(M(), A("a"), R("a"), R("z")), ConsistencyError),            # F11: orphan on line 4
    (journal(M(), A("a"), R("a"), R("a")), ConsistencyError),            # F12: duplicate on line 4
    (b"", RunNeverCreated),
])
def test_open_refuses_a_journal_whose_interior_is_bad_and_changes_nothing(store, data, error):
    path = put(store, data)
    with pytest.raises(error) as info:
        store.open("r1")
    assert info.value.path == path and info.value.line in (1, 3, 4)
    with open(path, "rb") as f:
        assert f.read() == data
    with pytest.raises(error):  # the lock was released: the same error, not RunLocked
        store.open("r1")


@pytest.mark.parametrize("leftover", [b"", b'{"seq":1,"protocol":"io.choria', b"\x00" * 512 + b"\n"])
def test_create_reclaims_the_journal_a_crashed_create_left_with_no_record(store, leftover):
    # A create killed between the O_EXCL open and the fsync of meta leaves a journal with no
    # complete record: nothing was acknowledged, so a new create of the id must succeed.
    path = put(store, leftover)
    with pytest.raises(RunNeverCreated):
        store.open("r1")
    with store.create("r1", M()) as j:
        j.append(A(text="ok"))
    assert read_state(path).records == 2


def test_create_never_reclaims_a_journal_holding_a_record(store):
    path = put(store, journal(M())[:-1] + b"\n" + b"garbage")
    with pytest.raises(RunExists):
        store.create("r1", M())
    assert read_state(path).records == 1


def test_field_case_f14_a_second_opener_is_refused_at_once_and_writes_nothing(store):
    store.create("r1", M()).close()
    with store.open("r1") as holder:
        holder.append(A("a"))
        size = os.path.getsize(holder.path)
        with pytest.raises(RunLocked, match="run r1 is held by another writer"):
            store.open("r1")
        assert os.path.getsize(holder.path) == size


def test_defect_2_field_case_f15_the_state_is_read_after_the_lock_is_taken(store, monkeypatch):
    store.create("r1", M()).close()
    real_acquire = fiskj.store.acquire
    raced = []

    def another_writer_finishes_first(path, run_id):
        if not raced:  # sequence point: A appends seq 2 and exits just before B locks
            raced.append(True)
            with store.open("r1") as a:
                a.append(A(text="from A"))
        return real_acquire(path, run_id)

    monkeypatch.setattr(fiskj.store, "acquire", another_writer_finishes_first)
    with store.open("r1") as b:
        assert raced and b.last_seq == 2
        assert b.append(T("suspended")) == 3
    assert [r.seq for r in read_records(store.directory + "/r1.json")[0]] == [1, 2, 3]


# --- crashes and faults in real processes ---------------------------------------------------------

CHILD = r"""
import sys
sys.path.insert(0, sys.argv[2])
from builders import A, M, R, T
from fiskj.store import FileStore
j = FileStore(sys.argv[1]).create("r1", M())
print(1, flush=True)
for record in (A("a", "b"), R("a"), R("b"), A(text="done", iteration=1)):
    try:
        print(j.append(record), flush=True)
    except Exception as exc:
        print(type(exc).__name__, flush=True)
if sys.argv[3] == "hold":
    print("ready", flush=True)
    sys.stdin.read()
"""


def run_child(store, fault=None, hold=False):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FISKJ_IOSEAM")}
    if fault:
        env["FISKJ_IOSEAM_FAULT"] = fault
    return subprocess.Popen([sys.executable, "-c", CHILD, store.directory, TESTS, "hold" if hold else "-"],
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize("fault", ["kill-before@3:fsync", "kill-after@3:write", "kill-after@3:fsync"])
def test_a_crash_around_the_fsync_loses_no_acknowledged_record_and_the_run_goes_on(store, fault):
    proc = run_child(store, fault)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err.decode()
    acknowledged = [int(x) for x in out.split()]
    assert acknowledged == [1, 2]
    state = store.load("r1")
    assert state.last_seq >= 2 and state.torn_tail is None
    with store.open("r1") as j:  # the lock died with the process
        seq = j.append(R("b") if state.last_seq == 3 else R("a"))
    assert seq == state.last_seq + 1
    assert store.load("r1").last_seq == seq


def test_enospc_mid_write_leaves_the_journal_readable_and_the_next_open_cuts_the_tail(store):
    proc = run_child(store, "short-write@3:write")
    out, err = proc.communicate(timeout=30)
    assert out.split() == [b"1", b"2", b"StoreIOError", b"JournalPoisoned", b"JournalPoisoned"], err.decode()
    state = store.load("r1")
    assert state.records == 2 and state.torn_tail is not None
    assert [i.torn_tail for i in store.list()] == [True]
    with store.open("r1") as j:
        assert j.repaired_tail == state.torn_tail
        assert j.append(R("a")) == 3
    assert store.load("r1").torn_tail is None and store.load("r1").last_seq == 3


def test_field_case_f14_a_sigkilled_holder_frees_the_run_at_once(store):
    proc = run_child(store, hold=True)
    assert proc.stdout.readline() == b"1\n"
    while proc.stdout.readline() != b"ready\n":
        pass
    try:
        with pytest.raises(RunLocked):
            store.open("r1")
        with pytest.raises(RunLocked):
            store.delete("r1")
        assert store.load("r1").last_seq == 5  # readers never lock
    finally:
        proc.kill()
        proc.communicate(timeout=10)
    with store.open("r1") as j:
        assert j.append(A(text="resumed", iteration=2)) == 6


# --- load, list, delete ------------------------------------------------------------------------------


def test_load_and_list_do_not_lock_and_read_a_partial_append_as_a_torn_tail(store):
    with store.create("r1", M()) as j:
        j.append(A("a"))
        with open(j.path, "ab") as f:  # a writer mid-append
            f.write(encode_record(numbered(M(), A("a"), R("a"))[2])[:30])
        state = store.load("r1")
        assert state.records == 2 and state.torn_tail.length == 30
        (info,) = store.list()
        assert (info.id, info.status, info.records, info.torn_tail, info.error) == ("r1", "open", 2, True, None)


def test_list_skips_files_that_are_not_runs_and_reports_runs_that_fail_to_fold(store):
    store.create("good", M(run_id="good", prompt="count")).close()
    put(store, b"garbage\n" + journal(M()), run_id="bad")
    for name in ("notes.txt", ".hidden.json", "bad id.json", "r1.json.tmp", "-x.json", "orphan.lock"):
        with open(os.path.join(store.directory, name), "w") as f:
            f.write("{}")
    infos = store.list()
    assert [i.id for i in infos] == ["bad", "good"]
    bad, good = infos
    assert bad.status == "unreadable" and isinstance(bad.error, CorruptJournal) and bad.error.line == 1
    assert bad.to_json()["error"]["kind"] == "CorruptJournal"
    assert (good.model, good.prompt, good.status, good.records, good.error) == ("m1", "count", "open", 1, None)
    assert good.created == M().created and good.updated == os.stat(good.path).st_mtime
    assert good.to_json()["updated"].endswith("+00:00")


def test_delete_removes_the_journal_and_the_lock_file_under_the_lock(store):
    store.create("r1", M()).close()
    store.delete("r1")
    assert os.listdir(store.directory) == []
    with pytest.raises(RunNotFound):
        store.delete("r1")
    with pytest.raises(RunNotFound):
        store.load("r1")
    assert os.listdir(store.directory) == []


def test_the_lock_file_is_not_deleted_while_a_writer_holds_it(store):
    with store.create("r1", M()):
        with pytest.raises(RunLocked):
            store.delete("r1")
        assert sorted(os.listdir(store.directory)) == ["r1.json", "r1.lock"]


# --- unsafe files ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["symlink", "dangling symlink", "directory", "fifo"])
def test_a_journal_that_is_not_a_regular_file_is_refused_and_nothing_outside_is_touched(store, tmp_path, kind):
    os.makedirs(store.directory, mode=0o700)
    path = os.path.join(store.directory, "r1.json")
    outside = tmp_path / "outside.json"
    if kind == "symlink":
        outside.write_bytes(journal(M()))
        os.symlink(outside, path)
    elif kind == "dangling symlink":
        os.symlink(outside, path)
    elif kind == "directory":
        os.mkdir(path)
    else:
        os.mkfifo(path)
    before = outside.read_bytes() if outside.exists() else None
    for call in (store.open, store.load, store.delete):
        with pytest.raises(UnsafeFile):
            call("r1")
    with pytest.raises(RunExists):
        store.create("r1", M())
    (info,) = store.list()
    assert isinstance(info.error, UnsafeFile)
    assert (outside.read_bytes() if outside.exists() else None) == before
    assert os.path.lexists(path)


def test_a_symlinked_lock_file_is_refused(store, tmp_path):
    store.create("r1", M()).close()
    lock = os.path.join(store.directory, "r1.lock")
    os.unlink(lock)
    os.symlink(tmp_path / "elsewhere", lock)
    with pytest.raises(UnsafeFile):
        store.open("r1")
    assert not (tmp_path / "elsewhere").exists()


def test_a_journal_writable_by_others_is_refused_for_writing(store):
    store.create("r1", M()).close()
    os.chmod(os.path.join(store.directory, "r1.json"), 0o666)
    with pytest.raises(UnsafeFile, match="writable by others"):
        store.open("r1")
    assert store.load("r1").records == 1


def test_a_journal_whose_meta_names_another_run_is_refused_by_load_open_and_list(store):
    path = put(store, journal(M(run_id="someone-else"), A("a")) + b'{"seq":3')
    before = open(path, "rb").read()
    for call in (store.load, store.open):
        with pytest.raises(ConsistencyError) as info:
            call("r1")
        assert info.value.field == "meta.run_id" and "someone-else" in info.value.message
    (info,) = store.list()
    assert info.status == "unreadable" and isinstance(info.error, ConsistencyError)
    assert open(path, "rb").read() == before  # the torn tail was not cut either
