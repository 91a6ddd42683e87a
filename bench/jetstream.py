"""Section ``jetstream`` of the bench: JetStreamStore appends vs the server's own publish+ack floor (issue 28).

One nats-server on loopback with ``sync_interval: always`` (each stored message fsynced before its ack), one
R1 stream, one :class:`fiskj.jetstream.JetStreamStore`.  Each pair, order alternating: ``Journal.append`` of a
record, and a bare ``js.publish`` of the same bytes (no headers, no fence) to a fresh subject of the same
stream over the same connection.  The floor's own time inside the event loop is reported too (what the
thread hop of :class:`fiskj.jetstream.NatsClient` adds).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from typing import Any

from fiskj.codec import encode_record

from bench.append import _paired_ratio, _pct, _sized_pair
from bench.common import median, row
from bench.journals import meta_record


def bench_jetstream(directory: str, *, n: int = 200, sizes: tuple[int, ...] = (300, 4096)
                    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The section: ``n`` pairs per record size; the server's store in ``directory``.  Returns (rows, details)."""
    from fiskj.jetstream import JetStreamStore
    from harness.subject.nats_server import add_stream, start_server

    base = tempfile.mkdtemp(prefix="fiskj-bench-js-", dir=directory)
    server = start_server(base, sync_interval="always")
    rows, details = [], {}
    try:
        add_stream([server.url], "BENCH", prefix="bench")
        with JetStreamStore(f"{server.url}/BENCH?allow_single_replica=1") as store:
            client = store.client

            async def bare(subject: str, body: bytes) -> float:
                t = time.perf_counter()
                await client.js.publish(subject, body)
                return time.perf_counter() - t

            for size in sizes:
                journal = store.create(f"b{size}", meta_record(f"b{size}"))
                records = [r for k in range(n // 2 + 4) for r in _sized_pair(size, k)]
                subj, flr, inner, nbytes = [], [], [], 0
                for i, record in enumerate(records):
                    line = encode_record(record, journal.last_seq + 1)
                    for first in ((0, 1) if i % 2 else (1, 0)):
                        t = time.perf_counter()
                        if first:
                            journal.append(record)
                            subj.append(time.perf_counter() - t)
                        else:
                            inner.append(client.run(bare(f"bench.floor{size}.{i}", line[:-1])))
                            flr.append(time.perf_counter() - t)
                    nbytes += len(line)
                subj, flr, inner = subj[8:], flr[8:], inner[8:]  # the first pairs warm up
                ms, mf, ratio = median(subj), median(flr), _paired_ratio(subj, flr)
                details[f"jetstream_{size}"] = {"n": len(subj), "line_bytes": nbytes / len(records),
                                                "subject_us": ms * 1e6, "floor_us": mf * 1e6,
                                                "floor_in_loop_us": median(inner) * 1e6,
                                                "subject_p90_us": _pct(subj, 90) * 1e6,
                                                "floor_p90_us": _pct(flr, 90) * 1e6, "ratio_paired": ratio}
                rows.append(row("jetstream", f"append {nbytes / len(records):.0f} B, sync always: median latency",
                                ms * 1e6, mf * 1e6, unit="us", ratio=ratio,
                                note=f"n={len(subj)} pairs; floor = bare js.publish + ack of the same bytes "
                                     f"({median(inner) * 1e6:.0f} us of it inside the event loop); ratio = 1 + "
                                     f"median(paired difference) / floor median; ratio of medians {ms / mf:.2f}x"))
                journal.close()
    finally:
        server.stop(signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)
    details["jetstream_fs"] = os.path.realpath(directory)
    return rows, details
