#!/usr/bin/env python3
"""fiskj benchmarks against their physical floors (tracker issue 8).

Usage::

    python3 bench/run.py [--quick] [--json FILE] [--only SECTION,...] [--dir DIR]

``--quick`` takes under 2 minutes, the full run under 15.  Every figure is
measured side by side with its floor in the same run, interleaved (the
machines are shared and noisy), and quoted as medians and ratios:

1. ``append``: ``Journal.append`` (a journal made by ``FileStore(DIR).create``)
   of ~300-byte and 4 KiB records vs a bare ``os.write`` + ``os.fsync`` of the
   same bytes to a file in the same directory, alternating one of each.  Also
   the CPU cost of an append with the IO stubbed out (where the rest goes),
   and appends to a journal reopened after many records (the cost must not
   grow with the run).  Target: within 1.15x.
2. ``load``: ``fiskj.reader.read_state`` of generated journals (1k and 100k
   records; 1M in the full run) vs ``json.loads`` of the same lines read in
   binary, each in a fresh child process (process CPU time, so that time
   spent waiting for a busy CPU is not counted; peak RSS from
   ``getrusage``).  A second floor keeps what a fold must keep (``json.loads``
   plus the retained messages, collector paused as ``read_state`` does it).
   Targets: within 1.5x of the ``json.loads`` floor; peak memory at most 3x the
   journal's size; cost linear in records.
3. ``campaign``: trials/s of a kill campaign on the small bundled scenario
   ``kill-every-event``, and the per-trial share of each cost, each measured
   on its own (interpreter or fork start per leg, tool processes, model
   server round trips, fsyncs, checking).  Power-loss crash states built and
   checked for I4 per second (pure), and explored with a recovery leg per
   second.  Targets: 20 trials/s on 2 cores; 1,000 crash states/s.
4. ``catch``: for each mutant of ``harness/mutants/``, the median time from a
   cold start (reference run included) to its first detection over 5 seeds
   (quick: 1).  Target: under 10 s.

The table's rows are dicts with the keys of :data:`ROW_KEYS`; ``--json`` writes
``{"machine", "mode", "rows", "details"}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fiskj.codec import encode_record, with_seq  # noqa: E402
from fiskj.fingerprint import make_fingerprint  # noqa: E402
from fiskj.records import AssistantRecord, MetaRecord, Record, TerminalRecord, ToolResultRecord  # noqa: E402

__all__ = ["ROW_KEYS", "SECTIONS", "row", "machine_info", "generate_records", "write_journal", "bench_append",
           "bench_load", "bench_campaign", "bench_crash_states", "bench_catch", "format_table", "main"]

#: Keys of every table row.
ROW_KEYS = ("section", "metric", "subject", "floor", "ratio", "unit", "target", "met", "note")

#: Sections in run order.
SECTIONS = ("append", "load", "campaign", "catch")

QUICK = {"append_n": 300, "append_long": 10_000, "load_sizes": (1_000, 100_000), "load_rounds": 3,
         "campaign_trials": 24, "campaign_repeats": 1, "powerloss_states": 8, "catch_seeds": (None,)}
FULL = {"append_n": 2000, "append_long": 100_000, "load_sizes": (1_000, 100_000, 1_000_000), "load_rounds": 5,
        "campaign_trials": 100, "campaign_repeats": 3, "powerloss_states": 32,
        "catch_seeds": (1, 2, 3, 4, 5)}


def row(section: str, metric: str, subject: float | None, floor: float | None = None, *, unit: str = "",
        target: str = "", met: bool | None = None, note: str = "", ratio: float | None = None) -> dict[str, Any]:
    """One table row; ``ratio`` defaults to subject / floor when both are known."""
    if ratio is None and subject is not None and floor:
        ratio = subject / floor
    return {"section": section, "metric": metric, "subject": subject, "floor": floor, "ratio": ratio,
            "unit": unit, "target": target, "met": met, "note": note}


def median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


# --- the machine ------------------------------------------------------------------------


def fs_type(path: str) -> str:
    """The file system type of ``path`` (longest mount point of /proc/mounts that contains it)."""
    path = os.path.realpath(path)
    best, kind = "", "unknown"
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    mnt = parts[1].replace("\\040", " ")
                    if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                        best, kind = mnt, parts[2]
    except OSError:
        pass
    return kind


def machine_info(directory: str) -> dict[str, Any]:
    """nproc, CPU model, kernel, Python, the file system of ``directory``, load average."""
    model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(),
            "python": platform.python_version(), "fs": fs_type(directory), "dir": directory,
            "loadavg": [round(x, 2) for x in load]}


# --- generated journals ---------------------------------------------------------------------

_WORDS = ("the of and to in is was for on that with as by at from file line run tool result error value "
          "list read write open close count sum check path node data").split()
_FP = make_fingerprint(model="claude-sonnet-4-5", system="be brief", tools=[{"name": "ls"}, {"name": "cat"}],
                       max_tokens=10**9, max_iterations=10**9)


def _text(rng: random.Random, size: int) -> str:
    out: list[str] = []
    n = 0
    while n < size:
        word = rng.choice(_WORDS)
        out.append(word)
        n += len(word) + 1
    return " ".join(out)


def meta_record(run_id: str) -> MetaRecord:
    return MetaRecord(version=2, run_id=run_id, created="2026-11-30T01:02:03.123456789+00:00", fingerprint=_FP,
                      prompt="count the files and summarise them")


def generate_records(n: int, run_id: str = "bench", seed: int = 1) -> Iterable[Record]:
    """``n`` records of a plausible run (seq 1..n): meta, turns of an assistant with 1-2 tool_use
    blocks and their tool_results (~300 bytes a line on average), a final ``suspended`` terminal."""
    rng = random.Random(seed)
    yield dataclasses.replace(meta_record(run_id), seq=1)
    seq, it = 1, 0
    while seq < n - 1:
        room = n - 2 - seq  # slots left for tool_results before the terminal record
        ids = [f"toolu_{it:07d}_{j}" for j in range(min(rng.choice((1, 1, 2)), room))]
        content: list[dict[str, Any]] = [{"type": "text", "text": _text(rng, rng.randrange(10, 60))}]
        content += [{"type": "tool_use", "id": i, "name": rng.choice(("ls", "cat", "grep")),
                     "input": {"path": "/srv/data/" + rng.choice(_WORDS)}} for i in ids]
        seq += 1
        yield AssistantRecord(iteration=it, message={"role": "assistant", "content": content},
                              stop_reason="tool_use" if ids else "end_turn",
                              in_tokens=rng.randrange(100, 5000), out_tokens=rng.randrange(10, 500),
                              cache_read_tokens=rng.randrange(0, 1000), seq=seq)
        for i in ids:
            seq += 1
            yield ToolResultRecord(tool_use_id=i, result={"type": "tool_result", "tool_use_id": i,
                                                          "content": _text(rng, rng.randrange(10, 130)),
                                                          "is_error": False}, seq=seq)
        it += 1
    if n > 1:
        yield TerminalRecord(reason="suspended", seq=n)


def write_journal(path: str | os.PathLike[str], n: int, run_id: str = "bench", seed: int = 1) -> int:
    """Write a generated journal of ``n`` records to ``path`` (streaming); return its size in bytes."""
    size = 0
    with open(path, "wb", buffering=1 << 20) as f:
        for record in generate_records(n, run_id, seed):
            line = encode_record(record)
            f.write(line)
            size += len(line)
    return size


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


# --- 2. load and fold ---------------------------------------------------------------------------

_LOAD_MODES = ("floor", "floor_keep", "read_state", "store_open")


def _child_load(mode: str, path: str) -> dict[str, Any]:
    """Runs in a fresh child: one read of ``path`` by ``mode``; CPU and wall seconds, peak RSS growth."""
    from fiskj.reader import read_state
    from fiskj.store import FileStore

    records = 0
    gc.collect()
    rss0 = _rss()["VmRSS"]
    wall, cpu = time.perf_counter(), time.process_time()
    if mode == "floor":
        loads = json.loads
        with open(path, "rb") as f:
            for line in f:
                loads(line)
                records += 1
    elif mode == "floor_keep":
        # What a fold must keep: the message and result objects.  Collector paused as read_state does.
        loads, kept = json.loads, []
        enabled = gc.isenabled()
        gc.disable()
        try:
            with open(path, "rb") as f:
                for line in f:
                    obj = loads(line)
                    records += 1
                    payload = obj.get("assistant") or obj.get("tool_result") or obj.get("user")
                    if payload is not None:
                        kept.append(payload.get("message") or payload.get("result"))
        finally:
            if enabled:
                gc.enable()
    elif mode == "read_state":
        state = read_state(path)
        records = state.records
    elif mode == "store_open":  # the resume path: FileStore.open folds the journal under the run lock
        journal = FileStore(os.path.dirname(path)).open(os.path.basename(path)[: -len(".json")])
        records = journal.last_seq
        journal.close()
    else:
        raise SystemExit(f"unknown load mode {mode!r}")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    after = _rss()
    peak = max(after["VmHWM"], after["VmRSS"])
    return {"mode": mode, "records": records, "cpu_s": cpu, "wall_s": wall, "peak_rss_delta": max(0, peak - rss0)}


def _rss() -> dict[str, int]:
    """VmRSS and VmHWM (peak) of this process in bytes, from /proc/self/status.

    Not ``getrusage``'s ``ru_maxrss``: Linux carries that over from the parent across fork and
    exec, so a child of a big parent would report the parent's size as its own peak.
    """
    out = {"VmRSS": 0, "VmHWM": 0}
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in out:
                    out[key] = int(value.split()[0]) * 1024
    except OSError:  # not Linux: ru_maxrss (KiB on Linux, bytes on macOS) as the peak
        out["VmHWM"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out


def _run_child(args: list[str], timeout: float = 600) -> dict[str, Any]:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", *args], capture_output=True,
                         text=True, timeout=timeout, cwd=str(ROOT))
    if out.returncode != 0:
        raise RuntimeError(f"bench child {args} failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_load(directory: str, *, sizes: tuple[int, ...] = (1_000, 100_000), rounds: int = 5
               ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Section 2: per size, ``rounds`` interleaved child runs of each mode; returns (rows, details)."""
    rows, details = [], {}
    base = tempfile.mkdtemp(prefix="fiskj-bench-load-", dir=directory)
    per_record: dict[int, float] = {}
    try:
        for n in sizes:
            path = os.path.join(base, f"journal-{n}.json")
            size = write_journal(path, n)
            store = os.path.join(base, f"store-{n}")
            os.mkdir(store, 0o700)
            os.link(path, os.path.join(store, "bench.json"))  # the same file, as a run of a store
            os.chmod(path, 0o600)
            with open(path, "rb") as f:  # into the page cache before the first timed read
                while f.read(1 << 24):
                    pass
            runs: dict[str, list[dict[str, Any]]] = {m: [] for m in _LOAD_MODES}
            modes = list(_LOAD_MODES)
            for r in range(rounds):
                for mode in modes[r % len(modes):] + modes[:r % len(modes)]:  # rotate the order each round
                    target = os.path.join(store, "bench.json") if mode == "store_open" else path
                    runs[mode].append(_run_child(["load", mode, target]))
            cpu = {m: median(x["cpu_s"] for x in v) for m, v in runs.items()}
            wall = {m: median(x["wall_s"] for x in v) for m, v in runs.items()}
            ratios = [s["cpu_s"] / f["cpu_s"] for s, f in zip(runs["read_state"], runs["floor"])]
            peak = median(x["peak_rss_delta"] for x in runs["read_state"])
            peak_keep = median(x["peak_rss_delta"] for x in runs["floor_keep"])
            rec = runs["read_state"][0]["records"]
            per_record[n] = cpu["read_state"] / rec
            details[f"load_{n}"] = {"records": rec, "bytes": size, "cpu_s": cpu, "wall_s": wall,
                                    "ratio_cpu_median_of_pairs": median(ratios),
                                    "ratio_wall": wall["read_state"] / wall["floor"],
                                    "peak_rss_delta": peak, "peak_rss_delta_floor_keep": peak_keep,
                                    "us_per_record": {m: cpu[m] / rec * 1e6 for m in cpu}}
            # each round ran the modes back to back: the median of the per-round ratios is the
            # figure least moved by the machine's load changing between rounds
            ratio = median(ratios)
            open_ratio = median(s["cpu_s"] / f["cpu_s"] for s, f in zip(runs["store_open"], runs["floor"]))
            label = f"{n:,}" if n < 1_000_000 else f"{n // 1_000_000}M"
            rows.append(row("load", f"read_state {label} rec: records/s (CPU)", rec / cpu["read_state"],
                            rec / cpu["floor"], unit="rec/s", ratio=ratio, target="<= 1.5x", met=ratio <= 1.5,
                            note=f"{cpu['read_state'] / rec * 1e6:.2f} vs {cpu['floor'] / rec * 1e6:.2f} us/rec "
                                 f"(medians; ratio = median of {len(ratios)} per-round ratios); json.loads keeping "
                                 f"what a fold keeps: {cpu['floor_keep'] / cpu['floor']:.2f}x"))
            rows.append(row("load", f"FileStore.open {label} rec (resume): records/s (CPU)", rec / cpu["store_open"],
                            rec / cpu["floor"], unit="rec/s", ratio=open_ratio, target="<= 1.5x",
                            met=open_ratio <= 1.5,
                            note=f"{cpu['store_open'] / rec * 1e6:.2f} us/rec; store.fold_open_file: same reader and "
                                 f"fold, collector not paused"))
            if n >= 10_000:  # below that the interpreter's own peak hides the read
                rows.append(row("load", f"read_state {label} rec: peak RSS / journal", peak / size, None, unit="x",
                                ratio=peak / size, target="<= 3x", met=peak / size <= 3,
                                note=f"{peak / 2**20:.0f} MiB for {size / 2**20:.0f} MiB; "
                                     f"json.loads keeping the same objects: {peak_keep / size:.2f}x"))
        if len(per_record) >= 2:
            small, big = min(per_record), max(per_record)
            growth = per_record[big] / per_record[small]
            mid = sorted(per_record)[len(per_record) // 2] if len(per_record) > 2 else small
            rows.append(row("load", f"per-record cost {big:,} vs {mid:,} rec", per_record[big] * 1e6,
                            per_record[mid] * 1e6, unit="us/rec", target="linear (<= 1.25x)",
                            met=per_record[big] / per_record[mid] <= 1.25,
                            note=f"{big:,} vs {small:,}: {growth:.2f}x; "
                                 + ", ".join(f"{k:,}: {v * 1e6:.2f}" for k, v in sorted(per_record.items()))))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return rows, details


# --- 3. campaign -----------------------------------------------------------------------------------

_POWER_LOSS_TOML = '''
name = "bench-power-loss"
purpose = "the power-loss bench: the small workload of tests/test_powerloss.py"
[workload]
turns = 1
tools_per_turn = 2
[faults]
family = "power_loss"
[trials]
count = 40
seed = 3
timeout_s = 60
'''


def _time_cmd(argv: list[str], n: int, env: dict[str, str] | None = None, stdin: bytes | None = None) -> float:
    """Median wall seconds of running ``argv`` to completion ``n`` times."""
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(argv, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
        out.append(time.perf_counter() - t)
    return median(out)


def _fork_exit(n: int) -> float:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        out.append(time.perf_counter() - t)
    return median(out)


def _fsync_latency(directory: str, n: int = 50) -> float:
    fd, path = tempfile.mkstemp(prefix="fiskj-bench-fsync-", dir=directory)
    try:
        out = []
        for _ in range(n):
            os.write(fd, b"x" * 300)
            t = time.perf_counter()
            os.fsync(fd)
            out.append(time.perf_counter() - t)
        return median(out)
    finally:
        os.close(fd)
        os.unlink(path)


def _model_call_latency(server: Any, n: int = 30) -> float:
    from fiskj.model import AnthropicClient
    from harness.server import Script, Turn, api_key

    session = server.open_session(Script(seed=1, turns=(Turn(text="hi"),)))
    try:
        client = AnthropicClient(server.base_url, api_key(session.token, 0))
        request = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "hello"}]}
        client.complete(request)
        out = []
        for _ in range(n):
            t = time.perf_counter()
            client.complete(request)
            out.append(time.perf_counter() - t)
        return median(out)
    finally:
        server.close_session(session.token)


