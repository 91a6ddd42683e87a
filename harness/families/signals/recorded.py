"""Kill crash points from one recording: the state a SIGKILL at trace event K leaves, computed, not re-run
(docs/persistence-model.md "Kills from the recording": the state, the oracles by the kill's time, one resume per
distinct state, :class:`Recorder`).  Where a real kill can differ (an op of another thread or process in flight
at the kill), the point is not recorded: :func:`prelude` returns ``None`` and the trial kills for real.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, TypeVar

from harness.families.power_loss.crashstates import CrashState, window
from harness.history.model import History, Leg
from harness.runner.faults import event_action, history_fault
from harness.runner.prelude import Prelude
from harness.runner.trial import ReferenceRun

T = TypeVar("T")

__all__ = ["crash_prefix", "in_flight", "prelude", "state_key", "resumes_first", "Recorder", "slug_for"]


def crash_prefix(schedule: list[dict[str, Any]]) -> int | None:
    """How many trace events of leg 0 a schedule's first fault lets complete: ``K`` for a kill after event K,
    ``K - 1`` before it; ``None`` for any other first fault (timed, counted by op kind, not a kill)."""
    first = schedule[0] if schedule else {}
    if first.get("kind") != "kill" or "event" not in first or first.get("op"):
        return None
    return int(first["event"]) - (first.get("when", "after") == "before")


def _kill_time(trace: list[dict[str, Any]], p: int, before: bool) -> int | None:
    """The monotonic time (ns) of a kill after ``p`` events (``before``: at the entry of event ``p + 1``)."""
    ev = trace[p] if before else trace[p - 1] if p else None
    t = ev.get("t0" if before else "t") if ev else None
    return t if isinstance(t, int) else None


def in_flight(trace: list[dict[str, Any]], start: int, t_kill: int) -> bool:
    """True when an event from index ``start`` on (another thread's or process's) had entered before the kill
    time ``t_kill``: a real kill lets it run (docs/observer.md "What a kill guarantees"), a prefix does not."""
    return any(isinstance(ev.get("t0"), int) and ev["t0"] < t_kill for ev in trace[start:])


def prelude(ref: ReferenceRun, schedule: list[dict[str, Any]], slug_of: Callable[[str], str]) -> Prelude | None:
    """The recorded leg 0 of a trial whose first fault is an event kill (:class:`harness.runner.trial.Prelude`),
    from ``ref``'s uninterrupted leg 0; ``slug_of``: a trial folder's cwd slug (``""``: the subject has no cwd).
    ``None`` when the recording cannot stand in: not an event kill, a point past the leg's end, no times in
    the trace, or an op in flight at the kill (:func:`in_flight`)."""
    p, hist = crash_prefix(schedule), ref.history
    before = schedule[0].get("when") == "before" if schedule else False
    if p is None or not hist.legs or len(hist.legs[0].trace) < p + before:
        return None
    leg = hist.legs[0]
    trace, old_home = leg.trace, hist.options.get("trial_dir")
    t_kill = _kill_time(trace, p, before)
    if t_kill is None or not old_home or in_flight(trace, p + before, t_kill):
        return None
    state = _state_at(hist, p)
    cut = [dict(ev) for ev in trace[:p]]
    if cut and not before and "tid" in cut[-1]:  # the observer marks the op its kill came after
        cut[-1]["fault"] = event_action(schedule[0])
    dead = Leg(index=0, kind=leg.kind, argv=leg.argv, pid=leg.pid, t_start=leg.t_start, t_end=t_kill, trace=cut,
               fault=history_fault(schedule[0], injected=True), exit_signal="SIGKILL")
    dead.fault.detail["recorded"] = True
    return Prelude(files=state.files, dirs=sorted(state.dirs), old_home=old_home, slug=slug_of(old_home),
                   run_uuid=hist.options.get("run_uuid") or "", leg=dead,
                   calls=[c for c in hist.model_calls if c.t <= t_kill],
                   effects=[e for e in hist.effects if e.t <= t_kill])


_STATES: dict[int, dict[int, CrashState]] = {}  # id of a recorded history -> prefix -> its state (while it lives)
_STATES_LOCK = threading.Lock()


def _state_at(hist: History, p: int) -> CrashState:
    """The files and folders leg 0 of ``hist`` left after ``p`` events, every unit persisted (power loss's crash
    state, :func:`window`), computed once per recording and prefix: the plan (:func:`resumes_first`) and the
    executor both ask for every point's, and each is a replay of the trace up to it."""
    with _STATES_LOCK:
        known = _STATES.get(id(hist))
        if known is None:
            known = _STATES[id(hist)] = {}
            weakref.finalize(hist, _STATES.pop, id(hist), None)
        state = known.get(p)
    if state is None:
        state = window(hist.legs[0].trace, {}, (), p, ())[1]
        assert state is not None  # (no unit dropped: the state in which every unit persisted)
        with _STATES_LOCK:
            known[p] = state
    return state


