"""The IO seam: every durability-relevant system call of fiskj goes through here.

Calls: :func:`open`, :func:`write`, :func:`fsync`, :func:`fdatasync`,
:func:`ftruncate`, :func:`rename`, :func:`mkdir`, :func:`fsync_dir`,
:func:`flock`, :func:`close`, :func:`unlink`.  Callers must look them up
at call time (``ioseam.write(fd, data)``, never ``from fiskj.ioseam import
write``) so that :func:`configure` can swap them.

With neither variable below set, the names are bound straight to the
``os``/``fcntl`` functions: the seam costs nothing.  Two variables, read
once at import (docs/ioseam.md has the full format and an example):

* ``FISKJ_IOSEAM_TRACE=/abs/file``: append one JSON line per completed call
  (path, fd, offset, base64 data, ...) to that file.  The harness's
  power-loss simulator replays it.
* ``FISKJ_IOSEAM_FAULT=ACTION@K[:OP]``: at the K-th seam call (1-based,
  counting only OP calls when OP is given) do ACTION: ``kill-before``,
  ``kill-after`` (SIGKILL to this process before/after the real call),
  ``sigint-after``, ``sigterm-after`` (that signal to this process after the
  real call: a suspend request landing at a durability event),
  ``stop-after`` (SIGSTOP to this process after the real call: the harness holds it
  there and continues it with SIGCONT, a race's sequence point; ``:publish`` counts the
  JetStream appends the server acknowledged, :func:`published`),
  ``eio``, ``enospc`` (raise that ``OSError`` instead of the call),
  ``short-write`` (write the first half of the bytes, then raise ENOSPC;
  on a call that is not a write it acts as ``enospc``).

A malformed value raises :class:`fiskj.errors.UsageError` at import.
"""

from __future__ import annotations

import base64
import errno as _errno
import fcntl
import json
import os
import signal
import time
import stat
import threading
from typing import Any

from .errors import UsageError

__all__ = [
    "OPS", "FAULT_OPS", "ACTIONS", "TRACE_ENV", "FAULT_ENV", "Fault", "parse_fault", "configure",
    "active", "open", "write", "fsync", "fdatasync", "ftruncate", "rename", "mkdir",
    "fsync_dir", "flock", "close", "unlink",
]

TRACE_ENV = "FISKJ_IOSEAM_TRACE"
FAULT_ENV = "FISKJ_IOSEAM_FAULT"

#: Seam operations, as named in traces and in ``FISKJ_IOSEAM_FAULT``'s ``:OP``.
OPS = ("open", "write", "fsync", "fdatasync", "ftruncate", "rename", "mkdir",
       "fsync_dir", "flock", "close", "unlink")
#: Fault actions of ``FISKJ_IOSEAM_FAULT``.
ACTIONS = ("kill-before", "kill-after", "eio", "enospc", "short-write", "sigint-after", "sigterm-after",
           "stop-after")
#: What a fault's ``:OP`` may count: the calls, and ``publish`` (a JetStream append acknowledged, :func:`published`).
FAULT_OPS = OPS + ("publish",)
#: The actions that send this process a suspend signal once the call completed.
_SIGNAL_AFTER = {"sigint-after": signal.SIGINT, "sigterm-after": signal.SIGTERM}


