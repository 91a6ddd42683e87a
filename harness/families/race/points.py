"""Sequence points inside a race agent: breakpoints on IO-seam calls and on the ledger tool.

A command of :mod:`harness.families.race.agent` may carry ``"pause": [BP, ...]``.  A
breakpoint ``{"name", "op", "path", "k", "when", "split"}`` fires at the
``k``-th call (1-based, counted from the start of the command) of IO-seam
operation ``op`` (``"open"``, ``"write"``, ``"fsync"``, ``"flock"``,
``"close"``, ...; ``"tool"`` for a run of the ledger tool; ``"any"``) on a
file of kind ``path`` (``"journal"``, ``"lock"`` or ``"any"``), ``"before"``
or ``"after"`` the call.  Firing writes a ``paused`` event and blocks until
the driver writes ``{"op": "continue"}`` (or kills the agent).  A ``write``
breakpoint with ``"split": F`` (0 < F < 1) writes the first ``F`` of the
line, pauses, then writes the rest: the driver sees the file exactly as a
concurrent reader could while a write is in progress.

The breakpoints are hooks on :mod:`fiskj.ioseam`'s public functions
(:meth:`SequencePoints.install`).  Each hooked seam call appends ``"n t0
t1"`` (call number, monotonic ns before and after) to the trial's
``timing`` file, so the driver can put times on the seam trace's events.
The two halves of a split write are marked ``split-head`` and
``split-tail``: they are one write of the engine, and the driver merges
them back into one trace event.

Here too are the agent's two pipes: :func:`emit` writes one JSON line,
:class:`Lines` reads them (a pause waits on it for its ``continue``).
"""

from __future__ import annotations

import json
import os
import select
from time import monotonic_ns as mono
from typing import Any, Callable

from fiskj import ioseam

__all__ = ["emit", "Lines", "Breakpoint", "SequencePoints"]


def emit(obj: dict[str, Any]) -> None:
    """Write ``obj`` as one JSON line on standard output (all of it, in one line)."""
    data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
    while data:
        data = data[os.write(1, data):]


class Lines:
    """JSON lines from a file descriptor, with a non-blocking peek (for the poll loop)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buf, self.eof = fd, b"", False

    def get(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next command, or None when none arrives within ``timeout`` (None: wait); exits on EOF."""
        while b"\n" not in self.buf:
            if self.eof:
                os._exit(0)
            if timeout is not None and not select.select([self.fd], [], [], timeout)[0]:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                self.eof = True
                continue
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line) if line.strip() else None


class Breakpoint:
    """One breakpoint of a command (see the module docstring); :meth:`hit` counts the calls it matches."""

    __slots__ = ("name", "op", "path", "k", "when", "split", "seen")

    def __init__(self, spec: dict[str, Any], index: int) -> None:
        self.name = spec.get("name") or f"bp{index}"
        self.op = spec.get("op", "any")
        self.path = spec.get("path", "any")
        self.k = int(spec.get("k", 1))
        self.when = spec.get("when", "before")
        self.split = spec.get("split")
        self.seen = 0

    def hit(self, op: str, kind: str) -> bool:
        if self.seen >= self.k or self.op not in ("any", op) or self.path not in ("any", kind):
            return False
        self.seen += 1
        return self.seen == self.k


