"""Running races: one trial (:func:`run_race_trial`), a scenario's trials (:func:`run_races`)."""

from __future__ import annotations

import os
import shutil
import time
from typing import Any, Callable

from harness.families.race.catalog import RACES
from harness.families.race.creates import two_creates
from harness.families.race.driver import AgentTimeout, RaceDriver
from harness.families.race.holders import holder_killed, lock_survives_other_fds
from harness.families.race.readers import readers_during_appends
from harness.families.race.resumers import two_resumers
from harness.families.race.to_history import trial_history
from harness.families.race.trial import SetupFailed, Trial
from harness.families.race.verdicts import RaceResult, judge
from harness.families.race.writers import two_writers

__all__ = ["RUNNERS", "run_race_trial", "races_of", "run_races"]

#: The script of each race of :data:`RACES`.
RUNNERS: dict[str, Callable[[Trial], None]] = {
    "two-writers": two_writers,
    "two-resumers": two_resumers,
    "two-creates": two_creates,
    "holder-killed": holder_killed,
    "readers-during-appends": readers_during_appends,
    "lock-survives-other-fds": lock_survives_other_fds,
}


def run_race_trial(scenario: Any, race: str, seed: int, workdir: str | os.PathLike[str], *,
                   driver: RaceDriver | None = None, mutant: str | None = None, schedule: str | None = None,
                   keep: bool = False) -> RaceResult:
    """Run one trial of ``race`` with ``seed`` in a fresh store under ``workdir``; return a :class:`RaceResult`.

    ``scenario`` (a :class:`harness.scenario.parse.Scenario`, or None) gives the
    name, the per-trial time budget (``trials.timeout_s``) and the
    invariants to judge (``check.invariants``, intersected with
    :data:`INVARIANTS_BY_RACE`).  ``driver`` is the agent pool to use (its
    mutant applies; pass one to run many trials fast); without one a
    temporary pool with ``mutant`` is made and closed.  ``schedule`` forces
    one of :data:`SCHEDULES` (default: drawn from the seed).  The trial
    directory is removed unless ``keep``.
    """
    if race not in RUNNERS:
        raise ValueError(f"unknown race {race!r}; known: {', '.join(RACES)}")
    if driver is None:
        with RaceDriver(mutant, spares=0, start=2) as tmp:
            return run_race_trial(scenario, race, seed, workdir, driver=tmp, schedule=schedule, keep=keep)
    if mutant is not None and mutant != driver.mutant:
        raise ValueError(f"mutant {mutant!r} differs from the driver's {driver.mutant!r}")
    timeout = min(float(getattr(getattr(scenario, "trials", None), "timeout_s", 20.0)), driver.timeout_s)
    t = Trial(driver, race, seed, os.fspath(workdir), schedule, timeout)
    started = time.monotonic()
    aborted = False
    setup_error: str | None = None
    try:
        RUNNERS[race](t)
    except SetupFailed as exc:
        setup_error = str(exc)
        t.notes.append(f"setup failed: {exc}")
    except AgentTimeout as exc:
        aborted = True
        t.notes.append(f"aborted: {exc}")
        t.record("no_abort", "every agent answers", {"error": str(exc), "stderr": {
            r.index: r.agent.stderr_tail(800) for r in t.roles if r.agent.stderr_tail(1)}})
    except BaseException:
        aborted = True  # a harness error: its agents may be paused mid-command; never reuse them
        raise
    finally:
        t.wind_down(aborted)
    history = trial_history(t, scenario, setup_error)
    verdicts = judge(history, scenario)
    if not keep:
        shutil.rmtree(t.dir, ignore_errors=True)
    return RaceResult(race, seed, t.schedule, driver.mutant, history, verdicts, t.metrics,
                      time.monotonic() - started)


def races_of(scenario: Any) -> list[str]:
    """The races a scenario asks for: ``[faults] races`` when the schema has it, else from its name.

    ``race-<race>`` names one race (``race-two-writers``); any other name
    (``race-all``) means every race of :data:`RACES`.
    """
    raw = getattr(scenario, "raw", None) or {}
    listed = (raw.get("faults") or {}).get("races")
    if listed:
        bad = [r for r in listed if r not in RACES]
        if bad:
            raise ValueError(f"unknown race(s) {bad}; known: {', '.join(RACES)}")
        return list(listed)
    name = getattr(scenario, "name", "") or ""
    for race in RACES:
        if name == f"race-{race}":
            return [race]
    return list(RACES)


def run_races(scenario: Any, seed: int, workdir: str | os.PathLike[str], *, trials: int | None = None,
              mutant: str | None = None, driver: RaceDriver | None = None,
              stop_on_violation: bool = False) -> list[RaceResult]:
    """Run ``trials`` (default ``scenario.trials.count``) race trials, cycling through :func:`races_of`.

    Trial ``i`` uses seed ``seed + i``.  With ``stop_on_violation`` it stops
    at the first trial that is not valid.
    """
    races = races_of(scenario)
    count = trials if trials is not None else int(getattr(getattr(scenario, "trials", None), "count", len(races)))
    own = driver is None
    driver = driver or RaceDriver(mutant)
    out = []
    try:
        for i in range(count):
            result = run_race_trial(scenario, races[i % len(races)], seed + i, workdir, driver=driver)
            out.append(result)
            if stop_on_violation and not result.ok:
                break
    finally:
        if own:
            driver.close()
    return out