def bench_campaign(*, trials: int = 24, scenario_name: str = "kill-every-event", jobs: int | None = None,
                   probe_n: int = 10, repeats: int = 1) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Section 3a: a kill campaign's trials/s and the share of each cost per trial; returns (rows, details)."""
    from harness.campaign import Campaign
    from harness.checkers import check_all
    from harness.runner import Runner
    from harness.scenario import bundled_scenario_dir, load_scenario
    from harness.workload import ledger_tool_path

    scenario = load_scenario(bundled_scenario_dir() / f"{scenario_name}.toml")
    jobs = jobs or os.cpu_count() or 1
    rows, details = [], {}
    with Runner() as runner:
        runner.reference(scenario)  # once, outside the timed campaigns (cached per runner)
        done, rates, wall = [], [], 0.0
        for _ in range(max(1, repeats)):
            t = time.perf_counter()
            result = Campaign([scenario], trials=trials, jobs=jobs, runner=runner, shrink_budget=0,
                              keep_histories=True).run()
            elapsed = time.perf_counter() - t
            if result.errors:
                raise RuntimeError(f"campaign errors: {result.errors}")
            done += result.trials
            rates.append(len(result.trials) / elapsed)
            wall += elapsed
        histories = [r.history for r in done if r.history is not None]
        # what one trial does, counted from its history
        legs = median(len(h.legs) for h in histories)
        tools = median(len(h.effects) for h in histories)
        calls = median(len(h.model_calls) for h in histories)
        syncs = median(sum(1 for leg in h.legs for ev in leg.trace if ev.get("op") in ("fsync", "fdatasync", "fsync_dir"))
                       for h in histories)
        trial_s = median(r.elapsed_s for r in done)
        legs_s = median(sum((leg.t_end - leg.t_start) / 1e9 for leg in h.legs) for h in histories)
        # each cost on its own
        check_s = []
        for h in histories:
            c = time.perf_counter()
            check_all(h, list(scenario.check.invariants))
            check_s.append(time.perf_counter() - c)
        py = sys.executable
        start_plain = _time_cmd([py, "-c", "pass"], probe_n)
        start_isolated = _time_cmd([py, "-I", "-S", "-c", "pass"], probe_n)
        start_fiskj = _time_cmd([py, "-c", "import fiskj.cli, fiskj.cli_run, fiskj.loop, fiskj.store"], probe_n)
        fork = _fork_exit(probe_n * 3)
        ledger_dir = tempfile.mkdtemp(prefix="fiskj-bench-ledger-", dir=runner.tmp_root)
        try:
            env = {"FISKJ_LEDGER": os.path.join(ledger_dir, "ledger.jsonl"), "PATH": os.environ.get("PATH", "")}
            tool_s = _time_cmd([py, "-I", "-S", ledger_tool_path(), "effect_a"], probe_n, env=env,
                               stdin=b'{"tool_use_id": "t1", "sleep_ms": 0}')
        finally:
            shutil.rmtree(ledger_dir, ignore_errors=True)
        model_s = _model_call_latency(runner.server, probe_n * 3)
        fsync_s = _fsync_latency(runner.tmp_root or tempfile.gettempdir())
        leg_start = fork if runner.fork_server else start_fiskj
    lo, hi = scenario.workload.tool_ms
    sleep_s = (lo + hi) / 2 / 1000
    inside = {
        "leg start (" + ("fork server" if runner.fork_server else "interpreter + imports") + ")": legs * leg_start,
        "tool processes (python -I -S + ledger fsync)": tools * tool_s,
        "tool sleep (scripted)": tools * sleep_s,
        "model server round trips": calls * model_s,
        f"fsync ({fs_type(runner.tmp_root or tempfile.gettempdir())})": syncs * fsync_s,
    }
    parts = dict(inside)
    parts["rest of the legs (fiskj CLI, loop, journal, trace; CPU contention)"] = max(0.0, legs_s - sum(inside.values()))
    parts["checking (check_all)"] = median(check_s)
    accounted = sum(parts.values())
    tps = median(rates)
    details["campaign"] = {"scenario": scenario.name, "trials": len(done), "jobs": jobs, "wall_s": wall,
                           "trials_per_s_runs": rates,
                           "trials_per_s": tps, "trial_median_s": trial_s, "legs_median_s": legs_s, "per_trial": {
                               "legs": legs, "tool_runs": tools, "model_calls": calls, "fsyncs": syncs},
                           "unit_costs_s": {"python -c pass": start_plain, "python -I -S -c pass": start_isolated,
                                            "python + fiskj imports": start_fiskj, "fork+exit": fork,
                                            "ledger tool run": tool_s, "model call": model_s, "fsync": fsync_s,
                                            "check_all": median(check_s)},
                           "shares": {k: v / trial_s for k, v in parts.items()},
                           "fork_server": runner.fork_server, "tmp_root": runner.tmp_root}
    rows.append(row("campaign", f"{scenario.name}: trials/s ({jobs} jobs)", tps, None, unit="trials/s",
                    target=">= 20/s", met=tps >= 20,
                    note=f"median of {len(rates)} campaign(s), {len(done)} trials in {wall:.1f} s (the plan: a kill "
                         f"after each IO-seam event); median trial {trial_s * 1e3:.0f} ms "
                         f"({legs:g} legs, {tools:g} tool runs, {calls:g} model calls, {syncs:g} fsyncs)"))
    for name, cost in parts.items():
        rows.append(row("campaign", f"  share: {name}", cost * 1e3, None, unit="ms/trial",
                        ratio=cost / trial_s, note=f"{cost / trial_s:.0%} of a median trial"))
    rows.append(row("campaign", "  share: harness outside the legs (setup, reading, folding, waits)",
                    max(0.0, trial_s - accounted) * 1e3, None, unit="ms/trial",
                    ratio=max(0.0, trial_s - accounted) / trial_s,
                    note=f"{max(0.0, trial_s - accounted) / trial_s:.0%}; python -c pass {start_plain * 1e3:.1f} ms, "
                         f"-I -S {start_isolated * 1e3:.1f} ms, fork+exit {fork * 1e3:.2f} ms"))
    return rows, details


