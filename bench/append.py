"""Section 1 of the bench: Journal.append vs a bare write + fsync of the same bytes."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
from typing import Any

from fiskj.codec import encode_record, with_seq
from fiskj.records import AssistantRecord, Record, ToolResultRecord

from bench.common import median, row
from bench.journals import meta_record, write_journal


# --- 1. append ---------------------------------------------------------------------------------


def _sized_pair(size: int, k: int) -> tuple[AssistantRecord, ToolResultRecord]:
    """An assistant record with one tool_use and its tool_result, each encoding to about ``size`` bytes."""
    tid = f"toolu_{k:08d}"

    def assistant(pad: int) -> AssistantRecord:
        return AssistantRecord(iteration=k, message={"role": "assistant", "content": [
            {"type": "text", "text": "x" * pad}, {"type": "tool_use", "id": tid, "name": "ls", "input": {"p": "."}}]},
            stop_reason="tool_use", in_tokens=1000, out_tokens=100, seq=100_000)

    def result(pad: int) -> ToolResultRecord:
        return ToolResultRecord(tool_use_id=tid, result={"type": "tool_result", "tool_use_id": tid,
                                                         "content": "y" * pad, "is_error": False}, seq=100_000)

    a_pad = max(0, size - len(encode_record(assistant(0))))
    r_pad = max(0, size - len(encode_record(result(0))))
    return assistant(a_pad), result(r_pad)


def _append_series(journal: Any, records: list[Record], floor_fd: int) -> tuple[list[float], list[float], int]:
    """Append ``records`` to ``journal``, each paired with a write+fsync of the same bytes to ``floor_fd``.

    The order inside a pair alternates.  Returns per-op latencies (subject, floor) in seconds and the bytes."""
    subject, floor, nbytes = [], [], 0
    clock = time.perf_counter
    for i, record in enumerate(records):
        line = encode_record(record, journal.last_seq + 1)  # the bytes append writes
        nbytes += len(line)
        for first in ((0, 1) if i % 2 else (1, 0)):
            if first:
                t = clock()
                journal.append(record)
                subject.append(clock() - t)
            else:
                t = clock()
                os.write(floor_fd, line)
                os.fsync(floor_fd)
                floor.append(clock() - t)
    return subject, floor, nbytes


def _append_cpu(records: list[Record], directory: str) -> dict[str, float]:
    """Median CPU cost (us) of one append with write/fsync stubbed, and of its parts (encode, seq, fold)."""
    from fiskj import ioseam, journal as jmod
    from fiskj.fold import Folder
    from fiskj.store import FileStore

    saved = (ioseam.write, ioseam.fsync, ioseam.fsync_dir)
    ioseam.write = lambda fd, data: len(data)  # type: ignore[assignment]
    ioseam.fsync = lambda fd: None  # type: ignore[assignment]
    ioseam.fsync_dir = lambda path: None  # type: ignore[assignment]
    try:
        store = FileStore(os.path.join(directory, "cpu-store"))
        j = store.create("cpu", meta_record("cpu"))
        try:
            whole, enc, rep, fold = [], [], [], []
            clock = time.perf_counter
            folder = Folder()
            folder.add(dataclasses.replace(meta_record("cpu"), seq=1))
            for i, record in enumerate(records):
                t = clock()
                j.append(record)
                whole.append(clock() - t)
                t = clock()
                encode_record(record, i + 2)
                enc.append(clock() - t)
                t = clock()
                r2 = with_seq(record, i + 2)
                rep.append(clock() - t)
                t = clock()
                folder.check(r2)
                folder.add(r2)
                fold.append(clock() - t)
            # the same appends, each after a 150 us sleep, as after an fsync: caches and CPU are cold
            cold = []
            for k in range(len(records) // 2):
                for record in _sized_pair(300, 1_000_000 + k):
                    time.sleep(150e-6)
                    t = clock()
                    j.append(record)
                    cold.append(clock() - t)
        finally:
            j.close()
        _ = jmod
    finally:
        ioseam.write, ioseam.fsync, ioseam.fsync_dir = saved
    us = 1e6
    return {"append": median(whole) * us, "with_seq": median(rep) * us, "encode": median(enc) * us,
            "fold_check_add": median(fold) * us, "append_after_sleep": median(cold) * us}


def bench_append(directory: str, *, n: int = 200, sizes: tuple[int, ...] = (300, 4096),
                 long_journal: int = 0) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Section 1.  ``directory`` must be on the file system under test; returns (rows, details)."""
    from fiskj.store import FileStore

    rows, details = [], {}
    base = tempfile.mkdtemp(prefix="fiskj-bench-append-", dir=directory)
    try:
        for size in sizes:
            store = FileStore(os.path.join(base, f"store-{size}"))
            run_id = f"bench-{size}"
            journal = store.create(run_id, meta_record(run_id))
            fd = os.open(os.path.join(store.directory, "floor.bin"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                records: list[Record] = [r for k in range(n // 2 + 4) for r in _sized_pair(size, k)]
                _append_series(journal, records[:8], fd)  # warm-up
                subj, flr, nbytes = _append_series(journal, records[8:8 + n], fd)
            finally:
                os.close(fd)
                journal.close()
            ms, mf = median(subj), median(flr)
            line = nbytes / max(1, len(subj))
            details[f"append_{size}"] = {"n": len(subj), "line_bytes": line, "subject_us": ms * 1e6,
                                         "floor_us": mf * 1e6, "subject_p90_us": _pct(subj, 90) * 1e6,
                                         "floor_p90_us": _pct(flr, 90) * 1e6,
                                         "subject_per_s": len(subj) / sum(subj), "floor_per_s": len(flr) / sum(flr)}
            ratio = _paired_ratio(subj, flr)
            details[f"append_{size}"]["ratio_paired"] = ratio
            rows.append(row("append", f"append {line:.0f} B: median latency", ms * 1e6, mf * 1e6, unit="us",
                            ratio=ratio, target="<= 1.15x", met=ratio <= 1.15,
                            note=f"n={len(subj)} pairs; ratio = 1 + median(paired difference) / floor median; "
                                 f"ratio of medians {ms / mf:.2f}x"))
            tput = (len(subj) / sum(subj), len(flr) / sum(flr))
            rows.append(row("append", f"append {line:.0f} B: throughput", tput[0], tput[1], unit="rec/s",
                            ratio=tput[1] / tput[0], target="<= 1.15x", met=tput[1] / tput[0] <= 1.15,
                            note="ratio = floor rate / subject rate"))
        cpu_records = [r for k in range(60) for r in _sized_pair(300, k)]
        cpu = _append_cpu(cpu_records, base)
        details["append_cpu_us"] = cpu
        rows.append(row("append", "append CPU, IO stubbed (300 B)", cpu["append"], None, unit="us",
                        note=f"hot loop; of which encode {cpu['encode']:.1f}, with_seq {cpu['with_seq']:.1f}, "
                             f"fold check+add {cpu['fold_check_add']:.1f}"))
        rows.append(row("append", "append CPU, IO stubbed, after a 150 us sleep", cpu["append_after_sleep"], None,
                        unit="us", note="the same code with cold caches, as it runs right after an fsync"))
        if long_journal:
            rows += _append_long(base, long_journal, n, details)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return rows, details


def _append_long(base: str, records_before: int, n: int, details: dict[str, Any]) -> list[dict[str, Any]]:
    """Appends to a journal reopened after ``records_before`` records vs the same floor (cost must not grow)."""
    from fiskj.store import FileStore

    store = FileStore(os.path.join(base, "store-long"))
    os.makedirs(store.directory, mode=0o700)
    run_id = "bench-long"
    write_journal(os.path.join(store.directory, run_id + ".json"), records_before, run_id=run_id)
    t = time.perf_counter()
    journal = store.open(run_id)
    open_s = time.perf_counter() - t
    fd = os.open(os.path.join(store.directory, "floor.bin"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        records = [r for k in range(n // 2 + 4) for r in _sized_pair(300, 10_000_000 + k)]
        _append_series(journal, records[:8], fd)
        subj, flr, _ = _append_series(journal, records[8:8 + n], fd)
    finally:
        os.close(fd)
        journal.close()
    ms, mf = median(subj), median(flr)
    ratio = _paired_ratio(subj, flr)
    details["append_long"] = {"records_before": records_before, "open_s": open_s, "subject_us": ms * 1e6,
                              "floor_us": mf * 1e6, "ratio_paired": ratio}
    return [row("append", f"append 300 B after {records_before:,} records", ms * 1e6, mf * 1e6, unit="us",
                ratio=ratio, target="<= 1.15x", met=ratio <= 1.15,
                note=f"journal reopened with FileStore.open ({open_s:.1f} s); ratio of medians {ms / mf:.2f}x")]


def _paired_ratio(subject: list[float], floor: list[float]) -> float:
    """1 + median(subject_i - floor_i) / median(floor): the pairs ran back to back, so the
    disk's and the CPU's momentary load cancels out of each difference."""
    return 1 + median(a - b for a, b in zip(subject, floor)) / median(floor)


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))] if values else float("nan")
