"""The file store: runs as ``<id>.json`` journals plus ``<id>.lock`` files in one directory.

Source: docs/spec.md sections 1, 9, 10 and 11 and fisk-ai's known defects 1-4
(section 16), restated from fisk-ai's format notes and sessions documentation
(docs/spec.md "Sources"); tracker issue 3.  docs/store.md summarises
the decisions.  Rules:

* The directory (default :func:`fiskj.paths.default_store_dir`) is created
  0700 whatever the umask, only when a run is created; each directory this
  creates has its entry made durable by fsyncing its parent (defect 4).
* An existing store directory must be a directory owned by us.  Writable by
  group or others: refused (:class:`UnsafeFile`), since another user could
  have planted files or symlinks in it.  Readable/searchable by group or
  others only: a writer (``create``, ``open``, ``delete``) tightens it to
  0700 (its files are 0600 already); a reader (``load``, ``list``) leaves it
  as it is: a read never changes, creates or writes anything.
* ``create`` locks first, then creates the journal ``O_CREAT|O_EXCL|
  O_NOFOLLOW`` 0600 and appends meta as seq 1 (which fsyncs the directory):
  of two creators exactly one wins, the other gets :class:`RunExists`
  (defect 3).
* ``open`` locks FIRST, then reads and folds under the lock (defect 2), and
  cuts a torn final line (ftruncate to the last complete line, fsync)
  before returning, so no append is glued to torn bytes (defect 1; field
  cases F02, F03 in docs/field-cases.md).  A corrupt interior is refused.
* ``load``, ``open`` and ``list`` refuse a journal whose meta names another
  run (``ConsistencyError``, field ``meta.run_id``; docs/spec.md section 2).
* ``load`` and ``list`` never lock and never fail because a writer is
  mid-append: a partial last line is a torn tail to them.
* Journal and lock files that are symlinks, FIFOs or directories are refused
  (``O_NOFOLLOW`` + ``fstat``); nothing outside the directory is touched.
"""

from __future__ import annotations

import datetime
import errno
import io
import os
import stat
from dataclasses import dataclass
from typing import Any

from . import ioseam, probes
from .errors import (ConsistencyError, FiskjError, InvalidRecord, JournalError, RunExists, RunLocked,
                     RunNeverCreated, RunNotFound, StoreError, StoreIOError, UnsafeFile, UnsupportedVersion)
from .fold import Folder, RunState
from .journal import Journal
from .lock import RunLock, acquire
from .paths import JOURNAL_SUFFIX, default_store_dir, is_valid_run_id, journal_path, lock_path, validate_run_id
from .reader import JournalReader, collector_paused, read_records, with_context
from .records import MetaRecord, Record

__all__ = ["FileStore", "RunInfo", "check_create", "fold_open_file", "refusal_probe"]

_CLOEXEC_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


