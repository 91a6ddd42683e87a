"""The journal writer: the open, locked, append-only file of one run.

docs/spec.md section 9 ("Durability") is normative.  The order of one
append, fixed and commented once here:

1. check: the journal is open and not poisoned; the record's seq is set to
   ``last_seq + 1``; it encodes within :data:`fiskj.codec.MAX_RECORD_BYTES`;
   the fold accepts it (:meth:`fiskj.fold.Folder.check`, which changes
   nothing: a tool_result whose id is not pending is refused).  A refused
   record writes nothing and does not poison.
2. ONE ``write`` of the whole line (no loop: a short write is a failure, and
   the bytes that did land are a torn tail that the next open cuts);
3. ``fsync`` of the journal;
4. on the first append of a newly created journal, ``fsync`` of the store
   directory, so the new file's name survives a power loss (section 9, rule 2);
5. only then is the record acknowledged: the state advances and the seq is
   returned.

A failed write or fsync poisons the journal: every later append raises
:class:`JournalPoisoned`, and the fsync is never retried (after a failed
fsync the kernel may have dropped the dirty pages, so a later "success"
proves nothing: PostgreSQL's 2018 fsync lesson).  The records already on
disk stay readable.

A :class:`Journal` is built by :class:`fiskj.store.FileStore` (``create`` and
``open``), which holds the run's lock for it; :meth:`Journal.close` closes the
file and releases the lock last.  Another backend (:mod:`fiskj.jetstream`) keeps
steps 1 and 5 and replaces steps 2-4 (:meth:`Journal._write_line`) and the
release (:meth:`Journal._release`).
"""

from __future__ import annotations

from . import ioseam, probes
from .encode import encode_record, with_seq
from .errors import JournalError, JournalPoisoned, InvalidRecord, StoreIOError, UsageError
from .fold import Folder, RunState
from .lock import RunLock
from .reader import TornTail
from .records import AssistantRecord, MetaRecord, Record, TerminalRecord, ToolResultRecord, UserRecord

__all__ = ["Journal"]

#: The code probe (fiskj.probes) each way of poisoning the journal reaches.
_POISON_PROBES = {"write": "journal.poisoned.write", "fsync": "journal.poisoned.fsync",
                  "store directory fsync": "journal.poisoned.dir_fsync"}

_RECORD_TYPES = (MetaRecord, AssistantRecord, UserRecord, ToolResultRecord, TerminalRecord)


