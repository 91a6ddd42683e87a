"""Patches of the engine's reading of its journal: lines, damage inside it, the fold's status (docs/spec.md
sections 3, 7 and 8).  A reader's ``_scan(f)`` yields records and sets ``good_size``, ``lines``, ``torn_tail``."""

from __future__ import annotations

import dataclasses
import io
from typing import Any, Iterator

from fiskj import reader as rd
from fiskj.errors import JournalError
from fiskj.fold import Folder

from harness.selftest.patches import wrap

__all__ = ["skip_interior_damage", "drop_final_record", "nul_block_ends_journal", "split_unicode_lines",
           "status_stays_suspended"]


def skip_interior_damage() -> None:
    """``JournalReader._scan`` skips an unparsable line in the middle of the journal instead of raising."""

    def _scan(self: Any, f: Any) -> Iterator[Any]:
        offset = 0
        for number, line in enumerate(iter(lambda: f.readline(rd.MAX_RECORD_BYTES + 1), b""), 1):
            if not line.endswith(b"\n"):
                self.torn_tail = rd.TornTail(offset, len(line))
                return
            try:
                record = rd.decode_record(line)
            except JournalError:
                if rd._at_eof(f):
                    self.torn_tail = rd.TornTail(offset, len(line))
                    return
                offset += len(line)  # skipped, and the scan carries on
                continue
            offset += len(line)
            self.good_size, self.lines = offset, number
            yield record

    rd.JournalReader._scan = _scan


def drop_final_record() -> None:
    """``JournalReader._scan`` reports a complete, valid final record as a torn tail (and does not yield it)."""

    @wrap(rd.JournalReader, "_scan")
    def _scan(original: Any, self: Any, f: Any) -> Iterator[Any]:
        sizes, records = [0], []
        for record in original(self, f):
            records.append(record)
            sizes.append(self.good_size)
        if records and self.torn_tail is None:
            records.pop()
            self.good_size = sizes[-2]
            self.torn_tail = rd.TornTail(sizes[-2], sizes[-1] - sizes[-2])
            self.lines -= 1
        yield from records


def nul_block_ends_journal() -> None:
    """``JournalReader._scan`` stops at the first line that starts with a NUL byte (what a power loss leaves at
    the end of a file) and reports the rest as a torn tail, good records after it included: open cuts them."""

    @wrap(rd.JournalReader, "_scan")
    def _scan(original: Any, self: Any, f: Any) -> Iterator[Any]:
        data = f.read()
        end = data.find(b"\n\x00") + 1 or len(data)
        yield from original(self, io.BytesIO(data[:end]))
        if end < len(data):
            self.torn_tail = rd.TornTail(end, len(data) - end)


def split_unicode_lines() -> None:
    """``JournalReader._scan`` decodes the file and splits it with ``str.splitlines(keepends=True)``, taking a
    piece that does not end in ``\\n`` for the torn tail.  fiskj writes U+0085 as raw UTF-8 (it escapes only
    U+2028 and U+2029, as Go does), so a record holding one is cut in two there: a resume cuts the journal at
    that record and does its work again (I2, I3), and the subject's reading disagrees (I10).  I4 does not see
    the loss when the resume writes the same bytes back, as a deterministic model and tools make it do."""

    def _scan(self: Any, f: Any) -> Iterator[Any]:
        data = f.read()
        offset = 0
        for number, line in enumerate(data.decode("utf-8", "surrogateescape").splitlines(keepends=True), 1):
            raw = line.encode("utf-8", "surrogateescape")
            if not line.endswith("\n"):
                self.torn_tail = rd.TornTail(offset, len(data) - offset)
                return
            try:
                record = rd.decode_record(raw)
            except JournalError as exc:
                if offset + len(raw) == len(data) and rd._unparsable(raw):
                    self.torn_tail = rd.TornTail(offset, len(raw))
                    return
                raise rd.with_context(exc, path=self.path, line=number, offset=offset) from None
            offset += len(raw)
            self.good_size, self.lines = offset, number
            yield record

    rd.JournalReader._scan = _scan


def status_stays_suspended() -> None:
    """``Folder.state`` of an ``open`` run takes the status of the last terminal record the fold saw, wherever
    it is (defect 5: a resumed run that crashed reads ``suspended``)."""

    @wrap(Folder, "state")
    def state(original: Any, self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        terminal = getattr(self, "_terminal", None)
        if result.status == "open" and terminal is not None:
            return dataclasses.replace(result, status=terminal.reason)
        return result
