"""Mid-run crash points of a JetStream server's power loss, from one recorded run (issue 28).  Pure.

A point (``at = "ack"`` or ``"event"``, point ``K``) is an instant ``T`` of the recording; how ``T`` orders the
server's trace (:func:`server_prefix`, in exit order) against the agent's (:func:`cut_leg`), and the cross-check
by content (:class:`CrashPointError`): docs/jetstream.md "Mid-run crash points" and "Ordering the two traces".
"""

from __future__ import annotations

import base64
import fnmatch
from dataclasses import dataclass
from typing import Any

from harness.errors import SetupError
from harness.families.power_loss.crashstates import window
from harness.history.model import Fault, History, Leg
from harness.runner.prelude import Prelude

__all__ = ["AT", "BLOCKS", "CrashPointError", "PastEnd", "Point", "acks", "block_events", "by_exit", "crash_plan",
           "held", "crash_point", "server_prefix", "cut_leg"]

#: The kinds of mid-run crash point (``[faults] at``: ``every-ack``, ``every-event``).
AT = ("ack", "event")
#: The stream's message block files, as the observer names them (an fnmatch pattern over a full path).
BLOCKS = "*/streams/*/msgs/*.blk"


class CrashPointError(SetupError):
    """A crash point that the recording does not have (past the run's last ack or event), or whose two traces
    disagree (an acknowledged record not in any server write by its ack's time)."""


class PastEnd(CrashPointError):
    """A crash point past the recording's last ack or server event (a trial planned beyond the run)."""


@dataclass(frozen=True)
class Point:
    """One crash point: ``at`` and ``k`` as asked, ``t`` its instant (monotonic ns), ``server`` the server's
    trace prefix (events), ``acked`` the agent's acknowledged publishes by then."""

    at: str
    k: int
    t: int
    server: int
    acked: int

    def describe(self) -> dict[str, Any]:
        return {"at": self.at, "point": self.k, "t": self.t, "server_prefix": self.server, "acked": self.acked}


