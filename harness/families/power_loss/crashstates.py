"""Power-loss crash states of one traced run, in the manner of ALICE and CrashMonkey.  Pure (no IO).

Input: a run's IO-seam trace (docs/ioseam.md) and the file tree before it.
Output: the file trees a power loss could leave (:class:`CrashState`).  The
persistence model it implements (rules (a) data, (b) names, (c) truncation,
(d) ``zero_fill``; crash points as trace prefixes, the unsynced window's
units enumerated up to ``exhaustive_units`` else sampled; which writes are
acknowledged, judged by :func:`harness.checkers.i4_acknowledged.lost_acknowledged`
on the state's :class:`harness.history.model.CrashStateFacts`) is specified
in docs/persistence-model.md.
"""

from __future__ import annotations

import base64
import itertools
import random
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from harness.names import VOLATILE

__all__ = ["SECTOR_BYTES", "Ack", "CrashState", "CrashPoint", "Simulator", "crash_points", "crash_states", "window", "written"]

SECTOR_BYTES = 512


@dataclass(frozen=True)
class Ack:
    """Write ``n`` put ``data`` at ``offset``..``end`` of inode ``ino``; event ``claimed`` showed it returned."""

    path: str; offset: int; end: int; data: bytes  # noqa: E702
    ino: int; n: int; claimed: int = 0  # noqa: E702


