"""harness.observer.trace: the observed operations of a leg, as the IO-seam trace the checkers read.

The differential test: for the reference agent, the trace built from the
outside record and the agent's own IO-seam trace agree op for op and byte
for byte (the seam's composite ``fsync_dir`` is the observer's open, fsync
of the directory and close).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import pytest

from harness.observer import spawn_observed
from harness.observer.ops import Op
from harness.observer.trace import error_name, ops_to_trace


def _observed_reference_run(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    seam = tmp_path / "seam.jsonl"
    env = dict(os.environ, XDG_STATE_HOME=str(state), FISKJ_IOSEAM_TRACE=str(seam))
    proc = spawn_observed([sys.executable, "-m", "fiskj", "run", "--checkpoint", "--model", "scripted:3",
                           "--name", "r1", "count"], env=env, cwd=str(tmp_path), log=str(tmp_path / "ops.jsonl"),
                          roots=[str(state)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert proc.wait(timeout=60) == 0
    return ops_to_trace(proc.ops()), [json.loads(line) for line in seam.read_bytes().splitlines()]


def _collapse_dir_syncs(trace):
    """The observer's open(dir) + fsync_dir + close(dir) as the seam's one fsync_dir."""
    out, open_dirs = [], set()
    for e in trace:
        key = (e["pid"], e.get("fd"))
        if e["op"] == "open" and "O_DIRECTORY" in e.get("flags", []):
            open_dirs.add(key)
            continue
        if e["op"] == "close" and key in open_dirs:
            open_dirs.discard(key)
            continue
        out.append(e)
    return out


def test_the_observed_trace_of_the_reference_agrees_with_its_seam_trace_op_for_op_and_byte_for_byte(tmp_path):
    observed, seam = _observed_reference_run(tmp_path)
    observed = _collapse_dir_syncs(observed)
    assert [e["op"] for e in observed] == [e["op"] for e in seam]
    for o, s in zip(observed, seam):
        assert o["path"] == s["path"], (o, s)
        if s["op"] == "write":
            assert (o["offset"], o["len"], o["data"]) == (s["offset"], s["len"], s["data"])
        if s["op"] == "open":
            assert (o["created"], set(o["flags"]) >= set(s["flags"]) - {"O_LARGEFILE"}) == (s["created"], True)
        if s["op"] == "flock":
            assert o["operation"] == s["operation"]
    journal = (tmp_path / "state" / "fisk-ai" / "runs" / "r1.json").read_bytes()
    assert b"".join(base64.b64decode(e["data"]) for e in observed if e["op"] == "write"
                    and e["path"].endswith("r1.json")) == journal


def test_every_counted_op_is_one_event_numbered_in_entry_order_and_a_call_that_never_returned_is_marked():
    ops = [Op("write", seq=3, pid=1, tid=2, path="/s/j", fd=5, off=10, len=2, data=b"hi", ret=2, errno=0, t0=5, t1=6),
           Op("stat", seq=2, pid=1, tid=1, path="/s/j", ret=0, errno=0, t0=3, t1=4),
           Op("fsync", seq=1, pid=1, tid=1, path="/s", fd=4, dir=True, ret=0, errno=0, t0=1, t1=2),
           Op("fsync", seq=4, pid=1, tid=2, path="/s/j", fd=5, ret=None, errno=0, t0=7, t1=9),
           Op("open", seq=5, pid=1, tid=1, path="/s/k", flags_s="O_WRONLY|O_CREAT|O_EXCL", created=False,
              ret=-1, errno=17, t0=10, t1=11),
           Op("exit", pid=1, tid=1, code=0, t=12)]
    trace = ops_to_trace(ops)
    assert [(e["n"], e["op"]) for e in trace] == [(1, "fsync_dir"), (2, "write"), (3, "fsync"), (4, "open")]
    assert trace[1]["offset"] == 10 and base64.b64decode(trace[1]["data"]) == b"hi" and trace[1]["t"] == 6
    assert trace[2]["error"] == "KILLED" and trace[3]["error"] == "EEXIST" and trace[3]["flags"][1] == "O_CREAT"
    assert error_name(0) is None and error_name(5) == "EIO" and error_name(512) == "ERESTART512"
    (cut,) = ops_to_trace([Op("write", seq=1, pid=1, tid=1, path="/s/j", fd=5, off=4, count=30, ret=None, errno=0,
                              t0=1, t1=2)])
    assert (cut["error"], cut["offset"], cut["len"], cut["count"]) == ("KILLED", 4, 0, 30)  # 0..30 bytes written


@pytest.mark.parametrize("bad", [None, 0])
def test_no_error_name_for_success(bad):
    assert error_name(bad) is None
