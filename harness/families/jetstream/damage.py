"""Damage to one replica's stream block files (the jetstream family's ``fault = "damage"``, after Jepsen's NATS
2.12.1 analysis): the trial, its points and a block file's record layout are docs/jetstream.md "Server faults".

The pure part: :func:`records` parses a block file (nats-server's file store, little endian); :func:`point`
chooses the byte (and bit) a damage point hits from the block's bytes and a seed; :func:`damage` returns the
damaged bytes.  Trial ``i`` is ``POINTS[i % len(POINTS)]``.  The offset depends only on the block file's bytes
and the seed, never on timing.
"""

from __future__ import annotations

import glob
import os
import random
import signal
import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fiskj.jetstream import NatsClient
from nats.js.errors import NotFoundError

from harness.errors import SetupError
from harness.families.jetstream.cluster import STREAM, current_leader, make_leader, resumed
from harness.history.model import Fault, History
from harness.subject.nats_server import meta_leader

if TYPE_CHECKING:
    from harness.runner.trial import Runner
    from harness.scenario.model import Scenario
    from harness.subject.nats_server import NatsServer

__all__ = ["Record", "records", "point", "damage", "POINTS", "MODES", "PARTS", "spec_for", "last_block", "run"]

#: A record's fixed header: ``rl`` u32, ``seq`` u64, ``ts`` i64, subject length u16 (bytes).
HEADER = 22
#: The record's trailing checksum (bytes).
CHECKSUM = 8
_HBIT = 1 << 31  # rl: the record has headers
_SEQ_FLAGS = (1 << 63) | (1 << 62)  # seq: erased, tombstone
#: The damage modes: cut the block file at the offset, or flip one bit of the byte at it.
MODES = ("truncate", "bitflip")
#: Where in a record the offset falls: ``inside`` (any byte after its first: a cut mid-record), ``header``
#: (its 22-byte fixed header), ``payload`` (its body; its headers when the body is empty), ``checksum``.
PARTS = ("inside", "header", "payload", "checksum")
#: The bundled trials, ``(mode, record, part)``; ``record`` indexes the last block's records (negative: from the end).
POINTS: tuple[tuple[str, int, str], ...] = (
    ("truncate", -1, "inside"),     # the last record cut mid-way: a torn tail
    ("bitflip", -1, "payload"),     # the last record's body
    ("bitflip", -1, "checksum"),    # the last record's checksum
    ("truncate", 0, "inside"),      # the block cut inside its first record: every record of it gone
    ("bitflip", 0, "payload"),      # the first record's body
    ("bitflip", 0, "header"),       # the first record's length, sequence or timestamp
)


@dataclass(frozen=True)
class Record:
    """One message record of a block file: ``start`` and ``length`` (bytes, checksum included), ``seq``
    (flags cleared), ``subject``, the byte spans ``[a, b)`` of its ``header``, ``payload`` and ``checksum``."""

    start: int
    length: int
    seq: int
    subject: str
    header: tuple[int, int]
    payload: tuple[int, int]
    checksum: tuple[int, int]

    def span(self, part: str) -> tuple[int, int]:
        """The byte span ``part`` (one of :data:`PARTS`) names; ``inside`` is every byte but the first."""
        return (self.start + 1, self.start + self.length) if part == "inside" else getattr(self, part)


def records(data: bytes) -> list[Record]:
    """The whole records at the start of block file bytes ``data``, in order; parsing stops at the first that
    does not fit (a torn or damaged tail: what follows is not a record)."""
    out, at = [], 0
    while at + HEADER + CHECKSUM <= len(data):
        rl, seq, _ts, slen = struct.unpack_from("<IQqH", data, at)
        length, has_headers = rl & ~_HBIT, bool(rl & _HBIT)
        end = at + length
        body = at + HEADER + slen
        if length < HEADER + CHECKSUM + slen or end > len(data):
            break
        if has_headers:
            if body + 4 > end - CHECKSUM:
                break
            body += 4 + struct.unpack_from("<I", data, body)[0]
            if body > end - CHECKSUM:
                break
        subject = data[at + HEADER:at + HEADER + slen].decode("utf-8", "replace")
        payload = (body, end - CHECKSUM) if body < end - CHECKSUM else (at + HEADER + slen, end - CHECKSUM)
        out.append(Record(at, length, seq & ~_SEQ_FLAGS, subject, (at, at + HEADER), payload, (end - CHECKSUM, end)))
        at = end
    return out