def bench_crash_states(*, explore: int = 8, rounds: int = 3) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Section 3b: power-loss crash states built and I4-checked per second (pure), and explored per second."""
    from harness.crashstates import crash_points, lost_acknowledged
    from harness.powerloss import Params, run_power_loss
    from harness.runner import Runner
    from harness.scenario import parse_scenario

    scenario = parse_scenario(_POWER_LOSS_TOML)
    rows, details = [], {}
    with Runner() as runner:
        ref = runner.reference(scenario)
        trace = ref.history.legs[0].trace
        jpath = next(ev["path"] for ev in trace if str(ev.get("path") or "").endswith(".json"))
        home = str(Path(jpath).parents[2])
        rates, states = [], 0
        for _ in range(rounds):
            t = time.perf_counter()
            n = 0
            for point in crash_points(trace, {}, {home, str(Path(home).parent)}, seed=1):
                for state in point.states:
                    lost_acknowledged(state)
                    n += 1
            rates.append(n / (time.perf_counter() - t))
            states = n
        rate = median(rates)
        report = run_power_loss(scenario, runner=runner, params=Params(max_states=explore, seed=1))
        data = report.to_json()["crash_states"]
    details["crash_states"] = {"trace_events": len(trace), "states": states, "built_checked_per_s": rate,
                               "explored": data["explored"], "explored_per_s": data["explored_per_s"],
                               "report": data}
    rows.append(row("campaign", "power-loss crash states built + I4-checked/s", rate, None, unit="states/s",
                    target=">= 1,000/s", met=rate >= 1000,
                    note=f"{states} states of a {len(trace)}-event trace, pure (harness.crashstates)"))
    explored = data["explored_per_s"] or 0.0
    rows.append(row("campaign", "power-loss crash states explored/s (recovery leg each)", explored, None,
                    unit="states/s", target=">= 1,000/s", met=explored >= 1000,
                    note=f"{data['explored']} states, each a fresh `run --resume` process + check_all"))
    return rows, details


# --- 4. time to catch ----------------------------------------------------------------------------


def bench_catch(*, seeds: tuple[int | None, ...] = (None,), names: list[str] | None = None, budget_s: float = 60.0,
                jobs: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Section 4: per mutant of ``harness/mutants/``, the median time to its first detection over ``seeds``.

    Each run is the mutant self-test's campaign (:func:`harness.selftest.run_mutant`, its target
    scenario from :mod:`harness.mutants.targets`, no shrinking) with campaign seed ``seed``
    (``None``: the target's own); the time runs from the start of the campaign, reference run
    included, to the first violating trial judged.
    """
    from harness.mutants import mutants
    from harness.mutants.targets import TARGETS
    from harness.selftest import run_mutant

    rows, details = [], {}
    for mutant in mutants():
        if names is not None and mutant.name not in names:
            continue
        target = TARGETS.get(mutant.name)
        if target is None:
            rows.append(row("catch", mutant.name, None, unit="s", target="< 10 s", met=False,
                            note="no target in harness.mutants.targets"))
            continue
        times, caught, errors, by = [], [], [], set()
        for seed in seeds:
            result = run_mutant(mutant.name, budget_s=budget_s, jobs=jobs,
                                target=dataclasses.replace(target, seed=seed, shrink=0))
            caught.append(result.caught)
            if result.caught and result.first_detection_s is not None:
                times.append(result.first_detection_s)
            by.update(result.invariants)
            errors += result.errors
        med = median(times) if times else None
        details[mutant.name] = {"family": mutant.family, "scenario": target.scenario, "seeds": list(seeds),
                                "first_detection_s": times, "caught": caught, "invariants": sorted(by),
                                "errors": errors[:3]}
        ok = all(caught) and med is not None and med < 10
        rows.append(row("catch", mutant.name, med, None, unit="s", target="< 10 s", met=ok,
                        note=f"{sum(caught)}/{len(caught)} seed(s) caught by {','.join(sorted(by)) or '-'} "
                             f"on {target.scenario}; times " + ", ".join(f"{x:.1f}" for x in times)
                             + (f"; error: {errors[0][:120]}" if errors else "")))
    return rows, details