def crash_plan(every: str, states: int, count: int) -> list[dict[str, Any]]:
    """The first ``count`` trials of ``[faults] at = every`` (``"every-ack"`` or ``"every-event"``) with ``states``
    crash states per point, as schedule entries: trial ``i`` is point ``i // states + 1``, state ``i % states``
    (point-major, so a short campaign covers the early points with each state).  Raises ``ValueError``."""
    at = {"every-ack": "ack", "every-event": "event"}.get(every)
    if at is None or states < 1 or count < 0:
        raise ValueError(f"no crash plan for at={every!r}, states={states}, count={count}")
    return [{"kind": "power_loss", "at": at, "point": i // states + 1, "state": i % states} for i in range(count)]


def acks(trace: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """The ``publish`` events of the run ``run_id`` in an agent's seam ``trace`` (its acknowledged appends), in
    order."""
    return [ev for ev in trace if ev.get("op") == "publish" and str(ev.get("path", "")).endswith(f".{run_id}.>")]


def block_events(events: list[dict[str, Any]]) -> list[int]:
    """The 1-based positions in the server trace ``events`` of its writes and fsyncs of a message block file
    (:data:`BLOCKS`): its durability events of the stream."""
    return [i for i, ev in enumerate(events, 1)
            if ev.get("op") in ("write", "fsync", "fdatasync") and not ev.get("error")
            and fnmatch.fnmatchcase(str(ev.get("path", "")), BLOCKS)]


def by_exit(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The server trace ``events`` ordered by exit time (``t``; stable; an event without one last): each call
    takes effect when it returns, a linearization of the calls that keeps their real-time order (one that
    returned before another entered comes first).  The order :func:`server_prefix` and the crash states use."""
    return sorted(events, key=lambda ev: ev["t"] if isinstance(ev.get("t"), int) else 1 << 63)


def server_prefix(events: list[dict[str, Any]], t: int) -> int:
    """How many events of the server trace ``events`` (:func:`by_exit` order) had returned by instant ``t``: a
    call of another thread still in flight then is left out (the power went before it returned, so before it
    took effect: one outcome it may have), without holding back the calls that returned before ``t``."""
    return sum(1 for ev in events if isinstance(ev.get("t"), int) and ev["t"] <= t)


def _written(events: list[dict[str, Any]], upto: int) -> bytes:
    return b"".join(base64.b64decode(ev.get("data") or "") for ev in events[:upto] if ev.get("op") == "write")


def held(events: list[dict[str, Any]], upto: int, agent: list[dict[str, Any]], run_id: str, t: int) -> int:
    """How many of the records the agent saw acknowledged by instant ``t`` are in a write among the first ``upto``
    events of a server's trace ``events`` (any file: a cluster node's raft log or its stream's blocks)."""
    written = _written(events, upto)
    return sum(1 for ev in acks(agent, run_id) if isinstance(ev.get("t"), int) and ev["t"] <= t
               and base64.b64decode(ev.get("data") or "").rstrip(b"\n") in written)


def crash_point(at: str, k: int, agent: list[dict[str, Any]], server: list[dict[str, Any]], run_id: str) -> Point:
    """Crash point ``k`` (1-based) of kind ``at`` (:data:`AT`) of a recording: ``agent`` the agent's seam trace,
    ``server`` the server's trace in :func:`by_exit` order (from the server's start before the run: its block
    files are written only by the run); the point's ``server`` prefix is of that order.  Raises :class:`PastEnd`
    for a point the recording does not have and :class:`CrashPointError` when an acknowledged record is not in
    the server's prefix."""
    if at not in AT:
        raise ValueError(f"crash point kind {at!r} is not one of {AT}")
    published = acks(agent, run_id)
    if at == "ack":
        if not 1 <= k <= len(published):
            raise PastEnd(f"no ack {k}: the run has {len(published)} acknowledged publishes")
        t = published[k - 1]["t"]
    else:
        events = block_events(server)
        if not 1 <= k <= len(events):
            raise PastEnd(f"no server event {k}: the run has {len(events)} block writes and fsyncs")
        t = server[events[k - 1] - 1]["t"]
    p = server_prefix(server, t)
    seen = [ev for ev in published if isinstance(ev.get("t"), int) and ev["t"] <= t]
    written = _written(server, p)
    for ev in seen:
        line = base64.b64decode(ev.get("data") or "").rstrip(b"\n")
        if line not in written:
            raise CrashPointError(f"crash point {at} {k}: an acknowledged record ({line[:40]!r}...) is in no server "
                                  f"write of its first {p} events: the two traces disagree")
    return Point(at, k, t, p, len(seen))


def cut_leg(history: History, t: int, fault: Fault, slug: str = "") -> Prelude:
    """``history``'s leg 0 (a recorded run) as a :class:`Prelude` killed at instant ``t``: its seam trace's
    leading events emitted by ``t``, the files they left (every unit persisted: the agent's kill, not a power
    loss of its machine), the model calls and tool effects made by ``t``; ``fault`` on it; ``slug``: the recorded
    trial folder's cwd slug (:func:`harness.families.signals.recorded.slug_for`)."""
    leg = history.legs[0]
    q = 0
    while q < len(leg.trace) and isinstance(leg.trace[q].get("t"), int) and leg.trace[q]["t"] <= t:
        q += 1
    state = window(leg.trace, {}, (), q, (), complete=False)[1]
    assert state is not None  # (no unit dropped)
    dead = Leg(index=0, kind=leg.kind, argv=leg.argv, pid=leg.pid, t_start=leg.t_start, t_end=t,
               trace=[dict(ev) for ev in leg.trace[:q]], fault=fault, exit_signal="SIGKILL")
    old_home = history.options.get("trial_dir", "")
    return Prelude(files=state.files, dirs=sorted(state.dirs), old_home=old_home, slug=slug,
                   run_uuid=history.options.get("run_uuid", ""), leg=dead,
                   calls=[c for c in history.model_calls if c.t <= t],
                   effects=[e for e in history.effects if e.t <= t])
