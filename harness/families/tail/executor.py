"""The tail family's IO, through the journal-state engine (the plan: :mod:`harness.families.tail.family`): the
mutations of the reference run's final journal (:func:`mutations_for`), the cheap tier (:func:`ask_mutations`,
:func:`reader_history`: each answer beside its label, judged as I5) and the full tier (:func:`resume_candidates`,
:func:`repair_history`: a torn mutation laid in a fresh store and resumed, I5 also judging the repair, defect 1
of docs/spec.md section 16).  This module builds no verdict.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from harness.families.journal_state.ask import answers, reader_check
from harness.families.journal_state.executor import Context, lay, resume
from harness.families.journal_state.reader_child import Answer
from harness.families.power_loss.crashstates import written
from harness.families.tail.bound import round_robin
from harness.families.tail.mutations import Mutation, mutations, store_mutations
from harness.families.tail.params import Params
from harness.history.model import Fault, History, Leg

__all__ = ["CHECKED", "store_files", "store_damage", "mutations_for", "ask_mutations", "reader_history", "resume_candidates", "repair_history"]

#: Invariants judged on a repair's history (those the scenario checks; I5, which judges the repair, always).
CHECKED = ("I2", "I3", "I4", "I5", "I6", "I7", "I10")


def mutations_for(journal: bytes, params: Params, fmt: str) -> list[Mutation]:
    """The labelled mutations of ``journal`` (a journal of format ``fmt``) that ``params`` asks for (pure;
    :func:`harness.families.tail.mutations.mutations`, whose ``ValueError`` for a journal that is not clean
    it raises)."""
    return list(mutations(journal, seed=params.seed, random_cuts=params.random_cuts, flips=params.flips,
                          cut_every_offset_of_last_record=params.cut_every_offset_of_last_record,
                          zero_tail_bytes=params.zero_tail_bytes, garbage_tails=params.garbage_tails,
                          mid_run=params.mid_run, interior=params.interior, fmt=fmt))


def store_files(history: History) -> dict[str, bytes]:
    """An opaque store as the run's legs left it, read from their traces (pure; names below its folder)."""
    journal = history.journal
    named = ((journal.store_file(p, history.run_id), b) for p, b in written(ev for lg in history.legs
                                                                             for ev in lg.trace).items())
    return {name: data for name, data in named if name}


def store_damage(history: History) -> list[Mutation]:
    """The damage of an opaque store at the run's last writes (pure): :func:`store_mutations` of the two
    files it wrote last (still there at the end), each at its last write."""
    files, last = store_files(history), {}
    for ev in (ev for lg in history.legs for ev in lg.trace):
        name = history.journal.store_file(ev.get("path"), history.run_id)
        if ev.get("op") == "write" and name in files and ev.get("len") and (ev.get("offset") or 0) >= 0:
            last.pop(name, None)  # (moved to the end: the order of the last writes)
            last[name] = (ev.get("offset") or 0, (ev.get("offset") or 0) + ev["len"])
    return list(store_mutations(files, [(name, a, b) for name, (a, b) in list(last.items())[:-3:-1]]))


def ask_mutations(ctx: Context, muts: list[Mutation], mode: str, tmp: Path) -> dict[bytes, Answer]:
    """The subject's answers on the distinct journals of ``muts``, asked in ``mode`` (:func:`cheap_mode`) in
    stores laid under ``tmp`` (:func:`harness.families.journal_state.ask.answers`, the ``read`` question)."""
    return answers(ctx, [m.data for m in muts], mode, "read", tmp, {m.data: m.expected() for m in muts})


def reader_history(scenario: str, seed: int, run_id: str, muts: list[Mutation], asked: dict[bytes, Answer],
                   mode: str) -> History:
    """The facts of the reader checks: each mutation's label next to the subject's answer, asked in
    ``mode`` (judged as I5; :func:`harness.families.journal_state.ask.reader_check`).

    docs/spec.md section 7 says what the reader must answer; the history has
    no legs (the reader is no agent leg) and one
    :class:`~harness.history.model.ReaderCheck` per mutation with something to judge.
    """
    checks = [reader_check(m.id, m.kind, len(m.data), m.expected(), asked.get(m.data), mode, "read") for m in muts]
    return History(scenario=scenario, seed=seed, schedule=[{"kind": "tail", "check": "reader"}], run_id=run_id,
                   reader_checks=[c for c in checks if c is not None], options={"family": "tail"})


def resume_candidates(muts: list[Mutation], total: int, limit: int) -> list[Mutation]:
    """Torn mutations that lost the last record (so a resume appends), and every damage of a store,
    round-robin over kinds, at most ``limit``."""
    by_kind: dict[str, list[Mutation]] = {}
    for m in muts:
        if m.file or m.expect == "torn" and len(m.seqs) < total and m.seqs:
            by_kind.setdefault(m.kind, []).append(m)
    return round_robin([q[:: max(1, len(q) // max(1, limit))] for q in by_kind.values()], limit)


def repair_history(ctx: Context, m: Mutation) -> History:
    """Lay ``m``'s journal (or damaged store) in a fresh store and resume the run to its end; the two-leg history
    (judges nothing).

    Leg 0 is the reference leg with a ``tail`` fault (its journal: the
    mutation), leg 1 the resume (:func:`harness.families.journal_state.executor.resume`).
    """
    ref_leg = ctx.ref.history.legs[-1]
    with tempfile.TemporaryDirectory(prefix="fiskj-tail-", dir=ctx.runner.tmp_root, ignore_cleanup_errors=True) as tmp:
        if m.file:  # a store: every file as the run left it, the damaged one replaced
            store = os.path.relpath(ctx.journal(Path(tmp)), tmp)
            files = {os.path.join(store, n): b for n, b in {**store_files(ctx.ref.history), m.file: m.data}.items()}
            lay(ctx, Path(tmp), files=files, dirs=sorted({os.path.dirname(p) for p in files}))
        else:
            lay(ctx, Path(tmp), journal=m.data)
        leg0 = Leg(index=0, kind="start", argv=ref_leg.argv, pid=ref_leg.pid, t_start=ref_leg.t_start,
                   t_end=ref_leg.t_end, trace=ref_leg.trace, journal=None if m.file else m.data,
                   exit_code=ref_leg.exit_code,
                   stdout=ref_leg.stdout, stderr=ref_leg.stderr,  # what it printed (its answer: I6)
                   fault=Fault(kind="tail", injected=True, detail={"mutation": m.id, **m.describe()}))
        return resume(ctx, Path(tmp), [leg0], list(ctx.ref.history.model_calls), list(ctx.ref.history.effects),
                      {"kind": "tail", "mutation": m.id})