class Journal:
    """The open, locked writer of one run (built by :class:`fiskj.store.FileStore`).

    Attributes: ``run_id``, ``path`` (the journal file), ``directory`` (the
    store directory), ``repaired_tail`` (the :class:`TornTail` that
    ``open`` cut off, or ``None``).  ``fd`` is an ``O_WRONLY|O_APPEND``
    (or ``O_RDWR|O_APPEND``) descriptor of the journal, ``lock`` the held
    :class:`RunLock`, ``folder`` the fold of the records on disk (``None``
    for a new, empty journal), ``size`` the file's byte length, ``new`` True
    when the file was just created (its first append fsyncs the directory).
    The journal owns ``fd`` and ``lock`` from then on.
    """

    STORE = "FileStore"  #: the store class that opens it (named in errors)

    def __init__(self, *, run_id: str, path: str, directory: str, fd: int | None, lock: RunLock | None,
                 folder: Folder | None, size: int, new: bool,
                 repaired_tail: TornTail | None = None) -> None:
        self.run_id = run_id
        self.path = path
        self.directory = directory
        self.repaired_tail = repaired_tail
        self._fd: int | None = fd
        self._closed = False
        self._lock = lock
        self._folder = folder
        self._size = size
        self._last_seq = 0 if folder is None else folder.state().last_seq
        self._sync_dir = new
        self._poison: str | None = None

    # -- read-only views ------------------------------------------------------------

    @property
    def state(self) -> RunState:
        """The fold of every acknowledged record (:class:`RunState`; ``torn_tail`` None, ``good_size`` = file size).

        Raises :class:`ConsistencyError` before the meta record is appended.
        """
        folder = self._folder if self._folder is not None else Folder()
        return folder.state(torn_tail=None, good_size=self._size)

    @property
    def last_seq(self) -> int:
        """The seq of the last acknowledged record (0 for an empty journal)."""
        return self._last_seq

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    @property
    def poisoned(self) -> bool:
        """True after a failed write or fsync: every later append raises :class:`JournalPoisoned`."""
        return self._poison is not None

    # -- writing ---------------------------------------------------------------------

    def append(self, record: Record) -> int:
        """Append ``record`` durably and return the seq it was given (``last_seq + 1``; docs/spec.md section 9).

        The record's own ``seq`` is ignored and replaced.  Returns only after
        the line is written and fsynced (and, for the first append of a new
        journal, the store directory fsynced).  Raises, writing nothing:
        :class:`UsageError` (journal closed), :class:`JournalPoisoned` (an
        earlier write or fsync failed), :class:`InvalidRecord` (not a record,
        not JSON-encodable, or refused by the fold's table (docs/spec.md section 8):
        an orphan or duplicate tool_result, a meta that is not first, a record
        after a ``completed`` terminal), :class:`RecordTooLarge` (over the record limit,
        section 6).
        Raises :class:`StoreIOError` (``errno`` set) when the write, the
        fsync or the directory fsync fails; the journal is then poisoned.
        """
        if self._closed:
            raise UsageError(f"journal of run {self.run_id} is closed; open it again with "
                             f"{self.STORE}.open({self.run_id!r}) to append", run_id=self.run_id, path=self.path)
        if self._poison is not None:
            probes.hit("journal.append_refused_poisoned")
            raise JournalPoisoned(f"journal of run {self.run_id} refuses appends: {self._poison}; "
                                  f"end the run with an error and resume it in a new process",
                                  run_id=self.run_id, path=self.path)
        if not isinstance(record, _RECORD_TYPES):
            raise InvalidRecord(f"not a journal record: {type(record).__name__}", run_id=self.run_id)
        seq = self._last_seq + 1
        line = encode_record(record, seq)  # InvalidRecord / RecordTooLarge before any byte is written
        record = with_seq(record, seq)
        folder = self._folder if self._folder is not None else Folder()
        try:
            folder.check(record)  # the error add would raise; changes nothing
        except JournalError as exc:
            raise InvalidRecord(f"refusing to append {record.key} record as seq {seq} of run {self.run_id}: "
                                f"{exc.message}; nothing was written", run_id=self.run_id, path=self.path,
                                field=exc.field) from exc
        self._write_line(line, seq)
        try:
            folder.add(record)  # check passed: only a resource limit (MemoryError) can fail it now
        except BaseException as exc:
            # The line is on disk but this writer's state did not advance: a later append would reuse
            # seq.  Refuse every later append instead; the next open folds what is on disk.
            self._poison = f"the state after seq {seq} could not be updated ({type(exc).__name__})"
            raise
        self._folder = folder
        self._last_seq = seq
        self._size += len(line)
        return seq

    def _fail(self, what: str, seq: int, exc: OSError) -> StoreIOError:
        self._poison = f"{what} of seq {seq} failed ({exc.strerror or exc})"
        probes.hit(_POISON_PROBES[what])
        return StoreIOError(f"{what} of seq {seq} of run {self.run_id} failed: {exc.strerror or exc}; "
                            f"the journal is poisoned (no retry); records before seq {seq} stay readable",
                            path=self.path, run_id=self.run_id, errno=exc.errno)

    def _write_line(self, line: bytes, seq: int) -> None:
        fd = self._fd
        assert fd is not None
        try:
            written = ioseam.write(fd, line)  # ONE write of the whole line
        except OSError as exc:
            raise self._fail("write", seq, exc) from None
        if written != len(line):
            raise self._fail("write", seq, OSError(0, f"short write: {written} of {len(line)} bytes"))
        try:
            ioseam.fsync(fd)
        except OSError as exc:
            raise self._fail("fsync", seq, exc) from None
        if self._sync_dir:
            try:
                ioseam.fsync_dir(self.directory)
            except OSError as exc:
                raise self._fail("store directory fsync", seq, exc) from None
            self._sync_dir = False

    # -- closing -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the journal file, then release the run lock (last).  Idempotent.

        Raises :class:`StoreIOError` if a ``close`` fails; the lock is
        released even then.
        """
        if self._closed:
            return
        self._closed = True
        self._release()

    def _release(self) -> None:
        """Close the file, then release the lock (last); the lock is released even when the close fails."""
        fd, self._fd = self._fd, None
        assert fd is not None and self._lock is not None
        try:
            ioseam.close(fd)
        except OSError as exc:
            self._lock.release()
            raise StoreIOError(f"closing the journal of run {self.run_id} failed: {exc.strerror}",
                               path=self.path, run_id=self.run_id, errno=exc.errno) from None
        self._lock.release()

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("poisoned" if self._poison else "open")
        return f"Journal({self.run_id!r}, {state}, last_seq={self._last_seq})"
