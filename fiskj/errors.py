"""The fiskj error hierarchy.

Every error fiskj raises on purpose is a :class:`FiskjError`.  Each also
subclasses the builtin that fits it best (``ValueError``, ``BlockingIOError``,
``FileExistsError``, ...) so callers may catch either.  Errors carry their
context as attributes (``path``, ``line``, ``offset``, ``field``, ``run_id``)
and survive pickling, so the harness can pass them across process
boundaries.

Whose fault it is:

* the data on disk is bad: :class:`JournalError` and its subclasses;
* the caller broke a rule: :class:`UsageError` and its subclasses;
* another process holds the run: :class:`RunLocked`;
* the operating system failed us: :class:`StoreIOError`, :class:`JournalPoisoned`.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "FiskjError",
    "JournalError",
    "CorruptJournal",
    "RecordTooLarge",
    "UnsupportedVersion",
    "ConsistencyError",
    "UsageError",
    "InvalidRunID",
    "InvalidRecord",
    "StoreError",
    "RunLocked",
    "RunExists",
    "RunNotFound",
    "RunNeverCreated",
    "UnsafeFile",
    "StreamRefused",
    "StoreIOError",
    "JournalPoisoned",
    "ResumeRefused",
    "FingerprintMismatch",
    "ModelError",
    "ToolError",
]


class FiskjError(Exception):
    """Base of every error fiskj raises on purpose.

    ``message`` is the human text; keyword context (``path``, ``line``,
    ``offset``, ``field``, ``run_id`` and others) is stored as attributes
    and appended to ``str(error)`` as ``path:line: byte offset N`` where known.
    """

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context = dict(context)
        for key, value in context.items():
            setattr(self, key, value)

    # Defaults so that ``err.path`` etc. always exist.
    path: str | None = None
    line: int | None = None
    offset: int | None = None
    field: str | None = None
    run_id: str | None = None

    def __reduce__(self):  # survive pickling with context intact
        return (_rebuild, (type(self), self.message, self.context))

    def __str__(self) -> str:
        where = []
        if self.path is not None:
            where.append(str(self.path))
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.offset is not None:
            where.append(f"byte offset {self.offset}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        if not where:
            return self.message
        return f"{', '.join(where)}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        """Return ``{"kind", "message", "path", "line", "offset", "field"}`` (JSON-safe)."""
        return {
            "kind": type(self).__name__,
            "message": self.message,
            "path": None if self.path is None else str(self.path),
            "line": self.line,
            "offset": self.offset,
            "field": self.field,
        }


def _rebuild(cls: type, message: str, context: dict[str, Any]) -> FiskjError:
    err = cls.__new__(cls)
    FiskjError.__init__(err, message, **context)
    return err


# --- the data on disk is bad -------------------------------------------------


class JournalError(FiskjError, ValueError):
    """A journal's bytes break the format (docs/spec.md)."""


class CorruptJournal(JournalError):
    """A line that is not the final line cannot be parsed or is not a valid record."""


class RecordTooLarge(JournalError):
    """A record is larger than :data:`fiskj.codec.MAX_RECORD_BYTES` (spec: Limits)."""


class UnsupportedVersion(JournalError):
    """The meta record's version is newer than this reader (spec: Version policy)."""


class ConsistencyError(JournalError):
    """Records parse but contradict each other (seq order, orphan or duplicate tool result, ...)."""


# --- the caller broke a rule -------------------------------------------------


class UsageError(FiskjError, ValueError):
    """The caller asked for something the API or the format does not allow."""


class InvalidRunID(UsageError):
    """A run id is not 1-128 of ``[A-Za-z0-9_-]`` starting with a letter or digit."""


class InvalidRecord(UsageError):
    """A record object built in code is not valid (wrong type, missing field, too large)."""


class ResumeRefused(UsageError):
    """The run cannot be resumed (completed, ended, or otherwise not resumable)."""


class FingerprintMismatch(ResumeRefused):
    """The resume configuration differs from the journal's fingerprint.

    ``changes`` is a list of one human-readable line per changed field.
    """


# --- the store ----------------------------------------------------------------


class StoreError(FiskjError, OSError):
    """A store operation failed."""

    def __init__(self, message: str, **context: Any) -> None:
        FiskjError.__init__(self, message, **context)

    def __str__(self) -> str:
        return FiskjError.__str__(self)


class RunLocked(StoreError, BlockingIOError):
    """Another process holds the run's lock (it is being written or resumed)."""


class RunExists(StoreError, FileExistsError):
    """``create`` was asked for a run id that already has a journal."""


class RunNotFound(StoreError, FileNotFoundError):
    """No journal exists for the run id."""


class RunNeverCreated(RunNotFound):
    """The journal exists but holds no complete record: its create crashed before meta was acknowledged.

    Nothing of the run was ever acknowledged, so nothing is lost:
    ``create`` with the same id reclaims the file (under the lock).
    """


class UnsafeFile(StoreError, PermissionError):
    """A store path is a symlink, not a regular file, owned by another user, or too open."""


class StreamRefused(StoreError):
    """A JetStream store refused its stream at construction: missing, or able to lose or mutate a record.

    ``field`` names the stream setting (``max_msgs_per_subject``, ``storage``, ...); the message
    names the ``nats stream add`` / ``nats stream edit`` flags that fix it (docs/store.md).
    """


class StoreIOError(StoreError):
    """An operating-system call of the store failed (``errno`` attribute holds the code)."""


class JournalPoisoned(StoreError):
    """A write or fsync of this journal failed earlier; it refuses every later append.

    An fsync is never retried: after a failed fsync the kernel may have
    dropped the dirty pages, so a retry that succeeds proves nothing.
    """


# --- the agent -----------------------------------------------------------------


class ModelError(FiskjError, RuntimeError):
    """The model client got no answer or a bad one (docs/spec.md section 17).

    ``status`` is the HTTP status when the server answered (else ``None``);
    ``retryable`` is true for a transient failure that the same request may
    not meet again (a connection error, a timeout, HTTP 408, 409, 429 or
    5xx, a reply without a final ``stop_reason``), which
    :func:`fiskj.model.complete_with_retries` retries; ``retry_after`` is
    the wait in seconds the server asked for (``retry-after-ms`` /
    ``retry-after`` headers), else ``None``; ``retries`` how many retries
    were made before giving up (0 when none).
    """

    status: int | None = None
    retryable: bool = False
    retry_after: float | None = None
    retries: int = 0


class ToolError(FiskjError, RuntimeError):
    """A tool could not be started or its definition is invalid."""
