"""The tail family: a real run's journal, mutated by the tail nemesis, read and resumed.

For a scenario:

1. the reference run's final journal (:meth:`harness.runner.trial.Runner.reference`)
   is mutated by :func:`harness.families.tail.mutations.mutations` (cuts at every offset of
   the last record and at random offsets, zero and garbage tails, byte flips);
2. **reader**: every mutation is read by the subject's own reader, in a
   child process (``python -m harness.families.tail.reader_child DIR`` with the
   subject's environment, so a mutant's ``FISKJ_PRELOAD`` applies there and
   only there); each answer is recorded next to the mutation's label as a
   fact of a history (:func:`reader_history`, ``History.reader_checks``)
   that the I5 checker judges (torn tail with offset and length, or
   corruption naming the line: :mod:`harness.checkers.i5_reader_answers`);
3. **repair**: for up to ``resume_checks`` torn mutations whose run is
   resumable, the mutated journal is put in a fresh store and resumed to
   completion; the history (leg 0: the reference leg with a ``tail`` fault
   whose detail is the mutation's label, leg 1: the resume) is judged by
   the checkers (I2 to I7: no acknowledged record lost or glued, readable,
   the reference result; I5 also judges the repair itself: the kept bytes
   ``[0, good_size)`` unchanged and no torn tail left: defect 1 of docs/spec.md
   section 16).

This module builds no verdict: the checkers (:func:`harness.checkers.check_all`)
judge every history it records.

Reader checks need a fiskj-based subject (``python -m fiskj`` or
``python -m harness.selftest.subject``); other subjects get the repair checks only.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.checkers import INVALID, UNKNOWN, VALID, check_all
from harness.history.model import Fault, History, Leg, ReaderCheck
from harness.families.power_loss.executor import Recovery, context, recover, workspace
from harness.runner.trial import Runner
from harness.scenario.model import Scenario, family_params
from harness.subject.contract import Subject
from harness.families.tail.params import Params
from harness.families.tail.mutations import Answer, Mutation, mutations

__all__ = ["Params", "Report", "params_from", "answer_for", "reader_answers", "status_answer", "reader_history",
           "run_tails",
           "resume_candidates"]

#: Invariants judged on a repair's history (those the scenario checks; I5, which judges the repair, always).
CHECKED = ("I2", "I3", "I4", "I5", "I6", "I7", "I10")


def params_from(scenario: Scenario, **overrides: Any) -> Params:
    """:class:`Params` of ``scenario`` (``[faults]`` keys named as the fields; ``resume_checks`` = ``trials.count``)."""
    return family_params(Params, scenario, {"seed": scenario.trials.seed, "resume_checks": scenario.trials.count},
                         overrides)


@dataclass
class Report:
    """What one tail campaign of a scenario did and found."""

    scenario: str
    subject: list[str]
    journal_bytes: int = 0
    mutations: int = 0
    reader_checked: int = 0
    reader_violations: list[dict[str, Any]] = field(default_factory=list)
    unknowns: list[dict[str, Any]] = field(default_factory=list)  # verdicts (JSON) that could not be reached
    resumes: int = 0
    resume_violations: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.reader_violations and not self.resume_violations and not self.unknowns

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(family="tail", faults={"tail": self.reader_checked + self.resumes})
        return out


def answer_for(path: str) -> Answer:
    """What this process's fiskj reader says about the journal at ``path`` (never raises)."""
    from fiskj.errors import CorruptJournal, FiskjError
    from fiskj.reader import JournalReader

    reader = JournalReader(path)
    try:
        seqs = tuple(r.seq for r in reader)
    except CorruptJournal as exc:
        return Answer("corrupt", line=exc.line, message=str(exc))
    except FiskjError as exc:
        return Answer("error", line=exc.line, message=f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - a reader that crashes is a wrong answer, not ours
        return Answer("error", message=f"reader crashed: {type(exc).__name__}: {exc}")
    torn = (reader.torn_tail.offset, reader.torn_tail.length) if reader.torn_tail else None
    return Answer("read", seqs, torn, reader.good_size)


def _lay_journal(journal: Path, root: Path, data: bytes) -> None:
    """Write ``data`` as the journal at ``journal`` (mode 0600), its folders from ``root`` down made 0700."""
    journal.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    for d in journal.parents:
        if d == root.parent:
            break
        d.chmod(0o700)
    journal.write_bytes(data)
    journal.chmod(0o600)


def reader_answers(muts: list[Mutation], subject: Subject, tmp: Path, timeout_s: float = 120.0) -> dict[str, Answer]:
    """Ask the subject's reader, in one child process, about every mutation; returns id -> :class:`Answer`."""
    folder = tmp / "mutations"
    folder.mkdir()
    for i, m in enumerate(muts):
        (folder / f"{i:06d}.json").write_bytes(m.data)
    env = {k: v for k, v in os.environ.items()
           if k not in ("FISKJ_MUTANT", "FISKJ_PRELOAD", "FISKJ_IOSEAM_TRACE", "FISKJ_IOSEAM_FAULT")}
    env.update(subject.extra_env)
    proc = subprocess.run([sys.executable, "-m", "harness.families.tail.reader_child", str(folder)], env=env,
                          capture_output=True, timeout=timeout_s, check=False)
    out: dict[str, Answer] = {}
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        row = json.loads(line)
        raw = row["answer"]
        raw["seqs"] = tuple(raw["seqs"])
        raw["torn"] = tuple(raw["torn"]) if raw["torn"] else None
        out[muts[int(row["file"].split(".")[0])].id] = Answer(**raw)
    for m in muts:
        out.setdefault(m.id, Answer("error", message=f"no answer from the reader child (exit {proc.returncode}): "
                                                     f"{proc.stderr.decode('utf-8', 'replace')[-300:]}"))
    return out


def status_answer(ctx: Recovery, m: Mutation, tmp: Path) -> Answer:
    """What the subject's own status command says about mutation ``m``'s journal, put alone in a fresh store
    under ``tmp`` (an agent that is not fiskj-based, with a profile's ``[reading]``; never raises for the
    subject's behaviour).  ``via="status"``: it read the journal (with its ``records`` when its profile
    maps them) or it failed (``error``, with its message)."""
    from harness.history.readers import parse_reading
    from harness.subject.contract import RunConfig

    runner, subject = ctx.runner, ctx.runner.subject
    state = tmp / "state"
    _lay_journal(Path(subject.caps.journal.in_store(state, ctx.run_id)), state, m.data)
    wl = ctx.workload
    cfg = RunConfig(run_id=ctx.run_id, model=wl.model, base_url=runner.server.base_url, tools_file=ctx.tools_file,
                    max_tokens=wl.max_tokens, max_iterations=wl.max_iterations, prompt=wl.prompt, chat=wl.chat,
                    thinking=wl.thinking)
    where = {"state_home": str(state), "trial_dir": str(tmp)}
    argv = subject.status_argv(cfg, **where)
    assert argv is not None, "status_answer needs a subject with a status command"
    env = subject.env(base_url=runner.server.base_url, api_key="fiskj-reader-leg0", state_home=str(state),
                      ledger=str(tmp / "ledger.jsonl"), leg=0, trace=None)
    reading = parse_reading(runner.legs.read(argv, env, tmp, "tail"), subject.status_fields)
    if reading["error"]:
        return Answer("error", message=f"{reading['error']}; stderr: {str(reading.get('stderr', ''))[-200:]}",
                      via="status")
    return Answer("read", via="status", records=reading.get("records"))


def reader_history(scenario: str, seed: int, run_id: str, muts: list[Mutation], answers: dict[str, Answer]) -> History:
    """The facts of the reader checks: each mutation's label next to the reader's answer (judged as I5).

    docs/spec.md section 7 says what the reader must answer; the history has
    no legs (the reader child is no agent leg) and one
    :class:`~harness.history.model.ReaderCheck` per mutation.
    """
    return History(scenario=scenario, seed=seed, schedule=[{"kind": "tail", "check": "reader"}], run_id=run_id,
                   reader_checks=[ReaderCheck(m.id, m.kind, len(m.data), m.expected(), answers[m.id].to_json())
                                  for m in muts], options={"family": "tail"})


def resume_candidates(muts: list[Mutation], total: int, limit: int) -> list[Mutation]:
    """Torn mutations that lost the last record (so a resume appends), round-robin over kinds, at most ``limit``."""
    by_kind: dict[str, list[Mutation]] = {}
    for m in muts:
        if m.expect == "torn" and len(m.seqs) < total and m.seqs:
            by_kind.setdefault(m.kind, []).append(m)
    queues = [q[:: max(1, len(q) // max(1, limit))] for q in by_kind.values()]
    out: list[Mutation] = []
    depth = 0
    while len(out) < limit and any(depth < len(q) for q in queues):
        out += [q[depth] for q in queues if depth < len(q)][: limit - len(out)]
        depth += 1
    return out


def repair_history(ctx: Recovery, m: Mutation) -> History:
    """Put ``m``'s journal in a fresh store and resume the run to its end; the two-leg history (judges nothing).

    Leg 0 is the reference leg with a ``tail`` fault (its journal: the
    mutation), leg 1 the resume, started through the one leg runner.
    """
    ref_leg = ctx.ref.history.legs[-1]
    tmp = Path(tempfile.mkdtemp(prefix="fiskj-tail-", dir=ctx.runner.tmp_root))
    try:
        _lay_journal(Path(ctx.runner.subject.caps.journal.in_store(tmp / "state", ctx.run_id)), tmp / "state", m.data)
        leg0 = Leg(index=0, kind="start", argv=ref_leg.argv, pid=ref_leg.pid, t_start=ref_leg.t_start,
                   t_end=ref_leg.t_end, trace=ref_leg.trace, journal=m.data, exit_code=ref_leg.exit_code,
                   fault=Fault(kind="tail", injected=True, detail={"mutation": m.id, **m.describe()}))
        return recover(ctx, tmp, [leg0], list(ctx.ref.history.model_calls), list(ctx.ref.history.effects),
                       {"kind": "tail", "mutation": m.id})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _repair(ctx: Recovery, m: Mutation) -> dict[str, Any] | None:
    """Resume the run from ``m``'s journal; return a violation dict, or None when all is well."""
    history = repair_history(ctx, m)
    verdicts = check_all(history, [i for i in CHECKED if i in ctx.scenario.check.invariants or i == "I5"])
    problems = [f"{v.invariant}: {v.summary}" for v in verdicts if v.status == INVALID]
    if not problems:
        return None
    return {"mutation": m.describe(), "problems": problems, "exit_code": history.legs[1].exit_code,
            "stderr": history.legs[1].stderr[-600:],
            "verdicts": [v.to_json() for v in verdicts if v.status not in (VALID,)]}


def run_tails(scenario: Scenario, *, runner: Runner | None = None, subject: Subject | None = None,
              params: Params | None = None) -> Report:
    """Run the tail family of ``scenario``; returns a :class:`Report` (never raises for a bad agent)."""
    params = params or params_from(scenario)
    with workspace(runner, subject, "fiskj-tails-") as (runner, shared):
        report = Report(scenario.name, list(runner.subject.argv))
        t0 = time.monotonic()
        ctx = context(runner, scenario, shared)
        journal = ctx.ref.history.legs[-1].journal or b""
        muts = list(mutations(journal, seed=params.seed, random_cuts=params.random_cuts, flips=params.flips,
                              cut_every_offset_of_last_record=params.cut_every_offset_of_last_record,
                              zero_tail_bytes=params.zero_tail_bytes, garbage_tails=params.garbage_tails,
                              mid_run=params.mid_run, interior=params.interior, fmt=runner.subject.caps.journal.format))
        report.journal_bytes, report.mutations = len(journal), len(muts)
        if runner.subject.caps.fiskj_based:
            answers = reader_answers(muts, runner.subject, shared)
            history = reader_history(scenario.name, params.seed, ctx.run_id, muts, answers)
            report.reader_checked = len(history.reader_checks)
            (verdict,) = check_all(history, ["I5"])
            if verdict.status == UNKNOWN:
                report.unknowns.append(verdict.to_json())
            elif verdict.status == INVALID:
                report.reader_violations += [{"mutation": v["mutation"], "reason": v["reason"], "answer": v["answer"]}
                                             for v in verdict.evidence["violations"] if v["kind"] == "reader_answer"]
        else:
            report.notes.append("reader checks skipped: the subject is not fiskj-based")
        total = journal.count(b"\n")
        chosen = resume_candidates(muts, total, params.resume_checks)
        with concurrent.futures.ThreadPoolExecutor(params.jobs or os.cpu_count() or 1) as pool:
            for violation in pool.map(lambda m: _repair(ctx, m), chosen):
                report.resumes += 1
                if violation is not None:
                    report.resume_violations.append(violation)
    report.seconds = time.monotonic() - t0
    return report