def _plain_fsync_dir(path: str) -> None:
    """fsync the directory ``path`` (its entries' names become durable); raises ``OSError``."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# The plain calls.  The public names below are rebound by configure().
_PLAIN = {
    "open": os.open, "write": os.write, "fsync": os.fsync, "fdatasync": os.fdatasync,
    "ftruncate": os.ftruncate, "rename": os.rename, "mkdir": os.mkdir,
    "fsync_dir": _plain_fsync_dir, "flock": fcntl.flock, "close": os.close, "unlink": os.unlink,
}


class Fault:
    """A parsed ``FISKJ_IOSEAM_FAULT`` value: ``action`` at call ``k`` (1-based) of ``op`` (None: any op)."""

    __slots__ = ("action", "k", "op")

    def __init__(self, action: str, k: int, op: str | None) -> None:
        self.action, self.k, self.op = action, k, op

    def __repr__(self) -> str:
        return f"Fault({self.action}@{self.k}{':' + self.op if self.op else ''})"


def parse_fault(value: str) -> Fault:
    """Parse ``ACTION@K[:OP]`` (e.g. ``"eio@2:fsync"``) into a :class:`Fault`.

    K is a decimal integer >= 1, ACTION one of :data:`ACTIONS`, OP one of
    :data:`FAULT_OPS`.  Raises :class:`UsageError` naming the variable and the
    expected syntax when the value is malformed.
    """
    def bad(why: str) -> UsageError:
        return UsageError(f"{FAULT_ENV}={value!r} is malformed ({why}); expected ACTION@K[:OP], "
                          f"e.g. 'kill-before@3:fsync', with ACTION one of {', '.join(ACTIONS)} "
                          f"and OP one of {', '.join(FAULT_OPS)}", field=FAULT_ENV)
    action, at, rest = value.strip().partition("@")
    if not at:
        raise bad("no '@'")
    if action not in ACTIONS:
        raise bad(f"unknown action {action!r}")
    k_text, colon, op = rest.partition(":")
    if not k_text.isdecimal() or int(k_text) < 1:
        raise bad(f"K must be an integer >= 1, got {k_text!r}")
    if colon and op not in FAULT_OPS:
        raise bad(f"unknown op {op!r}")
    return Fault(action, int(k_text), op if colon else None)


# --- traced / faulted state ---------------------------------------------------------

_mutex = threading.Lock()
_trace_fd: int | None = None
_fault: Fault | None = None
_calls = 0                     # every seam call so far (the trace's ``n``)
_op_calls: dict[str, int] = {}
_fd_paths: dict[int, str] = {}  # fd -> absolute path, for traces


_tls = threading.local()  # t0 of the call in progress, per thread


def _begin(op: str) -> tuple[int, str | None]:
    """Count one call of ``op``; return its number ``n`` and the fault action due now, if any."""
    global _calls
    _tls.t0 = time.monotonic_ns()
    with _mutex:
        _calls += 1
        n = _calls
        k = _op_calls[op] = _op_calls.get(op, 0) + 1
    f = _fault
    if f is not None and (k if f.op else n) == f.k and (f.op is None or f.op == op):
        return n, f.action
    return n, None


def _emit(n: int, rec: dict[str, Any]) -> None:
    if _trace_fd is None:
        return
    line = {"n": n, "pid": os.getpid(), "t0": getattr(_tls, "t0", None), "t": time.monotonic_ns()}
    line.update(rec)
    os.write(_trace_fd, (json.dumps(line, separators=(",", ":")) + "\n").encode())


def _path_of(fd: int) -> str | None:
    """The path an fd was opened with through the seam, else what /proc says (Linux), else None."""
    path = _fd_paths.get(fd)
    if path is None:
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
    return path


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _done(n: int, action: str | None, rec: dict[str, Any]) -> None:
    """Trace a completed call, then do the action due after it (a SIGKILL, or a suspend signal)."""
    if action in _SIGNAL_AFTER or action == "stop-after":
        rec["fault"] = action
    _emit(n, rec)
    if action == "kill-after":
        _kill()
    elif action in _SIGNAL_AFTER:
        os.kill(os.getpid(), _SIGNAL_AFTER[action])
    elif action == "stop-after":
        os.kill(os.getpid(), signal.SIGSTOP)  # held here until the harness sends SIGCONT


def _errname(code: int | None) -> str:
    return _errno.errorcode.get(code or 0, str(code))


def _injected(code: int, target: str | None) -> OSError:
    return OSError(code, f"{os.strerror(code)} (injected by {FAULT_ENV})", target)


def _run(n: int, action: str | None, rec: dict[str, Any], call, *args) -> Any:
    """Do the generic part of one traced call: fault, real call, trace line, kill-after."""
    if action == "kill-before":
        _kill()
    if action in ("eio", "enospc", "short-write"):
        code = _errno.EIO if action == "eio" else _errno.ENOSPC
        rec.update(error=_errname(code), fault=action)
        _emit(n, rec)
        raise _injected(code, rec.get("path"))
    try:
        result = call(*args)
    except OSError as exc:
        rec["error"] = _errname(exc.errno)
        _emit(n, rec)
        raise
    _done(n, action, rec)
    return result


_FLAG_NAMES = [name for name in ("O_CREAT", "O_EXCL", "O_TRUNC", "O_APPEND", "O_NOFOLLOW",
                                 "O_CLOEXEC", "O_DIRECTORY", "O_NONBLOCK", "O_SYNC", "O_DSYNC",
                                 "O_NOCTTY", "O_NOATIME", "O_PATH", "O_TMPFILE") if hasattr(os, name)]


def _flag_names(flags: int) -> list[str]:
    acc = flags & os.O_ACCMODE
    names = [{os.O_RDONLY: "O_RDONLY", os.O_WRONLY: "O_WRONLY", os.O_RDWR: "O_RDWR"}.get(acc, str(acc))]
    for name in _FLAG_NAMES:
        bit = getattr(os, name)
        if flags & bit == bit:
            names.append(name)
    return names


def _t_open(path, flags: int, mode: int = 0o777, *, dir_fd=None) -> int:
    if dir_fd is not None:
        raise TypeError("ioseam.open does not take dir_fd (traces need absolute paths)")
    n, action = _begin("open")
    apath = os.path.abspath(os.fsdecode(path))
    rec: dict[str, Any] = {"op": "open", "path": apath, "flags": _flag_names(flags), "mode": mode,
                           "created": False}
    existed = None
    if flags & os.O_CREAT and not flags & os.O_EXCL:
        existed = os.path.lexists(apath)

    def real() -> int:
        fd = os.open(path, flags, mode)
        rec["fd"] = fd
        rec["created"] = bool(flags & os.O_CREAT) and (bool(flags & os.O_EXCL) or existed is False)
        _fd_paths[fd] = apath
        return fd
    return _run(n, action, rec, real)


def _position_after(fd: int, written: int) -> int | None:
    """File offset where the last ``written`` bytes went (end of file for O_APPEND when 0)."""
    try:
        if written == 0 and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND:
            return os.fstat(fd).st_size
        return os.lseek(fd, 0, os.SEEK_CUR) - written
    except OSError:
        return None


def _t_write(fd: int, data) -> int:
    n, action = _begin("write")
    data = bytes(data)
    rec: dict[str, Any] = {"op": "write", "path": _path_of(fd), "fd": fd}
    if action == "kill-before":
        _kill()
    if action in ("eio", "enospc"):
        rec.update(offset=_position_after(fd, 0), len=0, data="")
        return _run(n, action, rec, None)
    if action == "short-write":
        data = data[: len(data) // 2]
    try:
        written = os.write(fd, data)
    except OSError as exc:
        rec.update(offset=_position_after(fd, 0), len=0, data="", error=_errname(exc.errno))
        _emit(n, rec)
        raise
    rec.update(offset=_position_after(fd, written), len=written,
               data=base64.b64encode(data[:written]).decode("ascii"))
    if action == "short-write":
        rec.update(error="ENOSPC", fault=action)
        _emit(n, rec)
        raise _injected(_errno.ENOSPC, rec["path"])
    _done(n, action, rec)
    return written


def _fd_call(op: str, real):
    def traced(fd: int, *args):
        n, action = _begin(op)
        rec: dict[str, Any] = {"op": op, "path": _path_of(fd), "fd": fd}
        if op == "ftruncate":
            rec["length"] = args[0]
        elif op == "flock":
            rec["operation"] = [name for name in ("LOCK_SH", "LOCK_EX", "LOCK_UN", "LOCK_NB")
                                if args[0] & getattr(fcntl, name)]
        elif op == "close":
            def real_close(fd: int) -> None:
                os.close(fd)
                _fd_paths.pop(fd, None)
            return _run(n, action, rec, real_close, fd)
        return _run(n, action, rec, real, fd, *args)
    traced.__name__ = op
    return traced


def _t_rename(src, dst) -> None:
    n, action = _begin("rename")
    rec = {"op": "rename", "src": os.path.abspath(os.fsdecode(src)), "dst": os.path.abspath(os.fsdecode(dst))}
    rec["path"] = rec["dst"]
    return _run(n, action, rec, os.rename, src, dst)


def _t_mkdir(path, mode: int = 0o777) -> None:
    n, action = _begin("mkdir")
    rec = {"op": "mkdir", "path": os.path.abspath(os.fsdecode(path)), "mode": mode}
    return _run(n, action, rec, os.mkdir, path, mode)


def _t_path_call(op: str, real):
    def traced(path) -> None:
        n, action = _begin(op)
        return _run(n, action, {"op": op, "path": os.path.abspath(os.fsdecode(path))}, real, path)
    traced.__name__ = op
    return traced


_TRACED = {
    "open": _t_open, "write": _t_write, "fsync": _fd_call("fsync", os.fsync),
    "fdatasync": _fd_call("fdatasync", os.fdatasync), "ftruncate": _fd_call("ftruncate", os.ftruncate),
    "rename": _t_rename, "mkdir": _t_mkdir, "fsync_dir": _t_path_call("fsync_dir", _plain_fsync_dir),
    "flock": _fd_call("flock", fcntl.flock), "close": _fd_call("close", None),
    "unlink": _t_path_call("unlink", os.unlink),
}


def published(path: str, data: bytes) -> None:
    """Trace a JetStream publish the server acknowledged (op ``publish``: ``path`` the run's store location,
    ``len``/``data`` the record's journal line): the store's counterpart of a write and its fsync returning
    (docs/ioseam.md).  No call is made; a fault counting ``publish`` acts after it (``kill-after``,
    ``stop-after``, a suspend signal; the others do nothing here).  Nothing without a trace or a fault."""
    if _trace_fd is not None or _fault is not None:
        n, action = _begin("publish")
        rec = {"op": "publish", "path": path, "len": len(data), "data": base64.b64encode(data).decode("ascii")}
        _done(n, action if action in ("kill-after", "stop-after", *_SIGNAL_AFTER) else None, rec)


def active() -> bool:
    """Return True when tracing or fault injection is on (the seam is not the plain calls)."""
    return _trace_fd is not None or _fault is not None


def configure(trace: str | None = None, fault: str | None = None) -> None:
    """Select the seam's mode: plain calls, or traced/faulted wrappers.

    ``trace`` is an absolute file path (appended to, created 0600), ``fault``
    an ``ACTION@K[:OP]`` string; both None restores the plain ``os``/``fcntl``
    functions.  Call counters restart at 0.  Called once at import with the
    environment; tests and the harness may call it again in-process.
    Raises :class:`UsageError` for a relative trace path or a malformed fault,
    :class:`OSError` when the trace file cannot be opened.
    """
    global _trace_fd, _fault, _calls
    parsed = parse_fault(fault) if fault else None
    if trace and not os.path.isabs(trace):
        raise UsageError(f"{TRACE_ENV}={trace!r} must be an absolute path", field=TRACE_ENV)
    new_fd = None
    if trace:
        new_fd = os.open(trace, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        if not stat.S_ISREG(os.fstat(new_fd).st_mode):
            os.close(new_fd)
            raise UsageError(f"{TRACE_ENV}={trace!r} is not a regular file", field=TRACE_ENV)
    if _trace_fd is not None:
        os.close(_trace_fd)
    _trace_fd, _fault, _calls = new_fd, parsed, 0
    _op_calls.clear()
    table = _TRACED if active() else _PLAIN
    globals().update(table)


# Placeholders for type checkers and readers; configure() below binds the real ones.
open = os.open
write = os.write
fsync = os.fsync
fdatasync = os.fdatasync
ftruncate = os.ftruncate
rename = os.rename
mkdir = os.mkdir
fsync_dir = _plain_fsync_dir
flock = fcntl.flock
close = os.close
unlink = os.unlink

configure(os.environ.get(TRACE_ENV) or None, os.environ.get(FAULT_ENV) or None)
