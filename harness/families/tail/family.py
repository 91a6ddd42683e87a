"""The tail family: the reference run's journal, damaged at its tail (and inside), read and resumed by the subject.

Plan (pure, :mod:`harness.families.tail.mutations`): labelled mutations of
the reference journal, deterministic for the seed.  Two kinds of trial:

* ``reader``: one per mutation; the subject's own reader answers, and the
  answer is judged against the mutation's label (I5);
* ``resume``: up to ``resume_checks`` torn mutations, each put in a fresh
  store and resumed to the end by the subject (I2-I7, repair included).

Each trial's schedule names its mutation
(``[{"kind": "tail", "check": "reader" | "resume", "mutation": ID}]``), so a
replay re-runs that one.  Reader checks need a fiskj-based subject (they
run fiskj's reader with the subject's mutant); for any other subject the
plan holds resume trials only and the campaign says so before it starts.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from harness.families.base import FamilyBase, Planned, Ran
from harness.families.tail.executor import (CHECKED, fiskj_based, reader_answers, reader_history, repair_history,
                                           status_answer,
                                            resume_candidates)
from harness.families.power_loss.executor import context
from harness.families.tail.mutations import mutations
from harness.families.tail.params import MODES, Params
from harness.runner.trial import ReferenceRun, Runner
from harness.scenario.model import Scenario, family_params

__all__ = ["TAIL", "TailFamily", "INTERIOR_CHECKED"]

#: Invariants judged on the resume of a journal damaged inside (the scenario's, and I4, I5 always): its
#: acknowledged records after the damage stay (I4), nothing is appended past the damage (I5).
INTERIOR_CHECKED = ("I2", "I3", "I4", "I5", "I7", "I8")


class _Executor:
    def __init__(self, scenario: Scenario, runner: Runner) -> None:
        self.scenario, self.runner = scenario, runner
        self.shared = Path(tempfile.mkdtemp(prefix="fiskj-tails-", dir=runner.tmp_root))
        self.ctx = context(runner, scenario, self.shared)
        self._answers: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def _answer(self, planned: Planned) -> Any:
        """The subject's reader's answer on every planned mutation, asked once in one child process."""
        with self._lock:
            if self._answers is None:
                muts = planned.item[2]
                self._answers = reader_answers(muts, self.runner.subject, Path(tempfile.mkdtemp(dir=self.shared)))
            return self._answers

    def run(self, planned: Planned) -> Ran:
        check, m, _ = planned.item
        if check == "reader" and not fiskj_based(self.runner.subject):  # the subject's own status command
            answer = status_answer(self.ctx, m, Path(tempfile.mkdtemp(dir=self.shared)))
            history = reader_history(self.scenario.name, planned.seed, self.ctx.run_id, [m], {m.id: answer})
        elif check == "reader":
            history = reader_history(self.scenario.name, planned.seed, self.ctx.run_id, [m], self._answer(planned))
        else:
            history = repair_history(self.ctx, m)
        history.seed, history.schedule = planned.seed, planned.schedule
        return Ran(history, {"tail": 1})

    def close(self) -> None:
        shutil.rmtree(self.shared, ignore_errors=True)


class TailFamily(FamilyBase):
    """The tail family (see the module docstring); registered as :data:`TAIL`."""

    name = "tail"
    modes = MODES
    Params = Params

    def params(self, scenario: Scenario, count: int | None = None, seed: int | None = None) -> Params:
        return family_params(Params, scenario, {"seed": scenario.trials.seed if seed is None else seed,
                                                "resume_checks": count or scenario.trials.count}, {})



    def fixed_plan(self, scenario: Scenario) -> bool:
        """Its trials are a function of the seed (the count only caps resumes)."""
        return True


    def cannot(self, subject: Any, scenario: Scenario | None = None) -> list[str]:
        """What this family cannot do for ``subject`` (said before the campaign starts)."""
        if fiskj_based(subject):
            return []
        if getattr(subject, "status_args", None) is not None:
            return ["tail reader checks ask the subject's status command, which says only whether it read a "
                    "journal and how many records (not the torn tail's offset nor a corrupt line's number); "
                    "journals with no complete record are not asked"]
        if getattr(subject, "journal_format", "fisk-ai-v2") != "fisk-ai-v2":
            return ["tail reader checks are not run: they ask a reader what a damaged journal holds, which only a "
                    "fisk-ai-v2 journal says; the resumes of the damaged journals are run and judged"]
        return ["tail reader checks need a fiskj-based subject or the subject's own status command (a "
                "profile's [reading], docs/subject.md); only the resume checks run"]

    def plan(self, scenario: Scenario, reference: ReferenceRun, count: int, seed: int,
             schedules: list[list[dict[str, Any]]] | None, subject: Any = None) -> list[Planned]:
        params = self.params(scenario, count, seed)
        journal = reference.history.legs[-1].journal or b""
        muts = list(mutations(journal, seed=params.seed, random_cuts=params.random_cuts, flips=params.flips,
                              cut_every_offset_of_last_record=params.cut_every_offset_of_last_record,
                              zero_tail_bytes=params.zero_tail_bytes, garbage_tails=params.garbage_tails,
                              mid_run=params.mid_run, interior=params.interior, fmt=reference.history.journal_format))
        if subject is None or fiskj_based(subject):
            reader_muts = muts
        elif getattr(subject, "status_args", None) is not None:  # asked through its status command
            reader_muts = [m for m in muts if m.expect == "corrupt" or m.seqs]
        else:
            reader_muts = []
        out = [Planned([{"kind": "tail", "check": "reader", "mutation": m.id}], "mutation", seed,
                       item=("reader", m, reader_muts), invariants=("I5",)) for m in reader_muts]
        resume = tuple(i for i in CHECKED if i in scenario.check.invariants or i == "I5")
        out += [Planned([{"kind": "tail", "check": "resume", "mutation": m.id}], "mutation", seed,
                        item=("resume", m, reader_muts), invariants=resume)
                for m in resume_candidates(muts, journal.count(b"\n"), params.resume_checks)]
        # interior damage: the resume must refuse it and change nothing; the run cannot end, so no I6
        stays = tuple(i for i in INTERIOR_CHECKED if i in scenario.check.invariants or i in ("I4", "I5"))
        out += [Planned([{"kind": "tail", "check": "resume", "mutation": m.id}], "mutation", seed,
                        item=("resume", m, reader_muts), invariants=stays)
                for m in muts if m.kind == "interior"]
        if schedules is not None:  # a replay: the mutations it names
            wanted = {(str(s[0].get("check")), str(s[0].get("mutation"))) for s in schedules if s}
            out = [p for p in out if (p.schedule[0]["check"], p.schedule[0]["mutation"]) in wanted]
            if not out:
                raise ValueError(f"no tail mutation of this run matches {sorted(wanted)} (seed {seed})")
        return out

    def open(self, scenario: Scenario, runner: Runner, reference: ReferenceRun) -> _Executor:
        return _Executor(scenario, runner)



#: The registered instance.
TAIL = TailFamily()
