"""Read a journal file into records, tolerating exactly one torn tail.

Source: seed "Reading tolerates exactly one torn tail line" and FORMAT.md
"Durability rules"; docs/spec.md "Reading" is normative.

* Lines are split on the byte ``\\n`` only (binary read: no universal
  newlines, no ``splitlines``), so U+2028, U+0085, ``\\r`` and friends inside
  a record are data, never line ends.
* The final segment is a **torn tail** when it does not end in ``\\n`` (an
  append is one write of a whole line, so a line without its ``\\n`` was
  never acknowledged), or when it ends in ``\\n`` but cannot be parsed (not
  UTF-8, not JSON, larger than the record limit; e.g. zero-filled after a
  power loss).  It is dropped and reported as :class:`TornTail`
  (``offset``, ``length``), never raised.
* Any other line that cannot be parsed or is not a valid record is
  corruption: :class:`CorruptJournal` naming the path, 1-based line number
  and byte offset.  A final line that is valid JSON but not a valid record
  is corruption too: it was written whole.
* Memory is bounded: one line at a time, at most :data:`MAX_RECORD_BYTES`
  of it; an over-long line is skipped in chunks, never held.
"""

from __future__ import annotations

import gc
import io
import json
import os
from typing import BinaryIO, Iterator

from .codec import MAX_RECORD_BYTES, decode_record
from .errors import CorruptJournal, FiskjError, JournalError, RecordTooLarge, StoreIOError, UnsupportedVersion
from .fold import Folder, RunState, TornTail
from .records import Record

__all__ = ["JournalReader", "read_records", "read_state", "TornTail", "with_context"]

_CHUNK = 1 << 20


def with_context(err: FiskjError, **context: object) -> FiskjError:
    """Return a copy of ``err`` (same class and message) with ``context`` attributes added."""
    merged = {**err.context, **{k: v for k, v in context.items() if v is not None}}
    return type(err)(err.message, **merged)


class JournalReader:
    """Iterate over the records of a journal, streaming.

    ``source`` is a path or a binary file object positioned at the start.
    After iteration ends: ``torn_tail`` is the dropped final segment (or
    ``None``), ``good_size`` the byte length of the complete valid lines
    (where a writer must cut the file before appending) and ``lines`` the
    number of records yielded.  Raises :class:`CorruptJournal` /
    :class:`RecordTooLarge` / :class:`UnsupportedVersion` with ``path``,
    ``line`` and ``offset``; :class:`StoreIOError` when the file cannot be
    read.
    """

    def __init__(self, source: str | os.PathLike[str] | BinaryIO, path: str | None = None) -> None:
        self._source = source
        self.path = path if path is not None else (os.fspath(source) if isinstance(source, (str, os.PathLike)) else None)
        self.torn_tail: TornTail | None = None
        self.good_size = 0
        self.lines = 0

    def __iter__(self) -> Iterator[Record]:
        if isinstance(self._source, (str, os.PathLike)):
            try:
                f = open(self._source, "rb", buffering=_CHUNK)  # noqa: SIM115
            except OSError as exc:
                raise StoreIOError(f"cannot open journal: {exc.strerror}", path=self.path, errno=exc.errno) from None
            with f:
                try:
                    yield from self._scan(f)
                except OSError as exc:  # EIO and friends while reading: typed, like a failed open
                    raise StoreIOError(f"cannot read journal: {exc.strerror or exc}", path=self.path,
                                       errno=exc.errno) from None
        else:
            yield from self._scan(self._source)

    def _scan(self, f: BinaryIO) -> Iterator[Record]:
        offset = 0
        line_no = 0
        readline = f.readline
        limit = MAX_RECORD_BYTES
        while True:
            line = readline(limit + 1)
            if not line:
                return
            line_no += 1
            if len(line) > limit:
                # Over-long line: skip it in chunks without holding it.
                length = len(line)
                ended = line.endswith(b"\n")
                while not ended:
                    chunk = readline(_CHUNK)
                    if not chunk:
                        break
                    length += len(chunk)
                    ended = chunk.endswith(b"\n")
                if not ended or _at_eof(f):
                    self.torn_tail = TornTail(offset, length)
                    return
                raise RecordTooLarge(
                    f"line of {length} bytes exceeds the record limit of {limit} bytes",
                    path=self.path, line=line_no, offset=offset)
            if line[-1:] != b"\n":
                # Only the last segment can lack its newline: a torn tail.
                self.torn_tail = TornTail(offset, len(line))
                return
            try:
                record = decode_record(line)
            except UnsupportedVersion as exc:
                raise with_context(exc, path=self.path, line=line_no, offset=offset) from None
            except JournalError as exc:
                if _at_eof(f) and _unparsable(line):
                    self.torn_tail = TornTail(offset, len(line))
                    return
                raise with_context(exc, path=self.path, line=line_no, offset=offset) from None
            offset += len(line)
            self.good_size = offset
            self.lines = line_no
            yield record


def _at_eof(f: BinaryIO) -> bool:
    peek = getattr(f, "peek", None)
    if peek is not None:
        return not peek(1)
    pos = f.tell()
    more = f.read(1)
    f.seek(pos)
    return not more


def _unparsable(line: bytes) -> bool:
    """True when ``line`` is not a JSON object at all (as opposed to a valid object with bad fields).

    Strict JSON: ``NaN`` and ``Infinity`` are not JSON, so a line holding them is unparsable.
    """
    try:
        return not isinstance(json.loads(line.decode("utf-8"), parse_constant=_not_json), dict)
    except (ValueError, RecursionError):
        return True


def _not_json(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def read_records(source: str | os.PathLike[str] | BinaryIO) -> tuple[list[Record], TornTail | None]:
    """Read every record of a journal; return ``(records, torn_tail)``.  Errors as :class:`JournalReader`."""
    reader = JournalReader(source)
    records = list(reader)
    return records, reader.torn_tail


def read_state(source: str | os.PathLike[str] | BinaryIO | bytes) -> RunState:
    """Read and fold a journal in one streaming pass; return its :class:`RunState`.

    ``source`` may also be the journal's bytes.  The state carries
    ``torn_tail`` and ``good_size``.  Fold errors (:class:`ConsistencyError`)
    get the path and the line's byte offset added.  A file with no complete
    record (empty, or only a torn line) raises :class:`CorruptJournal`.
    """
    if isinstance(source, (bytes, bytearray)):
        source = io.BufferedReader(io.BytesIO(bytes(source)))  # type: ignore[arg-type]
    reader = JournalReader(source)
    folder = Folder()
    offsets = 0
    # The fold keeps the conversation: hundreds of thousands of new containers and no cycle
    # among them.  The cyclic collector would traverse all of them again and again as they
    # pile up (a third of the time of a large read), so it is paused for the read, and
    # resumed, if it was running, however the read ends.
    collecting = gc.isenabled()
    if collecting:
        gc.disable()
    try:
        add = folder.add
        for record in reader:
            try:
                add(record)
            except JournalError as exc:
                raise with_context(exc, path=reader.path, offset=offsets) from None
            offsets = reader.good_size
    finally:
        if collecting:
            gc.enable()
    if reader.lines == 0:
        what = "is empty" if reader.torn_tail is None else f"holds only a torn line of {reader.torn_tail.length} bytes"
        raise CorruptJournal(f"journal {what}: no meta record", path=reader.path, line=1, offset=0)
    return folder.state(torn_tail=reader.torn_tail, good_size=reader.good_size)
