"""The race family: two or more agents on one run, interleaved at sequence points.

Plan (pure, :mod:`harness.families.race.catalog`): ``count`` trials
cycling through the scenario's races (``[faults] races``, else from its
name), trial ``i`` with seed ``seed + i``; a replay names its race and
schedule (``[{"kind": "race", "race": R, "schedule": S}]``).  Executor: the
race's script drives a pool of race agents (:mod:`harness.families.race.agent`,
started through the one leg runner) and records what each role observed;
:mod:`harness.checkers.race` and the invariants of the race judge it.

The race agents run fiskj's store (with the subject's mutant, if any): the
fast path for the reference.  Any other subject races through its own
commands, observed from outside (:data:`BLACK_BOX`): a leg is held at its
K-th lookup, read, open or lock (a sequence point) while a rival leg with
the same command runs to its end, then released; K runs over the first
sequence points of the leg.  ``two-resumers``: both resume a run killed
with a pending batch (the held one must not run a tool or call the model
again: a fold before the lock does, fisk-ai defect 2); ``two-writers``: the
same sequence points seen from the writer holding the run (the rival must be
refused and change no byte while the held leg holds the lock: I8, I9);
``two-creates``:
both create the run (the held one must not touch the winner's journal: a
create without ``O_EXCL`` does, defect 3); ``holder-killed``: the resumer
holding the run is SIGKILLed after its K-th durability call, and the next
resumer must take the run over at once and finish it (a lock that outlives
its holder blocks the run for good).  The invariants judge them.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from typing import Any

from harness.families.base import FamilyBase, Planned, Ran
from harness.families.race.catalog import INVARIANTS_BY_RACE
from harness.families.race.driver import RaceDriver
from harness.families.race.params import MODES, Params
from harness.families.race.run import races_of, run_race_trial
from harness.families.trace_points import pending_point_of, write_count
from harness.history.faults import fault_counts
from harness.names import MUTANT_ENV, PRELOAD_ENV
from harness.runner.trial import Runner, run_id_for
from harness.scenario.model import Scenario

__all__ = ["RACE", "RaceFamily", "BLACK_BOX"]

#: The races a subject that is not fiskj-based runs through its own commands (see the module docstring).
BLACK_BOX = ("two-resumers", "two-writers", "two-creates", "holder-killed")


#: The race a subject runs through its own commands when it gives a reading command (a profile's [reading]).
READER_RACE = "readers-during-appends"


def _black_box(subject: Any) -> tuple[str, ...]:
    """The races ``subject`` runs through its own commands: :data:`BLACK_BOX`, and :data:`READER_RACE` when
    it gives a reading command."""
    return BLACK_BOX + ((READER_RACE,) if subject is not None and subject.caps.reading else ())


def _fiskj_based(subject: Any) -> bool:
    return subject is None or subject.caps.fiskj_based



class _Executor:
    def __init__(self, scenario: Scenario, runner: Runner) -> None:
        self.scenario, self.runner = scenario, runner
        extra = dict(runner.subject.extra_env)
        self.mutant, self.preload = extra.get(MUTANT_ENV) or None, extra.get(PRELOAD_ENV) or None
        self.workdir = tempfile.mkdtemp(prefix="fiskj-races-", dir=runner.tmp_root)
        self._local = threading.local()
        self._drivers: list[RaceDriver] = []
        self._lock = threading.Lock()

    def _driver(self) -> RaceDriver:
        """This thread's pool of race agents (a pool serves one trial at a time)."""
        driver = getattr(self._local, "driver", None)
        if driver is None:
            driver = self._local.driver = RaceDriver(self.mutant, preload=self.preload)
            with self._lock:
                self._drivers.append(driver)
        return driver

    def run(self, planned: Planned) -> Ran:
        if planned.item[0] == "black-box":
            history = self.runner.run_trial(self.scenario, planned.seed, planned.schedule)
            return Ran(history, {"race": 1, **fault_counts(history)})
        race, forced = planned.item
        r = run_race_trial(self.scenario, race, planned.seed, self.workdir, driver=self._driver(), schedule=forced)
        return Ran(r.history, fault_counts(r.history), [{"kind": "race", "race": r.race, "schedule": r.schedule}])

    def close(self) -> None:
        with self._lock:
            drivers, self._drivers = self._drivers, []
        for driver in drivers:
            driver.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


