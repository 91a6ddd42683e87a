"""Clean interruption of a campaign: Ctrl-C (SIGINT) or SIGTERM stops launching trials and ends the running ones
(what the command does: docs/ci.md "Interruption").

:func:`handling` (the command line only) records the first signal; inside :func:`cooperative` (a campaign's
waits, :func:`as_done`) that is all, and the campaign acts on it within :data:`POLL_S`; elsewhere it raises
:class:`Interrupted`, a ``KeyboardInterrupt``.  Later signals are only recorded; :func:`deferred` holds even
the first back (writing the reports).  Without :func:`handling`, a ``KeyboardInterrupt`` reaching
:func:`as_done` ends the running trials the same way and is raised again once the campaign cleaned up.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from harness.runner.process import signal_name

__all__ = ["Interrupted", "handling", "installed", "requested", "signum", "signal_text", "exit_status",
           "note", "clear", "cooperative", "deferred", "raising", "as_done", "check", "descendants",
           "kill_descendants", "end_processes", "end_trials", "private_tmp_root", "TMP_ENV"]

#: The variable a :class:`harness.runner.trial.Runner` reads for where trial directories go.
TMP_ENV = "FISKJ_HARNESS_TMP"
#: The signals taken (SIGINT: Ctrl-C; SIGTERM: ``kill``, a CI runner's cancel).
SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: How often a waiting campaign looks at the flag (seconds).
POLL_S = 0.1


class Interrupted(KeyboardInterrupt):
    """The command was interrupted by ``signum`` (SIGINT or SIGTERM); :attr:`exit_status` is ``128 + signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """``128 + signum``: 130 for SIGINT, 143 for SIGTERM (as a shell reports a process killed by it)."""
        return exit_status(self.signum)


@dataclass
class _State:
    """The process's interruption state (the signal handler and the main thread share it)."""

    signum: int | None = None
    event: threading.Event = field(default_factory=threading.Event)
    installed: int = 0
    cooperative: int = 0
    deferred: int = 0


_state = _State()


def exit_status(signum: int) -> int:
    """The exit status of a command interrupted by ``signum``: ``128 + signum`` (130 SIGINT, 143 SIGTERM)."""
    return 128 + int(signum)


def requested() -> bool:
    """True once SIGINT or SIGTERM was received (or a ``KeyboardInterrupt`` was :func:`note`\\ d)."""
    return _state.event.is_set()


def signum() -> int | None:
    """The first signal received, or ``None``."""
    return _state.signum


def signal_text(num: int | None = None) -> str:
    """The name of signal ``num``, default the first received (``SIGINT`` when none was): ``SIGTERM``."""
    return signal_name(num or _state.signum or signal.SIGINT)


def installed() -> bool:
    """True while :func:`handling` is in force (the command line takes the signals itself)."""
    return _state.installed > 0


def note(signum: int = signal.SIGINT) -> None:
    """Record an interruption by ``signum`` (the first one wins): a ``KeyboardInterrupt`` caught by a campaign."""
    if _state.signum is None:
        _state.signum = int(signum)
    _state.event.set()


def clear() -> None:
    """Forget any recorded interruption (the end of :func:`handling`; a library caller after a re-raise)."""
    _state.signum = None
    _state.event.clear()


def _handler(signum: int, frame: Any) -> None:
    first = _state.signum is None
    note(signum)
    if first and not _state.cooperative and not _state.deferred:
        raise Interrupted(signum)


