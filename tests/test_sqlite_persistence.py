"""The persistence model (docs/persistence-model.md) against SQLite itself, in its documented modes.

A small program (tests/data/sqlite_writer.py) makes N committed transactions on a SQLite database under the
outside observer; after each commit returns it prints ``committed k`` and writes ``k`` to a marker file, so the
trace position of that write is where commit k was acknowledged (one thread: the observer's entry order puts it
after every call of the commit).  Every crash state of the trace (harness/families/power_loss/crashstates.py:
exhaustive windows up to 12 units, else 64 seeded samples a crash point) is laid in a folder and opened with
sqlite3: ``PRAGMA integrity_check`` and the commits present.  Each mode must show what SQLite documents
(https://www.sqlite.org/pragma.html#pragma_synchronous, https://www.sqlite.org/wal.html):

* WAL + FULL, DELETE + EXTRA: intact, and every acknowledged commit survives, in every state;
* DELETE + FULL: intact in every state, at most the last acknowledged commit rolled back (its journal's unlink is
  not made durable: EXTRA exists to sync the directory after it), and the model does show that loss;
* WAL + NORMAL: intact in every state (WAL frames are checksummed), an acknowledged commit lost in some;
* OFF: some state loses an acknowledged commit or is corrupt.

Measured on 2026-12-02 (3 commits, 2 loaded cores): 1,100 to 3,600 states a mode, 260 to 1,950 distinct
databases, 0.6 to 3.7 s a mode (docs/persistence-model.md "Tested against SQLite itself" has the table).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.families.io_error.family import journal_calls
from harness.families.power_loss.crashstates import crash_points
from harness.families.power_loss.executor import state_space
from harness.families.power_loss.params import Params
from harness.families.tail.executor import repair_history, store_damage, store_files
from harness.families.tail.family import TAIL
from harness.scenario.parse import bundled_scenario_dir, load_scenario
from harness.history.journal_location import JournalLocation
from harness.history.model import History, Leg
from harness.names import OPAQUE
from harness.observer import spawn_observed
from harness.observer.trace import ops_to_trace
from harness.runner.leg import journal_glob, observer_faults
from observer_helpers import tracer_works  # noqa: F401

WRITER = str(Path(__file__).parent / "data" / "sqlite_writer.py")
COMMITS = 3
WHERE = ("state_home", "home", "tmp_dir", "cwd")


def _run(root: Path, journal_mode: str, synchronous: str, n: int = COMMITS, first: int = 1,
         faults: list[str] = ()) -> list[dict]:  # type: ignore[assignment]
    """The trace of one observed run of the writer (commits ``first`` .. ``first + n - 1``) under ``root``."""
    proc = spawn_observed([sys.executable, WRITER, str(root), journal_mode, synchronous, str(n), str(first)],
                          log=root / f"log{first}", roots=[root / "db", root / "acks"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, faults=faults)
    out, err = proc.communicate(timeout=60)
    if faults:
        return ops_to_trace(proc.ops())
    assert proc.returncode == 0, err
    assert out.decode().split() == " ".join(f"committed {k}" for k in range(first, first + n)).split()
    return ops_to_trace(proc.ops())


def _states(tmp_path: Path, journal_mode: str, synchronous: str) -> list[tuple[int, bool, list[int]]]:
    """``(acknowledged commits, intact, commits present)`` of every crash state of one run of the writer."""
    root = tmp_path / "root"
    (root / "db").mkdir(parents=True)  # the store's folder exists before the run (durable)
    trace = _run(root, journal_mode, synchronous)
    if journal_mode == "WAL":  # its index is written through mmap: the model leaves it out (VOLATILE)
        assert any(ev["path"].endswith("-shm") for ev in trace)
    acks = [ev["n"] for ev in trace if ev["op"] == "write" and ev["path"] == str(root / "acks")]
    assert len(acks) == COMMITS
    store, judged, out_states = str(root / "db") + "/", {}, []
    for point in crash_points(trace, {}, {str(root), str(root.parent), str(root / "db")}, samples=64, seed=1):
        acked = sum(1 for n in acks if n <= point.prefix_n)
        for state in point.states:
            assert not any(p.endswith("-shm") for p in state.files)
            files = tuple(sorted((p[len(store):], data) for p, data in state.files.items() if p.startswith(store)))
            if files not in judged:
                judged[files] = _open(tmp_path / f"s{len(judged)}", dict(files))
            out_states.append((acked, *judged[files]))
    return out_states


def _made(folder: Path) -> str:
    folder.mkdir(exist_ok=True)
    return str(folder)


def _open(folder: Path, files: dict[str, bytes]) -> tuple[bool, list[int]]:
    """Lay ``files`` in ``folder`` and open the database as SQLite would after a reboot: intact? which commits?"""
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    try:
        db = sqlite3.connect(folder / "t.db")
        try:
            intact = db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            try:
                present = [k for (k,) in db.execute("SELECT k FROM t ORDER BY k")]
            except sqlite3.OperationalError as exc:  # the table's creation did not survive
                assert "no such table" in str(exc)
                present = []
        finally:
            db.close()
    except sqlite3.DatabaseError:
        return False, []
    return intact, present


@pytest.mark.parametrize("journal_mode, synchronous", [("WAL", "FULL"), ("DELETE", "EXTRA")])
def test_sqlite_full_in_wal_and_extra_in_delete_keep_every_acknowledged_commit_in_every_crash_state(
        tmp_path, journal_mode, synchronous):
    states = _states(tmp_path, journal_mode, synchronous)
    assert all(intact for _, intact, _ in states)
    assert all(present == list(range(1, len(present) + 1)) for _, _, present in states)  # atomic, in order
    assert all(len(present) >= acked for acked, _, present in states)
    assert any(acked == COMMITS and len(present) == COMMITS for acked, _, present in states)
    assert any(len(present) > acked for acked, _, present in states)  # committed, not yet acknowledged


def test_sqlite_full_in_delete_mode_may_roll_back_the_last_acknowledged_commit_and_no_other(tmp_path):
    states = _states(tmp_path, "DELETE", "FULL")
    assert all(intact for _, intact, _ in states)
    assert all(present == list(range(1, len(present) + 1)) for _, _, present in states)
    assert all(len(present) >= acked - 1 for acked, _, present in states)
    # the journal's unlink (the commit) is not made durable before the commit returns: a hot journal comes back
    assert any(len(present) == acked - 1 for acked, _, present in states)


def test_sqlite_normal_in_wal_mode_stays_intact_but_loses_acknowledged_commits(tmp_path):
    states = _states(tmp_path, "WAL", "NORMAL")
    assert all(intact for _, intact, _ in states)
    assert all(present == list(range(1, len(present) + 1)) for _, _, present in states)
    assert any(len(present) < acked for acked, _, present in states)


@pytest.mark.parametrize("journal_mode", ["DELETE", "WAL"])
def test_sqlite_off_loses_an_acknowledged_commit_or_the_database_in_some_crash_state(tmp_path, journal_mode):
    states = _states(tmp_path, journal_mode, "OFF")
    assert any(not intact or len(present) < acked for acked, intact, present in states)
    assert any(intact and len(present) == COMMITS for _, intact, present in states)


def test_power_loss_follows_an_opaque_store_through_a_resume_leg_from_the_files_the_first_leg_left(tmp_path):
    """state_space over a store (``format = "opaque"``): no decoded journal needed, no ``-shm``; the leg that loses power starts from the store as the trace of the
    leg before it left it (crashstates.written), so every state holds that leg's commits."""
    root = tmp_path / "root"
    (root / "db").mkdir(parents=True)
    legs = [Leg(index=0, kind="start", argv=[], trace=_run(root, "WAL", "FULL", 2, 1))]
    after_start = {str(p): p.read_bytes() for p in (root / "db").iterdir()}  # what the start leg left
    legs.append(Leg(index=1, kind="resume", argv=[], trace=_run(root, "WAL", "FULL", 2, 3)))
    ref = SimpleNamespace(history=History(scenario="s", seed=0, schedule=[], run_id="r1", legs=legs,
                                          options={"trial_dir": str(root)}, journal_format=OPAQUE,
                                          journal_template="{trial_dir}/db"))
    subject = SimpleNamespace(trial_where=lambda home, uuid, make: {k: str(home / k) for k in
                                                                     ("state_home", "home", "tmp_dir", "cwd")})
    space = state_space(ref, "r1", Params(crash_leg="resume"), subject)  # type: ignore[arg-type]
    assert space.leg == 1 and space.start[1] == after_start
    store = str(root / "db") + "/"
    seen: dict[tuple, list[int]] = {}
    for state in space.distinct:
        assert not any(p.endswith("-shm") for p in state.files)
        files = tuple(sorted((p[len(store):], b) for p, b in state.files.items() if p.startswith(store)))
        if files not in seen:
            intact, seen[files] = _open(tmp_path / f"s{len(seen)}", dict(files))
            assert intact and seen[files][:2] == [1, 2]
    assert {len(present) for present in seen.values()} >= {2, 4}
    with pytest.raises(ValueError, match="no write of the journal"):
        state_space(SimpleNamespace(history=History(scenario="s", seed=0, schedule=[], run_id="r1", legs=legs,
                                                    journal_format=OPAQUE, journal_template="{trial_dir}/other")),
                    "r1", Params(), subject)  # type: ignore[arg-type]


