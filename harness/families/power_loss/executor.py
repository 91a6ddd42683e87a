"""The power-loss family's state space and a crash state's full resume (the tiers: :mod:`.family`, :mod:`.tiers`;
docs/persistence-model.md "How the harness uses it").

:func:`state_space` enumerates the crash states of the reference run's trace (pure).  :func:`explore_state` lays a
state in a fresh state home and resumes it through the journal-state engine, the effects ledger holding the
reference run's effects before the crash point (the tool in flight counts as run): its history's leg 0 is the
reference leg cut at the crash point (fault ``power_loss``), leg 1 the recovery, ``History.crash_state`` the
state's facts (I4 judges them by the model), the recovery judged by :data:`CHECKED`.  It builds no verdict.
"""

from __future__ import annotations

import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fiskj.codec import decode_record
from fiskj.records import AssistantRecord, ToolResultRecord

from harness.families.journal_state.executor import Context, lay, resume
from harness.families.power_loss.crashstates import CrashState, crash_points, written
from harness.families.power_loss.params import Params
from harness.families.tail.bound import round_robin
from harness.families.trace_points import lines_written
from harness.history.journal_location import JournalLocation
from harness.history.model import CrashStateFacts, Fault, History, Leg
from harness.runner.prelude import rehome
from harness.runner.trial import ReferenceRun
from harness.subject.contract import journal_bytes

__all__ = ["CHECKED", "Space", "select_states", "journal_index", "state_space", "explore_state", "crash_time"]

#: Invariants judged by the shared checkers on a power-loss history (I4 is judged on the state).
CHECKED = ("I2", "I3", "I5", "I6", "I7", "I10")


def journal_index(trace: list[dict[str, Any]], run_id: str, journal: JournalLocation,
                  files: dict[str, bytes] | None = None) -> tuple[dict[str, int], list[int]]:
    """Trace positions (0-based) of the writes of ``run_id``'s ``journal`` that ended a record's line
    (:func:`~harness.families.trace_points.lines_written`; ``files``: as it takes them): tool_use_id -> its
    tool_result's, and the assistants' in order."""
    results: dict[str, int] = {}
    assistants: list[int] = []
    for i, line in lines_written(trace, lambda path: journal.is_journal(path, run_id), files):
        try:
            rec = decode_record(line)
        except Exception:  # noqa: BLE001 - a damaged line is no record
            continue
        if isinstance(rec, ToolResultRecord):
            results.setdefault(rec.tool_use_id, i)
        elif isinstance(rec, AssistantRecord):
            assistants.append(i)
    return results, assistants


def select_states(points: list[Any], max_states: int) -> list[CrashState]:
    """Distinct states (first crash point wins), round-robin over crash points, at most ``max_states`` (0: all)."""
    seen: set[tuple] = set()
    queues = []
    for point in points:
        queue = []
        for state in point.states:
            key = state.key()
            if key not in seen:
                seen.add(key)
                queue.append(state)
        queues.append(queue)
    return round_robin(queues, max_states or None)


