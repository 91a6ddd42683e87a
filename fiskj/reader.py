"""Read a journal file into records, tolerating exactly one torn tail (docs/spec.md section 7, normative).

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
* Memory is bounded: complete lines are read and parsed in batches of at
  most 256 lines, a batch ending once it holds 1 MiB (so at most 1 MiB plus
  one line of up to :data:`MAX_RECORD_BYTES`); an over-long line is skipped
  in chunks, never held.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
from dataclasses import dataclass
from typing import BinaryIO, Iterator

from .codec import MAX_RECORD_BYTES, _decode_value, _parse_lines, decode_record
from .errors import CorruptJournal, FiskjError, JournalError, RecordTooLarge, StoreIOError, UnsupportedVersion
from .fold import Folder, RunState
from .records import Record

__all__ = ["JournalReader", "read_records", "read_state", "TornTail", "with_context", "collector_paused"]

_CHUNK = 1 << 20

#: Lines parsed together (fewer, at most _BATCH_BYTES of them, when they are long; see codec._parse_lines).
_BATCH_LINES = 256
_BATCH_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class TornTail:
    """An incomplete or unparsable final line the reader dropped: byte ``offset`` and ``length`` (docs/spec.md section 7)."""

    offset: int
    length: int

    def to_json(self) -> dict[str, int]:
        """Return ``{"offset": int, "length": int}``."""
        return {"offset": self.offset, "length": self.length}


def with_context(err: FiskjError, **context: object) -> FiskjError:
    """Return a copy of ``err`` (same class and message) with ``context`` attributes added."""
    merged = {**err.context, **{k: v for k, v in context.items() if v is not None}}
    return type(err)(err.message, **merged)


class JournalReader:
    """Iterate over the records of a journal, streaming (docs/spec.md section 7).

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
            # Read ahead a batch of complete lines (each ends in \n, none over the limit), then
            # parse them in one call (codec._parse_lines); ``line`` is what stopped the batch.
            batch: list[bytes] = []
            size = 0
            line: bytes | None = None
            while len(batch) < _BATCH_LINES and size < _BATCH_BYTES:
                line = readline(limit + 1)
                if len(line) > limit or line[-1:] != b"\n":  # over-long, torn, or b"" at the end
                    break
                batch.append(line)
                size += len(line)
                line = None
            values = _parse_lines(batch) if len(batch) > 1 else None
            last = len(batch) - 1
            for i, good in enumerate(batch):
                line_no += 1
                try:
                    record = decode_record(good) if values is None else _decode_value(values[i])
                except UnsupportedVersion as exc:
                    raise with_context(exc, path=self.path, line=line_no, offset=offset) from None
                except JournalError as exc:
                    # The file's final line?  Only the batch's last, when nothing but the end follows.
                    final = i == last and (line == b"" or (line is None and _at_eof(f)))
                    if final and _unparsable(good):
                        self.torn_tail = TornTail(offset, len(good))
                        return
                    raise with_context(exc, path=self.path, line=line_no, offset=offset) from None
                offset += len(good)
                self.good_size = offset
                self.lines = line_no
                yield record
            if line is None:
                continue
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
            # Only the last segment can lack its newline: a torn tail.
            self.torn_tail = TornTail(offset, len(line))
            return


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


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a fold builds the state.

    A fold keeps the conversation: hundreds of thousands of new containers, none in a cycle.
    While they pile up, the collector would traverse all of them again and again (each pass
    costs about as much as parsing a third of the journal); and when it is resumed, its first
    young pass would traverse them all once more.  So it is paused for the read and, if it was
    running, resumed however the read ends; on the way the objects of the young generations
    are moved to the oldest one (``gc.freeze`` then ``gc.unfreeze``: two list splices, no
    traversal), which full collections scan as usual.  That step is skipped when the program
    keeps objects frozen itself (``gc.get_freeze_count()``), so its frozen set is never thawed;
    once seen, that is remembered (the count walks the whole frozen set: 1.5 ms in a process that
    froze a pre-imported interpreter, which a process forked from it then never pays).
    """
    global _program_freezes
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if not _program_freezes:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            else:
                _program_freezes = True
        gc.enable()


#: The program keeps objects frozen itself (``gc.freeze``): :func:`collector_paused` leaves them so.
_program_freezes = False


def read_records(source: str | os.PathLike[str] | BinaryIO) -> tuple[list[Record], TornTail | None]:
    """Read every record of a journal; return ``(records, torn_tail)``.  Errors as :class:`JournalReader`."""
    reader = JournalReader(source)
    records = list(reader)
    return records, reader.torn_tail


def read_state(source: str | os.PathLike[str] | BinaryIO | bytes) -> RunState:
    """Read and fold a journal in one streaming pass; return its :class:`RunState` (docs/spec.md sections 7 and 8).

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
    with collector_paused():
        add = folder.add
        for record in reader:
            try:
                add(record)
            except JournalError as exc:
                raise with_context(exc, path=reader.path, offset=offsets) from None
            offsets = reader.good_size
    if reader.lines == 0:
        what = "is empty" if reader.torn_tail is None else f"holds only a torn line of {reader.torn_tail.length} bytes"
        raise CorruptJournal(f"journal {what}: no meta record", path=reader.path, line=1, offset=0)
    return folder.state(torn_tail=reader.torn_tail, good_size=reader.good_size)
