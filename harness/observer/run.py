"""Start a program under the tracer: :func:`spawn_observed` returns an :class:`ObservedProcess`, a
:class:`subprocess.Popen` of the tracer that stands in for the program (docs/observer.md "Transparency").
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Mapping, Sequence

from .build import observer_binary
from .errors import ControlError, ControlTimeout, FaultSpecError
from .ops import OpList, parse_fault, parse_ops

_File = int | IO[Any] | None


@dataclass(frozen=True, slots=True)
class Waits:
    """A ``waits SEQ PID TID OP PATH`` line (``--announce-waits``): the thread ``tid`` entered op ``seq``, a lock
    call that waits while another holds the lock (``flock`` without ``LOCK_NB``, ``F_SETLKW``)."""

    seq: int
    pid: int
    tid: int
    op: str
    path: str

    @classmethod
    def parse(cls, line: str) -> "Waits":
        return cls(*_control_fields(line, "waits", 3))


@dataclass(frozen=True, slots=True)
class Paused(Waits):
    """A ``paused K SEQ PID TID OP PATH`` line: the thread ``tid`` is stopped at the entry of op ``seq`` (the
    ``k``-th pause)."""

    k: int = 0

    @classmethod
    def parse(cls, line: str) -> "Paused":
        k, *rest = _control_fields(line, "paused", 4)
        return cls(*rest, k=k)


def _control_fields(line: str, word: str, ints: int) -> list[Any]:
    """The fields of a control line ``WORD N1 .. N<ints> OP PATH``: the numbers as ints, then op and path (the
    path may hold spaces).  Raises :class:`ControlError` for any other line."""
    parts = line.rstrip("\n").split(" ", ints + 2)
    if len(parts) != ints + 3 or parts[0] != word or not all(p.lstrip("-").isdigit() for p in parts[1:ints + 1]):
        raise ControlError(f"unexpected control line {line!r}")
    return [int(p) for p in parts[1:ints + 1]] + parts[ints + 1:]


class ObservedProcess(subprocess.Popen):  # type: ignore[type-arg]
    """The tracer running ``argv``, recording the ops under ``roots`` to ``log`` and injecting ``faults``
    (``ACTION@K[:KINDS]`` specs); Popen-like, plus :meth:`ops` and, with ``control``, pause/release.

    ``env``: the program's environment (``None``: this process's); ``lookups=False`` (``--ops durable``)
    stops only the durability calls and the kinds a fault counts; ``attach``: trace this process instead of
    starting ``argv`` (it installed :func:`seccomp_filter` of the same options and stopped itself);
    ``announce_waits`` (needs ``control``): the tracer prints a :class:`Waits` line at each lock call that may
    wait, read with :meth:`wait_waits` (a process spawned so must not also pause).  Raises
    :class:`FaultSpecError` for a bad fault or a pause without ``control``, ``ValueError`` without a root.
    """

    def __init__(self, argv: Sequence[str], *, log: str | os.PathLike[str], roots: Sequence[str | os.PathLike[str]],
                 faults: Sequence[str] = (), control: bool = False, env: Mapping[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None, stdin: _File = None, stdout: _File = None,
                 stderr: _File = None, start_new_session: bool = True, binary: str | os.PathLike[str] | None = None,
                 lookups: bool = True, attach: int | None = None, announce_waits: bool = False):
        if not roots:
            raise ValueError("spawn_observed needs at least one root")
        parsed = [parse_fault(spec) for spec in faults]  # a bad spec raises here, not as a tracer exit
        pauses = [f.k for f in parsed if f.action == "pause"]
        if len(set(pauses)) != len(pauses):
            raise FaultSpecError(f"two pause faults share a K in {list(faults)}: 'release K' must name one")
        if pauses and not control:
            raise FaultSpecError("a pause fault needs control=True (the pause/release channel)")
        if announce_waits and (not control or pauses):
            raise FaultSpecError("announce_waits needs control=True and no pause fault (one reader of the channel)")
        self.log = Path(log)
        self.roots = tuple(os.path.realpath(r) for r in roots)
        self.faults = tuple(faults)
        self.attached = attach
        cmd = [*_options(self.faults, lookups, binary), "--log", str(self.log)]
        for root in self.roots:
            cmd += ["--root", root]
        self._ctl_w: int | None = None
        self._ctl_r: int | None = None
        self._ctl_buf = b""
        self._ctl_eof = False
        theirs: tuple[int, ...] = ()
        if control:
            tracer_in, self._ctl_w = os.pipe()
            self._ctl_r, tracer_out = os.pipe()
            theirs = (tracer_in, tracer_out)
            cmd += ["--control-in", str(tracer_in), "--control-out", str(tracer_out)]
            cmd += ["--announce-waits"] if announce_waits else []
        cmd += ["--attach", str(attach)] if attach else ["--", *argv]
        try:
            super().__init__(cmd, env=env, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr,
                             start_new_session=start_new_session, pass_fds=theirs, close_fds=True)
        except BaseException:
            self._close_control()
            raise
        finally:
            for fd in theirs:
                os.close(fd)

    # -- control ---------------------------------------------------------------

    def wait_paused(self, timeout: float | None = None) -> Paused:
        """Block until the tracer reports a thread paused by a ``pause@K`` fault; return that line."""
        return Paused.parse(self._control_line(timeout, "before pausing a thread"))

    def wait_waits(self, timeout: float | None = None) -> Waits | None:
        """Block until the tracer (``announce_waits``) reports a lock call that may wait; return that line, or
        ``None`` once the tracer ended (its control channel closed).  Raises :class:`ControlTimeout`."""
        if self._ctl_r is None:  # closed: the tracer ended (poll/wait saw it)
            return None
        try:
            line = self._control_line(timeout, "")
        except ControlTimeout:
            raise
        except ControlError:
            if self._ctl_eof:
                return None
            raise
        return Waits.parse(line)

    def _control_line(self, timeout: float | None, doing: str) -> str:
        """The next line on control-out; raises :class:`ControlTimeout` after ``timeout`` seconds,
        :class:`ControlError` when the channel is closed first."""
        if self._ctl_r is None:
            raise ControlError("no control channel: spawn with control=True")
        deadline = None if timeout is None else time.monotonic() + timeout
        poller = select.poll()  # not select(): a campaign's descriptors may number over FD_SETSIZE (1024)
        poller.register(self._ctl_r, select.POLLIN)
        while b"\n" not in self._ctl_buf:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not poller.poll(None if left is None else left * 1000.0):
                raise ControlTimeout(f"no control line within {timeout} s")
            chunk = os.read(self._ctl_r, 4096)
            if not chunk:
                self._ctl_eof = True
                raise ControlError(f"the tracer closed its control channel (exit status {self.poll()}) {doing}")
            self._ctl_buf += chunk
        line, _, self._ctl_buf = self._ctl_buf.partition(b"\n")
        return line.decode("utf-8", "surrogateescape")

    def release(self, k: int) -> None:
        """Let the thread(s) paused by ``pause@K`` run their op (a release before the pause pre-releases it)."""
        if self._ctl_w is None:
            raise ControlError("no control channel: spawn with control=True")
        os.write(self._ctl_w, f"release {int(k)}\n".encode())

    def _close_control(self) -> None:
        for name in ("_ctl_w", "_ctl_r"):
            fd = getattr(self, name, None)
            if fd is not None:
                setattr(self, name, None)
                os.close(fd)

    # -- Popen ---------------------------------------------------------------------

    def poll(self) -> int | None:
        code = super().poll()
        if code is not None:
            self._close_control()
        return code

    def wait(self, timeout: float | None = None) -> int:
        code = super().wait(timeout)
        self._close_control()
        return code

    # -- the log -------------------------------------------------------------------

    def ops(self) -> OpList:
        """The log parsed (:func:`harness.observer.ops.parse_ops`); complete once the process was waited for."""
        with open(self.log, "rb") as f:
            return parse_ops(f)


def _options(faults: Sequence[str], lookups: bool, binary: Any = None) -> list[str]:
    return [str(binary or observer_binary()), *(w for spec in faults for w in ("--fault", spec)),
            *(() if lookups else ("--ops", "durable"))]


def seccomp_filter(faults: Sequence[str] = (), lookups: bool = True) -> bytes:
    """The tracer's seccomp-bpf program for these options (``struct sock_filter`` array), for a process to
    install before :class:`ObservedProcess` ``attach``-es to it.  Raises ``OSError`` when the tracer fails."""
    return subprocess.run([*_options(faults, lookups), "--print-filter"], check=True, capture_output=True).stdout


#: Run ``argv`` under the tracer (docs/observer.md "Use"): :class:`ObservedProcess`'s constructor.
spawn_observed = ObservedProcess
