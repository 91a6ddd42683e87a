"""Section 2 of the bench: read_state and FileStore.open vs json.loads, in fresh child processes."""

from __future__ import annotations

import gc
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from bench.common import ROOT, median, row
from bench.journals import write_journal



# --- 2. load and fold ---------------------------------------------------------------------------

_LOAD_MODES = ("floor", "floor_keep", "read_state", "store_open")

#: The entry point whose ``--child load MODE PATH`` runs :func:`_child_load` in a fresh process.
_RUN_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run.py")


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
    out = subprocess.run([sys.executable, _RUN_PY, "--child", *args], capture_output=True,
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