@dataclass(frozen=True)
class RunInfo:
    """One run as :meth:`FileStore.list` reports it.

    ``id``; ``path`` of the journal; ``created`` (meta RFC 3339 string);
    ``updated`` (journal mtime, seconds since the epoch); ``model`` and
    ``prompt`` from meta; ``status`` (:attr:`RunState.status`, or
    ``"unreadable"``); ``records`` (count of records, None when unreadable);
    ``torn_tail`` (bool); ``error``: the :class:`FiskjError` that kept the
    run from folding, else None.
    """

    id: str
    path: str
    created: str | None = None
    updated: float | None = None
    model: str | None = None
    prompt: str | None = None
    status: str = "unreadable"
    records: int | None = None
    torn_tail: bool = False
    error: FiskjError | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the ``fiskj session ls --json`` object; ``updated`` as RFC 3339 UTC, ``error`` as
        null or ``{kind, line, offset, message}``."""
        updated = None
        if self.updated is not None:
            updated = datetime.datetime.fromtimestamp(self.updated, datetime.timezone.utc).isoformat()
        error = None
        if self.error is not None:
            error = {"kind": type(self.error).__name__, "line": self.error.line,
                     "offset": self.error.offset, "message": self.error.message}
        return {"id": self.id, "path": self.path, "created": self.created, "updated": updated,
                "model": self.model, "prompt": self.prompt, "status": self.status,
                "records": self.records, "torn_tail": self.torn_tail, "error": error}


def _io_error(what: str, path: str, exc: OSError, run_id: str | None = None) -> StoreIOError:
    return StoreIOError(f"{what} failed: {exc.strerror or exc}", path=path, run_id=run_id, errno=exc.errno)


def _close_quietly(fd: int) -> None:
    try:
        ioseam.close(fd)
    except OSError:
        pass


def _open_regular(path: str, flags: int, run_id: str) -> int:
    """Open an existing journal with ``O_NOFOLLOW``; refuse anything but a regular file."""
    try:
        fd = ioseam.open(path, flags | _CLOEXEC_NOFOLLOW)
    except FileNotFoundError:
        raise RunNotFound(f"no run {run_id} in the store", path=path, run_id=run_id) from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise UnsafeFile(f"journal of run {run_id} is a symlink or not a regular file; refusing it",
                             path=path, run_id=run_id) from None
        raise _io_error("opening the journal", path, exc, run_id) from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        _close_quietly(fd)
        raise _io_error("fstat of the journal", path, exc, run_id) from None
    if not stat.S_ISREG(mode):
        _close_quietly(fd)
        raise UnsafeFile(f"journal of run {run_id} is not a regular file; refusing it", path=path, run_id=run_id)
    return fd


def _check_run_id(folder: Folder, run_id: str, path: str) -> RunState:
    """Return the folder's state; raise :class:`ConsistencyError` if its meta names another run (spec section 2)."""
    state = folder.state()
    if state.meta.run_id != run_id:
        raise ConsistencyError(f"the journal's meta names run {state.meta.run_id!r}, but the store knows it as "
                               f"{run_id!r} (a renamed or copied journal?); refusing it",
                               path=path, line=1, offset=0, field="meta.run_id", run_id=run_id)
    return state


def fold_open_file(fd: int, path: str) -> tuple[Folder, JournalReader]:
    """Read and fold the journal open on ``fd`` from its current offset (normally 0).

    Returns the :class:`Folder` (to continue appending) and the exhausted
    :class:`JournalReader` (``torn_tail``, ``good_size``, ``lines``).  Raises
    :class:`CorruptJournal` (also for a file with no complete record),
    :class:`ConsistencyError`, :class:`UnsupportedVersion`, :class:`RecordTooLarge`
    with ``path``, ``line`` and ``offset``; :class:`StoreIOError` on a read error.
    The descriptor is left open.
    """
    f = io.open(fd, "rb", buffering=1 << 20, closefd=False)
    reader = JournalReader(f, path=path)
    folder = Folder()
    offset = 0
    try:
        with collector_paused():  # a fold keeps many new containers, none in a cycle (reader.py)
            for record in reader:
                try:
                    folder.add(record)
                except JournalError as exc:
                    raise with_context(exc, path=path, offset=offset) from None
                offset = reader.good_size
    except OSError as exc:
        raise _io_error("reading the journal", path, exc) from None
    finally:
        f.close()
    if reader.lines == 0:
        what = "is empty" if reader.torn_tail is None else f"holds only a torn line of {reader.torn_tail.length} bytes"
        raise RunNeverCreated(f"journal {what}: its create crashed before the meta record was acknowledged, "
                              f"so nothing of the run was kept; create the run again", path=path, line=1, offset=0)
    return folder, reader