def point(data: bytes, mode: str, record: int, part: str, seed: int) -> tuple[int, int, Record]:
    """The ``(offset, bit, record)`` damage ``mode`` hits in block file bytes ``data``: a byte of ``part`` of
    record ``record`` (an index of :func:`records`), chosen with ``random.Random`` seeded by ``seed``, the mode,
    record and part; ``bit`` 0-7 (a bit flip's; 0 for a cut).  Raises :class:`ValueError` for an unknown mode or
    part, no such record, or an empty span."""
    if mode not in MODES or part not in PARTS:
        raise ValueError(f"damage mode {mode!r} / part {part!r}: expected one of {MODES} / {PARTS}")
    recs = records(data)
    if not -len(recs) <= record < len(recs):
        raise ValueError(f"no record {record} in a block of {len(recs)} record(s)")
    rec = recs[record]
    lo, hi = rec.span(part)
    if lo >= hi:
        raise ValueError(f"record {record} has no {part} bytes")
    rng = random.Random(f"{seed}:{mode}:{record}:{part}")
    offset = rng.randrange(lo, hi)
    return offset, (rng.randrange(8) if mode == "bitflip" else 0), rec


def damage(data: bytes, mode: str, offset: int, bit: int = 0) -> bytes:
    """``data`` damaged: ``truncate`` keeps its first ``offset`` bytes, ``bitflip`` flips bit ``bit`` (0: the
    least significant) of byte ``offset``.  Raises :class:`ValueError` for an unknown mode or an offset or bit out
    of range."""
    if mode == "truncate":
        if not 0 <= offset <= len(data):
            raise ValueError(f"cannot cut {len(data)} bytes at {offset}")
        return data[:offset]
    if mode == "bitflip":
        if not 0 <= offset < len(data) or not 0 <= bit < 8:
            raise ValueError(f"no bit {bit} of byte {offset} in {len(data)} bytes")
        return data[:offset] + bytes([data[offset] ^ (1 << bit)]) + data[offset + 1:]
    raise ValueError(f"damage mode {mode!r}: expected one of {MODES}")


