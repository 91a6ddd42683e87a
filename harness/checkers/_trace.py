"""Pure readings of IO-seam traces (docs/ioseam.md): acknowledged lines and lock spans.

A trace event is a dict with ``n``, ``pid``, ``op``, ``path``, ``fd`` and,
per op, ``offset``/``len``/``data`` (base64, the bytes that reached the
file) for ``write``, ``length`` for ``ftruncate``, ``flags`` for ``open``,
``operation`` for ``flock``; ``error`` is present when the call failed.
``t`` (monotonic ns) is used when present.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Iterator

from fiskj.codec import decode_record

from harness.history.model import History, Leg

__all__ = ["Ack", "Span", "events", "is_lock", "acknowledged", "lock_spans", "journal_writes",
           "traced", "observed", "unsynced_appends"]


@dataclass
class Ack:
    """One journal line a leg wrote and then fsynced (acknowledged); ``op``: the call that acknowledged it
    (``fsync``, ``fdatasync``, or ``publish``: an append a JetStream server acknowledged)."""

    leg: int
    pid: int
    seq: int | None
    line: bytes
    offset: int | None
    write_n: int
    fsync_n: int
    t: int | None
    op: str = "fsync"

    @property
    def end(self) -> int | None:
        return None if self.offset is None else self.offset + len(self.line)

    def brief(self) -> dict[str, Any]:
        from harness.checkers._common import excerpt
        return {"seq": self.seq, "leg": self.leg, "pid": self.pid, "offset": self.offset,
                "length": len(self.line), "write_n": self.write_n, "fsync_n": self.fsync_n,
                "record_type": record_type(self.line) or "unknown", "excerpt": excerpt(self.line)}


@dataclass
class Span:
    """A process's hold of the run lock, or its journal writes: ``[start, end]`` in ns (None: unknown)."""

    leg: int
    pid: int
    start: int | None
    end: int | None
    first_n: int
    last_n: int | None


def traced(history: History) -> bool:
    """True when at least one leg left an IO-seam trace."""
    return any(leg.trace for leg in history.legs)


def observed(history: History, leg: Leg) -> bool:
    """True when what ``leg`` did to the store is known: it left a trace, or it ran under the outside observer
    (``history.options["observer"] == "ptrace"``), whose log holds every call of the leg's process tree, so
    an empty trace means the leg made no call on the store ("observed, did nothing"), never "untraced"."""
    return bool(leg.trace) or history.options.get("observer") == "ptrace"


def _basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]  # trace paths are POSIX paths (docs/ioseam.md)


def is_lock(path: str | None, run_id: str) -> bool:
    """True when ``path`` names the lock file of ``run_id`` (``<id>.lock``, docs/spec.md section 10)."""
    return bool(path) and _basename(path) == f"{run_id}.lock"


def events(leg: Leg) -> Iterator[dict[str, Any]]:
    """The leg's events in ``n`` order, each with ``path`` filled from its fd where missing, and ``pid``."""
    fds: dict[tuple[int, int], str] = {}
    for ev in sorted(leg.trace, key=lambda e: e.get("n", 0)):
        ev = dict(ev)
        ev.setdefault("pid", leg.pid)
        key = (ev["pid"], ev.get("fd"))
        if ev.get("op") == "open" and ev.get("fd") is not None and ev.get("path") and not ev.get("error"):
            fds[key] = ev["path"]
        if not ev.get("path") and ev.get("fd") is not None:
            ev["path"] = fds.get(key)
        yield ev
        if ev.get("op") == "close":
            fds.pop(key, None)


