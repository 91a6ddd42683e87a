"""harness.families.power_loss.crashstates: the power-loss crash-state enumerator (pure), on handcrafted traces."""

from __future__ import annotations

import ast
import base64
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.checkers.i4_acknowledged import lost_acknowledged as lost_in_facts
from harness.families.power_loss.crashstates import CrashState, Simulator, crash_points, crash_states, window
from harness.history.model import CrashStateFacts



def lost_acknowledged(state: CrashState) -> list[str]:
    """I4's judgement of a crash state, on the facts the power-loss family records of it."""
    return lost_in_facts(CrashStateFacts.of(state))


D = "/s/runs"
J = f"{D}/r.json"


class Trace:
    """Builds IO-seam trace events (docs/ioseam.md) with increasing ``n``."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.size: dict[int, int] = {}

    def _ev(self, op: str, **kw) -> "Trace":
        self.events.append({"n": len(self.events) + 1, "pid": 7, "op": op, **kw})
        return self

    def create(self, path: str = J, fd: int = 3) -> "Trace":
        self.size[fd] = 0
        return self._ev("open", path=path, fd=fd, flags=["O_WRONLY", "O_CREAT", "O_EXCL", "O_APPEND"], created=True)

    def write(self, data: bytes, fd: int = 3, path: str = J, error: str | None = None) -> "Trace":
        off = self.size.get(fd, 0)
        self.size[fd] = off + len(data)
        extra = {"error": error} if error else {}
        return self._ev("write", path=path, fd=fd, offset=off, len=len(data),
                        data=base64.b64encode(data).decode(), **extra)

    def fsync(self, fd: int = 3, path: str = J, error: str | None = None) -> "Trace":
        return self._ev("fsync", path=path, fd=fd, **({"error": error} if error else {}))

    def fsync_dir(self, path: str = D) -> "Trace":
        return self._ev("fsync_dir", path=path)

    def mkdir(self, path: str) -> "Trace":
        return self._ev("mkdir", path=path, mode=0o700)

    def close(self, fd: int = 3, path: str = J) -> "Trace":
        return self._ev("close", path=path, fd=fd)

    def ftruncate(self, length: int, fd: int = 3, path: str = J) -> "Trace":
        self.size[fd] = length
        return self._ev("ftruncate", path=path, fd=fd, length=length)

    def rename(self, src: str, dst: str) -> "Trace":
        return self._ev("rename", src=src, dst=dst, path=dst)

    def append(self, data: bytes, *, sync: bool = True, sync_dir: bool = False) -> "Trace":
        """One journal append as fiskj does it: write, fsync, (fsync of the directory)."""
        self.write(data)
        if sync:
            self.fsync()
        if sync_dir:
            self.fsync_dir()
        return self


def states(trace: Trace, **kw):
    return list(crash_states(trace.events, {}, {"/s", D}, **kw))


def rec(i: int, size: int = 100) -> bytes:
    return (b'{"seq":%d,"x":"' % i).ljust(size - 3, b"a") + b'"}\n'


def test_a_correct_writer_loses_no_acknowledged_record_in_any_state():
    t = Trace().create().append(rec(1, 700), sync_dir=True)
    for i in range(2, 6):
        t.append(rec(i, 300 + 97 * i))
    t.close()
    found = states(t)
    assert len(found) > 20
    assert [s.id for s in found if lost_acknowledged(s)] == []
    final = found[-1]
    assert final.files[J] == b"".join([rec(1, 700)] + [rec(i, 300 + 97 * i) for i in range(2, 6)])
    assert len(final.acknowledged) == 5


def test_a_record_written_in_two_writes_is_acknowledged_only_once_its_append_returned():
    """A write that did not end its line is part of one append with the write that ends it: the second half is no
    sign the first returned (the old model took it for one, and I4 reported a record 'acknowledged by' its own
    second half lost at a power loss before its fsync: a false alarm beside the real append_not_synced)."""
    line = rec(2)
    t = Trace().create().append(rec(1), sync_dir=True).write(line[:40]).write(line[40:])  # killed before its fsync
    assert [s.id for s in states(t, complete=False) if lost_acknowledged(s)] == []
    assert all(len(s.acknowledged) == 1 for s in states(t, complete=False) if s.prefix_n == len(t.events))
    t.fsync().write(rec(3))  # the next append: the split one returned
    last = [s for s in states(t, complete=False) if s.prefix_n == len(t.events)]
    assert all(len(s.acknowledged) == 3 for s in last)  # rec(1) and both halves of rec(2)
    assert [s.id for s in states(t, complete=False) if lost_acknowledged(s)] == []  # fsynced before rec(3)


def test_an_unsynced_write_may_be_lost_or_kept():
    t = Trace().create().append(rec(1), sync_dir=True).write(rec(2))
    last = [s for s in states(t) if s.prefix_n == len(t.events)]
    contents = {s.files[J] for s in last}
    assert rec(1) in contents and rec(1) + rec(2) in contents


def test_sectors_persist_in_any_subset_and_the_size_extends_over_zeros():
    t = Trace().create().append(b"x" * 512, sync_dir=True).write(b"y" * 1024)
    last = [s.files[J] for s in states(t, zero_fill=False) if s.prefix_n == len(t.events)]
    assert sorted(last) == sorted([b"x" * 512, b"x" * 512 + b"y" * 512, b"x" * 512 + b"\0" * 512 + b"y" * 512,
                                   b"x" * 512 + b"y" * 1024])


def test_a_write_that_shares_a_sector_persists_only_its_own_bytes():
    t = Trace().create().append(b"a" * 100, sync_dir=True).write(b"b" * 100)
    last = {s.files[J] for s in states(t, zero_fill=False) if s.prefix_n == len(t.events)}
    assert last == {b"a" * 100, b"a" * 100 + b"b" * 100}


def test_zero_fill_gives_the_new_size_without_the_data():
    t = Trace().create().append(b"a" * 10, sync_dir=True).write(b"b" * 30)
    last = [s for s in states(t) if s.prefix_n == len(t.events)]
    zero = [s for s in last if s.persisted.startswith("size-only")]
    assert len(zero) == 1 and zero[0].files[J] == b"a" * 10 + b"\0" * 30


def test_a_state_named_by_the_units_it_dropped_is_the_enumerated_state_that_kept_the_rest():
    t = Trace().create().append(b"x" * 512, sync_dir=True).write(b"y" * 1024)
    n = len(t.events)
    units, _ = window(t.events, {}, {"/s", D}, n)
    assert units == [("w", 0, 0, 1), ("w", 0, 0, 2)]  # the unsynced write's two sectors
    enumerated = {frozenset(s.kept): s for s in states(t, zero_fill=False) if s.prefix_n == n}
    for dropped in ([], [units[0]], units):
        _, state = window(t.events, {}, {"/s", D}, n, [list(u) for u in dropped])
        assert state.kept == frozenset(units) - set(dropped) and state.files == enumerated[state.kept].files
        assert bool(lost_acknowledged(state)) == bool(dropped)  # the run ended: its last write was acknowledged
    assert state.id == f"p{n}~w/0/0/1,w/0/0/2"
    with pytest.raises(ValueError, match="not in the unsynced window"):
        window(t.events, {}, {"/s", D}, n, [["w", 9, 0, 0]])
    with pytest.raises(ValueError, match=rf"no crash point {n + 1} in a trace of {n} events: this run of the "
                                         r"subject made .* does not repeat its run event for event"):
        window(t.events, {}, {"/s", D}, n + 1)


def test_a_created_file_vanishes_until_its_directory_is_fsynced():
    t = Trace().create().append(rec(1))
    before = [s for s in states(t) if s.prefix_n == len(t.events)]
    assert any(J not in s.files for s in before)
    assert any("create " + J in s.lost_entries for s in before)
    t.fsync_dir()
    after = [s for s in states(t) if s.prefix_n == len(t.events)]
    assert after and all(s.files.get(J) == rec(1) for s in after)


def test_the_window_between_fsync_and_directory_fsync_is_not_yet_acknowledged():
    t = Trace().create().write(rec(1)).fsync()  # killed here: the append has not returned
    assert [s for s in states(t, complete=False) if lost_acknowledged(s)] == []
    assert [s for s in states(t, complete=True) if lost_acknowledged(s)] != []  # it returned: F09


def test_missing_directory_fsync_on_first_append_loses_an_acknowledged_record():
    t = Trace().create().append(rec(1)).append(rec(2))  # F09: no fsync_dir
    bad = [s for s in states(t) if lost_acknowledged(s)]
    assert bad and "the file is gone" in lost_acknowledged(bad[0])[0]


def test_a_new_store_directory_not_made_durable_loses_the_whole_store():
    t = Trace().mkdir("/s/new").mkdir("/s/new/runs").fsync_dir("/s/new")  # defect 4: /s never fsynced
    path = "/s/new/runs/r.json"
    t.create(path).write(rec(1), path=path).fsync(path=path).fsync_dir("/s/new/runs").write(rec(2), path=path)
    bad = [s for s in states(t) if lost_acknowledged(s)]
    assert bad and any("mkdir /s/new" in s.lost_entries and "/s/new/runs" not in s.dirs for s in bad)
    t2 = Trace().mkdir("/s/new").fsync_dir("/s").mkdir("/s/new/runs").fsync_dir("/s/new")
    t2.create(path).write(rec(1), path=path).fsync(path=path).fsync_dir("/s/new/runs").write(rec(2), path=path)
    t2.fsync(path=path).close(path=path)
    assert [s for s in states(t2) if lost_acknowledged(s)] == []


def test_appends_without_fsync_lose_an_acknowledged_record():
    t = Trace().create().fsync_dir().append(rec(1), sync=False).append(rec(2), sync=False)
    bad = [s for s in states(t) if lost_acknowledged(s)]
    assert bad and all(s.prefix_n >= 4 for s in bad)


def test_fsync_before_write_loses_the_last_record_at_close():
    t = Trace().create().fsync_dir()
    for i in (1, 2):
        t.fsync().write(rec(i))
    t.close()
    bad = [s for s in states(t) if lost_acknowledged(s)]
    assert bad and bad[0].prefix_n == len(t.events)
    assert "bytes 100..200" in lost_acknowledged(bad[0])[0]


def test_a_write_whose_fsync_failed_is_never_acknowledged():
    t = Trace().create().fsync_dir().write(rec(1)).fsync(error="EIO").close()
    assert all(not s.acknowledged for s in states(t))


def test_a_short_write_leaves_its_bytes_but_acknowledges_nothing():
    t = Trace().create().fsync_dir().write(rec(1)[:40], error="ENOSPC").close()
    last = [s for s in states(t) if s.prefix_n == len(t.events)]
    assert {s.files[J] for s in last} >= {b"", rec(1)[:40]} and all(not s.acknowledged for s in last)


def test_ftruncate_is_durable_only_after_the_fsync():
    t = Trace().create().append(rec(1) + b"torn", sync_dir=True).ftruncate(100)
    before = {s.files[J] for s in states(t) if s.prefix_n == len(t.events)}
    assert before == {rec(1) + b"torn", rec(1)}
    t.fsync()
    assert {s.files[J] for s in states(t) if s.prefix_n == len(t.events)} == {rec(1)}


def test_a_rename_is_undone_until_its_directory_is_fsynced():
    tmp = f"{D}/r.tmp"
    t = Trace().create(tmp).append(rec(1), sync_dir=True)
    t.events[-2]["path"] = t.events[-3]["path"] = tmp
    t.rename(tmp, J)
    names = {tuple(sorted(s.files)) for s in states(t) if s.prefix_n == len(t.events)}
    assert names == {(tmp,), (J,)}
    t.fsync_dir()
    assert {tuple(sorted(s.files)) for s in states(t) if s.prefix_n == len(t.events)} == {(J,)}


def test_every_prefix_of_the_trace_is_a_crash_point():
    t = Trace().create().append(rec(1), sync_dir=True).close()
    points = list(crash_points(t.events, {}, {D}))
    assert [p.prefix_n for p in points] == list(range(len(t.events) + 1))
    assert points[0].states[0].files == {}


def test_large_windows_are_sampled_deterministically_for_a_seed():
    t = Trace().create().append(rec(1), sync_dir=True).write(b"z" * 512 * 30)
    one = [(s.id, s.files.get(J)) for s in states(t, seed=5, samples=40)]
    two = [(s.id, s.files.get(J)) for s in states(t, seed=5, samples=40)]
    other = [(s.id, s.files.get(J)) for s in states(t, seed=6, samples=40)]
    assert one == two and one != other
    point = list(crash_points(t.events, {}, {D}, samples=40))[-1]
    assert not point.exhaustive and point.units == 31 and len(point.states) <= 41  # offset 100: 31 sectors


def test_distinct_skips_states_seen_at_an_earlier_crash_point():
    t = Trace().create().append(rec(1), sync_dir=True).close()
    every = states(t)
    distinct = states(t, distinct=True)
    assert len(distinct) < len(every)
    assert len({s.key() for s in distinct}) == len(distinct)


def test_the_initial_tree_is_durable():
    sim = Simulator({J: rec(1)}, {"/s", D})
    point = sim.states(0)
    assert [s.files for s in point.states] == [{J: rec(1)}]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 1500), min_size=1, max_size=6), st.integers(1, 600))
def test_with_every_write_fsynced_every_state_holds_every_acknowledged_byte(sizes, sector):
    t = Trace().create()
    for i, size in enumerate(sizes):
        t.append(rec(i + 1, max(size, 20)), sync_dir=i == 0)
    t.close()
    for s in crash_states(t.events, {}, {"/s", D}, sector_bytes=sector, exhaustive_units=8, samples=16):
        assert lost_acknowledged(s) == []
        for path, end in s.acknowledged:
            assert len(s.files[path]) >= end


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(20, 1200), min_size=2, max_size=5), st.integers(0, 3))
def test_without_fsync_some_state_loses_an_acknowledged_write(sizes, seed):
    t = Trace().create().fsync_dir()
    for i, size in enumerate(sizes):
        t.append(rec(i + 1, size), sync=False)
    assert any(lost_acknowledged(s) for s in crash_states(t.events, {}, {"/s", D}, seed=seed, samples=32))


def test_states_are_built_at_more_than_a_thousand_per_second():
    t = Trace().create().append(rec(1, 900), sync_dir=True)
    for i in range(2, 60):
        t.append(rec(i, 300 + (i * 37) % 900))
    t.close()
    start = time.process_time()
    count = sum(1 for _ in crash_states(t.events, {}, {"/s", D}))
    rate = count / max(time.process_time() - start, 1e-6)
    assert count > 300 and rate > 1000, rate


def test_the_enumerator_and_the_tail_nemesis_import_nothing_that_does_io():
    allowed = {"__future__", "base64", "itertools", "random", "dataclasses", "typing", "json",
               "harness.names"}  # the shared names, a module that imports nothing
    harness = Path(__file__).parent.parent / "harness"
    assert not [n for n in ast.walk(ast.parse((harness / "names.py").read_text())) if isinstance(n, ast.ImportFrom)
                and n.module != "__future__" or isinstance(n, ast.Import)]
    for name in ("families/power_loss/crashstates", "families/tail/mutations"):
        tree = ast.parse((harness / f"{name}.py").read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module if n.module.startswith("harness.") else n.module.split(".")[0]
                     for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert imported <= allowed, (name, imported - allowed)



def _resume_trace(first: bytes, torn: bytes, record: bytes, cut: bool) -> Trace:
    """A resume of J = first + torn: open, (cut the torn tail and fsync,) append ``record``, close."""
    t = Trace()
    t.size[3] = len(first) + len(torn)
    t._ev("open", path=J, fd=3, flags=["O_RDWR", "O_APPEND"], created=False)
    if cut:
        t.ftruncate(len(first)).fsync()
    return t.append(record).close()


def test_a_torn_tail_cut_and_fsynced_before_the_append_loses_nothing():
    trace = _resume_trace(rec(1), rec(9)[:40], rec(2), cut=True)
    found = list(crash_states(trace.events, {J: rec(1) + rec(9)[:40]}, {"/s", D}))
    assert [s.id for s in found if lost_acknowledged(s)] == []
    assert found[-1].files[J] == rec(1) + rec(2)


def test_an_append_glued_to_a_torn_tail_keeps_its_bytes_but_the_reader_drops_the_record():
    import io

    from builders import A, M, lines
    from fiskj.reader import read_records

    meta, assistant = lines(M(), A("a"))
    trace = _resume_trace(meta, assistant[:40], assistant, cut=False)  # defect 1: no cut
    final = list(crash_states(trace.events, {J: meta + assistant[:40]}, {"/s", D}))[-1]
    assert lost_acknowledged(final) == []  # byte-level the write is there: a reader must see the glue
    records, torn = read_records(io.BufferedReader(io.BytesIO(final.files[J])))
    assert [r.seq for r in records] == [1] and torn is not None  # the acknowledged record reads as torn


def test_a_lost_acknowledged_record_is_named_with_its_seq_kind_write_and_what_the_file_holds():
    line = b'{"seq":1,"protocol":"io.choria.fisk-ai.v1.session.meta","meta":{}}\n'
    t = Trace().create().fsync_dir().append(line, sync=False).append(rec(2), sync=False)
    messages = [m for s in states(t) for m in lost_acknowledged(s)]
    named = [m for m in messages if "record seq 1 (meta) bytes 0.." in m]
    assert named and all("write n=3" in m for m in named)
    assert any("the file ends at byte 0" in m and "not durable when the power went" in m for m in named)
