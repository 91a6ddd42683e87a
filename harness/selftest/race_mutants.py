"""Broken variants of the store that the race family must catch (applied in a child process only).

Each mutant is a monkeypatch of :mod:`fiskj` made inside a race agent
(:mod:`harness.families.race.agent`, selected by ``FISKJ_MUTANT=name``), never in the
harness process: the patched code runs only where the race nemesis drives
it.  :func:`apply` patches; :data:`MUTANTS` names each variant, the defect it
reintroduces and the race (with the schedule) that must catch it.

| name | defect | caught by |
|---|---|---|
| ``fold-before-lock`` | FORMAT.md defect 2: ``open`` folds, then locks | ``two-resumers`` (loser paused at its lock until the winner is done) |
| ``create-no-excl`` | defect 3: ``create`` checks existence, then opens without ``O_EXCL`` | ``two-creates`` (both paused at their first open) |
| ``release-before-last-append`` | the lock is released before the terminal record is appended | ``two-writers`` (B runs a session in the gap) |
| ``lockf`` | the run lock is a ``lockf`` (POSIX record) lock, not ``flock``: closing any other descriptor of the lock file drops it (F18) | ``lock-survives-other-fds`` |
| ``no-cloexec`` | the lock descriptor is inherited by tool subprocesses, which keep the run locked after the holder dies (F18) | ``lock-survives-other-fds`` |
| ``stale-lock-file`` | the lock is an ``O_EXCL`` marker file: a SIGKILLed holder leaves it behind (F14) | ``holder-killed`` |
| ``blocking-lock`` | ``flock`` without ``LOCK_NB``: a second writer waits instead of being refused at once | ``two-writers`` |
| ``torn-tail-is-corrupt`` | ``load``/``list`` raise on a partial last line instead of reporting a torn tail | ``readers-during-appends`` |

Patches look functions up on their modules at call time (``ioseam.flock``,
``FileStore.open``), so they reach every caller.  The ``lockf`` mutant
patches the seam's own call tables, so that :func:`fiskj.ioseam.configure`
(called again per trial by the agent) keeps it and traces still show its
calls as ``flock``.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from typing import Callable

__all__ = ["Mutant", "MUTANTS", "apply", "apply_any", "ENV"]

#: Environment variable naming the mutant a race agent applies at start.
ENV = "FISKJ_MUTANT"


@dataclass(frozen=True)
class Mutant:
    """A broken variant: ``name``, the ``defect`` it reintroduces, the ``race`` that catches it.

    ``family`` is always ``"race"`` (as in :class:`harness.selftest.mutants.Mutant`).
    """

    name: str
    defect: str
    race: str
    patch: Callable[[], None]
    family: str = "race"


def _fold_before_lock() -> None:
    from fiskj import store as st
    from fiskj.journal import Journal
    from fiskj.lock import acquire
    from fiskj.paths import journal_path, lock_path, validate_run_id

    def open_(self, run_id):  # defect 2: read and fold WITHOUT the lock, lock afterwards
        validate_run_id(run_id)
        self._require_dir(run_id)
        jpath = journal_path(self.directory, run_id)
        rfd = st._open_regular(jpath, os.O_RDONLY, run_id)
        try:
            folder, reader = st.fold_open_file(rfd, jpath)
        finally:
            st._close_quietly(rfd)
        lock = acquire(lock_path(self.directory, run_id), run_id)
        try:
            fd = st._open_regular(jpath, os.O_RDWR | os.O_APPEND, run_id)
        except BaseException:
            lock.release()
            raise
        return Journal(run_id=run_id, path=jpath, directory=self.directory, fd=fd, lock=lock, folder=folder,
                       size=reader.good_size, new=False, repaired_tail=None)

    st.FileStore.open = open_


def _create_no_excl() -> None:
    from fiskj import ioseam
    from fiskj import store as st
    from fiskj.errors import RunExists, RunLocked
    from fiskj.journal import Journal
    from fiskj.lock import acquire
    from fiskj.paths import journal_path, lock_path, validate_run_id

    def create(self, run_id, meta):  # defect 3: check, then open without O_EXCL
        validate_run_id(run_id)
        jpath = journal_path(self.directory, run_id)
        if os.path.lexists(jpath):
            raise RunExists(f"run {run_id} already exists", path=jpath, run_id=run_id)
        self._ensure_dir(run_id)
        try:
            lock = acquire(lock_path(self.directory, run_id), run_id)
        except RunLocked:
            raise RunExists(f"run {run_id} already exists: another process holds it", path=jpath,
                            run_id=run_id) from None
        fd = ioseam.open(jpath, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        journal = Journal(run_id=run_id, path=jpath, directory=self.directory, fd=fd, lock=lock,
                          folder=None, size=0, new=True)
        journal.append(meta)
        return journal

    st.FileStore.create = create


def _release_before_last_append() -> None:
    from fiskj.journal import Journal
    from fiskj.records import TerminalRecord

    original = Journal.append

    def append(self, record):  # the lock goes before the terminal record is written
        if isinstance(record, TerminalRecord):
            self._lock.release()
        return original(self, record)

    Journal.append = append


def _lockf_call(fd: int, operation: int) -> None:
    fcntl.lockf(fd, operation)


def _lockf() -> None:
    from fiskj import ioseam

    ioseam._PLAIN["flock"] = _lockf_call
    ioseam._TRACED["flock"] = ioseam._fd_call("flock", _lockf_call)
    ioseam.configure(os.environ.get(ioseam.TRACE_ENV) or None, os.environ.get(ioseam.FAULT_ENV) or None)


def _no_cloexec() -> None:
    from fiskj import lock, store

    real = lock.acquire

    def acquire(path, run_id):  # Python opens descriptors close-on-exec (PEP 446); undo that
        held = real(path, run_id)
        os.set_inheritable(held.fd, True)
        return held

    lock.acquire = acquire
    store.acquire = acquire


def _stale_lock_file() -> None:
    from fiskj import ioseam, lock
    from fiskj.errors import RunLocked

    class MarkerLock(lock.RunLock):
        __slots__ = ()

        def release(self) -> None:
            if self.fd is not None:
                try:
                    os.unlink(self.path + ".held")
                except OSError:
                    pass
            lock.RunLock.release(self)

    def acquire(path, run_id):  # a marker file instead of a kernel lock: a crash leaves it behind
        try:
            mfd = os.open(path + ".held", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            raise RunLocked(f"run {run_id} is held by another writer", path=path, run_id=run_id) from None
        os.close(mfd)
        fd = ioseam.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        return MarkerLock(fd, path, run_id)

    lock.acquire = acquire
    from fiskj import store
    store.acquire = acquire


def _blocking_lock() -> None:
    from fiskj import ioseam

    real = ioseam._PLAIN["flock"]

    def blocking(fd: int, operation: int) -> None:
        real(fd, operation & ~fcntl.LOCK_NB)

    ioseam._PLAIN["flock"] = blocking
    ioseam._TRACED["flock"] = ioseam._fd_call("flock", blocking)
    ioseam.configure(os.environ.get(ioseam.TRACE_ENV) or None, os.environ.get(ioseam.FAULT_ENV) or None)


def _torn_tail_is_corrupt() -> None:
    from fiskj import store as st
    from fiskj.errors import CorruptJournal

    original = st.FileStore._read

    def read(self, run_id):
        state, info = original(self, run_id)
        if state.torn_tail is not None:
            raise CorruptJournal("unparsable final line", path=st.journal_path(self.directory, run_id),
                                 line=state.records + 1, offset=state.torn_tail.offset)
        return state, info

    st.FileStore._read = read


MUTANTS: dict[str, Mutant] = {m.name: m for m in (
    Mutant("fold-before-lock", "FORMAT.md defect 2: resume folds the journal before taking the lock",
           "two-resumers", _fold_before_lock),
    Mutant("create-no-excl", "FORMAT.md defect 3: create checks existence, then opens without O_EXCL",
           "two-creates", _create_no_excl),
    Mutant("release-before-last-append", "the run lock is released before the last (terminal) append",
           "two-writers", _release_before_last_append),
    Mutant("lockf", "the run lock is fcntl.lockf, dropped when any descriptor of the lock file closes (F18)",
           "lock-survives-other-fds", _lockf),
    Mutant("no-cloexec", "the lock descriptor is not close-on-exec: a tool child keeps the run locked (F18)",
           "lock-survives-other-fds", _no_cloexec),
    Mutant("stale-lock-file", "the lock is an O_EXCL marker file that a SIGKILLed holder leaves behind (F14)",
           "holder-killed", _stale_lock_file),
    Mutant("blocking-lock", "flock without LOCK_NB: the second writer waits instead of failing at once (F14)",
           "two-writers", _blocking_lock),
    Mutant("torn-tail-is-corrupt", "load and list raise on a partial last line instead of reporting a torn tail",
           "readers-during-appends", _torn_tail_is_corrupt),
)}


def apply(name: str) -> Mutant:
    """Apply mutant ``name`` to fiskj in THIS process (a race agent); return it.

    Raises ``KeyError`` naming the known ones.  Call it in a child only.
    """
    try:
        mutant = MUTANTS[name]
    except KeyError:
        raise KeyError(f"unknown race mutant {name!r}; known: {', '.join(MUTANTS)}") from None
    mutant.patch()
    return mutant


def apply_any(name: str) -> str:
    """Apply ``name`` from :data:`MUTANTS`, else from :mod:`harness.selftest.mutants` (the other families' variants).

    Returns the family that defines it.  Raises ``KeyError`` when neither knows it.
    """
    if name in MUTANTS:
        apply(name)
        return "race"
    from harness.selftest import mutants
    return mutants.apply(name).family