@contextlib.contextmanager
def handling(keep: bool = False) -> Iterator[None]:
    """Take SIGINT and SIGTERM for the duration (main thread only; elsewhere it does nothing), then restore the
    previous handlers and forget the interruption.  A signal that the process inherited as ignored (a job
    started in the background by a shell ignores SIGINT) stays ignored.

    ``keep``: once interrupted, ignore both signals from the end on (the process is about to exit: a second
    Ctrl-C then must not print a traceback, nor a signal kill it before its exit status is given)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}
    for sig in SIGNALS:
        current = signal.getsignal(sig)
        if current is signal.SIG_IGN:
            continue
        previous[sig] = current
        signal.signal(sig, _handler)
    _state.installed += 1
    try:
        yield
    finally:
        if keep and requested():  # the interpreter's exit restores SIG_DFL: a signal then would kill it
            for sig in previous:
                signal.signal(sig, signal.SIG_IGN)
        else:
            _state.installed -= 1
            for sig, old in previous.items():
                signal.signal(sig, old if old is not None else signal.SIG_DFL)
            if not _state.installed:
                clear()


@contextlib.contextmanager
def _held(kind: str) -> Iterator[None]:
    setattr(_state, kind, getattr(_state, kind) + 1)
    try:
        yield
    finally:
        setattr(_state, kind, getattr(_state, kind) - 1)


def cooperative() -> contextlib.AbstractContextManager[None]:
    """While in force a signal is only recorded: the code polls :func:`requested` (a campaign's waits)."""
    return _held("cooperative")


def deferred() -> contextlib.AbstractContextManager[None]:
    """While in force a signal is only recorded, never raised (writing the reports); see :func:`requested`."""
    return _held("deferred")


@contextlib.contextmanager
def raising() -> Iterator[None]:
    """Undo :func:`cooperative` for the duration: a first signal raises :class:`Interrupted` at once (work the
    main thread does itself, such as a shrink's trials, cannot poll)."""
    saved, _state.cooperative = _state.cooperative, 0
    try:
        yield
    finally:
        _state.cooperative = saved


def check() -> None:
    """Raise :class:`Interrupted` when an interruption was recorded (a campaign asked to start after it)."""
    if _state.signum is not None:
        raise Interrupted(_state.signum)


def as_done(futures: Iterable[Future]) -> Iterator[Future]:
    """Yield ``futures`` as they complete, like :func:`concurrent.futures.as_completed`, until an interruption
    is recorded: then the ones already done are yielded and the iteration stops (the others are the
    caller's to end: :func:`end_trials`).  A ``KeyboardInterrupt`` raised while waiting is recorded
    (:func:`note`), not raised.  Cooperative (:func:`cooperative`) for its whole life, the caller's loop
    body included."""
    pending = set(futures)
    with cooperative():
        while pending:
            if requested():
                for fut in [f for f in pending if f.done()]:
                    pending.discard(fut)
                    yield fut
                return
            try:
                done, pending = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
            except KeyboardInterrupt as exc:
                note(getattr(exc, "signum", signal.SIGINT))
                continue
            for fut in done:
                yield fut


# --- ending what runs ------------------------------------------------------------------------


def _children() -> list[Any]:
    """Every process below this one (psutil), ``[]`` when they cannot be listed."""
    import psutil

    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def descendants() -> set[int]:
    """The pids of every process below this one (children, their children, ...)."""
    return {p.pid for p in _children()}


def kill_descendants(spare: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """SIGKILL every process below this one but those in ``spare``; returns the pids signalled.  Reaps nothing:
    a thread waiting on its own child reaps it, :func:`end_processes` reaps the rest."""
    import psutil

    killed = []
    for proc in _children():
        if proc.pid not in spare:
            with contextlib.suppress(psutil.Error):
                proc.kill()
                killed.append(proc.pid)
    return killed


def end_processes(spare: set[int] | frozenset[int] = frozenset(), timeout_s: float = 5.0) -> list[int]:
    """Kill every process below this one but ``spare`` and reap them, until none is left or ``timeout_s``
    passed; returns the pids killed.  Called when the trials' threads are done (an exited child nobody
    waits for is reaped here: none is left as a zombie)."""
    deadline = time.monotonic() + timeout_s
    killed: list[int] = []
    while True:
        killed += kill_descendants(spare)
        if spare:
            for pid in killed:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        else:
            with contextlib.suppress(ChildProcessError):
                while os.waitpid(-1, os.WNOHANG)[0]:  # every exited child, without waiting
                    pass
        if not [p for p in _children() if p.pid not in spare] or time.monotonic() > deadline:
            return killed
        time.sleep(0.02)


def end_trials(pool: Any, futures: Iterable[Future], spare: set[int] | frozenset[int] = frozenset(),
               timeout_s: float = 20.0) -> None:
    """Stop a campaign's thread ``pool`` after an interruption: cancel the trials not started, then kill the
    processes of the running ones (every process below this one but ``spare``) again and again until every
    one of ``futures`` is done (a killed leg's trial goes on to its next leg, which is killed in turn) or
    ``timeout_s`` passed."""
    futures = list(futures)
    pool.shutdown(wait=False, cancel_futures=True)
    deadline = time.monotonic() + timeout_s
    while True:
        kill_descendants(spare)
        if all(f.done() for f in futures) or time.monotonic() > deadline:
            return
        wait(futures, timeout=0.05)


# --- trial directories -----------------------------------------------------------------------


@contextlib.contextmanager
def private_tmp_root(enabled: bool = True) -> Iterator[str | None]:
    """Make one folder ``fiskj-harness-*`` where the trial directories of this command go (``$FISKJ_HARNESS_TMP``
    points at it for the duration; every Runner reads it) and remove it, whatever is left in it, at the end:
    an interrupted trial's directory cannot outlive the command.  ``enabled`` False (``--keep-dirs``: the
    directories must stay) changes nothing.  A parent that cannot be written changes nothing either (the
    Runner then says so itself)."""
    if not enabled:
        yield None
        return
    from harness.runner.trial import _default_tmp_root  # where a Runner would put them

    parent = os.environ.get(TMP_ENV) or _default_tmp_root()
    with deferred():  # a signal between the mkdir and the ``try`` below would leave the folder behind
        try:
            root = tempfile.mkdtemp(prefix="fiskj-harness-", dir=parent)
        except OSError:
            root = None
        old = os.environ.get(TMP_ENV)
        if root is not None:
            os.environ[TMP_ENV] = root
    if root is None:
        yield None
        return
    try:
        check()  # the signal recorded while deferred, now that the folder is sure to be removed
        yield root
    finally:
        if old is None:
            os.environ.pop(TMP_ENV, None)
        else:
            os.environ[TMP_ENV] = old
        shutil.rmtree(root, ignore_errors=True)
