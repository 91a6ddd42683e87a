"""Tiered exploration of power-loss crash states (docs/persistence-model.md "Tiered exploration"): a cheap
judgement of every distinct state (:func:`judge_cheap`: the crash model's I4 on the state and the subject's
recovery or reading of its journal, asked the journal-state engine's one way, judged as I5; :func:`judge_cheap_opaque`
for an opaque store), a full resume of a sample (:func:`full_sample`: the first state of every distinct recovery
outcome, :func:`outcome_key`, then a seeded draw of ``resumes`` more, at most ``cap``) through
:func:`harness.families.power_loss.executor.explore_state`.  Nothing here builds a verdict: :func:`cheap_history`
records the facts and the checkers judge them (:func:`harness.checkers.check_all`).
"""

from __future__ import annotations

import concurrent.futures
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.checkers import VALID, Verdict, check_all
from harness.families.journal_state.ask import answers, cheap_mode, expected_reading, reader_check
from harness.families.journal_state.executor import Context
from harness.families.power_loss.crashstates import CrashState
from harness.families.power_loss.executor import Space, crash_time, explore_state
from harness.history.journal_location import JournalLocation
from harness.history.model import CrashStateFacts, History, ReaderCheck
from harness.names import FISK_AI_V2

__all__ = ["CHEAP_CHECKED", "Cheap", "journal_of", "outcome_key", "full_sample", "cheap_limit", "cheap_history",
           "judge_cheap", "judge_cheap_opaque"]

#: Invariants the cheap tier judges (those of the scenario's ``[check]``).
CHEAP_CHECKED = ("I4", "I5")


def journal_of(state: CrashState, run_id: str, journal: JournalLocation = JournalLocation()) -> bytes | None:
    """The bytes of ``run_id``'s ``journal`` in ``state``, or ``None`` when the state has none."""
    for path, data in state.files.items():
        if journal.is_journal(path, run_id):
            return data
    return None


def _recovered(data: bytes, fmt: str) -> tuple[Any, ...]:
    """What a correct recovery does with journal ``data``: ``("journal", bytes kept, whether it cuts a torn
    tail)``, or ``("corrupt", line)`` / ``("error", line)`` (it must refuse it)."""
    if fmt != FISK_AI_V2:  # a format the harness does not decode: complete lines are kept
        kept = data[:data.rfind(b"\n") + 1]
        return ("journal", kept, len(kept) < len(data))
    label = expected_reading(data)
    if label["kind"] in ("corrupt", "error"):
        return (label["kind"], label["line"])
    return ("journal", data[:label["good_size"]], label["torn"] is not None)


def outcome_key(state: CrashState, run_id: str, journal: JournalLocation = JournalLocation(),
                memo: dict[Any, Any] | None = None) -> tuple:
    """The state's recovery outcome: what a resume starts from and does first (the journal a correct
    recovery leaves and whether it cuts a torn tail to get it, or the journal's absence with the
    directories that survived).  States with equal keys recover alike.  Pure; ``memo``: a dict the caller
    keeps across states of one run, where the outcome of each journal's bytes is kept (many states share them)."""
    if journal.is_store:  # a store's recovery is the agent's own: its files are the outcome
        return ("store", tuple(sorted((p, b) for p, b in state.files.items() if journal.is_journal(p, run_id))))
    data = journal_of(state, run_id, journal)
    if data is None:
        return ("absent", frozenset(state.dirs))
    memo = {} if memo is None else memo
    if ("recovered", data) not in memo:
        memo[("recovered", data)] = _recovered(data, journal.format)
    return memo[("recovered", data)]