def refusal_probe(exc: BaseException) -> str | None:
    """The ``open.refused.*`` code probe (:mod:`fiskj.probes`) a refused open or resume of a run reaches:
    the kind of ``exc`` (``None``: an IO error or anything else, which is no refusal)."""
    for kind, name in ((RunNeverCreated, "never_created"), (RunNotFound, "not_found"), (RunLocked, "locked"),
                       (UnsupportedVersion, "unsupported_version"), (ConsistencyError, "consistency"),
                       (JournalError, "corrupt"), (UnsafeFile, "unsafe_file")):
        if isinstance(exc, kind):
            return f"open.refused.{name}"
    return None


def _never_created(jpath: str, run_id: str) -> bool:
    """True when ``jpath`` is a regular file of ours holding no complete record (see :class:`RunNeverCreated`)."""
    try:
        fd = _open_regular(jpath, os.O_RDONLY, run_id)
    except (RunNotFound, UnsafeFile):
        return False
    try:
        fold_open_file(fd, jpath)
    except RunNeverCreated:
        return True
    except (JournalError, StoreError):
        return False
    finally:
        _close_quietly(fd)
    return False


def check_create(run_id: str, meta: Any) -> None:
    """What every store checks before it creates run ``run_id`` with ``meta`` (docs/spec.md section 9): raises
    :class:`InvalidRunID`, or :class:`InvalidRecord` when ``meta`` is not a MetaRecord or names another run."""
    validate_run_id(run_id)
    if not isinstance(meta, MetaRecord):
        raise InvalidRecord(f"create needs a MetaRecord as the first record, got {type(meta).__name__}",
                            run_id=run_id)
    if meta.run_id != run_id:
        raise InvalidRecord(f"meta.run_id {meta.run_id!r} differs from the run id {run_id!r}",
                            run_id=run_id, field="meta.run_id")