# --- the table ------------------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value != value:
            return "nan"
        if abs(value) >= 10_000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def format_table(rows: list[dict[str, Any]], markdown: bool = False) -> str:
    """The rows as a text (or Markdown) table: metric, subject, floor, ratio, unit, target, met, note."""
    head = ["section", "metric", "subject", "floor", "ratio", "unit", "target", "met", "note"]
    body = []
    for r in rows:
        ratio = r["ratio"]
        ratio_s = "-" if ratio is None else (f"{ratio:.0%}" if r["metric"].lstrip().startswith("share") else f"{ratio:.2f}x")
        met = "" if r["met"] is None else ("yes" if r["met"] else "NO")
        body.append([r["section"], r["metric"], _fmt(r["subject"]), _fmt(r["floor"]), ratio_s, r["unit"],
                     r["target"], met, r["note"]])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(c.replace("|", "/") for c in b) + " |" for b in body]
        return "\n".join(lines)
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    widths[-1] = len(head[-1])
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells[:-1], widths[:-1])) + "  " + cells[-1]  # noqa: E731
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(b) for b in body])


# --- main ----------------------------------------------------------------------------------------------


def run(sections: tuple[str, ...], cfg: dict[str, Any], directory: str,
        log: Callable[[str], None] = lambda s: None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run ``sections`` with config ``cfg`` (:data:`QUICK` / :data:`FULL`); returns (rows, details)."""
    rows: list[dict[str, Any]] = []
    details: dict[str, Any] = {}
    steps: list[tuple[str, Callable[[], tuple[list[dict[str, Any]], dict[str, Any]]]]] = []
    if "append" in sections:
        steps.append(("append", lambda: bench_append(directory, n=cfg["append_n"], long_journal=cfg["append_long"])))
    if "load" in sections:
        steps.append(("load", lambda: bench_load(directory, sizes=cfg["load_sizes"], rounds=cfg["load_rounds"])))
    if "campaign" in sections:
        steps.append(("campaign", lambda: bench_campaign(trials=cfg["campaign_trials"],
                                                         repeats=cfg["campaign_repeats"])))
        steps.append(("crash states", lambda: bench_crash_states(explore=cfg["powerloss_states"])))
    if "catch" in sections:
        steps.append(("catch", lambda: bench_catch(seeds=cfg["catch_seeds"])))
    for name, step in steps:
        t = time.perf_counter()
        log(f"bench: {name} ...")
        try:
            r, d = step()
        except Exception as exc:  # a section that cannot run is reported, the others still run
            r = [row(name.split()[0], f"{name}: not measured", None, note=f"{type(exc).__name__}: {exc}"[:300])]
            d = {"error": f"{type(exc).__name__}: {exc}"}
        rows += r
        details.update(d)
        log(f"bench: {name} done in {time.perf_counter() - t:.1f} s")
    return rows, details


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        kind, *rest = argv[1:]
        if kind == "load":
            print(json.dumps(_child_load(*rest)))
            return 0
        raise SystemExit(f"unknown child {kind!r}")
    ap = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, 1 seed: under 2 minutes")
    ap.add_argument("--json", metavar="FILE", help="also write the rows, the machine and the details as JSON")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"sections to run (default: {','.join(SECTIONS)})")
    ap.add_argument("--dir", default=tempfile.gettempdir(),
                    help="directory on the file system under test for append and load (default: the temp dir)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = ap.parse_args(argv)
    sections = tuple(s.strip() for s in args.only.split(",") if s.strip())
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown section(s) {sorted(unknown)}; known: {', '.join(SECTIONS)}")
    cfg = QUICK if args.quick else FULL
    machine = machine_info(args.dir)
    started = time.perf_counter()
    rows, details = run(sections, cfg, args.dir, log=lambda s: print(s, file=sys.stderr, flush=True))
    elapsed = time.perf_counter() - started
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    print(f"fiskj bench ({'quick' if args.quick else 'full'}, {elapsed:.0f} s): {machine['nproc']} x {machine['cpu']}, "
          f"Linux {machine['kernel']}, Python {machine['python']}, {machine['fs']} ({machine['dir']}), "
          f"load {machine['loadavg']} -> {machine['loadavg_end']}")
    print(format_table(rows, markdown=args.markdown))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": machine, "mode": "quick" if args.quick else "full", "elapsed_s": elapsed,
                       "rows": rows, "details": details}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