def full_sample(states: list[CrashState], run_id: str, *, resumes: int, cap: int, seed: int,
                journal: JournalLocation = JournalLocation()) -> tuple[list[CrashState], int]:
    """The states that get a full resume, in (crash point, id) order, and how many distinct recovery
    outcomes ``states`` hold.  The first state of each outcome comes first; then ``resumes`` more, drawn
    with ``random.Random(f"power-loss-sample:{seed}")``; at most ``cap`` (0: no cap), outcomes spread
    evenly when they alone exceed it.  Pure and deterministic for the seed."""
    ordered = sorted(states, key=lambda s: (s.prefix_n, s.id))
    seen: set[tuple] = set()
    reps: list[CrashState] = []
    memo: dict[Any, Any] = {}
    for s in ordered:
        k = outcome_key(s, run_id, journal, memo)
        if k not in seen:
            seen.add(k)
            reps.append(s)
    taken = {s.id for s in reps}
    rest = [s for s in ordered if s.id not in taken]
    extra = random.Random(f"power-loss-sample:{seed}").sample(rest, min(resumes, len(rest)))
    if cap and len(reps) >= cap:
        chosen = [reps[i * len(reps) // cap] for i in range(cap)]
    else:
        chosen = (reps + extra)[:cap] if cap else reps + extra
    return sorted(chosen, key=lambda s: (s.prefix_n, s.id)), len(reps)


def cheap_limit(subject: Any) -> str | None:
    """The limit line of the cheap tier for ``subject`` (said before a campaign starts), or ``None``."""
    mode = cheap_mode(subject)
    if mode == "status":
        return ("power-loss crash states are judged cheaply through the subject's status command, a reading "
                "with no repair: the cut of a torn tail is judged only on the sampled full resumes")
    if subject.caps.journal.is_store:
        return ("power-loss crash states of an opaque store are judged cheaply by the agent's reading (I4) of "
                "the state that kept the least of its store, one for each set of tool results it had sent the model "
                "by the crash; the other states, and its recovery (I5), only on the sampled full resumes")
    if mode == "model":
        return ("POWER LOSS: the harness cannot ask the subject what a crash state's journal holds (that needs a "
                "reading command, a profile's [reading], and a fisk-ai-v2 journal: docs/subject.md): every crash "
                "state is judged cheaply for I4 by the crash model alone, and its recovery (I5) only on the "
                "sampled full resumes")
    return None


@dataclass
class Cheap:
    """The cheap judgement of a batch of states: per state its verdicts; ``asked``: distinct journals
    recovered or read by the subject; ``seconds``: wall time; ``mode``: :data:`MODES`; ``first``: the first
    violating state's history (``None`` when all hold)."""

    states: int = 0
    asked: int = 0
    seconds: float = 0.0
    mode: str = "model"
    violating: list[tuple[CrashState, list[Verdict]]] = field(default_factory=list)
    first: History | None = None
    last: History | None = None


def cheap_history(scenario: str, run_id: str, state: CrashState, check: ReaderCheck | None,
                  journal: JournalLocation = JournalLocation()) -> History:
    """The facts of one state's cheap judgement: the state (I4) and, when the subject was asked, its answer
    next to the oracle's label (I5); no legs.  Its schedule replays it alone."""
    return History(scenario=scenario, seed=0,
                   schedule=[{"kind": "power_loss", "state": state.id, "prefix_n": state.prefix_n, "explore": False}],
                   run_id=run_id, crash_state=CrashStateFacts.of(state), reader_checks=[check] if check else [],
                   options={"family": "power_loss", "tier": "cheap"}, journal_format=journal.format,
                   journal_template=journal.template)


def judge_cheap(ctx: Context, states: list[CrashState], invariants: tuple[str, ...], *, mode: str,
                tmp_root: str | None = None) -> Cheap:
    """Judge ``states`` cheaply (module docstring) with the checkers; ``invariants``: those judged (of
    :data:`CHEAP_CHECKED`); ``mode``: how the subject is asked (:func:`~harness.families.journal_state.ask.cheap_mode`);
    ``tmp_root``: where the stores the subject is asked about are laid.  Returns a :class:`Cheap` with the
    verdicts of every state not judged valid, the first such state's history and the last state's (the
    history of a batch that holds).

    The subject is asked (:func:`harness.families.journal_state.ask.answers`, the recovery question) from
    this thread, while a worker thread judges I4 on every state; then I5 on the answers."""
    t0 = time.monotonic()
    journal = ctx.subject.caps.journal
    name = ctx.scenario.name
    out = Cheap(states=len(states), mode=mode)
    asking = mode != "model" and "I5" in invariants
    journals = {s.id: journal_of(s, ctx.run_id, journal) for s in states} if asking else {}
    distinct = [data for data in dict.fromkeys(journals.values()) if data is not None]
    # a status command is a process a journal: it is asked only about those with something to judge; the
    # forked reader answers every distinct journal at once, while a worker judges I4 and labels them
    labels = {data: expected_reading(data) for data in distinct} if mode == "status" else {}

    def judge_states() -> tuple[list[History], list[list[Verdict]]]:  # I4 on each state, and the labels (pure)
        histories = [cheap_history(name, ctx.run_id, s, None, journal) for s in states]
        verdicts = [check_all(h, [i for i in invariants if i != "I5"]) for h in histories]
        labels.update((data, expected_reading(data)) for data in distinct if data not in labels)
        return histories, verdicts

    with tempfile.TemporaryDirectory(prefix="fiskj-powerloss-cheap-", dir=tmp_root) as tmp, \
            concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(judge_states)
        asked = answers(ctx, distinct, mode, "recovery", Path(tmp), labels if mode == "status" else None) \
            if asking else {}
        histories, verdicts = pending.result()
    out.asked = len(asked)
    for s, history, found in zip(states, histories, verdicts):
        data = journals.get(s.id)
        if "I5" in invariants:
            if data is not None:
                check = reader_check(s.id, "power_loss", len(data), labels[data], asked.get(data), mode, "recovery")
                history.reader_checks = [check] if check else []
            found = found + check_all(history, ["I5"])
        if any(v.status != VALID for v in found):  # invalid, or undecided: never hidden in a batch
            out.violating.append((s, found))
            if out.first is None:
                out.first = history
    out.last = histories[-1] if histories else None
    out.seconds = time.monotonic() - t0
    return out


def judge_cheap_opaque(ctx: Context, states: list[CrashState], space: Space) -> Cheap:
    """The cheap tier for an opaque store (docs/persistence-model.md "Tiered exploration"): I4 by the agent's
    reading of a laid state (:func:`explore_state` ``read_only``), asked of one state per set of things it had
    acted on by its crash point (the model calls carrying a tool result before it): of the batch's states with
    that set, the one that kept the fewest bytes of the store, where a loss of what it acted on shows first (one
    reading per set, not per crash point: a reading is a process start of the agent)."""
    t0, out, pick = time.monotonic(), Cheap(states=len(states), mode="reading"), {}
    calls = [c for c in ctx.ref.history.model_calls if c.leg == space.leg and c.sent_results]
    for s in states:
        acted = tuple(c.index for c in calls if c.t <= crash_time(ctx, s, space))
        kept = sum(len(d) for p, d in s.files.items() if ctx.subject.caps.journal.is_journal(p, ctx.run_id))
        if acted and kept < pick.get(acted, (kept + 1, None))[0]:
            pick[acted] = (kept, s)
    for _, s in sorted(pick.values(), key=lambda ks: (ks[1].prefix_n, ks[1].id)):
        history = explore_state(ctx, s, space, read_only=True)
        out.asked += 1
        found = check_all(history, ["I4"])
        if any(v.status != VALID for v in found):
            out.violating.append((s, found))
            out.first = out.first or history
        out.last = history
    out.last = out.last or cheap_history(ctx.scenario.name, ctx.run_id, states[-1], None, ctx.subject.caps.journal)
    out.seconds = time.monotonic() - t0
    return out
