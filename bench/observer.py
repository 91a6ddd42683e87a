#!/usr/bin/env python3
"""The outside observer's cost (harness/observer, docs/observer.md), against the bare floor.

    python3 bench/observer.py [--quick] [--json FILE] [--markdown]

1. Per-append latency: one write of a ~300-byte line + fsync, timed inside a
   child process with ``time.perf_counter``, four ways: *bare* (``os.write`` +
   ``os.fsync``), *observed* (the same child run under ``fiskj-observe`` with
   the directory as its root, so both calls are recorded with their bytes),
   *stopped* (under the tracer with a root elsewhere: both calls stop at the
   filter and are let through, the cost of the mechanism alone) and *seam*
   (``fiskj.ioseam.write`` + ``fsync`` with a trace, what fiskj's own IO seam
   costs).  On ext4 (``/tmp``) and tmpfs (``/dev/shm``).  They run
   interleaved: every round starts one child of each kind, in a rotating order,
   each doing ``n`` appends after a warm-up; medians over all appends, and the
   median of the per-round ratios (the disk's load in one round cancels).
   Target: observed at most 3x bare.
2. Process start: wall time from ``Popen`` to ``wait`` of ``/bin/true`` and of
   ``python -c pass`` (which makes a few hundred stat/read/open calls the
   filter stops on, none under the root), bare and under the tracer,
   interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import format_table, machine_info, median, row  # noqa: E402

LINE = (b'{"seq":1,"protocol":"io.choria.fisk-ai.v1.session.tool_result","tool_result":{"tool_use_id":"toolu_01",'
        b'"result":{"type":"tool_result","tool_use_id":"toolu_01","content":"' + b"x" * 150 + b'"}}}\n')
TARGET = "<= 3x"


# --- the child: n appends, latencies in ns on stdout --------------------------------------------------


def _child(mode: str, directory: str, n: int) -> list[int]:
    """Runs in a fresh process (bare or under the tracer): ``n`` timed appends after 5 warm-up ones."""
    path = os.path.join(directory, f"append-{mode}-{os.getpid()}.log")
    write, fsync = os.write, os.fsync
    if mode == "seam":
        from fiskj import ioseam

        ioseam.configure(trace=os.path.join(directory, f"seam-{os.getpid()}.jsonl"))
        write, fsync = ioseam.write, ioseam.fsync
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    clock, out = time.perf_counter_ns, []
    for i in range(n + 5):
        t = clock()
        write(fd, LINE)
        fsync(fd)
        if i >= 5:
            out.append(clock() - t)
    os.close(fd)
    return out


def _run_child(mode: str, directory: str, n: int, binary: str | None) -> list[int]:
    argv = [sys.executable, os.path.abspath(__file__), "--child", "seam" if mode == "seam" else "bare", directory,
            str(n)]
    if mode in ("observed", "stopped"):
        log = os.path.join(directory, f"observer-{os.getpid()}-{time.monotonic_ns()}.log")
        root = directory if mode == "observed" else os.path.join(directory, "no-such-root")
        argv = [str(binary), "--log", log, "--root", root, "--"] + argv
    env = {k: v for k, v in os.environ.items() if not k.startswith("FISKJ_")}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, timeout=300).stdout
    return json.loads(out)


def bench_append_observed(directory: str, *, n: int, rounds: int, binary: str) -> tuple[dict[str, Any], list[dict]]:
    """Section 1 on ``directory``'s file system: latencies bare / observed / seam."""
    base = tempfile.mkdtemp(prefix="fiskj-bench-observer-", dir=directory)
    modes = ("bare", "observed", "stopped", "seam")
    lat: dict[str, list[int]] = {m: [] for m in modes}
    per_round: dict[str, list[float]] = {m: [] for m in modes[1:]}
    try:
        for r in range(rounds):
            got = {}
            for mode in modes[r % 4:] + modes[:r % 4]:  # rotating order
                got[mode] = _run_child(mode, base, n, binary)
                lat[mode] += got[mode]
            for mode in per_round:
                per_round[mode].append(median(got[mode]) / median(got["bare"]))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    from bench.common import fs_type

    fs = fs_type(directory)
    us = {m: median(v) / 1000 for m, v in lat.items()}
    ratio = {m: median(per_round[m]) for m in per_round}
    details = {"fs": fs, "dir": directory, "n_per_round": n, "rounds": rounds, "median_us": us,
               "p90_us": {m: sorted(v)[int(len(v) * 0.9)] / 1000 for m, v in lat.items() if v},
               "ratio_median_of_rounds": ratio, "ratio_of_medians": {m: us[m] / us["bare"] for m in per_round}}
    rows = [row("observer", f"append 300 B + fsync under the tracer ({fs})", us["observed"], us["bare"], unit="us",
                ratio=ratio["observed"], target=TARGET, met=ratio["observed"] <= 3,
                note=f"{rounds} rounds x {n}; ratio = median of per-round median ratios; "
                     f"ratio of medians {us['observed'] / us['bare']:.2f}x"),
            row("observer", f"append 300 B + fsync under the tracer, root elsewhere ({fs})", us["stopped"], us["bare"],
                unit="us", ratio=ratio["stopped"],
                note="both calls stopped by the filter but not recorded: the cost of the ptrace stops alone"),
            row("observer", f"append 300 B + fsync through the IO seam with a trace ({fs})", us["seam"], us["bare"],
                unit="us", ratio=ratio["seam"], note="fiskj.ioseam traced wrappers, same child, no tracer")]
    return details, rows


