"""Mutant ``reader-splits-unicode-lines``: the reader splits the journal with ``str.splitlines``.

A line of a journal ends at the byte ``\\n`` only (docs/spec.md section 3);
U+0085, U+2028, U+2029 and the other characters ``str.splitlines`` ends a
line at are data inside a record.  This reader decodes the file and splits
it with ``splitlines(keepends=True)``, and takes a piece that does not end
in ``\\n`` for the torn tail (only the last line can lack its newline, it
assumes).  fiskj writes U+0085 as raw UTF-8 (only U+2028 and U+2029 are
escaped, as Go does), so a record holding one is cut in two: the reader
reports a torn tail at that record, and a resume cuts the journal there,
losing acknowledged records, and runs their tools and model calls again
(I2, I3); the subject's own reading disagrees with the journal (I10).  (I4
does not see the loss when the resume writes the same records back, byte
for byte, as a deterministic model and tools make it do.)
"""

from __future__ import annotations

NAME = "reader-splits-unicode-lines"
DEFECT = "the reader splits lines with str.splitlines, so U+0085 (and U+2028, U+2029, ...) inside a record ends a line"
FAMILY = "kill"


def apply() -> None:
    from fiskj import reader as rd
    from fiskj.errors import JournalError

    def _scan(self, f):
        data = f.read()
        offset = 0
        for number, line in enumerate(data.decode("utf-8", "surrogateescape").splitlines(keepends=True), 1):
            raw = line.encode("utf-8", "surrogateescape")
            if not line.endswith("\n"):  # the bug: a piece cut at U+0085 "lacks its newline", so it is torn
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


apply()  # a preload: importing this module applies the patch (in a child process only)