@dataclass
class Space:
    """The crash states of a reference run (pure, from its trace; docs/persistence-model.md).

    ``old_home``: the reference's state home (paths in the states are under
    it); ``points``: every crash point; ``distinct``: the distinct states,
    round-robin over crash points (:func:`select_states`); ``index``: where
    tool results and assistant records were written (:func:`journal_index`);
    ``build_seconds``: time to build them; ``leg``: the reference leg that
    loses power (0, or the resume leg of a two-leg reference); ``start``: the
    simulation's input (trace, files, dirs, sector bytes), for
    :func:`~harness.families.power_loss.crashstates.window`; ``options``: the
    other keywords of :func:`~harness.families.power_loss.crashstates.crash_points`.
    ``points``, ``distinct`` and ``build_seconds`` are enumerated on first use
    (thread-safe): a replay of shrunk states, each rebuilt from ``start`` alone,
    needs none of them.
    """

    old_home: str
    index: tuple[dict[str, int], list[int]]
    trace_events: int
    leg: int = 0
    start: tuple = ()
    options: dict[str, Any] = field(default_factory=dict)
    _built: tuple[list[Any], list[CrashState], float] | None = field(default=None, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def _enumerated(self) -> tuple[list[Any], list[CrashState], float]:
        with self._lock:
            if self._built is None:
                t0 = time.monotonic()
                trace, files, dirs, sector = self.start
                points = list(crash_points(trace, files, dirs, sector_bytes=sector, **self.options))
                self._built = (points, select_states(points, 0), time.monotonic() - t0)
            return self._built

    @property
    def points(self) -> list[Any]:
        """Every crash point (:class:`~harness.families.power_loss.crashstates.CrashPoint`), in trace order."""
        return self._enumerated()[0]

    @property
    def distinct(self) -> list[CrashState]:
        """The distinct crash states, round-robin over crash points (:func:`select_states`)."""
        return self._enumerated()[1]

    @property
    def build_seconds(self) -> float:
        """Seconds the enumeration of :attr:`points` took."""
        return self._enumerated()[2]


def state_space(ref: ReferenceRun, run_id: str, params: Params, subject: Any) -> Space:
    """Enumerate the crash states of the reference run's last leg (pure; raises ``ValueError``
    when its trace shows no journal: nothing was observed, so nothing can be judged; an opaque store the
    run never wrote is judged as it is: a power loss after the run finds nothing of it).  For an opaque store
    (:attr:`~harness.history.journal_location.JournalLocation.is_store`) any file below it is its journal
    (docs/persistence-model.md "Opaque stores").

    The first leg starts from an empty state home; a later leg (``crash_leg
    = "resume"``) starts from what the leg before it left, all of it durable
    (that leg was killed right after an fsync of the journal, its
    directories were made durable when they were created).  The persistence
    model covers every file the trace shows under the trial's folder (the
    reference's ``trial_dir``; the agent under test ``subject``'s folders there existed before the run).
    """
    leg = len(ref.history.legs) - 1 if params.crash_leg == "resume" else 0
    trace = ref.history.legs[leg].trace
    journal = ref.history.journal
    jpath = next((ev["path"] for ev in trace if journal.is_journal(ev.get("path"), run_id)), None)
    if jpath is None and not (journal.is_store and ref.history.options.get("trial_dir")):
        raise ValueError(f"the reference run's trace ({len(trace)} events) shows no write of the journal "
                         f"{journal.template}: power loss has nothing to simulate (is the leg observed?)")
    opts = ref.history.options
    old_home = opts.get("trial_dir") or str(Path(jpath).parents[3])  # (a history from before trial_dir was kept)
    before = subject.trial_where(Path(old_home), opts.get("run_uuid"), make=False)
    dirs = {old_home, str(Path(old_home).parent)} | {before[k] for k in ("state_home", "home", "tmp_dir", "cwd")
                                                     if before[k].startswith(old_home + "/")}
    files: dict[str, bytes] = {}
    if leg > 0 and journal.is_store:  # the store as the legs before left it (read from their traces)
        files = {p: b for p, b in written(ev for lg in ref.history.legs[:leg] for ev in lg.trace).items()
                 if journal.is_journal(p, run_id)}
        dirs |= {str(d) for p in files for d in Path(p).parents if str(d).startswith(old_home + "/")}
    elif leg > 0:
        files = {jpath: ref.history.legs[leg - 1].journal or b""}
        if journal.is_contract:  # the contract's run lock beside it (docs/spec.md section 10)
            files[str(Path(jpath).with_suffix(".lock"))] = b""
        dirs |= {str(p) for p in Path(jpath).parents if str(p).startswith(old_home + "/")}
    options = dict(exhaustive_units=params.exhaustive_units, samples=params.samples, seed=params.seed,
                   zero_fill=params.zero_fill)
    return Space(old_home, journal_index(trace, run_id, journal, files), len(trace), leg,
                 (trace, files, dirs, params.sector_bytes), options)


def explore_state(ctx: Context, state: CrashState, space: Space, read_only: bool = False) -> History:
    """Lay ``state``'s files in a fresh state home (:func:`harness.families.journal_state.executor.lay`),
    resume it (:func:`~harness.families.journal_state.executor.resume`; ``read_only``: an opaque store's
    reading only, no leg), and return the history with the state's facts (``History.crash_state``).  Judges
    nothing."""
    ref_leg = ctx.ref.history.legs[space.leg]
    prior = list(ctx.ref.history.legs[:space.leg])
    old_home = space.old_home
    slug = ctx.subject.trial_where(Path(old_home), ctx.run_uuid, make=False)["cwd_slug"] if ctx.subject.cwd else ""

    def local(path: str) -> str | None:  # relative to the trial's folder; a folder named after its cwd renamed
        return rehome(path, old_home, slug, new_slug)

    with tempfile.TemporaryDirectory(prefix="fiskj-powerloss-", dir=ctx.runner.tmp_root,
                                     ignore_cleanup_errors=True) as name:
        tmp = Path(name)
        new_slug = ctx.where(tmp)["cwd_slug"]
        files = {local(p): data for p, data in state.files.items() if local(p) is not None}
        dirs = [d for d in (local(p) for p in state.dirs) if d is not None]
        lay(ctx, tmp, files=files, dirs=dirs)  # type: ignore[arg-type]
        p, crashed = state.prefix_n, ctx.journal(tmp)
        results, assistants = space.index
        ran = {tid for tid, i in results.items() if i <= p}  # written before the crash, or in flight
        hist = ctx.ref.history
        calls = [c for c in hist.model_calls if c.leg == space.leg] if space.leg else hist.model_calls
        if hist.journal.decoded:  # what the journal had taken in by the crash point
            pre_effects = [e for e in hist.effects
                           if e.leg < space.leg or (e.leg == space.leg and e.tool_use_id in ran)]
            upto = [c for k, c in enumerate(calls) if k < len(assistants) and assistants[k] <= p]
        else:  # a journal the harness does not decode: what had happened by the crash point's time
            crash_t = crash_time(ctx, state, space)
            pre_effects = [e for e in hist.effects if e.leg < space.leg or (e.leg == space.leg and e.t <= crash_t)]
            upto = [c for c in calls if c.t <= crash_t]
        pre_calls = [c for c in hist.model_calls if space.leg and c.leg < space.leg] + upto
        leg0 = Leg(index=space.leg, kind=ref_leg.kind, argv=ref_leg.argv, pid=ref_leg.pid, t_start=ref_leg.t_start,
                   t_end=ref_leg.t_end, trace=ref_leg.trace[:p],
                   fault=Fault(kind="power_loss", at={"event": p}, injected=True,
                               detail={"state": state.id, "persisted": state.persisted,
                                       "lost_entries": state.lost_entries}),
                   journal=journal_bytes(crashed))
        history = resume(ctx, tmp, [*prior, leg0], pre_calls, pre_effects, {"kind": "power_loss", "state": state.id},
                         read_only)
    history.crash_state = CrashStateFacts.of(state)
    return history


def crash_time(ctx: Context, state: CrashState, space: Space) -> int:
    """The monotonic time (ns) of ``state``'s crash point in the reference leg that lost power (:func:`_time_of`)."""
    leg = ctx.ref.history.legs[space.leg]
    if state.prefix_n >= len(leg.trace) and leg.t_end:  # after its last call: any time until the leg ended
        return leg.t_end
    return _time_of(leg.trace[:state.prefix_n], leg.t_start)


def _time_of(prefix: list[dict[str, Any]], start: int) -> int:
    """The monotonic time (ns) of the last traced call in ``prefix`` (its end when known), else ``start``."""
    for ev in reversed(prefix):
        t = ev.get("t1", ev.get("t"))
        if isinstance(t, int):
            return t
    return start