def _start_time(argv: list[str], binary: str | None, log_dir: str) -> float:
    if binary:
        argv = [binary, "--log", os.path.join(log_dir, "start.log"), "--root", log_dir, "--"] + argv
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def bench_start(*, rounds: int, binary: str) -> tuple[dict[str, Any], list[dict]]:
    """Section 2: process start, bare vs under the tracer, interleaved."""
    log_dir = tempfile.mkdtemp(prefix="fiskj-bench-observer-start-")
    details, rows = {}, []
    try:
        for name, argv in (("/bin/true", ["/bin/true"]), ("python -c pass", [sys.executable, "-c", "pass"])):
            bare, traced = [], []
            for r in range(rounds):
                for kind in (("bare", "traced") if r % 2 else ("traced", "bare")):
                    (bare if kind == "bare" else traced).append(
                        _start_time(argv, None if kind == "bare" else binary, log_dir))
            b, t = median(bare) * 1e3, median(traced) * 1e3
            details[name] = {"bare_ms": b, "observed_ms": t, "rounds": rounds}
            rows.append(row("observer", f"start {name} under the tracer", t, b, unit="ms",
                            note=f"wall time Popen to wait, {rounds} each, interleaved; +{t - b:.2f} ms"))
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    return details, rows


def bench_observer(dirs: tuple[str, ...] = ("/tmp", "/dev/shm"), *, n: int = 200, rounds: int = 9,
                   start_rounds: int = 20) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Both sections; ``dirs`` that do not exist are left out.  Returns (rows, details)."""
    from harness.observer import observer_binary

    binary = str(observer_binary())
    rows: list[dict[str, Any]] = []
    details: dict[str, Any] = {"observer_append": {}}
    for d in dirs:
        if os.path.isdir(d) and os.access(d, os.W_OK):
            det, r = bench_append_observed(d, n=n, rounds=rounds, binary=binary)
            details["observer_append"][d] = det
            rows += r
    det, r = bench_start(rounds=start_rounds, binary=binary)
    details["observer_start"] = det
    rows += r
    return rows, details


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        mode, directory, n = argv[1:4]
        print(json.dumps(_child(mode, directory, int(n))))
        return 0
    ap = argparse.ArgumentParser(prog="bench/observer.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds (about 20 s)")
    ap.add_argument("--json", metavar="FILE", help="also write rows, machine and details as JSON")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = ap.parse_args(argv)
    kw = dict(n=100, rounds=5, start_rounds=10) if args.quick else dict(n=300, rounds=11, start_rounds=30)
    machine = machine_info("/tmp")
    rows, details = bench_observer(**kw)  # type: ignore[arg-type]
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    print(f"fiskj observer bench: {machine['nproc']} x {machine['cpu']}, Linux {machine['kernel']}, "
          f"load {machine['loadavg']} -> {machine['loadavg_end']}")
    print(format_table(rows, markdown=args.markdown))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": machine, "rows": rows, "details": details}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