class RaceFamily(FamilyBase):
    """The race family (see the module docstring); registered as :data:`RACE`."""

    name = "race"
    modes = MODES
    Params = Params



    def cannot(self, subject: Any, scenario: Scenario | None = None) -> list[str]:
        black_box = _black_box(subject)
        others = [r for r in (races_of(scenario) if scenario is not None else ()) if r not in black_box]
        if _fiskj_based(subject):  # the race agent: fiskj's store in one process, no command of the subject
            if scenario is None:
                return []
            out = (["I10 (the subject's own reading) is not judged: these races run fiskj's race agent, which "
                    "has no reading command to ask (the race verdict judges its readers)"]
                   if "I10" in scenario.check.invariants else [])
            for race in races_of(scenario):
                skipped = [i for i in scenario.check.invariants if i != "I10" and i not in INVARIANTS_BY_RACE[race]]
                if skipped:
                    out.append(f"{', '.join(skipped)} is not judged in race {race}: the race agent's {race} runs "
                               "no tool or model call to judge it by (the race verdict judges its outcome)")
            return out
        if not others or len(others) == len(races_of(scenario)):
            return []  # all black-box, or none (then the scenario is unsupported: an error, said there)
        return [f"races {', '.join(others)} need the race agent (fiskj's store) and are not run; "
                f"{', '.join(r for r in races_of(scenario) if r in black_box)} run through the subject's commands"]

    def unsupported(self, subject: Any, scenario: Scenario | None = None) -> str | None:
        """Why this family cannot run against ``subject`` at all, or ``None``: a scenario none of whose races
        can run through the subject's own commands (:data:`BLACK_BOX`) would test fiskj, not the subject."""
        black_box = _black_box(subject)
        if _fiskj_based(subject) or scenario is None or set(races_of(scenario)) & set(black_box):
            return None
        why = (f"; {READER_RACE} needs the subject's own reading command (a profile's [reading], "
               f"docs/subject.md)" if READER_RACE in races_of(scenario) and READER_RACE not in black_box else "")
        return (f"the races of this scenario ({', '.join(races_of(scenario))}) need the race agent, fiskj's own "
                f"store: they cannot judge this subject, so the scenario is not run (races through the "
                f"subject's own commands: {', '.join(black_box)}){why}")


    def needs_reference(self, scenario: Scenario) -> bool:
        # a black-box race plans from the reference
        return bool(set(races_of(scenario)) & set(BLACK_BOX + (READER_RACE,)))

    def plan(self, scenario: Scenario, reference: Any, count: int, seed: int,
             schedules: list[list[dict[str, Any]]] | None, subject: Any = None) -> list[Planned]:
        def planned(race: str, trial_seed: int, forced: str | None) -> Planned:
            wanted = tuple(i for i in INVARIANTS_BY_RACE[race] if i in scenario.check.invariants) + ("race",)
            return Planned([{"kind": "race", "race": race, "schedule": forced}], "race", trial_seed,
                           item=(race, forced), invariants=wanted)

        if not _fiskj_based(subject):
            return self._black_box_plan(scenario, reference, count, seed, schedules, subject)
        if schedules is not None:
            out = []
            for sch in schedules:
                if not (sch and isinstance(sch[0], dict) and sch[0].get("kind") == "race" and sch[0].get("race")):
                    raise ValueError(f"a race scenario replays schedules like [{{'kind': 'race', 'race': ...}}], "
                                     f"got {sch!r}")
                out.append(planned(sch[0]["race"], seed, sch[0].get("schedule")))
            return out
        races = races_of(scenario)
        return [planned(races[i % len(races)], seed + i, None) for i in range(count)]

    def _black_box_plan(self, scenario: Scenario, reference: Any, count: int, seed: int,
                        schedules: list[list[dict[str, Any]]] | None, subject: Any = None) -> list[Planned]:
        """Races through the subject's own commands (pure): sequence point K = 1, 2, ... per race, in turn.

        ``readers-during-appends``: the writer (a fresh run) is held before its K-th write, K over the
        reference run's writes, while the subject reads the run; its readings are judged as I10.  (Both
        engines here write a record in one write, so a reader never sees half a line mid-run; the tail
        family gives the subject's reader torn and damaged journals.)
        """
        invariants = tuple(scenario.check.invariants)
        if schedules is not None:
            reader = any(e.get("reader") for s in schedules for e in s if isinstance(e, dict))
            judged = invariants + (("I10",) if reader and "I10" not in invariants else ())
            return [Planned(list(s), "explicit", seed, item=("black-box",), invariants=judged) for s in schedules]
        races = [r for r in races_of(scenario) if r in _black_box(subject)]
        writes = write_count(reference.history.legs[0].trace if reference else [])
        kill = pending_point_of(reference.history, run_id_for(scenario)) if reference else None
        if {"two-resumers", "two-writers", "holder-killed"} & set(races) and kill is None:
            raise ValueError("the reference run shows no tool batch to leave pending: the resumers have nothing "
                             "to race")
        out = []
        for i in range(count):
            race, k = races[i % len(races)], 1 + i // len(races)
            pending = {"kind": "kill", "event": kill, "when": "after"}
            if race == READER_RACE:
                if writes < 1:
                    raise ValueError("the reference run made no write: a reader has no append to race")
                hold = {"kind": "hold", "at": 1 + (k - 1) % writes, "ops": "write", "reader": True}
                judged = invariants + (("I10",) if "I10" not in invariants else ())
                out.append(Planned([hold], f"race-{race}", seed, item=("black-box",), invariants=judged))
                continue
            if race == "holder-killed":
                schedule = [pending, {"kind": "kill", "event": k, "when": "after"}]
            else:
                hold = {"kind": "hold", "at": k}
                schedule = [pending, hold] if race in ("two-resumers", "two-writers") else [hold]
            # a takeover is judged by the result: a lock that outlived its holder leaves the run unfinished (I6)
            judged = invariants + (("I6",) if race == "holder-killed" and "I6" not in invariants else ())
            out.append(Planned(schedule, f"race-{race}", seed, item=("black-box",), invariants=judged))
        return out

    def open(self, scenario: Scenario, runner: Runner, reference: Any) -> _Executor:
        return _Executor(scenario, runner)



#: The registered instance.
RACE = RaceFamily()
