"""Observed operations as an IO-seam trace (docs/ioseam.md), so that every checker and family reads any subject
observed from outside as it reads the seam's trace, using nothing the subject reports about itself.  Pure.
"""

from __future__ import annotations

import base64
import errno as _errno
from typing import Any, Iterable

from .ops import DURABLE_KINDS, Op, entry_order

__all__ = ["ops_to_trace", "error_name"]


def error_name(code: int | None) -> str | None:
    """``EIO`` for 5; ``ERESTART512`` style for kernel-internal codes; ``None`` for 0/None."""
    if not code:
        return None
    return _errno.errorcode.get(code, f"ERESTART{code}" if 512 <= code <= 516 else f"E{code}")


def _event(n: int, op: Op) -> dict[str, Any]:
    ev: dict[str, Any] = {"n": n, "pid": op.pid, "tid": op.tid, "t0": op.t0, "t": op.t1, "op": op.op,
                          "path": op.path, "seq": op.seq}
    if op.fd is not None:
        ev["fd"] = op.fd
    if op.ret is None:
        ev["error"] = "KILLED"  # the thread died inside the call: it never returned
    elif op.errno:
        ev["error"] = error_name(op.errno)
    if op.fault:
        ev["fault"] = op.fault
    kind = op.op
    if kind == "open":
        ev["flags"] = list(op.flag_names)
        ev["mode"] = op.mode
        ev["created"] = bool(op.created)
        if op.ret is not None and op.ret >= 0:
            ev["fd"] = op.ret
    elif kind == "write":
        data = op.data or b""
        ev.update(offset=op.off, len=len(data), data=base64.b64encode(data).decode("ascii"))
        if op.ret is None and op.count is not None:  # killed inside: the kernel wrote 0..count bytes, unknown
            ev["count"] = op.count
    elif kind in ("fsync", "fdatasync") and op.dir:
        ev["op"] = "fsync_dir"
    elif kind == "ftruncate":
        ev["length"] = op.len
    elif kind in ("rename", "link"):
        ev.update(src=op.path, dst=op.path2, path=op.path2)
    elif kind == "mkdir":
        ev["mode"] = op.mode
    elif kind == "flock":
        ev["operation"] = (op.how or "").split("|") if op.how else []
    elif kind == "lock":
        ev.update(cmd=op.cmd, operation=[op.how] if op.how else [])
    return ev


def ops_to_trace(ops: Iterable[Op]) -> list[dict[str, Any]]:
    """The IO-seam trace (docs/ioseam.md) of the counted operations among ``ops``, in entry order.

    Field names follow the seam's (``offset``, ``len``, ``data`` base64,
    ``flags`` as names, ``created``, ``operation``, ``src``/``dst``,
    ``error`` as an errno name; ``fsync`` of a directory is ``fsync_dir``);
    ``n`` is the 1-based position among counted operations over every
    process and thread, ``tid`` and ``seq`` are the observer's.  An
    operation whose thread died inside it has ``error: "KILLED"``.
    """
    counted = [op for op in entry_order(ops) if not op.lifecycle and op.op in DURABLE_KINDS]
    return [_event(n, op) for n, op in enumerate(counted, start=1)]
