"""The tail family: the reference run's journal, damaged at its tail (and inside), read and resumed by the subject.

Its two kinds of trial (``reader``: the subject's reader asked about a mutation, its answer judged against the
mutation's label, I5; ``resume``: a torn or interior mutation laid in a fresh store and resumed to the end,
I2-I7), the plan of :mod:`harness.families.tail.mutations`, its bound (:mod:`harness.families.tail.bound`), the
subjects that cannot be asked and an opaque store's damage: docs/scenarios.md, family ``tail``.  Both kinds run
through the journal-state engine (:mod:`harness.families.journal_state`): a reader check is its cheap tier, a
resume its full tier.  A trial's schedule (``[{"kind": "tail", "check": "reader" | "resume", "mutation": ID}]``)
replays that one mutation alone (any resumable torn mutation of the run, not only those planned).
"""

from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.families.base import FamilyBase, Planned, Ran
from harness.families.journal_state.ask import cheap_mode, expected
from harness.families.journal_state.executor import StateExecutor
from harness.families.journal_state.reader_child import Answer
from harness.families.tail.bound import bounded, stratum
from harness.families.tail.executor import (CHECKED, ask_mutations, mutations_for, reader_history, repair_history,
                                            resume_candidates, store_damage, store_files)
from harness.families.tail.mutations import Mutation, mutation_by_id
from harness.families.tail.params import MODES, Params
from harness.names import OPAQUE
from harness.runner.trial import ReferenceRun, Runner
from harness.scenario.model import Scenario, family_params

__all__ = ["TAIL", "TailFamily", "INTERIOR_CHECKED", "TailItem", "damage"]

#: Invariants judged on the resume of a journal damaged inside (the scenario's, and I4, I5 always): its
#: acknowledged records after the damage stay (I4), nothing is appended past the damage (I5).
INTERIOR_CHECKED = ("I2", "I3", "I4", "I5", "I7", "I8")


@dataclass(frozen=True)
class TailItem:
    """A planned tail trial's own object (``Planned.item``): its ``check`` (``reader``, ``resume``) of
    ``mutation``; ``batch``: the reader checks' mutations of the same plan, which the subject is asked about
    together; ``space``: every trial this run's mutations allow, from which :meth:`TailFamily.bound`
    chooses (set on the trials of a plan only)."""

    check: str
    mutation: Mutation
    batch: tuple[Mutation, ...] = field(default=(), repr=False, compare=False)
    space: tuple[Planned, ...] = field(default=(), repr=False, compare=False)


def _settle(plan: list[Planned], space: tuple[Planned, ...]) -> list[Planned]:
    """``plan`` with each trial's ``batch`` (the plan's reader mutations) and ``space`` set."""
    batch = tuple(p.item.mutation for p in plan if p.item.check == "reader")
    return [replace(p, item=replace(p.item, batch=batch, space=space)) for p in plan]


class _Executor(StateExecutor):
    """Runs a planned reader check (the cheap tier) or resume (the full tier) of a mutation."""

    def __init__(self, scenario: Scenario, runner: Runner) -> None:
        super().__init__(scenario, runner, prefix="fiskj-tails-")
        self.mode = cheap_mode(runner.subject)
        self._asked: dict[bytes, Answer] | None = None
        self._lock = threading.Lock()

    def _answers(self, planned: Planned) -> dict[bytes, Answer]:
        """The subject's answers: on every reader mutation of the plan, asked once for all by one forked
        reader; through a status command (a process a journal), on this trial's mutation alone."""
        if self.mode != "recovery":
            return ask_mutations(self.ctx, [planned.item.mutation], self.mode, Path(tempfile.mkdtemp(dir=self.shared)))
        with self._lock:
            if self._asked is None or planned.item.mutation.data not in self._asked:  # (a shrink's: asked alone)
                self._asked = {**(self._asked or {}), **ask_mutations(self.ctx, list(planned.item.batch), self.mode,
                                                                       Path(tempfile.mkdtemp(dir=self.shared)))}
            return self._asked

    def run(self, planned: Planned) -> Ran:
        check, m = planned.item.check, planned.item.mutation
        if check == "reader":
            history = reader_history(self.scenario.name, planned.seed, self.ctx.run_id, [m], self._answers(planned),
                                     self.mode)
        else:
            history = repair_history(self.ctx, m)
        history.seed, history.schedule = planned.seed, planned.schedule
        return Ran(history, {"tail": 1})