def spec_for(i: int) -> dict[str, Any]:
    """Trial ``i``'s schedule entry: ``{"kind": "damage", "mode", "record", "part", "clean_stop"}``:
    :data:`POINTS` ``[i % len(POINTS)]``, and ``clean_stop`` for the second round of them (``i // len(POINTS)``
    odd): the follower is first stopped cleanly (SIGTERM) and restarted, so it writes its stream state file
    (``msgs/index.db``) and compacts its raft log into a snapshot before it is killed and damaged."""
    mode, record, part = POINTS[i % len(POINTS)]
    return {"kind": "damage", "mode": mode, "record": record, "part": part,
            "clean_stop": (i // len(POINTS)) % 2 == 1}


def last_block(store_dir: str, stream: str) -> str | None:
    """The path of the stream's last message block file (the highest number) in a server's store, or None."""
    blocks = glob.glob(os.path.join(glob.escape(store_dir), "jetstream", "*", "streams", stream, "msgs", "*.blk"))
    return max(blocks, key=lambda p: int(os.path.basename(p)[:-4]), default=None)


def _held(node: NatsServer, stream: str) -> int:
    """The highest sequence the whole records of ``node``'s block files of ``stream`` hold (0: none)."""
    blocks = glob.glob(os.path.join(glob.escape(node.store_dir), "jetstream", "*", "streams", stream, "msgs", "*.blk"))
    top = 0
    for path in blocks:
        with open(path, "rb") as f:
            top = max([top] + [r.seq for r in records(f.read())])
    return top


def _stream_state(nodes: list[NatsServer], stream: str) -> dict[str, Any]:
    """The stream's state as its leader reports it: ``messages``, ``first_seq``, ``last_seq``, ``leader``, and
    ``missing``: the sequences in that range it answers it holds no message of (err_code 10037)."""
    client = NatsClient([n.url for n in nodes], timeout=2.0)
    try:
        info = client.run(client.js.stream_info(stream))
        missing = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                client.run(client.js.get_msg(stream, seq))
            except NotFoundError:
                missing.append(seq)
        return {"messages": info.state.messages, "first_seq": info.state.first_seq, "last_seq": info.state.last_seq,
                "leader": info.cluster.leader if info.cluster else None, "missing": missing}
    finally:
        client.close()


def run(scenario: Scenario, runner: Runner, nodes: list[NatsServer], spec: dict[str, Any], seed: int) -> History:
    """One damage trial of ``scenario`` (see the module docstring) on ``runner`` (the family's); ``spec``:
    :func:`spec_for`'s.  The fault's detail names the damaged server, file, mode, offset, bit, record, the block's
    size before and after, the stream's state before and after, who led it and who led the meta group when the
    follower was chosen (``meta_leader_before``); a restart or leadership that fails is recorded there
    (``restart``, ``lead``), not raised: the checkers judge what the store then holds.  Raises
    :class:`SetupError` when the stream has fewer than 3 replicas, or a follower does not hold every message
    within 10 s."""
    if len(nodes) < 3:
        raise SetupError("damage of one replica's block files needs a stream of 3 replicas")
    ref = runner.reference(scenario)
    before = _stream_state(nodes, STREAM)
    leader = current_leader(nodes)
    followers = sorted(n.name for n in nodes if n.name != leader)
    # not the meta group's leader when the other follower is not: its stop would make the other nodes wait out a
    # Raft election timeout (4-9 s) before the restarted node is ready; the stream's damage and recovery are the
    # same on either follower
    meta = meta_leader(nodes)
    followers = [f for f in followers if f != meta] or followers
    target = next(n for n in nodes if n.name == random.Random(f"{seed}:follower").choice(followers))
    deadline = time.monotonic() + 10.0
    while _held(target, STREAM) < before["last_seq"]:  # the follower's files hold every message (observed)
        if time.monotonic() > deadline:
            raise SetupError(f"follower {target.name} holds up to seq {_held(target, STREAM)} of {before['last_seq']}")
        time.sleep(0.02)
    if spec.get("clean_stop"):
        target.stop()  # SIGTERM: its state file written, its raft log compacted
        target.start()
        current_leader(nodes)
    target.stop(signal.SIGKILL)
    path = last_block(target.store_dir, STREAM)
    if path is None:
        raise SetupError(f"server {target.name} has no block file of stream {STREAM}")
    with open(path, "rb") as f:
        data = f.read()
    offset, bit, rec = point(data, spec["mode"], int(spec["record"]), spec["part"], seed)
    damaged = damage(data, spec["mode"], offset, bit)
    with open(path, "wb") as f:
        f.write(damaged)
    detail: dict[str, Any] = {
        "server": target.name, "leader_before": leader, "meta_leader_before": meta, "file": os.path.relpath(path, target.directory),
        "mode": spec["mode"], "part": spec["part"], "offset": offset, "size": len(data), "size_after": len(damaged),
        "record": {"index": int(spec["record"]), "seq": rec.seq, "start": rec.start, "length": rec.length},
        "records_in_block": len(records(data)), "clean_stop": bool(spec.get("clean_stop")),
        "stream_files": {name: os.path.getsize(os.path.join(os.path.dirname(path), name))
                         for name in sorted(os.listdir(os.path.dirname(path)))},
        "stream_before": before}
    if spec["mode"] == "bitflip":
        detail["bit"] = bit
    log_at = os.path.getsize(target.log_path)
    try:
        target.start()
        current_leader(nodes)
    except SetupError as exc:  # it refuses to start, or the stream has no leader: the checkers see what is left
        detail["restart"] = str(exc)
    if "restart" not in detail:
        try:
            make_leader(nodes, target.name)
        except SetupError as exc:
            detail["lead"] = str(exc)
    try:
        detail["stream_after"] = _stream_state(nodes, STREAM)
    except Exception as exc:  # noqa: BLE001 - recorded: the store's own reading is what is judged
        detail["stream_after"] = {"error": f"{type(exc).__name__}: {exc}"}
    detail["server_log"] = _recovery_lines(target.log_path, log_at)
    return resumed(scenario, runner, ref.history, Fault(kind="damage", injected=True, detail=detail), seed)


#: What a restarted server's log says of the stream's recovery (matched in each line after the restart).
_RECOVERY = ("Restored", "rebuild", "Recovering", "Catchup", "corrupt", "checksum", "truncat", "lost", "Can't start")


def _recovery_lines(log_path: str, at: int) -> list[str]:
    """The lines of the server log ``log_path`` from byte ``at`` that speak of the stream's recovery (at most 20,
    each without its pid and date)."""
    with open(log_path, "rb") as f:
        f.seek(at)
        lines = f.read().decode("utf-8", "replace").splitlines()
    return [line.split("] ", 1)[-1].strip() if "] " in line else line
            for line in lines if any(w in line for w in _RECOVERY)][:20]
