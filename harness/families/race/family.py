"""The race family: two or more agents on one run, interleaved at sequence points.

Plan (pure, :mod:`harness.families.race.catalog`): ``count`` trials
cycling through the scenario's races (``[faults] races``, else from its
name), trial ``i`` with seed ``seed + i``; a replay names its race and
schedule (``[{"kind": "race", "race": R, "schedule": S}]``).  Executor: the
race's script drives a pool of race agents (:mod:`harness.families.race.agent`,
started through the one leg runner) and records what each role observed;
:mod:`harness.checkers.race` and the invariants of the race judge it.

The race agents run fiskj's store (with the subject's mutant, if any): for
another subject the races say what they tested, not that subject.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from typing import Any

from harness.families.base import Planned, Ran
from harness.families.race.catalog import INVARIANTS_BY_RACE
from harness.families.race.driver import RaceDriver
from harness.families.race.params import MODES, Params
from harness.families.race.run import races_of, run_race_trial
from harness.report.faults import fault_counts
from harness.names import MUTANT_ENV, PRELOAD_ENV
from harness.runner.trial import Runner
from harness.scenario.model import Scenario

__all__ = ["RACE", "RaceFamily"]


class _Executor:
    def __init__(self, scenario: Scenario, runner: Runner) -> None:
        self.scenario = scenario
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
        race, forced = planned.item
        r = run_race_trial(self.scenario, race, planned.seed, self.workdir, driver=self._driver(), schedule=forced)
        return Ran(r.history, fault_counts(r.history), [{"kind": "race", "race": r.race, "schedule": r.schedule}])

    def close(self) -> None:
        with self._lock:
            drivers, self._drivers = self._drivers, []
        for driver in drivers:
            driver.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


class RaceFamily:
    """The race family (see the module docstring); registered as :data:`RACE`."""

    name = "race"
    modes = MODES
    Params = Params
    resumes = False
    shrinks = False

    def params(self, scenario: Scenario) -> Params:
        params = scenario.faults.params
        return params if isinstance(params, Params) else Params()

    def check(self, scenario: Scenario) -> tuple[str, str] | None:
        return None

    def cannot(self, subject: Any) -> list[str]:
        return []

    def unsupported(self, subject: Any) -> str | None:
        """Why this family cannot run against ``subject`` at all, or ``None``: the race agent is fiskj's own
        store (the reference fast path), so for any other subject a race would test fiskj, not the subject."""
        if subject is None or subject.is_reference or dict(subject.extra_env).get(MUTANT_ENV):
            return None
        return ("the race family drives fiskj's own store (the race agent), not this subject's processes: it "
                "cannot judge this subject, so its scenarios are not run (races through the subject's own "
                "commands are not built yet)")

    def fixed_plan(self, scenario: Scenario) -> bool:
        """Its plan grows with the trial count unless the scenario gives a schedule."""
        return scenario.faults.schedule is not None

    def needs_reference(self, scenario: Scenario) -> bool:
        return False

    def plan(self, scenario: Scenario, reference: Any, count: int, seed: int,
             schedules: list[list[dict[str, Any]]] | None, subject: Any = None) -> list[Planned]:
        def planned(race: str, trial_seed: int, forced: str | None) -> Planned:
            wanted = tuple(i for i in INVARIANTS_BY_RACE[race] if i in scenario.check.invariants) + ("race",)
            return Planned([{"kind": "race", "race": race, "schedule": forced}], "race", trial_seed,
                           item=(race, forced), invariants=wanted)

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

    def open(self, scenario: Scenario, runner: Runner, reference: Any) -> _Executor:
        return _Executor(scenario, runner)

    def strategy(self, scenario: Scenario, reference: Any) -> None:
        return None


#: The registered instance.
RACE = RaceFamily()