class TailFamily(FamilyBase):
    """The tail family (see the module docstring); registered as :data:`TAIL`."""

    name = "tail"
    modes = MODES
    Params = Params

    def params(self, scenario: Scenario, count: int | None = None, seed: int | None = None) -> Params:
        return family_params(Params, scenario, {"seed": scenario.trials.seed if seed is None else seed,
                                                "resume_checks": count or scenario.trials.count}, {})



    def fixed_plan(self, scenario: Scenario) -> bool:
        """Its trials are a function of the seed (the count only caps resumes; ``--trials`` bounds them all)."""
        return True

    def cannot(self, subject: Any, scenario: Scenario | None = None) -> list[str]:
        """What this family cannot do for ``subject`` (said before the campaign starts)."""
        if subject.caps.journal.is_store:
            return ["tail damage of an opaque store: its last-written files cut at page and sector boundaries and "
                    "zeroed where last written, each resumed; no reader check (the harness does not decode it)"]
        mode = cheap_mode(subject)
        if mode == "recovery":
            return []
        if mode == "status":
            return ["tail reader checks ask the subject's status command, which says only whether it read a "
                    "journal and how many records (not the torn tail's offset nor a corrupt line's number); "
                    "journals with no complete record are not asked"]
        if not subject.caps.decoded:
            return ["tail reader checks are not run: they ask a reader what a damaged journal holds, which only a "
                    "fisk-ai-v2 journal says; the resumes of the damaged journals are run and judged"]
        return ["tail reader checks need a fiskj-based subject or the subject's own status command (a "
                "profile's [reading], docs/subject.md); only the resume checks run"]

    def plan(self, scenario: Scenario, reference: ReferenceRun, count: int, seed: int,
             schedules: list[list[dict[str, Any]]] | None, subject: Any = None) -> list[Planned]:
        """A reader check of every mutation (those the subject can be asked about), resumes of
        ``resume_checks`` torn mutations (:func:`resume_candidates`) and of every interior one; a replay
        (``schedules``): the trials they name, from every trial the mutations allow.  Raises ``ValueError``
        when a schedule names no trial of this run."""
        params = self.params(scenario, count, seed)
        journal = reference.history.legs[-1].journal or b""
        store = reference.history.journal_format == OPAQUE  # damaged at its last writes and resumed, never read
        muts = store_damage(reference.history) if store else mutations_for(journal, params,
                                                                           reference.history.journal_format)
        if store and not muts:
            raise ValueError("the reference run's trace shows no write of the store: nothing was observed to damage")
        mode = "model" if store else "recovery" if subject is None else cheap_mode(subject)
        reader_muts = [m for m in muts if mode != "model" and expected(m.expected(), mode, "read") is not None]
        total = journal.count(b"\n")
        resume = tuple(i for i in CHECKED if i in scenario.check.invariants or i == "I5")
        # interior damage: the resume must refuse it and change nothing; the run cannot end, so no I6
        stays = tuple(i for i in INTERIOR_CHECKED if i in scenario.check.invariants or i in ("I4", "I5"))

        def trial(check: str, m: Mutation, invariants: tuple[str, ...]) -> Planned:
            return Planned([{"kind": "tail", "check": check, "mutation": m.id}], "mutation", seed,
                           item=TailItem(check, m), invariants=invariants)

        readers = [trial("reader", m, ("I5",)) for m in reader_muts]
        interior = [trial("resume", m, stays) for m in muts if m.kind == "interior"]
        space = tuple(readers + [trial("resume", m, resume) for m in resume_candidates(muts, total, len(muts))]
                      + interior)
        if schedules is not None:  # a replay: the trials it names, each alone (a shrunk one made from its name)
            wanted = {(str(s[0].get("check")), str(s[0].get("mutation"))) for s in schedules
                      if s and isinstance(s[0], dict)}
            out = [p for p in space if (p.item.check, p.item.mutation.id) in wanted]
            for check, mid in sorted(wanted - {(p.item.check, p.item.mutation.id) for p in out}):
                try:
                    m = mutation_by_id(journal, mid, reference.history.journal_format)
                except ValueError:
                    raise ValueError(f"no tail mutation of this run matches {check} {mid} (seed {seed})") from None
                out.append(trial(check, m, ("I5",) if check == "reader" else stays if m.kind == "interior" else resume))
            return _settle(out, space)
        out = readers + [trial("resume", m, resume) for m in resume_candidates(muts, total, params.resume_checks)]
        return _settle(out + interior, space)

    def bound(self, scenario: Scenario, plan: list[Planned], n: int, seed: int) -> list[Planned]:
        """At most ``n`` trials, chosen from every trial the run's mutations allow, one damage class at a
        time (:func:`harness.families.tail.bound.bounded`); pure, deterministic for ``seed``."""
        if not plan:
            return plan
        space = plan[0].item.space or tuple(plan)
        return _settle(bounded(space, n, seed, lambda p: stratum(p.item.check, p.item.mutation)), space)

    def open(self, scenario: Scenario, runner: Runner, reference: ReferenceRun) -> _Executor:
        return _Executor(scenario, runner)

    def _mutation(self, scenario: Scenario, reference: ReferenceRun, mid: str) -> Mutation | None:
        """The mutation named ``mid`` (made from its name, else found among the scenario's own), or ``None``."""
        if reference.history.journal_format == OPAQUE:
            return next((m for m in store_damage(reference.history) if m.id == mid), None)
        journal, fmt = reference.history.legs[-1].journal or b"", reference.history.journal_format
        try:
            return mutation_by_id(journal, "flip@" + mid.split("@")[1] if mid.startswith("flip") else mid, fmt)
        except (ValueError, IndexError):
            return next((m for m in mutations_for(journal, self.params(scenario), fmt) if m.id == mid), None)

    def size(self, scenario: Scenario, reference: ReferenceRun, schedule: list[dict[str, Any]]) -> tuple[tuple, str]:
        """The damage of the trial's mutation: bytes cut, appended or changed, then how far before the end."""
        m = self._mutation(scenario, reference, str(schedule[0].get("mutation"))) if schedule else None
        journal = reference.history.legs[-1].journal or b""
        if m is not None and m.file:  # a store's file, damaged
            journal = store_files(reference.history).get(m.file, b"")
        return damage(journal, m.data) if m is not None else ((float("inf"), 0), "an unknown mutation")

    def smaller(self, scenario: Scenario, reference: ReferenceRun,
                schedule: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """Smaller damage of the same kind (pure): a cut, an appended zero block or bytes changed in place of 1
        byte, half, one less (the last ones); one changed byte nearer the end (the last place, half-way there,
        the next).  Named from the end of the journal (:func:`~harness.families.tail.mutations.mutation_by_id`)."""
        step = schedule[0] if schedule else {}
        m = self._mutation(scenario, reference, str(step.get("mutation")))
        journal = reference.history.legs[-1].journal or b""
        if m is None or m.data == journal or m.file:  # (a store's damage has nothing smaller of its kind)
            return []
        size = len(journal)
        fewer = lambda n: [x for x in dict.fromkeys((1, n // 2, n - 1)) if 0 < x < n]  # noqa: E731
        if journal.startswith(m.data):
            ids = [f"cut@-{x}" for x in fewer(size - len(m.data))]
        elif m.kind == "zeros" and m.data.startswith(journal) and m.id.startswith("zeros"):
            nl = "+nl" if m.data.endswith(b"\n") else ""
            ids = [f"zeros{x}{nl}" for x in fewer(len(m.data) - size - bool(nl))]
        elif len(m.data) == size:  # bytes changed in place: fewer of them (the last ones), one byte nearer the end
            (n, _), _ = damage(journal, m.data)
            q = next(i for i in range(size - 1, -1, -1) if m.data[i] != journal[i])
            later = [p for p in dict.fromkeys((size - 2, (q + size - 2) // 2, q + 1)) if q < p and journal[p] != 10]
            ids = [f"flip@{q + 1 - x - size}:{_hexed(m.data[q + 1 - x:q + 1])}" for x in fewer(n)] if n > 1 else [
                f"flip@{p - size}:{_hexed(m.data[q:q + 1])}" for p in later]
        else:  # drawn garbage, a line cut off or glued inside, a mid-run cut: nothing smaller of its kind
            return []
        return [[{**step, "mutation": mid}] for mid in ids]


def _hexed(data: bytes) -> str:
    """Bytes as a ``flip`` mutation names them: hex, ``00*N`` for ``N`` equal bytes."""
    return f"{data[:1].hex()}*{len(data)}" if len(set(data)) == 1 and len(data) > 1 else data.hex()


def damage(journal: bytes, data: bytes) -> tuple[tuple[int, int], str]:
    """How ``data`` damages ``journal`` (pure): ``((bytes, bytes before the end), words)``, the bytes cut,
    appended or changed (from the first difference to the end when the length changed too)."""
    p = len(os.path.commonprefix([journal, data]))
    if data == journal or len(data) != len(journal):
        n = max(len(data), len(journal)) - p
        return (n, 0), ("no damage" if not n else f"cut {n} byte(s)" if p == len(data) else f"{n} byte(s) appended"
                        if p == len(journal) else f"{n} byte(s) replaced from offset {p} to the end")
    q = next(i for i in range(len(data) - 1, -1, -1) if data[i] != journal[i])
    n, end = q - p + 1, len(journal) - 1 - q
    return (n, end), f"{n} byte(s) changed {end} byte(s) before the end"



#: The registered instance.
TAIL = TailFamily()