def record_type(data: bytes) -> str:
    """The agent's own type of the journal line that ``data`` starts with: a fisk-ai v2 line's kind (the last
    word of its ``protocol``), else a JSON line's ``type`` (a Claude Code transcript's ``"assistant"``), else ``""``."""
    try:
        obj = json.loads(data.split(b"\n", 1)[0])
    except ValueError:
        return ""
    if isinstance(obj, dict) and isinstance(obj.get("protocol"), str):  # fisk-ai v2: ...session.<kind>
        return obj["protocol"].rsplit(".", 1)[-1]
    return obj["type"] if isinstance(obj, dict) and isinstance(obj.get("type"), str) else ""


def written_what(data: bytes) -> str:
    """What a journal write held, for a message: ``record terminal seq 14`` (a fisk-ai v2 line: the last word
    of its ``protocol``), else its size in bytes."""
    kind = record_type(data)
    if kind and b'"protocol"' in data.split(b"\n", 1)[0]:
        seq = json.loads(data.split(b"\n", 1)[0]).get("seq")
        return f"record {kind}" + (f" seq {seq}" if isinstance(seq, int) else "")
    return f"{len(data)} bytes"


def _data(ev: dict[str, Any]) -> bytes:
    raw = ev.get("data") or ""
    data = base64.b64decode(raw) if isinstance(raw, str) else bytes(raw)
    n = ev.get("len")
    return data[:n] if isinstance(n, int) and 0 <= n < len(data) else data


def acknowledged(history: History, leg: Leg) -> list[Ack]:
    """Journal lines ``leg`` wrote that a later successful fsync/fdatasync of the journal covered.

    A ``publish`` (a JetStream append the server acknowledged: docs/ioseam.md) is acknowledged at once.
    Written bytes are joined per process in write order and split on
    ``\\n``; a complete line is pending until the next completed fsync of the
    journal, then acknowledged; for a subject that promises to survive a process crash only
    (``[promises] durable = "process-crash"``) the write that completed it acknowledges it (a kill keeps what
    was written).  An ``ftruncate`` or ``O_TRUNC`` open drops the unterminated remainder.
    """
    journal = history.journal
    kill_only = history.promises.durable == "process-crash"  # a written line is what a kill keeps: acknowledged
    acks: list[Ack] = []
    carry: dict[int, tuple[bytes, int | None, int]] = {}
    pending: dict[int, list[tuple[bytes, int | None, int]]] = {}
    for ev in events(leg):
        pid, op = ev["pid"], ev.get("op")
        if op == "publish" and str(ev.get("path", "")).endswith(f".{history.run_id}.>"):
            pending.setdefault(pid, []).append((_data(ev), None, ev.get("n", 0)))  # a JetStream append, acked:
        elif not journal.is_journal(ev.get("path"), history.run_id):                # its line, as if fsynced now
            continue
        if op == "open" and "O_TRUNC" in (ev.get("flags") or []) or op == "ftruncate":
            carry.pop(pid, None)
        elif op == "write":
            data = _data(ev)
            if not data:
                continue
            buf, start, n0 = carry.get(pid, (b"", ev.get("offset"), ev.get("n", 0)))
            if not buf:
                start, n0 = ev.get("offset"), ev.get("n", 0)
            buf += data
            while (nl := buf.find(b"\n")) != -1:
                line, buf = buf[:nl + 1], buf[nl + 1:]
                pending.setdefault(pid, []).append((line, start, n0))
                start = None if start is None else start + len(line)
                n0 = ev.get("n", 0)
            carry[pid] = (buf, start, n0)
        if (op in ("fsync", "fdatasync", "publish") or op == "write" and kill_only) and not ev.get("error"):
            for line, start, n0 in pending.pop(pid, []):
                try:
                    seq = decode_record(line).seq
                except Exception:  # noqa: BLE001 - an undecodable line is still acknowledged bytes
                    seq = None
                acks.append(Ack(leg.index, pid, seq, line, start, n0, ev.get("n", 0), ev.get("t"), op))
    return acks