@dataclass
class CrashState:
    """One file tree a power loss after ``prefix_n`` events could leave; ``lost_entries``: unsynced
    name ops that did not survive; ``persisted``: the window's units that did (``kept``: as units, ``None`` for
    a size-only state); ``inodes``: path -> inode."""

    id: str
    prefix_n: int
    files: dict[str, bytes]
    dirs: set[str]
    lost_entries: list[str]
    acknowledged: list[tuple[str, int]]
    persisted: str = ""
    acks: tuple[Ack, ...] = ()
    inodes: dict[str, int] = field(default_factory=dict)
    kept: frozenset[tuple] | None = None

    def key(self) -> tuple:
        """The state's content, for de-duplication: its files, folders and acknowledged writes (computed once:
        a state is never changed after it is built, and a plan asks for its key more than once)."""
        key = self.__dict__.get("_key")
        if key is None:
            key = self.__dict__["_key"] = _content_key(self.files, self.dirs, frozenset(self.acknowledged))
        return key

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary (file sizes instead of bytes)."""
        return {"id": self.id, "prefix_n": self.prefix_n, "persisted": self.persisted,
                "files": {p: len(b) for p, b in sorted(self.files.items())}, "dirs": sorted(self.dirs),
                "lost_entries": list(self.lost_entries), "acknowledged": [list(a) for a in self.acknowledged]}


@dataclass
class CrashPoint:
    """The crash states of one prefix, its acknowledged writes, and its window size in units."""

    prefix_n: int; event: dict[str, Any] | None; acks: tuple[Ack, ...]  # noqa: E702
    units: int; exhaustive: bool; states: list[CrashState]  # noqa: E702


def _content_key(files: dict[str, bytes], dirs: Iterable[str], acknowledged: frozenset[tuple]) -> tuple:
    """What makes two crash states the same (:meth:`CrashState.key`): files, folders, acknowledged writes."""
    return (tuple(sorted(files.items())), frozenset(dirs), acknowledged)


@dataclass
class _Entry:  # one name operation; ``waiting``: the parent dirs still to be fsynced; ``label``: as a lost one reads
    kind: str; path: str; ino: int | None; waiting: set[str]; dst: str | None = None  # noqa: E702

    def __post_init__(self) -> None:
        self.label = f"{self.kind} {self.path}" + (f" -> {self.dst}" if self.dst else "")


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def _sectors(op: tuple, sb: int) -> range:
    return range(op[1] // sb, (op[1] + len(op[2]) - 1) // sb + 1) if op[0] == "w" else range(0)


class Simulator:
    """The model file system, fed one trace event at a time (:meth:`apply`); :meth:`states` enumerates."""

    def __init__(self, files: dict[str, bytes] | None = None, dirs: Iterable[str] = (),
                 sector_bytes: int = SECTOR_BYTES) -> None:
        if sector_bytes < 1:
            raise ValueError(f"sector_bytes must be >= 1, got {sector_bytes}")
        self.sector = sector_bytes
        self.base: dict[str, int] = {}        # names before the trace (durable)
        self.names: dict[str, int] = {}       # names now (volatile view)
        self.durable: list[bytes] = []        # per inode: content as of its last fsync
        self.current: list[bytearray] = []    # per inode: content now
        self.pending: list[list[tuple]] = []  # per inode since fsync: ("w", off, data) / ("t", length)
        self.acks: list[list[Ack]] = []       # per inode: acknowledged writes
        self.unclaimed: list[list[Ack]] = []  # per inode: writes not yet seen to return
        self.entries: list[_Entry] = []
        self.base_dirs, self.dirs_now = set(dirs), set(dirs)
        self.made_dirs: set[str] = set()      # dirs a mkdir/rename of the trace created
        self.fds: dict[tuple, Any] = {}       # (pid, fd) -> inode or ("dir", path)
        self.last: dict[str, Any] | None = None
        self.assumed: set[int] = set()        # inodes of paths opened but never created nor listed
        for path, data in (files or {}).items():
            self.base[path] = self.names[path] = self._inode(bytes(data))

    def _inode(self, data: bytes = b"") -> int:
        self.durable.append(data)
        self.current.append(bytearray(data))
        for table in (self.pending, self.acks, self.unclaimed):
            table.append([])
        return len(self.durable) - 1

    def _entry(self, kind: str, path: str, ino: int | None, dst: str | None = None) -> None:
        self.entries.append(_Entry(kind, path, ino, {_parent(path)} | ({_parent(dst)} if dst else set()), dst))

    def _ino_of(self, ev: dict[str, Any]) -> Any:
        target = self.fds.get((ev.get("pid"), ev.get("fd")))
        path = ev.get("path")
        if target is None and path:
            if path in self.dirs_now:
                return ("dir", path)
            target = self.names.get(path)
            if target is None:  # a file the initial tree did not list: assume it existed, empty
                target = self.base[path] = self.names[path] = self._inode()
                self.assumed.add(target)
        return target

    def apply(self, ev: dict[str, Any]) -> None:
        """Apply one trace event."""
        self.last = ev
        op, err = ev.get("op"), ev.get("error")
        if err and op in ("fsync", "fdatasync"):  # the append raised: its writes are not acknowledged
            ino = self._ino_of(ev)
            if isinstance(ino, int):
                self.unclaimed[ino] = []
        if err and op != "write":
            return
        getattr(self, f"_op_{op}", lambda ev: None)(ev)

    def _op_open(self, ev: dict[str, Any]) -> None:
        path, flags, key = ev["path"], set(ev.get("flags") or ()), (ev.get("pid"), ev.get("fd"))
        if "O_DIRECTORY" in flags or path in self.dirs_now:
            self.fds[key] = ("dir", path)
            return
        ino = self.names.get(path)
        if ev.get("created") or (ino is None and "O_CREAT" in flags):
            ino = self.names[path] = self._inode()
            self._entry("create", path, ino)
        elif ino is None:  # opened, not created: it existed (a file, or a folder opened without O_DIRECTORY)
            ino = self.base[path] = self.names[path] = self._inode()
            self.assumed.add(ino)
        elif "O_TRUNC" in flags:
            self._data(ino, ("t", 0))
        self.fds[key] = ino

    def _data(self, ino: int, op: tuple) -> None:
        cur = self.current[ino]
        if op[0] == "w":
            off, end = op[1], op[1] + len(op[2])
            cur.extend(bytes(max(0, off - len(cur))))
            cur[off:end] = op[2]
        else:
            off, end = op[1], 1 << 62
            del cur[off:]
            cur.extend(bytes(off - len(cur)))
        for acks in (self.acks[ino], self.unclaimed[ino]):  # the run overwrote or cut them: retired
            acks[:] = [a for a in acks if a.end <= off or a.offset >= end]
        self.pending[ino].append(op)

    def _claim(self, ino: int, n: int, lines: bool = False) -> None:
        """The unclaimed writes of ``ino`` returned, acknowledged at event ``n``; ``lines``: only those up to the
        last one that ended a line (a write of part of a line is part of one append, not yet returned)."""
        waiting = self.unclaimed[ino]
        upto = max((k + 1 for k, a in enumerate(waiting) if a.data.endswith(b"\n")), default=0) if lines \
            else len(waiting)
        self.acks[ino].extend(Ack(a.path, a.offset, a.end, a.data, a.ino, a.n, n) for a in waiting[:upto])
        self.unclaimed[ino] = waiting[upto:]

    def finish(self) -> None:
        """The traced process ran to its end: every write it made had returned (acknowledged)."""
        for ino in range(len(self.unclaimed)):
            self._claim(ino, -1)

    def _op_write(self, ev: dict[str, Any]) -> None:
        ino, data, off = self._ino_of(ev), base64.b64decode(ev.get("data") or ""), ev.get("offset")
        if not isinstance(ino, int) or not data:
            return
        off = len(self.current[ino]) if off is None else off  # unknown offset: an append
        self._claim(ino, ev.get("n", -1), lines=True)  # the previous append to this file has returned
        self._data(ino, ("w", off, data))
        if not ev.get("error"):  # a failed (short) write leaves bytes but acknowledges nothing
            path = self._path_of(ino) or ev.get("path") or "?"
            self.unclaimed[ino].append(Ack(path, off, off + len(data), data, ino, ev.get("n", -1)))

    def _op_ftruncate(self, ev: dict[str, Any]) -> None:
        ino = self._ino_of(ev)
        if isinstance(ino, int):
            self._data(ino, ("t", int(ev["length"])))

    def _op_fsync(self, ev: dict[str, Any]) -> None:
        ino = self._ino_of(ev)
        if isinstance(ino, tuple):
            self._op_fsync_dir({"path": ino[1]})
        elif ino is not None:
            self.pending[ino] = []
            self.durable[ino] = bytes(self.current[ino])

    _op_fdatasync = _op_fsync

    def _op_fsync_dir(self, ev: dict[str, Any]) -> None:
        for entry in self.entries:
            entry.waiting.discard(ev["path"])

    def _op_mkdir(self, ev: dict[str, Any]) -> None:
        self.made_dirs.add(ev["path"])
        self.dirs_now.add(ev["path"])
        self._entry("mkdir", ev["path"], None)

    def _op_rename(self, ev: dict[str, Any]) -> None:
        src, dst, ino = ev["src"], ev["dst"], None
        if src in self.dirs_now:
            self.made_dirs.add(dst)
            self.dirs_now.add(dst)
        else:
            ino = self.names.pop(src, None)
            if ino is None:
                ino = self.base[src] = self._inode()
            self.names[dst] = ino
        self._entry("rename", src, ino, dst)

    def _op_unlink(self, ev: dict[str, Any]) -> None:
        self._entry("unlink", ev["path"], self.names.pop(ev["path"], None))

    def _op_close(self, ev: dict[str, Any]) -> None:
        ino = self.fds.pop((ev.get("pid"), ev.get("fd")), None)
        if isinstance(ino, int):
            self._claim(ino, ev.get("n", -1))

    def _path_of(self, ino: int) -> str | None:
        return next((p for p, i in self.names.items() if i == ino), None)

    def acknowledged(self) -> tuple[Ack, ...]:
        """Acknowledged writes of inodes that still have a name (an unlinked file was deleted on purpose)."""
        out: list[Ack] = []
        for ino, acks in enumerate(self.acks):
            path = self._path_of(ino) if acks else None
            if path is not None:
                out.extend(Ack(path, a.offset, a.end, a.data, ino, a.n, a.claimed) for a in acks)
        return tuple(out)

    def units(self) -> list[tuple]:
        """The unsynced window: ("e", entry) / ("w", ino, op, sector) / ("t", ino, op) units."""
        out: list[tuple] = [("e", i) for i, e in enumerate(self.entries) if e.waiting]
        for ino, ops in enumerate(self.pending):
            for k, op in enumerate(ops):
                if op[0] == "w":
                    out.extend(("w", ino, k, s) for s in _sectors(op, self.sector))
                else:
                    out.append(("t", ino, k))
        return out

    def _content(self, ino: int, chosen: set[tuple], zero: bool) -> bytes:
        ops, base = self.pending[ino], self.durable[ino]
        if not ops or not (zero or any(u[0] != "e" and u[1] == ino for u in chosen)):
            return base
        if zero:
            size = len(self.current[ino])
            return base[:size] + bytes(max(0, size - len(base)))
        buf, sb = bytearray(base), self.sector
        for k, op in enumerate(ops):
            if op[0] == "t":
                if ("t", ino, k) in chosen:
                    del buf[op[1]:]
                    buf.extend(bytes(op[1] - len(buf)))
                continue
            off, data = op[1], op[2]
            for s in _sectors(op, sb):
                if ("w", ino, k, s) in chosen:
                    lo, hi = max(off, s * sb), min(off + len(data), (s + 1) * sb)
                    buf.extend(bytes(max(0, lo - len(buf))))
                    buf[lo:hi] = data[lo - off:hi - off]
        return bytes(buf)

    def build(self, chosen: set[tuple], *, zero: bool = False, state_id: str = "",
              prefix_n: int = 0, acks: tuple[Ack, ...] = ()) -> CrashState:
        """The crash state in which exactly the ``chosen`` units of the window persisted."""
        tree = self._tree(frozenset(u[1] for u in chosen if u[0] == "e"))
        mine: dict[int, set[tuple]] = {}
        for u in chosen:
            if u[0] != "e":
                mine.setdefault(u[1], set()).add(u)
        files = {p: self._content(i, mine.get(i, set()), zero) for p, i in tree[0].items()}
        return self._state(chosen, zero, tree, files, state_id, prefix_n, acks)

    def _tree(self, entries: frozenset[int]) -> tuple[dict[str, int], set[str], list[str]]:
        """The names of a crash state in which exactly the waiting name operations ``entries`` (indexes into
        :attr:`entries`) persisted: its files (path -> inode, those it holds: :meth:`kept`, in a folder it
        has), its folders, and the name operations lost."""
        names, made, lost = dict(self.base), set(), []
        for i, e in enumerate(self.entries):
            if e.waiting and i not in entries:
                lost.append(e.label)
            elif e.kind == "create":
                names[e.path] = e.ino  # type: ignore[assignment]
            elif e.kind == "mkdir":
                made.add(e.path)
            elif e.kind == "unlink":
                names.pop(e.path, None)
            elif e.ino is None:  # directory rename: move it and the names below it
                made.discard(e.path)
                made.add(e.dst)
                pre = e.path + "/"
                for p in [p for p in names if p.startswith(pre)]:
                    names[f"{e.dst}/{p[len(pre):]}"] = names.pop(p)
            else:
                names.pop(e.path, None)
                names[e.dst] = e.ino  # type: ignore[index]
        memo: dict[str, bool] = {}

        def present(d: str) -> bool:
            if d not in memo:
                memo[d] = d not in self.made_dirs or (d in made and present(_parent(d)))
            return memo[d]

        files = {p: i for p, i in self.kept(names).items() if present(_parent(p))}
        return files, self.base_dirs | {d for d in made if present(d)}, lost

    def _state(self, chosen: Iterable[tuple], zero: bool, tree: tuple[dict[str, int], set[str], list[str]],
               files: dict[str, bytes], state_id: str, prefix_n: int, acks: tuple[Ack, ...],
               labels: Iterable[str] | None = None) -> CrashState:
        """The :class:`CrashState` of ``tree`` (:meth:`_tree`) with the files' contents ``files``; ``labels``:
        the ``chosen`` units as ``persisted`` names them, when known."""
        chosen = frozenset(chosen)
        if labels is None:
            labels = ("/".join(map(str, u)) for u in chosen)
        persisted = "size-only (zero-filled data)" if zero else (" ".join(sorted(labels)) or "none")
        return CrashState(id=state_id, prefix_n=prefix_n, files=files, dirs=set(tree[1]), lost_entries=list(tree[2]),
                          acknowledged=[(a.path, a.end) for a in acks], persisted=persisted,
                          acks=acks, inodes=dict(tree[0]), kept=None if zero else chosen)

    def kept(self, names: dict[str, int]) -> dict[str, int]:
        """The names a state holds as files: not :data:`VOLATILE`, not a folder (a path with a name below it, or
        one only opened: a folder opened without ``O_DIRECTORY`` for its fsync), not a file the trace only
        opened (assumed to exist; the trial's own setup lays it)."""
        parents = {_parent(p) for p in names} | self.dirs_now
        return {p: i for p, i in names.items() if not p.endswith(VOLATILE) and p not in parents
                and not (i in self.assumed and not self.current[i] and not self.pending[i])}

    def states(self, prefix_n: int, *, seed: int | str = 0, exhaustive_units: int = 12,
               samples: int = 256, zero_fill: bool = True) -> CrashPoint:
        """Enumerate (or sample) the crash states of the current prefix, de-duplicated (the first of a content
        wins).  A state's names depend only on the name operations it keeps and a file's content only on that
        file's units it keeps: both are computed once per such choice, and a state is built only when its
        content (:meth:`CrashState.key`) is new."""
        units, acks = self.units(), self.acknowledged()
        n = len(units)
        exhaustive = n <= exhaustive_units
        if exhaustive:
            masks: Iterable[int] = range(1 << n)
        else:
            rng = random.Random(f"{seed}:{prefix_n}")
            masks = itertools.chain((0, (1 << n) - 1), (rng.getrandbits(n) for _ in range(max(0, samples - 2))))
        variants = itertools.chain(((m, False) for m in masks), [(-1, True)] if zero_fill and any(self.pending) else [])
        entry_bits, ino_bits = 0, [0] * len(self.pending)  # the mask's bits of the name operations, of each inode
        entry_at: list[int] = []
        ino_at: list[list[int]] = [[] for _ in self.pending]
        for b, u in enumerate(units):
            if u[0] == "e":
                entry_bits |= 1 << b
                entry_at.append(b)
            else:
                ino_bits[u[1]] |= 1 << b
                ino_at[u[1]].append(b)
        acknowledged = frozenset((a.path, a.end) for a in acks)
        labels = ["/".join(map(str, u)) for u in units]
        trees: dict[int, tuple[dict[str, int], set[str], list[str]]] = {}
        contents: dict[tuple[int, int], bytes] = {}  # (inode, its bits of the mask; -1 zero-filled) -> content
        seen: set[tuple] = set()
        out: list[CrashState] = []
        for mask, zero in variants:
            if zero:  # every name operation kept, the data zero-filled to the sizes of now
                mask = entry_bits
            tree = trees.get(mask & entry_bits)
            if tree is None:
                tree = trees[mask & entry_bits] = self._tree(frozenset(units[b][1] for b in entry_at if mask >> b & 1))
            files = {}
            for p, i in tree[0].items():
                ck = (i, -1 if zero else mask & ino_bits[i])
                data = contents.get(ck)
                if data is None:
                    data = contents[ck] = self._content(i, {units[b] for b in ino_at[i] if ck[1] >> b & 1}
                                                        if ck[1] > 0 else set(), zero)
                files[p] = data
            key = _content_key(files, tree[1], acknowledged)
            if key in seen:
                continue
            seen.add(key)
            bits = [b for b in range(n) if mask >> b & 1]
            state = self._state([units[b] for b in bits], zero, tree, files, f"p{prefix_n}.{len(out)}", prefix_n,
                                acks, [labels[b] for b in bits])
            state.__dict__["_key"] = key
            out.append(state)
        return CrashPoint(prefix_n, self.last, acks, n, exhaustive, out)


def crash_points(events: Iterable[dict[str, Any]], files: dict[str, bytes] | None = None,
                 dirs: Iterable[str] = (), *, sector_bytes: int = SECTOR_BYTES, exhaustive_units: int = 12,
                 samples: int = 256, seed: int | str = 0, zero_fill: bool = True,
                 complete: bool = True) -> Iterator[CrashPoint]:
    """Yield the :class:`CrashPoint` of every prefix of ``events``; ``complete``: the process ran to its end."""
    sim = Simulator(files, dirs, sector_bytes)
    opts: dict[str, Any] = dict(seed=seed, exhaustive_units=exhaustive_units, samples=samples, zero_fill=zero_fill)
    events = list(events)
    yield sim.states(0, **opts)
    for i, ev in enumerate(events, 1):
        sim.apply(ev)
        if complete and i == len(events):
            sim.finish()
        yield sim.states(i, **opts)


def crash_states(events: Iterable[dict[str, Any]], files: dict[str, bytes] | None = None,
                 dirs: Iterable[str] = (), *, distinct: bool = False, **options: Any) -> Iterator[CrashState]:
    """Yield the crash states of every prefix; ``distinct`` skips states yielded for an earlier prefix."""
    seen: set[tuple] = set()
    for point in crash_points(events, files, dirs, **options):
        for state in point.states:
            if distinct:
                key = state.key()
                if key in seen:
                    continue
                seen.add(key)
            yield state


#: Why a crash point or state named by a schedule may be missing from a new run of the subject.
NOT_REPEATED = ("a subject that does not repeat its run event for event, such as an agent whose background "
                "writer or start-up varies, numbers its crash points differently in each run: run the scenario "
                "again to find the state anew, e.g. with the campaign's --trials and --seed")


def window(events: list[dict[str, Any]], files: dict[str, bytes] | None, dirs: Iterable[str], prefix_n: int,
           dropped: Iterable[Iterable[Any]] | None = None, *, sector_bytes: int = SECTOR_BYTES,
           complete: bool = True) -> tuple[list[tuple], CrashState | None]:
    """The unsynced window's units after ``prefix_n`` of ``events`` and, with ``dropped``, the crash state in
    which every unit but those persisted (its id ``p<N>~<units>``).  Raises ``ValueError`` for a prefix past
    the trace or a dropped unit not in the window."""
    if not 0 <= prefix_n <= len(events):
        raise ValueError(f"no crash point {prefix_n} in a trace of {len(events)} events: this run of the subject "
                         f"made {len(events)} durability events, the schedule names a point of a run that made more "
                         f"({NOT_REPEATED})")
    sim = Simulator(files, dirs, sector_bytes)
    for ev in events[:prefix_n]:
        sim.apply(ev)
    if complete and prefix_n == len(events) and events:
        sim.finish()
    units = sim.units()
    if dropped is None:
        return units, None
    drop = {tuple(u) for u in dropped}
    if not drop <= set(units):
        raise ValueError(f"units {sorted(drop - set(units))} are not in the unsynced window of crash point {prefix_n}")
    name = ",".join("/".join(map(str, u)) for u in sorted(drop)) or "none"
    return units, sim.build(set(units) - drop, state_id=f"p{prefix_n}~{name}", prefix_n=prefix_n,
                            acks=sim.acknowledged())



def written(events: Iterable[dict[str, Any]], files: dict[str, bytes] | None = None) -> dict[str, bytes]:
    """The files as ``events`` left them, every call applied and nothing lost (path -> bytes, :data:`VOLATILE`
    left out): an opaque store after a leg that ran to its end, read from its trace alone."""
    sim = Simulator(files)
    for ev in events:
        sim.apply(ev)
    return {p: bytes(sim.current[i]) for p, i in sim.kept(sim.names).items()}
