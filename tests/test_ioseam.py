import base64
import errno
import fcntl
import json
import os
import signal
import subprocess
import sys

import pytest

from fiskj import ioseam
from fiskj.errors import UsageError
from fiskj.store import FileStore

from builders import A, M, R, T

APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC


pytestmark = pytest.mark.usefixtures("plain_seam")


def read_trace(path):
    return [json.loads(line) for line in open(path, "rb").read().splitlines()]


def run_child(code, env_extra, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FISKJ_IOSEAM")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, timeout=30)


def test_with_no_variable_set_the_seam_is_the_plain_os_functions(tmp_path):
    code = ("import os, fcntl; from fiskj import ioseam as s\n"
            "assert (s.open, s.write, s.fsync, s.fdatasync, s.ftruncate, s.rename, s.mkdir, s.flock, s.close, s.unlink)"
            " == (os.open, os.write, os.fsync, os.fdatasync, os.ftruncate, os.rename, os.mkdir, fcntl.flock,"
            " os.close, os.unlink)\nassert not s.active()")
    proc = run_child(code, {}, tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()


def test_the_trace_has_one_line_per_call_with_path_offset_and_bytes(tmp_path):
    trace = tmp_path / "trace.jsonl"
    ioseam.configure(trace=str(trace))
    target = str(tmp_path / "f")
    fd = ioseam.open(target, APPEND, 0o600)
    assert ioseam.write(fd, b"hello\n") == 6
    ioseam.fsync(fd)
    ioseam.write(fd, b"world\n")
    ioseam.fdatasync(fd)
    ioseam.ftruncate(fd, 8)
    ioseam.close(fd)
    ioseam.rename(target, target + "2")
    ioseam.mkdir(str(tmp_path / "d"), 0o700)
    ioseam.fsync_dir(str(tmp_path))
    ioseam.unlink(target + "2")
    lines = read_trace(trace)
    assert [l["n"] for l in lines] == list(range(1, 12))
    assert [l["op"] for l in lines] == ["open", "write", "fsync", "write", "fdatasync", "ftruncate", "close",
                                        "rename", "mkdir", "fsync_dir", "unlink"]
    opened = lines[0]
    assert opened["path"] == target and opened["created"] is True and opened["mode"] == 0o600
    assert opened["flags"] == ["O_WRONLY", "O_CREAT", "O_APPEND", "O_CLOEXEC"]
    assert lines[1] == {**lines[1], "path": target, "fd": fd, "offset": 0, "len": 6,
                        "data": base64.b64encode(b"hello\n").decode()}
    assert lines[3]["offset"] == 6
    assert lines[5]["length"] == 8 and lines[5]["path"] == target
    assert lines[6]["path"] == target
    assert (lines[7]["src"], lines[7]["dst"]) == (target, target + "2")
    assert lines[8]["mode"] == 0o700 and lines[9]["path"] == str(tmp_path)
    assert all("pid" in l for l in lines)


def test_a_reopened_file_is_traced_as_not_created_and_offsets_follow_the_file(tmp_path):
    target = tmp_path / "f"
    target.write_bytes(b"abc")
    ioseam.configure(trace=str(tmp_path / "t"))
    fd = ioseam.open(str(target), APPEND, 0o600)
    ioseam.write(fd, b"de")
    ioseam.close(fd)
    opened, written, _ = read_trace(tmp_path / "t")
    assert opened["created"] is False
    assert written["offset"] == 3


def test_a_failing_call_is_traced_with_its_errno_name(tmp_path):
    ioseam.configure(trace=str(tmp_path / "t"))
    with pytest.raises(FileNotFoundError):
        ioseam.open(str(tmp_path / "missing" / "f"), os.O_RDONLY)
    (line,) = read_trace(tmp_path / "t")
    assert line["error"] == "ENOENT" and line["created"] is False


def test_flock_is_traced_with_its_operation_names(tmp_path):
    ioseam.configure(trace=str(tmp_path / "t"))
    fd = ioseam.open(str(tmp_path / "l"), os.O_RDWR | os.O_CREAT, 0o600)
    ioseam.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    ioseam.close(fd)
    assert read_trace(tmp_path / "t")[1]["operation"] == ["LOCK_EX", "LOCK_NB"]


def test_replaying_the_trace_of_a_short_run_rebuilds_the_journal_byte_for_byte(tmp_path):
    trace = tmp_path / "trace.jsonl"
    ioseam.configure(trace=str(trace))
    store = FileStore(tmp_path / "state" / "runs")
    with store.create("r1", M()) as journal:
        journal.append(A("a"))
        journal.append(R("a"))
        journal.append(A(text="ok", iteration=1))
    lines = read_trace(trace)
    ops = [(l["op"], os.path.basename(l["path"])) for l in lines]
    assert ops == [("mkdir", "state"), ("fsync_dir", str(tmp_path.name)), ("mkdir", "runs"), ("fsync_dir", "state"),
                   ("open", "r1.lock"), ("flock", "r1.lock"), ("open", "r1.json"),
                   ("write", "r1.json"), ("fsync", "r1.json"), ("fsync_dir", "runs"),
                   ("write", "r1.json"), ("fsync", "r1.json"), ("write", "r1.json"), ("fsync", "r1.json"),
                   ("write", "r1.json"), ("fsync", "r1.json"), ("close", "r1.json"), ("close", "r1.lock")]
    rebuilt = bytearray()
    for line in lines:
        if line["op"] == "write":
            assert line["offset"] == len(rebuilt)
            rebuilt += base64.b64decode(line["data"])
    assert bytes(rebuilt) == (tmp_path / "state" / "runs" / "r1.json").read_bytes()


@pytest.mark.parametrize("value, why", [
    ("eio", "no '@'"), ("boom@1", "unknown action"), ("eio@0", "K must be"), ("eio@x", "K must be"),
    ("eio@-1", "K must be"), ("eio@2:sync", "unknown op"), ("eio@2:", "unknown op"), ("", "no .@."), ("eio@1:fsync:x", "unknown op"),
])
def test_a_malformed_fault_is_a_clear_usage_error(value, why):
    with pytest.raises(UsageError, match=why) as info:
        ioseam.parse_fault(value)
    assert "ACTION@K[:OP]" in str(info.value)


def test_a_malformed_variable_fails_at_import_naming_it(tmp_path):
    proc = run_child("import fiskj.ioseam", {"FISKJ_IOSEAM_FAULT": "kill@x"}, tmp_path)
    assert proc.returncode != 0
    assert b"FISKJ_IOSEAM_FAULT='kill@x' is malformed" in proc.stderr
    proc = run_child("import fiskj.ioseam", {"FISKJ_IOSEAM_TRACE": "relative.jsonl"}, tmp_path)
    assert proc.returncode != 0 and b"must be an absolute path" in proc.stderr


def test_a_well_formed_fault_parses_to_action_count_and_op():
    fault = ioseam.parse_fault("short-write@3:write")
    assert (fault.action, fault.k, fault.op) == ("short-write", 3, "write")
    assert ioseam.parse_fault("kill-after@12").op is None


@pytest.mark.parametrize("action, code", [("eio", errno.EIO), ("enospc", errno.ENOSPC)])
def test_an_injected_error_replaces_the_kth_call_of_its_op(tmp_path, action, code):
    ioseam.configure(trace=str(tmp_path / "t"), fault=f"{action}@2:fsync")
    fd = ioseam.open(str(tmp_path / "f"), APPEND, 0o600)
    ioseam.fsync(fd)
    with pytest.raises(OSError) as info:
        ioseam.fsync(fd)
    assert info.value.errno == code
    ioseam.fsync(fd)  # only the K-th call fails
    ioseam.close(fd)
    failed = read_trace(tmp_path / "t")[2]
    assert failed["op"] == "fsync" and failed["error"] == errno.errorcode[code] and failed["fault"] == action


def test_without_an_op_the_fault_counts_every_seam_call(tmp_path):
    ioseam.configure(fault="eio@2")
    fd = ioseam.open(str(tmp_path / "f"), APPEND, 0o600)
    with pytest.raises(OSError) as info:
        ioseam.write(fd, b"x")
    assert info.value.errno == errno.EIO
    os.close(fd)
    assert (tmp_path / "f").read_bytes() == b""


def test_a_short_write_puts_the_first_half_in_the_file_then_raises_enospc(tmp_path):
    ioseam.configure(trace=str(tmp_path / "t"), fault="short-write@1:write")
    fd = ioseam.open(str(tmp_path / "f"), APPEND, 0o600)
    with pytest.raises(OSError) as info:
        ioseam.write(fd, b"0123456789")
    assert info.value.errno == errno.ENOSPC
    ioseam.close(fd)
    assert (tmp_path / "f").read_bytes() == b"01234"
    line = read_trace(tmp_path / "t")[1]
    assert (line["len"], base64.b64decode(line["data"]), line["error"]) == (5, b"01234", "ENOSPC")


WRITE_CHILD = """
import os, sys
from fiskj import ioseam
fd = ioseam.open(sys.argv[1] if len(sys.argv) > 1 else "f", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
ioseam.write(fd, b"first\\n")
ioseam.write(fd, b"second\\n")
print("survived", flush=True)
"""


@pytest.mark.parametrize("action, content", [("kill-before", b"first\n"), ("kill-after", b"first\nsecond\n")])
def test_a_kill_fault_sigkills_the_process_before_or_after_the_call(tmp_path, action, content):
    trace = tmp_path / "t"
    proc = run_child(WRITE_CHILD, {"FISKJ_IOSEAM_FAULT": f"{action}@2:write", "FISKJ_IOSEAM_TRACE": str(trace)},
                     tmp_path)
    assert proc.returncode == -signal.SIGKILL
    assert b"survived" not in proc.stdout
    assert (tmp_path / "f").read_bytes() == content
    writes = [l for l in read_trace(trace) if l["op"] == "write"]
    assert len(writes) == (1 if action == "kill-before" else 2)


SUSPEND_CHILD = """
import os, signal, sys
from fiskj import ioseam
got = []
signal.signal(signal.SIGINT, lambda s, f: got.append("SIGINT"))
signal.signal(signal.SIGTERM, lambda s, f: got.append("SIGTERM"))
fd = ioseam.open("f", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
done = 0
while not got and done < 4:
    ioseam.write(fd, b"r%d\\n" % done)
    done += 1
print(got, done, flush=True)
"""


@pytest.mark.parametrize("fault, out", [("sigint-after@2:write", "['SIGINT'] 2"), ("sigterm-after@1:write", "['SIGTERM'] 1"),
                                        ("sigterm-after@2", "['SIGTERM'] 1"), ("sigint-after@9:write", "[] 4")])
def test_a_signal_after_fault_signals_the_process_right_after_the_kth_call(tmp_path, fault, out):
    trace = tmp_path / "t"
    proc = run_child(SUSPEND_CHILD, {"FISKJ_IOSEAM_FAULT": fault, "FISKJ_IOSEAM_TRACE": str(trace)}, tmp_path)
    assert proc.returncode == 0 and proc.stdout.decode().strip() == out
    marked = [(l["op"], l["fault"]) for l in read_trace(trace) if l.get("fault")]
    assert marked == ([] if "@9" in fault else [("write", fault.split("@")[0])])  # the call it came after


def test_the_trace_variable_traces_a_child_process(tmp_path):
    trace = tmp_path / "t"
    proc = run_child(WRITE_CHILD, {"FISKJ_IOSEAM_TRACE": str(trace)}, tmp_path)
    assert proc.returncode == 0
    assert [l["op"] for l in read_trace(trace)] == ["open", "write", "write"]
    assert read_trace(trace)[2]["offset"] == len(b"first\n")


PUBLISH_CHILD = """
import os, sys
from fiskj import ioseam
for i in range(3):
    ioseam.published("nats://h:1/S p.r.>", b"r%d\\n" % i)
print("continued", flush=True)
"""


def test_a_stop_after_publish_fault_stops_the_process_right_after_its_kth_acknowledged_publish(tmp_path):
    trace = tmp_path / "t"
    env = {**os.environ, "FISKJ_IOSEAM_FAULT": "stop-after@2:publish", "FISKJ_IOSEAM_TRACE": str(trace)}
    proc = subprocess.Popen([sys.executable, "-c", PUBLISH_CHILD], env=env, cwd=tmp_path, stdout=subprocess.PIPE)
    _, status = os.waitpid(proc.pid, os.WUNTRACED)  # stopped, not ended: the harness holds it there
    assert os.WIFSTOPPED(status) and os.WSTOPSIG(status) == signal.SIGSTOP
    assert [(l["op"], l.get("fault")) for l in read_trace(trace)] == [("publish", None), ("publish", "stop-after")]
    os.kill(proc.pid, signal.SIGCONT)
    assert proc.communicate(timeout=30)[0] == b"continued\n" and proc.returncode == 0
    assert len(read_trace(trace)) == 3
    assert ioseam.parse_fault("stop-after@2:publish").op == "publish"