def unsynced_appends(history: History, leg: Leg) -> list[dict[str, Any]]:
    """Journal writes of ``leg`` the agent went on from before an fsync (I4 ``append_not_synced``).

    A journal the harness decodes (fisk-ai v2) is held to docs/spec.md section 9, rule 1, to the letter: an append
    is one write of the whole line, then an fsync, so a write followed by the process's next write, a close or a
    clean exit with no fsync attempt between is one.  Another format (an agent's own ``jsonl``) is held to what
    durability needs, not to fisk-ai's framing: a line may take several writes and several lines one fsync; a
    write is one when the leg made a model call or ran a tool after it and before the process's next fsync
    attempt, or exited cleanly with it unsynced (docs/subject.md "What the checkers expect of the calls they
    see").  A write that failed is not counted (the engine raised); an fsync that failed still counts as the
    attempt.  The last write of a killed leg is not counted unless the leg acted on it (it may have died before
    its fsync), nor that of a leg sent a signal its subject promises to abort on (docs/spec.md section 15
    "Declared promises").
    """
    journal = history.journal
    strict = journal.decoded
    out: list[dict[str, Any]] = []
    open_write: dict[int, tuple[dict[str, Any], bytes]] = {}  # pid -> its (first) write not synced yet, its bytes
    acts = sorted([(c.t, f"model call {c.index}") for c in history.model_calls if c.leg == leg.index and c.t]
                  + [(e.t, f"tool {e.tool_use_id}") for e in history.effects if e.leg == leg.index and e.t])

    def unsynced(write: tuple[dict[str, Any], bytes], before: str) -> dict[str, Any]:
        ev, data = write  # what the write held is decoded only for a write reported
        return {"leg": leg.index, "pid": ev["pid"], "n": ev.get("n"), "offset": ev.get("offset"), "len": ev.get("len"),
                "record": written_what(data), "record_type": record_type(data) or "unknown", "before": before}

    def acted(write: tuple[dict[str, Any], bytes], until: dict[str, Any] | None) -> str:
        """The first act of the leg after ``write`` and before event ``until`` (``None``: ever after it)."""
        t0, t1 = write[0].get("t", write[0].get("t0")), None if until is None else until.get("t0", until.get("t"))
        if not isinstance(t0, int):
            return ""
        return next((what for t, what in acts if t > t0 and (t1 is None or t < t1)), "")

    clean_exit = leg.exit_signal is None and leg.exit_code is not None and not history.promises.aborts(leg)
    for ev in events(leg):
        if not journal.is_journal(ev.get("path"), history.run_id):
            continue
        pid, op = ev["pid"], ev.get("op")
        if op == "write" and not ev.get("error") and (data := _data(ev)):
            if pid not in open_write:
                open_write[pid] = (ev, data)
            elif strict:
                out.append(unsynced(open_write[pid], f"write n={ev.get('n')}"))
                open_write[pid] = (ev, data)
            elif went_on := acted(open_write[pid], ev):
                out.append(unsynced(open_write[pid], went_on))
                open_write[pid] = (ev, data)
        elif op in ("fsync", "fdatasync"):
            if pid in open_write and not strict and (went_on := acted(open_write[pid], ev)):
                out.append(unsynced(open_write[pid], went_on))
            open_write.pop(pid, None)
        elif op == "close" and pid in open_write and strict:
            out.append(unsynced(open_write.pop(pid), f"close n={ev.get('n')}"))
    for write in open_write.values():
        went_on = "" if strict else acted(write, None)
        if went_on or clean_exit:
            out.append(unsynced(write, went_on or f"exit {leg.exit_code}"))
    return out


def journal_writes(history: History, leg: Leg) -> list[dict[str, Any]]:
    """The leg's events that change the journal's bytes or name (write, ftruncate, O_TRUNC open, unlink, rename)."""
    journal = history.journal
    out = []
    for ev in events(leg):
        op = ev.get("op")
        if op == "rename" and (journal.is_journal(ev.get("src"), history.run_id)
                               or journal.is_journal(ev.get("dst"), history.run_id)):
            out.append(ev)
        elif not journal.is_journal(ev.get("path"), history.run_id):
            continue
        elif op in ("write", "ftruncate", "unlink") or (op == "open" and "O_TRUNC" in (ev.get("flags") or [])):
            if op == "write" and not _data(ev):
                continue
            out.append(ev)
    return out


