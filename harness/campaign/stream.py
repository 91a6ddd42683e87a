"""The trial stream: the one scheduler of a campaign, which interleaves its scenarios' plans trial by trial.

Rounds, draws from fresh seeds, fixed plans compared by content, spent scenarios and shards are
docs/scenarios.md "The CI gate".  Pure apart from the ``draw`` callable it is given: it neither runs
trials nor reads a clock; the campaign asks it for the next trial while it may start one.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.campaign.result import ScenarioRun
from harness.campaign.shard import shard_positions
from harness.errors import SetupError
from harness.families.base import Planned
from harness.names import SEED_STEP

__all__ = ["TrialStream", "Next", "trial_content", "SPENT_AFTER"]

#: Draws in a row that bring no new trial before a scenario is spent (a seeded sample can draw only known
#: trials once and new ones with the next seed; an unseeded plan never draws a new one).
SPENT_AFTER = 3


@dataclass(frozen=True)
class Next:
    """One trial the stream hands out: its scenario's ``run``, the ``planned`` trial, its ``round`` (it is
    the scenario's ``round``-th trial, 0-based) and the ``draw`` it came from."""

    run: ScenarioRun
    planned: Planned
    round: int
    draw: int


@dataclass
class _Lane:
    """One scenario's place in the stream: its queue of this shard's trials of the current draw, what its
    draws planned (content digests), and how many draws in a row brought nothing new."""

    run: ScenarioRun
    queue: deque[tuple[Planned, int]] = field(default_factory=deque)
    seen: set[str] = field(default_factory=set)
    empty: int = 0


def _canon(x: Any) -> Any:
    """``x`` with its sets sorted and its dataclasses, tuples and dicts as plain lists (a stable repr)."""
    if isinstance(x, (set, frozenset)):
        return sorted((_canon(v) for v in x), key=repr)
    if isinstance(x, dict):
        return sorted(((repr(_canon(k)), _canon(v)) for k, v in x.items()), key=lambda kv: kv[0])
    if isinstance(x, (list, tuple)):
        return [_canon(v) for v in x]
    return x


def trial_content(planned: Planned) -> str:
    """What a planned trial does, its seed aside, as a SHA-256 hex digest: its item's content when the item
    carries one (a crash state: ``key()``, its files, directories and acknowledged records; a tail mutation:
    its kind, bytes and expectation; with the strings and flags beside them, e.g. whether a crash state is
    recovered or judged for I4 alone), else its schedule.  Two trials with the same content are the same
    trial, so a later draw drops the ones an earlier draw planned."""
    items = planned.item if isinstance(planned.item, tuple) else (planned.item,)
    parts: list[Any] = []
    carried = False
    for x in items:
        if callable(getattr(x, "key", None)):
            parts.append(_canon(x.key()))
            carried = True
        elif isinstance(getattr(x, "data", None), bytes):
            parts.append([getattr(x, "kind", None), x.data, getattr(x, "expect", None)])
            carried = True
        elif isinstance(x, (str, bool, int)):
            parts.append(x)
    if not carried:
        parts = [json.dumps(planned.schedule, sort_keys=True, default=str)]
    return hashlib.sha256(repr(parts).encode("utf-8", "surrogatepass")).hexdigest()


