"""The tail nemesis: mutations of a journal's bytes, each labelled with the reader's right answer.  Pure (no IO).

Input: the bytes of a clean journal (complete lines, each ending in ``\\n``).
:func:`mutations` yields :class:`Mutation` s:

* ``cut``: the file cut at every byte offset of its last record
  (``cut_every_offset_of_last_record``) and at ``random_cuts`` seeded
  random offsets before it;
* ``zeros``: ``zero_tail_bytes`` NUL bytes appended, without and with a final
  ``\\n``, and the last record overwritten by NULs (a power loss that kept
  the size but not the data; F03);
* ``garbage``: ``garbage_tails`` random non-JSON tails, without and with a
  final ``\\n``, and as two lines (the first is then interior);
* ``mid-run``: with ``mid_run``, a zero tail and a garbage line after a
  seeded record boundary inside the run (a run cut there is resumable);
* ``interior``: with ``interior``, a seeded line inside the journal (good
  lines after it) overwritten by NULs, with garbage glued to it, or cut off
  half-way: corruption a reader must refuse, never take for the end of the
  journal (a resume of it must change nothing);
* ``flip``: ``flips`` bytes inside lines replaced by NUL, 0xFF or ``\\n``,
  each of which no JSON line survives (in an interior line, or the last);
* ``intact``: the journal itself.

An opaque store (a database, docs/subject.md "Journal formats") is damaged where the run last wrote it
instead (:func:`store_mutations`): no reader answer is labelled, its resume is judged.

What the reader must answer (the label, :meth:`Mutation.expected`: **torn**, **clean** or **corrupt**) is
docs/spec.md section 7 (field cases F01 and F03); the tail family records a reader's answer next to it
(:class:`~harness.history.model.ReaderCheck`) and I5 judges it (:mod:`harness.checkers.i5_reader_answers`).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from typing import Any, Iterator

from harness.names import FISK_AI_V2

__all__ = ["PAGE_BYTES", "Mutation", "mutations", "store_mutations", "mutation_by_id", "line_spans"]

#: The page a database writes at once (SQLite's default page size); a store's cuts also fall on sectors.
PAGE_BYTES = 4096


@dataclass(frozen=True)
class Mutation:
    """One mutated journal and what the reader must answer for it.

    ``expect``: ``"clean"``, ``"torn"`` or ``"corrupt"``.  ``seqs``: the seqs of
    the records the reader must return (clean and torn), ``good_size`` their
    byte length, ``torn``: ``(offset, length)`` of the torn tail; ``line`` and
    ``offset``: the corrupt line (1-based) and where it starts; ``file``: a store's file ``data`` replaces
    (its path below the store's folder; ``""``: the journal).
    """

    id: str
    kind: str
    data: bytes
    expect: str
    seqs: tuple[int, ...] = ()
    good_size: int = 0
    torn: tuple[int, int] | None = None
    line: int | None = None
    offset: int | None = None
    file: str = ""

    def describe(self) -> dict:
        """A JSON-ready label (without the bytes)."""
        return {"id": self.id, "kind": self.kind, "size": len(self.data), "expect": self.expect,
                "records": len(self.seqs), "good_size": self.good_size,
                "torn": list(self.torn) if self.torn else None, "line": self.line, **({"file": self.file} if self.file else {})}

    def expected(self) -> dict[str, Any]:
        """What the reader must answer (docs/spec.md section 7), as JSON: ``kind`` (``clean``, ``torn``,
        ``corrupt``), ``seqs``, ``good_size``, ``torn``, ``line``, ``offset``."""
        return {"kind": self.expect, "seqs": list(self.seqs), "good_size": self.good_size,
                "torn": list(self.torn) if self.torn else None, "line": self.line, "offset": self.offset}


def line_spans(journal: bytes) -> list[tuple[int, int]]:
    """``(start, end)`` of every line, ``end`` after its ``\\n``; raises ValueError unless all lines end in ``\\n``."""
    spans, start = [], 0
    while start < len(journal):
        nl = journal.find(b"\n", start)
        if nl < 0:
            raise ValueError(f"journal does not end in a newline (a torn tail at offset {start}); "
                             f"give the tail nemesis a clean journal")
        spans.append((start, nl + 1))
        start = nl + 1
    return spans


def _seqs(journal: bytes, spans: list[tuple[int, int]]) -> list[int]:
    out = []
    for i, (a, b) in enumerate(spans):
        try:
            out.append(int(json.loads(journal[a:b])["seq"]))
        except (ValueError, KeyError, TypeError):
            raise ValueError(f"line {i + 1} of the journal is not a record; "
                             f"give the tail nemesis a clean journal") from None
    return out


def _garbage(rng: random.Random, size: int) -> bytes:
    """Random bytes with no ``\\n`` that are not JSON (first byte ``#``: nothing JSON starts so)."""
    body = bytes(b for b in rng.randbytes(size) if b != 0x0A)
    return b"#" + body


def mutations(journal: bytes, *, seed: int | str = 0, cut_every_offset_of_last_record: bool = True,
              random_cuts: int = 16, zero_tail_bytes: int = 4096, garbage_tails: int = 4, flips: int = 8,
              max_garbage: int = 300, mid_run: bool = True, fmt: str = FISK_AI_V2,
              interior: bool = True) -> Iterator[Mutation]:
    """Yield the labelled mutations of ``journal`` (deterministic for a ``seed``); see the module docstring.

    ``fmt`` (:data:`harness.names.JOURNAL_FORMATS`): a ``fisk-ai-v2`` journal's lines are known by their
    records' seqs; any other format's by their 0-based line numbers (``seqs`` then counts lines)."""
    spans = line_spans(journal)
    if not spans:
        raise ValueError("journal is empty; give the tail nemesis a journal with records")
    seqs = _seqs(journal, spans) if fmt == FISK_AI_V2 else list(range(len(spans)))
    n, size = len(spans), len(journal)
    rng = random.Random(f"tails:{seed}")
    last_start = spans[-1][0]

    cut = lambda c, label: _cut(journal, spans, seqs, c, label)  # noqa: E731

    yield Mutation("intact", "intact", journal, "clean", tuple(seqs), size)
    if cut_every_offset_of_last_record:
        for c in range(last_start, size):
            yield cut(c, "cut")
    if last_start > 0:
        for c in sorted(rng.sample(range(last_start), min(random_cuts, last_start))):
            yield cut(c, "cut")
    everything = tuple(seqs)
    if zero_tail_bytes > 0:
        zeros = bytes(zero_tail_bytes)
        yield Mutation(f"zeros{zero_tail_bytes}", "zeros", journal + zeros, "torn", everything, size,
                       (size, zero_tail_bytes))
        yield Mutation(f"zeros{zero_tail_bytes}+nl", "zeros", journal + zeros + b"\n", "torn", everything, size,
                       (size, zero_tail_bytes + 1))
    last_len = size - last_start
    for nl in (b"", b"\n"):
        data = journal[:last_start] + bytes(last_len - len(nl)) + nl
        yield Mutation("zeroed-last" + ("+nl" if nl else ""), "zeros", data, "torn", everything[:-1], last_start,
                       (last_start, last_len))
    for g in range(garbage_tails):
        junk = _garbage(rng, rng.randrange(1, max_garbage))
        for nl in (b"", b"\n"):
            yield Mutation(f"garbage{g}" + ("+nl" if nl else ""), "garbage", journal + junk + nl, "torn", everything,
                           size, (size, len(junk) + len(nl)))
        yield Mutation(f"garbage{g}-2lines", "garbage", journal + junk + b"\n" + junk, "corrupt",
                       line=n + 1, offset=size)
    if mid_run and n >= 2:
        k = rng.randrange(1, n)
        end = spans[k - 1][1]
        junk = _garbage(rng, rng.randrange(1, max_garbage)) + b"\n"
        for name, tail in ((f"mid-run@{end}+zeros", bytes(zero_tail_bytes or 512)), (f"mid-run@{end}+garbage", junk)):
            yield Mutation(name, "mid-run", journal[:end] + tail, "torn", tuple(seqs[:k]), end, (end, len(tail)))
    for f in range(flips):
        k = rng.randrange(n)
        a, b = spans[k]
        pos = rng.randrange(a, b - 1)
        byte = rng.choice((b"\x00", b"\xff", b"\n"))
        yield _flip(journal, spans, seqs, pos, byte, f"flip{f}@{pos}:{byte.hex()}")
    if interior and n >= 3:  # damage inside the journal, good lines after it (docs/spec.md section 7)
        k = rng.randrange(1, n - 1)
        a, b = spans[k]
        body = journal[a:b - 1]
        for name, line in ((f"nul-block@{a}", bytes(len(body)) + b"\n"),            # a block of NULs mid-file
                           (f"glued@{a}", body + _garbage(rng, 24) + b"\n"),      # garbage glued to a record
                           (f"cut-off@{a}", body[:max(1, len(body) // 2)] + b"\n")):  # a cut-off line
            yield Mutation(name, "interior", journal[:a] + line + journal[b:], "corrupt", line=k + 1, offset=a)


def store_mutations(files: dict[str, bytes], last: list[tuple[str, int, int]], *, sector: int = 512,
                    page: int = PAGE_BYTES) -> Iterator[Mutation]:
    """Damage of an opaque store at the run's last writes (pure): for each ``(file, start, end)`` of ``last``
    (a file of ``files`` and the byte range of the last write to it), the file cut at every page
    (``cut-page@C``) and sector (``cut-sector@C``) boundary in ``[start, end)``, its last page zeroed
    (``zero-page@P:Q``) and the whole last write zeroed (``zero-write@A:B``), the size kept.  Each names its
    file (``NAME/cut-page@4096``); ``expect`` is ``"damaged"`` (no reader answer is labelled)."""
    for name, a, b in last:
        data = files[name]
        b = min(b, len(data))
        for c in range(-(-a // sector) * sector, b, sector):
            yield Mutation(f"{name}/cut-{'page' if c % page == 0 else 'sector'}@{c}", "cut", data[:c], "damaged",
                           file=name)
        for how, lo in (("page", max(0, (b - 1) // page * page)), ("write", a)):
            if lo < b:
                yield Mutation(f"{name}/zero-{how}@{lo}:{b}", "zeros", data[:lo] + bytes(b - lo) + data[b:],
                               "damaged", file=name)


def _cut(journal: bytes, spans: list[tuple[int, int]], seqs: list[int], c: int, label: str = "cut") -> Mutation:
    """``journal`` cut at byte ``c``: clean at a line end, else torn."""
    n, size = len(spans), len(journal)
    k = next(i for i, (a, b) in enumerate(spans) if a <= c < b) if c < size else n
    a = spans[k][0] if k < n else size
    if c == a:
        return Mutation(f"cut@{c}", label, journal[:c], "clean", tuple(seqs[:k]), a)
    return Mutation(f"cut@{c}", label, journal[:c], "torn", tuple(seqs[:k]), a, (a, c - a))


def _flip(journal: bytes, spans: list[tuple[int, int]], seqs: list[int], pos: int, byte: bytes, name: str) -> Mutation:
    """``journal`` with the bytes from ``pos`` (inside a line, up to its newline) replaced by ``byte``: a torn
    last line, else corrupt."""
    k = next(i for i, (a, b) in enumerate(spans) if a <= pos < b - 1 and pos + len(byte) <= b)
    a, b = spans[k]
    data = journal[:pos] + byte + journal[pos + len(byte):]
    if k == len(spans) - 1 and b"\n" not in byte:
        return Mutation(name, "flip", data, "torn", tuple(seqs[:-1]), a, (a, b - a))
    return Mutation(name, "flip", data, "corrupt", line=k + 1, offset=a)


def mutation_by_id(journal: bytes, mid: str, fmt: str = FISK_AI_V2) -> Mutation:
    """The mutation of ``journal`` named ``mid`` as a shrink names one (pure): ``cut@C``, ``zerosN`` (``+nl``) or
    ``flip@POS:HEX`` (the bytes from ``POS`` replaced by ``HEX``; ``HEX*N``: ``N`` times); a negative ``C`` or
    ``POS`` counts from the end (a shrink's names: the same place in a journal a few bytes longer or shorter).
    Raises ``ValueError`` for another name, or one that names no such place in ``journal``."""
    spans = line_spans(journal)
    seqs = _seqs(journal, spans) if fmt == FISK_AI_V2 else list(range(len(spans)))
    how, _, at = mid.partition("@")
    try:
        pos = int(at.split(":")[0]) % len(journal) if how in ("cut", "flip") else 0
        if how == "cut":
            return replace(_cut(journal, spans, seqs, pos), id=mid)
        if how == "flip":
            hexed, _, times = at.split(":")[1].partition("*")
            return _flip(journal, spans, seqs, pos, bytes.fromhex(hexed) * int(times or 1), mid)
        if mid.startswith("zeros") and int(mid[5:].removesuffix("+nl")) > 0:
            tail = bytes(int(mid[5:].removesuffix("+nl"))) + (b"\n" if mid.endswith("+nl") else b"")
            return Mutation(mid, "zeros", journal + tail, "torn", tuple(seqs), len(journal), (len(journal), len(tail)))
    except (ValueError, IndexError, StopIteration, ZeroDivisionError):
        pass
    raise ValueError(f"no tail mutation {mid!r} of this journal ({len(journal)} bytes, {len(spans)} lines)")