def state_key(pre: Prelude, schedule: list[dict[str, Any]]) -> tuple:
    """What a recorded trial's resume starts from: the files and folders, the calls and effects made, and the
    rest of the schedule; points with equal keys share one resume."""
    return (tuple(sorted(pre.files.items())), tuple(pre.dirs), tuple(c.key for c in pre.calls),
            tuple((e.tool_use_id, e.attempt) for e in pre.effects), repr(schedule[1:]))


def resumes_first(ref: ReferenceRun, schedules: list[T]) -> list[T]:
    """``schedules`` (or planned trials with a ``schedule``) with the first point of every distinct recorded
    state first, the points that share its resume after them, each part in its order (pure): parallel
    trials then run distinct resumes instead of one waiting for another's."""
    seen: set[tuple] = set()
    first, rest = [], []
    for item in schedules:
        schedule = getattr(item, "schedule", item)
        pre = prelude(ref, schedule, lambda home: "")
        key = None if pre is None else state_key(pre, schedule)
        (rest if key is not None and key in seen else first).append(item)
        seen.add(key)  # type: ignore[arg-type]
    return first + rest


class Recorder:
    """Runs recorded kill trials, one resume per distinct materialized state (thread-safe).

    ``run(scenario, seed, schedule, prelude)`` is :meth:`harness.runner.trial.Runner.run_trial`; a point whose
    state (files, folders, calls and effects made, later faults) a resume already started from is judged on
    that resume's legs with its own leg 0; the same schedule run again runs again.  :attr:`resumes`: the
    resumes run."""

    def __init__(self, run: Callable[..., History]) -> None:
        self._run, self._lock = run, threading.Lock()
        self._groups: dict[tuple, tuple[threading.Lock, list[History]]] = {}
        self._seen: dict[str, int] = {}
        self.resumes = 0

    def trial(self, scenario: Any, seed: int, schedule: list[dict[str, Any]], pre: Prelude) -> tuple[History, bool]:
        """The history of the trial ``schedule`` names and whether a resume ran for it."""
        with self._lock:  # a schedule planned again (a regression's repeats) gets a resume of its own
            again = self._seen[repr(schedule)] = self._seen.get(repr(schedule), -1) + 1
            lock, done = self._groups.setdefault((*state_key(pre, schedule), again), (threading.Lock(), []))
        with lock:
            ran = not done
            if ran:
                done.append(self._run(scenario, seed, schedule, prelude=pre))
                with self._lock:
                    self.resumes += 1
        first = done[0]
        leg = replace(pre.leg, journal=first.legs[0].journal, reading=first.legs[0].reading)
        notes = [] if ran else [f"judged on the resume of the same state as {first.schedule[0]}"]
        return replace(first, seed=seed, schedule=[dict(f) for f in schedule], legs=[leg, *first.legs[1:]],
                       notes=[*first.notes, *notes]), ran


def slug_for(subject: Any) -> Callable[[str], str]:
    """The cwd slug of a trial folder for ``subject`` (``""`` when it has no cwd of its own)."""
    return lambda home: subject.trial_where(Path(home), make=False)["cwd_slug"] if subject.cwd else ""