class TrialStream:
    """Hands out the trials of ``runs`` round by round.  ``draw(run, seed)``: the scenario's plan with ``seed``
    (a ``ValueError`` or :class:`harness.errors.SetupError` becomes the run's ``error``, in :attr:`errors`);
    ``fixed(run)``: its plan is fixed (a fresh draw keeps only new trials); ``shard``, ``seed_stream``,
    ``max_draws``, ``on_round(k, live)`` as :class:`harness.campaign.campaign.Campaign`'s.  Each run keeps its
    bookkeeping: ``plan`` (every trial drawn, all shards), ``seeds`` (one per draw), ``started``, ``ended``
    (why it left: ``plan``, ``spent``, ``stopped``, ``error``, ``draws``; ``""`` while in it).  Main thread only.
    """

    def __init__(self, runs: list[ScenarioRun], draw: Callable[[ScenarioRun, int], list[Planned]], *,
                 shard: tuple[int, int] | None = None, seed_stream: bool = False, max_draws: int | None = None,
                 on_round: Callable[[int, int], None] | None = None,
                 fixed: Callable[[ScenarioRun], bool] = lambda run: True) -> None:
        if max_draws is not None and max_draws < 1:
            raise ValueError(f"max_draws must be at least 1, got {max_draws!r}")
        self._draw, self.shard, self.seed_stream, self.max_draws = draw, shard, seed_stream, max_draws
        self.on_round, self._fixed = on_round, fixed
        self.errors: list[str] = []
        self.round = 0
        self._announced = -1
        self._lanes = [_Lane(run) for run in runs]
        for lane in self._lanes:
            if lane.run.error is not None or lane.run.skipped:
                lane.run.ended = "error" if lane.run.error else "skipped"
                continue
            self._refill(lane)

    @property
    def planned(self) -> int:
        """Trials of this shard drawn so far (handed out or queued)."""
        return sum(lane.run.started + len(lane.queue) for lane in self._lanes)

    def waiting(self) -> int:
        """Scenarios still in the stream that have not had their trial of the current round."""
        return sum(1 for lane in self._lanes if not lane.run.ended and lane.run.started <= self.round)

    def first_draw_left(self) -> bool:
        """Whether a scenario still in the stream has a trial of its draw 0 not handed out yet."""
        return any(j == 0 for lane in self._lanes if not lane.run.ended for _, j in lane.queue)

    def stop(self, run: ScenarioRun) -> None:
        """Take ``run`` out of the stream (its trials not handed out yet are dropped: ``--first-violation``)."""
        for lane in self._lanes:
            if lane.run is run and not run.ended:
                lane.queue.clear()
                run.ended = "stopped"

    def next(self) -> Next | None:
        """The next trial in round order, drawing a scenario's next plan when its draw is spent; ``None`` when
        no scenario is left in the stream."""
        while True:
            live = [lane for lane in self._lanes if not lane.run.ended]
            if not live:
                return None
            due = [lane for lane in live if lane.run.started == self.round]
            if not due:
                self.round += 1
                continue
            if self._announced < self.round:
                self._announced = self.round
                if self.on_round is not None:
                    self.on_round(self.round, len(live))
            lane = due[0]
            if not lane.queue:
                self._refill(lane)
                continue
            planned, j = lane.queue.popleft()
            lane.run.started += 1
            return Next(lane.run, planned, self.round, j)

    def _refill(self, lane: _Lane) -> None:
        """Draw ``lane``'s plans until this shard has a trial of it, or it leaves the stream."""
        run = lane.run
        while not lane.queue and not run.ended:
            j = len(run.seeds)
            if j >= 1 and not self.seed_stream:
                run.ended = "plan"
                return
            if self.max_draws is not None and j >= self.max_draws:
                run.ended = "draws"
                return
            seed = run.seed + j * SEED_STEP
            try:
                drawn = self._draw(run, seed)
            except (ValueError, SetupError) as exc:
                run.error = f"{run.scenario.path or run.scenario.name}: {exc}"
                run.ended = "error"
                self.errors.append(run.error)
                return
            run.seeds.append(seed)
            fresh = drawn
            if self.seed_stream and self._fixed(run):
                keys = [trial_content(p) for p in drawn]
                fresh = [p for p, key in zip(drawn, keys) if key not in lane.seen] if j else drawn
                lane.seen.update(keys)
            offset = len(run.plan)  # the shard's positions run on across the draws (a 1-trial draw is not lost)
            run.plan += fresh
            lane.empty = 0 if fresh else lane.empty + 1
            if lane.empty >= SPENT_AFTER:
                run.ended = "spent"
                return
            mine = [g - offset for g in shard_positions(len(run.plan), self.shard) if g >= offset]
            lane.queue.extend((fresh[p], j) for p in mine)