class SequencePoints:
    """The breakpoints of the running command, the seam hooks that fire them, and the timing file.

    A base of :class:`harness.families.race.agent.Agent`: it reads ``run_id`` (whose
    journal and lock files are the ``path`` kinds) and ``cmds`` (where a
    pause waits for its ``continue``).
    """

    def __init__(self, cmds: Lines) -> None:
        self.cmds = cmds
        self.run_id = ""
        self.k = 0                        # seam calls since the last reset
        self.timing_fd: int | None = None
        self.bps: list[Breakpoint] = []   # the running command's breakpoints
        self.fds: dict[int, str] = {}     # descriptors the hooks saw opened -> absolute paths
        self._pending_after: list[Breakpoint] = []

    def reset_points(self) -> None:
        """Close the timing file and forget the descriptors and the call count (a new trial)."""
        if self.timing_fd is not None:
            os.close(self.timing_fd)
            self.timing_fd = None
        self.fds.clear()
        self.k = 0

    def _kind(self, path: str | None) -> str:
        base = os.path.basename(path or "")
        if base == f"{self.run_id}.json":
            return "journal"
        if base == f"{self.run_id}.lock":
            return "lock"
        return "other"

    def _path_of(self, op: str, args: tuple) -> str | None:
        if op in ("open", "mkdir", "fsync_dir", "unlink"):
            return os.fsdecode(args[0]) if args else None
        if op == "rename":
            return os.fsdecode(args[1])
        if args and isinstance(args[0], int):
            path = self.fds.get(args[0])
            if path is None:
                try:
                    path = os.readlink(f"/proc/self/fd/{args[0]}")
                except OSError:
                    path = None
            return path
        return None

    def _timed(self, real: Callable, args: tuple, mark: str = "") -> Any:
        self.k += 1
        k = self.k
        t0 = mono()
        try:
            return real(*args)
        finally:
            if self.timing_fd is not None:
                os.write(self.timing_fd, f"{k} {t0} {mono()}{' ' + mark if mark else ''}\n".encode())

    def _pause(self, bp: Breakpoint, op: str, kind: str, n: int, **extra: Any) -> None:
        emit({"event": "paused", "name": bp.name, "op": op, "path": kind, "when": bp.when, "n": n,
              "t": mono(), **extra})
        while True:
            cmd = self.cmds.get()
            if cmd is None:
                continue
            if cmd.get("op") == "continue":
                return
            emit({"event": "error", "message": f"paused at {bp.name}: expected continue, got {cmd!r:.200}"})

    def _hits(self, op: str, kind: str) -> list[Breakpoint]:
        return [bp for bp in self.bps if bp.hit(op, kind)] if self.bps else []

    def _hook(self, op: str, real: Callable) -> Callable:
        agent = self

        def call(*args: Any) -> Any:
            path = agent._path_of(op, args)
            kind = agent._kind(path)
            hits = agent._hits(op, kind)
            split = next((bp for bp in hits if bp.when == "before" and bp.split and op == "write"), None)
            for bp in hits:
                if bp.when == "before" and bp is not split:
                    agent._pause(bp, op, kind, agent.k + 1)
            if split is not None:
                data = bytes(args[1])
                cut = min(max(1, int(len(data) * float(split.split))), max(1, len(data) - 1))
                first = agent._timed(real, (args[0], data[:cut]), "split-head")
                if first < cut or cut >= len(data):
                    result = first
                else:
                    agent._pause(split, op, kind, agent.k, written=cut, of=len(data))
                    result = first + agent._timed(real, (args[0], data[cut:]), "split-tail")
            else:
                result = agent._timed(real, args)
            if op == "open" and isinstance(result, int) and path is not None:
                agent.fds[result] = os.path.abspath(path)
            elif op == "close" and args:
                agent.fds.pop(args[0], None)
            for bp in hits:
                if bp.when == "after":
                    agent._pause(bp, op, kind, agent.k)
            return result

        call.__name__ = op
        return call

    def install(self) -> None:
        """Hook every seam operation (call after each :func:`fiskj.ioseam.configure`)."""
        for op in ioseam.OPS:
            setattr(ioseam, op, self._hook(op, getattr(ioseam, op)))

    def point(self, op: str, kind: str, when: str) -> None:
        """A sequence point outside the seam (the ledger tool)."""
        if when == "before":
            self._pending_after = [bp for bp in self._hits(op, kind)]
            for bp in self._pending_after:
                if bp.when == "before":
                    self._pause(bp, op, kind, self.k)
        else:
            for bp in self._pending_after:
                if bp.when == "after":
                    self._pause(bp, op, kind, self.k)
            self._pending_after = []