def lock_spans(history: History, leg: Leg) -> list[Span]:
    """Spans during which a process of ``leg`` held the run lock, by the kernel's rules for each kind of lock.

    * ``flock`` (docs/spec.md section 10): held from a successful
      ``LOCK_EX`` on a descriptor until ``LOCK_UN`` on it or its close.
    * ``fcntl`` open-file-description locks (``F_OFD_SETLK[W]``): the same,
      per descriptor.
    * ``fcntl`` POSIX record locks (``F_SETLK[W]``, what ``lockf`` uses):
      held by the *process* from ``F_WRLCK`` until ``F_UNLCK`` or the close
      of *any* of its descriptors of the lock file (the kernel drops it
      then: the ``lockf`` bug class, seen from outside).

    A ``flock`` taken by a child on a descriptor it inherited (``flock(1)``
    on the agent's descriptor) belongs to the shared open file: once that
    child has exited, it ends when the process that opened the lock file
    closes its last descriptor of it.

    ``start``/``end`` are the events' ``t`` when present; an end with no
    event is the leg's ``t_end`` (the kernel drops the lock at exit).
    """
    spans: list[Span] = []
    held: dict[tuple[int, Any], Span] = {}
    trace = list(events(leg))
    last_n = {ev["pid"]: ev.get("n", 0) for ev in trace}  # each process's last call (it is gone after it)
    opened: dict[int, set[Any]] = {}  # pid -> its descriptors of the lock file

    def end(key: tuple[int, Any], ev: dict[str, Any]) -> None:
        span = held.pop(key)
        # The lock was released somewhere inside the call: take the earliest instant (t0) so
        # that a holder preempted before writing its trace line never looks like an overlap.
        span.end, span.last_n = ev.get("t0", ev.get("t")), ev.get("n", 0)
        spans.append(span)

    for ev in trace:
        op = ev.get("op")
        if not is_lock(ev.get("path"), history.run_id):
            continue
        pid = ev["pid"]
        key = (pid, ev.get("fd"))
        operation = ev.get("operation") or []
        if op == "open" and not ev.get("error") and ev.get("fd") is not None:
            opened.setdefault(pid, set()).add(ev.get("fd"))
        if op == "flock" and not ev.get("error") and "LOCK_UN" not in operation:
            if key not in held:
                held[key] = Span(leg.index, pid, ev.get("t"), None, ev.get("n", 0), None)
        elif op == "flock" and "LOCK_UN" in operation and key in held:
            end(key, ev)
        elif op == "lock" and not ev.get("error") and str(ev.get("cmd") or "").endswith(("SETLK", "SETLKW")):
            which = key if str(ev.get("cmd")).startswith("F_OFD_") else (pid, "posix")
            if "F_WRLCK" in operation and which not in held:
                held[which] = Span(leg.index, pid, ev.get("t"), None, ev.get("n", 0), None)
            elif "F_UNLCK" in operation and which in held:
                end(which, ev)
        elif op == "close":
            for which in (key, (pid, "posix")):  # a record lock goes with the close of ANY descriptor
                if which in held:
                    end(which, ev)
            mine = opened.get(pid, set())
            if ev.get("fd") in mine:
                mine.discard(ev.get("fd"))
                if not mine:  # its last descriptor: an exited child's flock on the shared open file ends
                    for which in [k for k in held if k[0] != pid and k[1] != "posix"
                                  and last_n.get(k[0], 0) < ev.get("n", 0)]:
                        end(which, ev)
    for span in held.values():
        span.end = leg.t_end or None
        spans.append(span)
    return spans
