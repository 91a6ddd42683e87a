"""The observer's log as values: :class:`Op` and :func:`parse_ops` (its lines: docs/observer.md "The log").
Pure: no IO.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Iterable

from .errors import FaultSpecError, LogFormatError

#: Op kinds, in the tracer's order (bit i of a kinds mask is KINDS[i]).
KINDS = ("open", "write", "fsync", "fdatasync", "sync_file_range", "ftruncate", "rename", "mkdir", "unlink",
         "rmdir", "flock", "lock", "close", "link", "symlink", "fallocate", "stat", "access", "read")
#: Kinds a fault counts when its spec names none (stat, access and read are recorded, not counted).
DURABLE_KINDS = frozenset(KINDS[:16])
LIFECYCLE = ("spawn", "exec", "exit", "end")
ACTIONS = ("kill-before", "kill-after", "eio", "enospc", "short-write", "pause", "sigint-after", "sigterm-after")


@dataclass(frozen=True, slots=True)
class Op:
    """One line of the log.  Fields absent from the line are None (docs/observer.md has the table)."""

    op: str
    seq: int | None = None
    pid: int | None = None
    tid: int | None = None
    path: str | None = None
    path2: str | None = None
    target: str | None = None
    fd: int | None = None
    off: int | None = None
    len: int | None = None
    count: int | None = None
    data: bytes | None = None
    flags: int | None = None
    flags_s: str | None = None
    mode: int | None = None
    created: bool | None = None
    how: str | None = None
    cmd: str | None = None
    whence: int | None = None
    start: int | None = None
    dir: bool | None = None
    ret: int | None = None
    errno: int | None = None
    fault: str | None = None
    t0: int | None = None
    t1: int | None = None
    ppid: int | None = None
    thread: bool | None = None
    argv: tuple[str, ...] | None = None
    code: int | None = None
    signal: int | None = None
    t: int | None = None
    status: str | None = None

    @property
    def lifecycle(self) -> bool:
        """True for spawn, exec, exit and end lines."""
        return self.seq is None

    @property
    def flag_names(self) -> tuple[str, ...]:
        """``flags_s`` split: ("O_WRONLY", "O_CREAT", ...)."""
        return tuple(self.flags_s.split("|")) if self.flags_s else ()

    @property
    def path_bytes(self) -> bytes | None:
        """The path as the kernel saw it (bytes that are not UTF-8 come back via surrogateescape)."""
        return None if self.path is None else self.path.encode("utf-8", "surrogateescape")


class OpList(list):  # type: ignore[type-arg]
    """A ``list[Op]`` that also says whether the log ended in a torn line (the tracer died mid-write)."""

    torn: bytes | None = None
    torn_lineno: int | None = None


#: Each scalar field's JSON type, and how an error names it.
_SCALAR = {**dict.fromkeys(("seq", "pid", "tid", "fd", "off", "len", "count", "flags", "mode", "whence", "start",
                            "errno", "t0", "t1", "ppid", "code", "signal", "t", "ret"), (int, "an integer")),
           **dict.fromkeys(("path", "path2", "target", "flags_s", "how", "cmd", "fault", "status"), (str, "a string")),
           **dict.fromkeys(("created", "dir", "thread"), (bool, "true or false"))}
_OP_REQUIRED = ("seq", "pid", "tid", "path", "errno", "t0", "t1")


def _field(obj: dict[str, Any], name: str, lineno: int) -> Any:
    value = obj.get(name)
    if value is None:
        return None
    if name in _SCALAR and type(value) is not _SCALAR[name][0]:
        null = " or null" if name == "ret" else ""
        raise LogFormatError(lineno, name, f"expected {_SCALAR[name][1]}{null}, got {value!r}")
    if name == "data":
        if type(value) is not str:
            raise LogFormatError(lineno, name, f"expected base64 text, got {value!r}")
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise LogFormatError(lineno, name, f"not base64: {exc}") from None
    if name == "argv":
        if type(value) is not list or not all(type(a) is str for a in value):
            raise LogFormatError(lineno, name, f"expected a list of strings, got {value!r}")
        return tuple(value)
    return value


def parse_op(line: bytes, lineno: int = 1) -> Op:
    """One log line (with or without its newline) as an :class:`Op`; raises :class:`LogFormatError`."""
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise LogFormatError(lineno, "<line>", f"not JSON: {exc}") from None
    if type(obj) is not dict:
        raise LogFormatError(lineno, "<line>", f"expected an object, got {type(obj).__name__}")
    op = obj.get("op")
    if op not in KINDS and op not in LIFECYCLE:
        raise LogFormatError(lineno, "op", f"unknown op {op!r}")
    if op in KINDS:
        for name in _OP_REQUIRED:
            if obj.get(name) is None:
                raise LogFormatError(lineno, name, "missing")
        if "ret" not in obj:
            raise LogFormatError(lineno, "ret", "missing (null when the thread died inside the call)")
        if op == "write" and ("data" not in obj or "off" not in obj):
            raise LogFormatError(lineno, "data" if "data" not in obj else "off", "missing on a write")
    elif obj.get("seq") is not None:
        raise LogFormatError(lineno, "seq", f"a {op} line has no seq")
    return Op(op=op, **{name: _field(obj, name, lineno) for name in Op.__slots__ if name != "op" and name in obj})


def parse_ops(lines: Iterable[bytes]) -> OpList:
    """Parse the log's lines (e.g. iterating a file opened ``"rb"``) into an :class:`OpList`.

    A final line that does not end in a newline and does not parse is a torn
    tail (the tracer was killed while writing it): it is dropped and reported
    in ``.torn`` / ``.torn_lineno``.  Any other bad line raises
    :class:`LogFormatError` naming its line number and field.  Blank lines are skipped.
    """
    out = OpList()
    numbered = [(lineno, line) for lineno, line in enumerate(lines, 1) if line.strip()]
    for lineno, line in numbered[:-1]:
        out.append(parse_op(line, lineno))
    if numbered:
        lineno, line = numbered[-1]
        try:
            out.append(parse_op(line, lineno))
        except LogFormatError:
            if line.endswith(b"\n"):
                raise
            out.torn, out.torn_lineno = line, lineno
    return out


def entry_order(ops: Iterable[Op]) -> list[Op]:
    """The op lines (no lifecycle lines) sorted by ``seq``: the order the calls entered."""
    return sorted((o for o in ops if o.seq is not None), key=lambda o: o.seq)  # type: ignore[arg-type,return-value]


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """``ACTION@K[:KINDS][=GLOB]`` parsed; ``kinds`` defaults to :data:`DURABLE_KINDS`; ``glob``: only calls on
    a path it matches are counted (fnmatch(3) without ``FNM_PATHNAME``: ``*`` matches ``/`` too; ``""``: every call)."""

    action: str
    k: int
    kinds: frozenset[str]
    glob: str = ""

    def __str__(self) -> str:
        named = "" if self.kinds == DURABLE_KINDS else ":" + ",".join(k for k in KINDS if k in self.kinds)
        return f"{self.action}@{self.k}{named}" + (f"={self.glob}" if self.glob else "")


def parse_fault(spec: str) -> FaultSpec:
    """Validate a fault spec (the tracer checks again); raises :class:`FaultSpecError`."""
    spec, _, glob = spec.partition("=")
    head, _, kinds = spec.partition(":")
    action, at, k = head.partition("@")
    if not at or action not in ACTIONS:
        raise FaultSpecError(f"fault {spec!r}: expected ACTION@K[:KINDS][=GLOB] with ACTION one of "
                             f"{', '.join(ACTIONS)}")
    if not k.isdigit() or int(k) < 1:
        raise FaultSpecError(f"fault {spec!r}: K must be an integer >= 1, got {k!r}")
    names = frozenset(kinds.split(",")) if kinds else DURABLE_KINDS
    unknown = sorted(names - set(KINDS))
    if unknown:
        raise FaultSpecError(f"fault {spec!r}: unknown op kind(s) {unknown}; known: {', '.join(KINDS)}")
    return FaultSpec(action, int(k), names, glob)