@pytest.mark.parametrize("op, kind", [("write", "write"), ("fsync", "fdatasync")])
def test_an_io_error_of_an_opaque_store_fails_the_call_its_plan_names_among_every_file_below_it(tmp_path, op, kind):
    """io-errors over a store: the plan's K (journal_calls: the store's writes, or fsyncs and fdatasyncs, of
    every file below it) is the call the observer fails with the leg runner's fault (observer_faults with the
    store's journal_glob)."""
    store = JournalLocation("{trial_dir}/db", OPAQUE)
    (tmp_path / "clean" / "db").mkdir(parents=True)
    clean = _run(tmp_path / "clean", "DELETE", "FULL")
    calls = journal_calls(clean, "r1", store, op)
    assert len(calls) >= 3 and {ev["path"].rsplit("/", 1)[1] for ev in clean if ev["op"] == kind
                                and store.is_journal(ev["path"], "r1")} >= {"t.db", "t.db-journal"}
    k = calls[len(calls) // 2]
    root = tmp_path / "faulted"
    (root / "db").mkdir(parents=True)
    spec = observer_faults({"kind": "io_error", "action": "eio", "event": k, "op": op}, journal_glob(root / "db", True))
    trace = _run(root, "DELETE", "FULL", faults=spec)
    (hit,) = [ev for ev in trace if ev.get("fault")]
    assert hit["error"] == "EIO" and hit["op"] == kind and hit["path"].startswith(f"{root}/db/")
    i = trace.index(hit)
    assert journal_calls(trace[:i] + [{**hit, "error": None}], "r1", store, op)[-1] == k  # the K-th, as planned
    assert [ev["op"] for ev in trace[:i]] == [ev["op"] for ev in clean[:i]]


def test_tails_over_an_opaque_store_damage_the_files_last_written_at_their_last_write_and_resume_each(
        tmp_path, monkeypatch):
    """The tail plan of a store: the two files the run wrote last (DELETE mode: the journal is gone at the end,
    so the database alone), cut at page and sector boundaries and zeroed where last written, each a resume
    trial; the damage is real (SQLite opens some damaged databases as corrupt or missing a commit)."""
    root = tmp_path / "root"
    (root / "db").mkdir(parents=True)
    history = History(scenario="s", seed=0, schedule=[], run_id="r1", journal_format=OPAQUE,
                      journal_template="{trial_dir}/db", legs=[Leg(index=0, kind="start", argv=[],
                                                                     trace=_run(root, "DELETE", "FULL"))])
    assert store_files(history) == {"t.db": (root / "db" / "t.db").read_bytes()}
    muts = store_damage(history)
    assert {m.file for m in muts} == {"t.db"} and {m.kind for m in muts} == {"cut", "zeros"}
    outcomes = {_open(tmp_path / f"s{i}", {"t.db": m.data}) != (True, [1, 2, 3]) for i, m in enumerate(muts)}
    assert outcomes == {True}  # every damage changes what SQLite reads
    scenario = load_scenario(bundled_scenario_dir() / "tails-basic.toml")
    plan = TAIL.plan(scenario, SimpleNamespace(history=history), 4, 1, None)  # type: ignore[arg-type]
    assert plan and all(p.item.check == "resume" and p.item.mutation.file == "t.db" for p in plan)
    assert {p.item.mutation.kind for p in plan} == {"cut", "zeros"} and len(plan) == min(4, len(muts))
    assert len(TAIL.bound(scenario, plan, 2, 1)) == 2
    replay = TAIL.plan(scenario, SimpleNamespace(history=history), 4, 1, [plan[-1].schedule])  # type: ignore[arg-type]
    assert [p.item.mutation for p in replay] == [plan[-1].item.mutation]
    assert TAIL.smaller(scenario, SimpleNamespace(history=history), plan[-1].schedule) == []  # type: ignore[arg-type]
    laid = {}  # the resume of a damaged store starts from every store file, the damaged one replaced

    def resume(ctx, tmp, before, calls, effects, fault):
        laid.update({str(p.relative_to(tmp)): p.read_bytes() for p in tmp.rglob("*") if p.is_file()})
        assert before[0].journal is None and before[0].fault.detail["file"] == "t.db"
        return History(scenario="s", seed=0, schedule=[], run_id="r1")

    monkeypatch.setattr("harness.families.tail.executor.resume", resume)
    m = plan[-1].item.mutation
    ctx = SimpleNamespace(ref=SimpleNamespace(history=history), runner=SimpleNamespace(tmp_root=str(tmp_path)),
                          subject=SimpleNamespace(files=()), where=lambda tmp: {k: _made(tmp / k) for k in WHERE},
                          journal=lambda tmp: tmp / "state_home" / "lg")
    repair_history(ctx, m)  # type: ignore[arg-type]
    assert laid == {"state_home/lg/t.db": m.data}