class FileStore:
    """The runs in one directory (``directory``, absolute; default: the XDG store directory).

    Methods: :meth:`create`, :meth:`open` (writers, under the run lock),
    :meth:`load`, :meth:`list` (readers, no lock), :meth:`delete`.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = os.path.abspath(os.fspath(directory)) if directory is not None else default_store_dir()

    def __repr__(self) -> str:
        return f"FileStore({self.directory!r})"

    def location(self, run_id: str | None = None) -> str:
        """The store directory, or run ``run_id``'s journal path (as :class:`fiskj.jetstream.JetStreamStore`)."""
        return self.directory if run_id is None else journal_path(self.directory, run_id)

    def close(self) -> None:
        """Nothing to release (every journal holds its own lock); as :meth:`JetStreamStore.close`."""

    # -- the directory ----------------------------------------------------------------

    def _check_dir(self, run_id: str | None = None, *, tighten: bool = True) -> bool:
        """Check the store directory's kind, owner and mode; with ``tighten`` (writers only), tighten a
        directory that group or others may read to 0700 (docs/spec.md section 1, rule 4).

        Returns False when it does not exist.  Raises :class:`UnsafeFile`, :class:`StoreIOError`.
        """
        d = self.directory
        try:
            st = os.stat(d)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise _io_error("stat of the store directory", d, exc, run_id) from None
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafeFile("the store path is not a directory", path=d, run_id=run_id)
        if st.st_uid != os.geteuid():
            raise UnsafeFile(f"the store directory is owned by uid {st.st_uid}, not by this user "
                             f"(uid {os.geteuid()}); refusing to use it", path=d, run_id=run_id)
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o022:
            raise UnsafeFile(f"the store directory has mode {mode:04o}: writable by group or others, who could "
                             f"plant files or symlinks in it; check its content, then `chmod 700 {d}`",
                             path=d, run_id=run_id)
        if mode & 0o077 and tighten:
            try:
                os.chmod(d, 0o700)
            except OSError as exc:
                raise _io_error("tightening the store directory to 0700", d, exc, run_id) from None
        return True

    def _ensure_dir(self, run_id: str) -> None:
        """Create the store directory and missing parents 0700, fsyncing each new entry's parent."""
        missing = []
        d = self.directory
        while not os.path.lexists(d):
            missing.append(d)
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
        for d in reversed(missing):
            try:
                ioseam.mkdir(d, 0o700)
                if stat.S_IMODE(os.stat(d).st_mode) != 0o700:  # the umask took bits away
                    os.chmod(d, 0o700)
            except FileExistsError:
                pass  # a racing creator made it; we still fsync its parent below
            except OSError as exc:
                raise _io_error("creating the store directory", d, exc, run_id) from None
            try:
                ioseam.fsync_dir(os.path.dirname(d))
            except OSError as exc:
                raise _io_error("fsync of the store directory's parent", os.path.dirname(d), exc, run_id) from None
        self._check_dir(run_id)

    def _require_dir(self, run_id: str, *, tighten: bool = True) -> None:
        if not self._check_dir(run_id, tighten=tighten):
            raise RunNotFound(f"no run {run_id}: the store directory does not exist",
                              path=self.directory, run_id=run_id)

    def _drop_lock_file(self, lock: RunLock) -> None:
        """Unlink a lock file we hold (allowed: nobody else can hold it now), then release."""
        try:
            ioseam.unlink(lock.path)
        except OSError:
            pass
        lock.release()

    # -- writers -----------------------------------------------------------------------

    def create(self, run_id: str, meta: MetaRecord) -> Journal:
        """Create run ``run_id`` with ``meta`` as seq 1; return its open :class:`Journal`.

        Order: validate the id and meta, create the directory if missing,
        take the lock, create ``<id>.json`` (``O_CREAT|O_EXCL|O_NOFOLLOW``,
        0600 whatever the umask), append meta (write, fsync, fsync of the
        directory).  Raises :class:`InvalidRunID`, :class:`InvalidRecord`
        (meta not a MetaRecord or its ``run_id`` differs), :class:`RunExists`
        (a journal, or anything else, already has the name, or another
        process holds the run), :class:`UnsafeFile`, :class:`StoreIOError`.
        When appending meta fails, the new file is removed again (best
        effort) and the error is raised.
        """
        check_create(run_id, meta)
        self._ensure_dir(run_id)
        jpath = journal_path(self.directory, run_id)
        try:
            lock = acquire(lock_path(self.directory, run_id), run_id)
        except RunLocked:
            probes.hit("open.refused.locked")
            raise RunExists(f"run {run_id} already exists: another process holds it (creating or writing it)",
                            path=jpath, run_id=run_id) from None
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | _CLOEXEC_NOFOLLOW
        try:
            try:
                fd = ioseam.open(jpath, flags, 0o600)
            except FileExistsError:
                if not _never_created(jpath, run_id):
                    raise
                # A create that crashed before meta was acknowledged left this file; we hold the
                # lock, so nobody else can be writing it: remove it durably and create afresh.
                probes.hit("create.never_created_reclaimed")
                ioseam.unlink(jpath)
                ioseam.fsync_dir(self.directory)
                fd = ioseam.open(jpath, flags, 0o600)
        except FileExistsError:
            lock.release()
            raise RunExists(f"run {run_id} already exists; pick another id, or open it to resume",
                            path=jpath, run_id=run_id) from None
        except OSError as exc:
            lock.release()
            raise _io_error("creating the journal", jpath, exc, run_id) from None
        except BaseException:
            lock.release()
            raise
        journal = Journal(run_id=run_id, path=jpath, directory=self.directory, fd=fd, lock=lock,
                          folder=None, size=0, new=True)
        try:
            if stat.S_IMODE(os.fstat(fd).st_mode) != 0o600:  # the umask took bits away
                os.fchmod(fd, 0o600)
            journal.append(meta)
        except BaseException:
            try:
                ioseam.unlink(jpath)
                ioseam.fsync_dir(self.directory)
            except OSError:
                pass
            journal.close()
            raise
        return journal

    def open(self, run_id: str) -> Journal:
        """Open run ``run_id`` for appending; return its :class:`Journal` (state = fold under the lock).

        Order: take the lock, open the journal (``O_RDWR|O_APPEND|O_NOFOLLOW``),
        check it (regular file, ours, not writable by others), read and fold
        it, and if it ends in a torn line, ftruncate to the last complete
        line and fsync (``Journal.repaired_tail`` tells what was cut).
        Raises :class:`RunLocked` at once when another writer holds it,
        :class:`RunNotFound`, :class:`UnsafeFile`, :class:`CorruptJournal` /
        :class:`ConsistencyError` (also when meta names another run, field
        ``meta.run_id``) / :class:`UnsupportedVersion` (nothing is changed
        then), :class:`StoreIOError`.
        Every refusal reaches its code probe (:mod:`fiskj.probes`, ``open.refused.*``); a cut
        torn tail reaches ``open.torn_tail_cut``.
        """
        try:
            journal = self._open(run_id)
        except FiskjError as exc:
            refusal = refusal_probe(exc)
            if refusal is not None:
                probes.hit(refusal)
            raise
        if journal.repaired_tail is not None:
            probes.hit("open.torn_tail_cut")
        return journal

    def _open(self, run_id: str) -> Journal:
        validate_run_id(run_id)
        self._require_dir(run_id)
        jpath = journal_path(self.directory, run_id)
        if not os.path.lexists(jpath):  # fast path only; checked again under the lock
            raise RunNotFound(f"no run {run_id} in the store", path=jpath, run_id=run_id)
        lock = acquire(lock_path(self.directory, run_id), run_id)  # lock FIRST (defect 2)
        try:
            fd = _open_regular(jpath, os.O_RDWR | os.O_APPEND, run_id)
        except RunNotFound:
            self._drop_lock_file(lock)
            raise
        except BaseException:
            lock.release()
            raise
        try:
            st = os.fstat(fd)
            if st.st_uid != os.geteuid() or st.st_mode & 0o022:
                raise UnsafeFile(f"journal of run {run_id} is not owned by this user or is writable by others "
                                 f"(mode {stat.S_IMODE(st.st_mode):04o}); refusing to append to it",
                                 path=jpath, run_id=run_id)
            if st.st_mode & 0o077:
                os.fchmod(fd, 0o600)
            folder, reader = fold_open_file(fd, jpath)
            _check_run_id(folder, run_id, jpath)
            if reader.torn_tail is not None:  # cut it before any append (defect 1)
                try:
                    ioseam.ftruncate(fd, reader.good_size)
                    ioseam.fsync(fd)
                except OSError as exc:
                    raise _io_error("cutting the torn tail of the journal", jpath, exc, run_id) from None
        except BaseException:
            _close_quietly(fd)
            lock.release()
            raise
        return Journal(run_id=run_id, path=jpath, directory=self.directory, fd=fd, lock=lock, folder=folder,
                       size=reader.good_size, new=False, repaired_tail=reader.torn_tail)

    def delete(self, run_id: str) -> None:
        """Delete run ``run_id`` under its lock: unlink the journal, then the lock file, fsync the directory.

        Raises :class:`RunLocked` when a writer holds it, :class:`RunNotFound`,
        :class:`UnsafeFile` when the journal is a symlink or not a regular
        file (remove it by hand), :class:`StoreIOError`.
        """
        validate_run_id(run_id)
        self._require_dir(run_id)
        jpath = journal_path(self.directory, run_id)
        if not os.path.lexists(jpath):
            raise RunNotFound(f"no run {run_id} in the store", path=jpath, run_id=run_id)
        lock = acquire(lock_path(self.directory, run_id), run_id)
        try:
            try:
                st = os.lstat(jpath)
            except FileNotFoundError:
                self._drop_lock_file(lock)
                raise RunNotFound(f"no run {run_id} in the store", path=jpath, run_id=run_id) from None
            if not stat.S_ISREG(st.st_mode):
                raise UnsafeFile(f"journal of run {run_id} is a symlink or not a regular file; "
                                 f"not deleting it (remove it by hand)", path=jpath, run_id=run_id)
            try:
                ioseam.unlink(jpath)
                ioseam.unlink(lock.path)  # only while holding it
                ioseam.fsync_dir(self.directory)
            except OSError as exc:
                raise _io_error(f"deleting run {run_id}", jpath, exc, run_id) from None
        finally:
            lock.release()

    # -- readers (no lock) --------------------------------------------------------------

    def _read(self, run_id: str) -> tuple[RunState, os.stat_result]:
        jpath = journal_path(self.directory, run_id)
        fd = _open_regular(jpath, os.O_RDONLY, run_id)
        try:
            st = os.fstat(fd)
            folder, reader = fold_open_file(fd, jpath)
        finally:
            _close_quietly(fd)
        _check_run_id(folder, run_id, jpath)
        return folder.state(torn_tail=reader.torn_tail, good_size=reader.good_size), st

    def load(self, run_id: str) -> RunState:
        """Read and fold run ``run_id`` without locking; return its :class:`RunState`.

        Changes nothing: no chmod (not even of a group-readable store directory), no lock file,
        no write (docs/spec.md section 1, rule 4).

        A partial last line (a writer mid-append, or a crash) is a torn tail:
        reported in ``state.torn_tail``, not an error.  Raises
        :class:`InvalidRunID`, :class:`RunNotFound`, :class:`UnsafeFile`,
        :class:`CorruptJournal`, :class:`ConsistencyError` (also when meta
        names another run: spec section 2),
        :class:`UnsupportedVersion`, :class:`StoreIOError`.
        """
        validate_run_id(run_id)
        self._require_dir(run_id, tighten=False)  # a read changes nothing (spec section 1, rule 4)
        return self._read(run_id)[0]

    def records(self, run_id: str) -> list[Record]:
        """The acknowledged records of run ``run_id`` in seq order (a torn tail dropped; what ``fiskj session
        migrate`` copies).  Raises as :meth:`load`."""
        self.load(run_id)  # refuses what load refuses
        return read_records(journal_path(self.directory, run_id))[0]

    def list(self) -> list[RunInfo]:
        """Return a :class:`RunInfo` per run (``<valid id>.json``), sorted by id; no lock taken, nothing changed.

        Other files (lock files, temporary files, names that are not run ids)
        are skipped.  A run that cannot be read or folded is listed with
        ``status="unreadable"`` and its ``error``, never hidden.  A missing
        store directory lists as ``[]``.  Raises :class:`UnsafeFile` for an
        unsafe store directory, :class:`StoreIOError` when it cannot be read.
        """
        if not self._check_dir(tighten=False):  # a read changes nothing (spec section 1, rule 4)
            return []
        try:
            names = sorted(os.listdir(self.directory))
        except OSError as exc:
            raise _io_error("listing the store directory", self.directory, exc) from None
        out = []
        for name in names:
            run_id = name[: -len(JOURNAL_SUFFIX)]
            if not name.endswith(JOURNAL_SUFFIX) or not is_valid_run_id(run_id):
                continue
            path = os.path.join(self.directory, name)
            try:
                state, st = self._read(run_id)
            except RunNotFound as exc:
                if not isinstance(exc, RunNeverCreated):
                    continue  # deleted since listdir
                out.append(RunInfo(id=run_id, path=path, updated=None, error=exc))
                continue
            except FiskjError as exc:
                try:
                    updated: float | None = os.lstat(path).st_mtime
                except OSError:
                    updated = None
                out.append(RunInfo(id=run_id, path=path, updated=updated, error=exc))
                continue
            out.append(RunInfo(id=run_id, path=path, created=state.meta.created, updated=st.st_mtime,
                               model=state.fingerprint.model, prompt=state.prompt, status=state.status,
                               records=state.records, torn_tail=state.torn_tail is not None))
        return out
