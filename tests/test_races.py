"""The race family (harness/families/race/): every subject races through its own commands under the one leg
runner; the reference passes every race, every broken variant of the lock and the store is caught.

A trial holds one leg at a sequence point (its K-th lookup, read, open or lock of the store, observed from
outside) while a rival leg running the same command runs to its end; the invariants judge the history.
"""

import dataclasses
import os
import re

import pytest

from harness.campaign.campaign import Campaign
from harness.checkers import check_all
from harness.families.race.family import RACE
from harness.families.race.params import RACES
from harness.families.race.plan import races_of
from harness.families.race.family import Prepared
from harness.families.race.plan import LOCKED_POINTS, NEVER, hold_points
from harness.history.model import history_from_json, history_to_json
from harness.names import EXIT_COMPLETED
from harness.history.faults import fault_counts
from harness.runner.trial import Runner
from harness.scenario.parse import load_scenario, parse_scenario
from harness.selftest.mutants import get, race_mutants, subject_for

MUTANTS = race_mutants()

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFUSED = 2


def scenario(race, **trials):
    sc = load_scenario(os.path.join(ROOT, "scenarios", f"race-{race}.toml"))
    return dataclasses.replace(sc, trials=dataclasses.replace(sc.trials, **trials)) if trials else sc


@pytest.fixture(scope="module")
def runner():
    with Runner() as r:  # the reference, as `fiskj-harness run` runs it (its legs are not observed by default)
        yield r


@pytest.fixture(scope="module")
def prepared(runner):
    """Each race's scenario with what its plan is made from (the reference run observed, the lock points)."""
    out = {}
    for race in RACES:
        sc = scenario(race)
        out[race] = (sc, RACE.prepare(sc, runner))
    return out  # (each prepared runner is the runner's observed twin, closed with it)


def run(prepared, runner, race, schedule):
    """One trial of ``race`` on the reference under ``schedule``, through the family's executor."""
    sc, prep = prepared[race]
    (planned,) = RACE.plan(sc, prep, 1, 1, [schedule])
    return RACE.open(sc, runner, prep).run(planned), planned


def holding(prep):
    """The first sequence point at which a resumer holds the run (just past its lock)."""
    return prep.resume_lock + 1


# --- the plan ---------------------------------------------------------------------------------------------


def test_every_race_has_a_scenario_that_parses_and_names_it():
    for race in RACES:
        sc = scenario(race)
        assert sc.faults.family == "race" and races_of(sc) == [race]
    assert races_of(parse_scenario('name = "race-all"\npurpose = "y"\n[faults]\nfamily = "race"\n')) == list(RACES)


def test_an_unknown_race_is_refused():
    with pytest.raises(ValueError, match="unknown race"):
        races_of(type("S", (), {"raw": {"faults": {"races": ["three-writers"]}}, "name": "x"})())


def test_every_read_open_and_lookup_a_resumer_makes_before_it_holds_the_lock_is_a_point_the_plan_reaches(prepared):
    # docs/spec.md section 12, rule 1 and section 16 defect 2: a resume that reads the journal unlocked at any
    # layer (the CLI's own look at the fingerprint included) is held at each of those reads in some trial
    for race in ("two-resumers", "two-writers", "two-creates"):
        sc, prep = prepared[race]
        lock = prep.start_lock if race == "two-creates" else prep.resume_lock
        assert lock and lock > 2, (race, lock)  # the CLI's look, the open, the lock file: more than the lock
        plan = RACE.plan(sc, prep, sc.trials.count, 1, None)
        held = {p.schedule[-1]["at"] for p in plan}
        assert set(range(1, lock + 1)) | set(range(lock + 1, lock + 1 + LOCKED_POINTS)) == held, race
        assert all(p.schedule[-1]["kind"] == "hold" for p in plan)
    assert hold_points(3) == [3, 2, 1] + list(range(4, 4 + LOCKED_POINTS))
    assert hold_points(3, holding_first=True)[:LOCKED_POINTS] == list(range(4, 4 + LOCKED_POINTS))
    assert hold_points(None) == []


def test_the_plan_cycles_through_the_scenario_races_and_is_a_function_of_its_inputs(prepared):
    sc, prep = prepared["two-resumers"]
    both = dataclasses.replace(sc, raw={**sc.raw, "faults": {"family": "race", "races": ["two-resumers",
                                                                                         "holder-killed"]}})
    plan = RACE.plan(both, prep, 4, 100, None)
    assert [p.origin for p in plan] == ["race-two-resumers", "race-holder-killed"] * 2
    assert all(p.seed == 100 for p in plan)
    assert [p.schedule for p in plan] == [p.schedule for p in RACE.plan(both, prep, 4, 100, None)]
    # holder-killed: the run's pending batch, then the resumer killed after its K-th durability call (I6 judges
    # the takeover: a lock that outlived its holder leaves the run unfinished)
    assert plan[1].schedule[-1] == {"kind": "kill", "event": 1, "when": "after"} and "I6" in plan[1].invariants
    # a replay plans exactly the schedules it is given
    (again,) = RACE.plan(sc, prep, 9, 5, [plan[0].schedule])
    assert again.schedule == plan[0].schedule and again.origin == "explicit"


def test_the_reference_campaign_says_no_limit_for_races_and_judges_i10(runner):
    from harness.campaign.campaign import subject_limits

    scenarios = [scenario(race) for race in RACES]
    assert subject_limits(scenarios, runner.subject) == []
    assert all("I10" in sc.check.invariants for sc in scenarios if races_of(sc) != ["holder-killed"])


def test_a_probe_is_held_at_a_point_no_leg_reaches_and_runs_to_its_end(prepared, runner):
    _, prep = prepared["two-creates"]
    assert isinstance(prep, Prepared) and prep.runner is runner.observed() and prep.runner.observe
    assert NEVER > 1 << 20 and prep.history.legs[0].exit_code == EXIT_COMPLETED


# --- the reference passes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("race", RACES)
def test_each_race_passes_on_the_reference(race, runner):
    sc = scenario(race)
    result = Campaign([sc], trials=3, seed=1, jobs=2, runner=runner, shrink_budget=0).run()
    assert not result.errors and len(result.trials) == 3
    assert not result.violations, [t.failed for t in result.trials]
    judged = {v.invariant for t in result.trials for v in t.verdicts}
    assert set(sc.check.invariants) <= judged and "race" not in judged
    assert not [line for line in result.limits if "race" in line]


def test_a_second_writer_is_refused_at_once_and_changes_no_byte(prepared, runner):
    sc, prep = prepared["two-writers"]
    planned = RACE.plan(sc, prep, 1, 1, None)[0]  # two-writers: held first where it holds the run
    assert planned.schedule[-1] == {"kind": "hold", "at": holding(prep)}
    ran, planned = run(prepared, runner, "two-writers", planned.schedule)
    killed, rival, held = ran.history.legs
    assert held.fault.kind == "hold" and held.fault.detail["rival"] == rival.index and held.exit_code == 0
    # refused at once while the held leg holds the run (fiskj: RunLocked, exit 1), never waiting for it
    assert rival.exit_code not in (None, 0) and "RunLocked" in rival.stderr and not rival.timed_out
    assert not [ev for ev in rival.trace if ev.get("op") in ("write", "ftruncate")]
    assert rival.journal == killed.journal  # the held leg had not written yet: the rival changed no byte
    assert {v.invariant: v.status for v in check_all(ran.history, list(planned.invariants))} == {
        i: "valid" for i in planned.invariants}


def test_of_two_resumers_exactly_one_proceeds_and_each_tool_runs_once(prepared, runner):
    sc, prep = prepared["two-resumers"]
    for at in (prep.resume_lock, holding(prep)):  # held just before its lock, and holding it
        ran, planned = run(prepared, runner, "two-resumers",
                           [RACE.plan(sc, prep, 1, 1, None)[0].schedule[0], {"kind": "hold", "at": at}])
        _, rival, held = ran.history.legs
        # the other is refused: the run is completed (exit 2), or held by the proceeding one (RunLocked)
        (loser,) = [lg for lg in (rival, held) if lg.exit_code != 0]
        assert loser.exit_code == REFUSED or "RunLocked" in loser.stderr, (at, loser.exit_code, loser.stderr)
        ids = [e.tool_use_id for e in ran.history.effects]
        assert ids and len(ids) == len(set(ids)), ids
        assert all(v.status == "valid" for v in check_all(ran.history, list(planned.invariants)))


_TIME = re.compile(rb'"\d{4}-\d\d-\d\dT[\d:.]+(Z|[+-]\d\d:\d\d)?"')


def test_a_race_s_kill_of_the_pending_batch_is_laid_from_the_recording_and_races_as_after_a_real_kill(prepared,
                                                                                                     runner):
    # docs/persistence-model.md "Kills from the recording": leg 0 (the run killed with its batch pending) is the
    # uninterrupted run cut there, not run again; the race after it is the same as after a real SIGKILL there
    sc, prep = prepared["two-resumers"]
    kill = RACE.plan(sc, prep, 1, 1, None)[0].schedule[0]
    for at in (prep.resume_lock, holding(prep)):
        schedule = [kill, {"kind": "hold", "at": at}]
        ran, planned = run(prepared, runner, "two-resumers", schedule)
        real = prep.runner.run_trial(sc, planned.seed, schedule)
        laid = ran.history
        assert laid.legs[0].fault.detail.get("recorded") and not real.legs[0].fault.detail.get("recorded"), at
        legs = lambda h: [(lg.index, lg.kind, lg.exit_code, lg.exit_signal, lg.fault.kind,
                           None if lg.journal is None else _TIME.sub(b"T", lg.journal)) for lg in h.legs]
        assert legs(laid) == legs(real), at
        assert [c.key for c in laid.model_calls] == [c.key for c in real.model_calls], at
        assert [(e.tool_use_id, e.attempt) for e in laid.effects] == [(e.tool_use_id, e.attempt) for e in real.effects]
        wanted = list(planned.invariants)
        assert [(v.invariant, v.status) for v in check_all(laid, wanted)] == \
            [(v.invariant, v.status) for v in check_all(real, wanted)] == [(i, "valid") for i in wanted], at


def test_of_two_creates_exactly_one_wins_and_all_its_records_land(prepared, runner):
    sc, prep = prepared["two-creates"]
    ran, _ = run(prepared, runner, "two-creates", [{"kind": "hold", "at": prep.start_lock}])
    rival, held = ran.history.legs
    assert rival.exit_code == 0 and held.exit_code not in (None, 0) and "RunExists" in held.stderr
    assert held.journal == rival.journal  # the refused creator changed no byte of the winner's journal
    assert ran.history.final_state["status"] == "completed"
    assert len(ran.history.final_state["messages"]) == len(prep.reference.state["messages"])


def test_the_next_writer_takes_over_at_once_after_the_holder_is_killed(prepared, runner):
    sc, prep = prepared["holder-killed"]
    planned = RACE.plan(sc, prep, 3, 1, None)[2]
    ran, _ = run(prepared, runner, "holder-killed", planned.schedule)
    assert [lg.exit_signal for lg in ran.history.legs[:2]] == ["SIGKILL", "SIGKILL"]
    assert ran.history.legs[-1].exit_code == EXIT_COMPLETED
    assert fault_counts(ran.history) == {"kill": 2} and ran.faults["race"] == 1
    assert all(v.status == "valid" for v in check_all(ran.history, list(planned.invariants)))


def test_readers_during_appends_read_the_run_while_the_writer_is_held_and_agree(prepared, runner):
    sc, prep = prepared["readers-during-appends"]
    ran, planned = run(prepared, runner, "readers-during-appends",
                       [{"kind": "hold", "at": 3, "ops": "write", "reader": True}])
    (reading,) = ran.history.readings
    assert reading["at"] == 3 and reading["journal"] and not reading["reading"].get("error")
    assert "I10" in planned.invariants
    (i10,) = check_all(ran.history, ["I10"])
    assert i10.status == "valid", i10.evidence


def test_trace_events_of_a_race_carry_times_for_the_one_writer_check(prepared, runner):
    sc, prep = prepared["two-writers"]
    ran, _ = run(prepared, runner, "two-writers", RACE.plan(sc, prep, 1, 1, None)[0].schedule)
    for leg in ran.history.legs:
        assert leg.trace and all(ev["t0"] <= ev["t"] for ev in leg.trace if ev.get("error") != "KILLED")


def test_a_race_history_round_trips_through_json_with_the_same_verdicts(prepared, runner):
    sc, prep = prepared["two-resumers"]
    planned = RACE.plan(sc, prep, 1, 1, None)[0]
    ran, _ = run(prepared, runner, "two-resumers", planned.schedule)
    again = history_from_json(history_to_json(ran.history))
    wanted = list(planned.invariants)
    assert [v.to_json() for v in check_all(again, wanted)] == [v.to_json() for v in check_all(ran.history, wanted)]
    assert again.legs[-1].lock_point == ran.history.legs[-1].lock_point


# --- broken variants are caught ---------------------------------------------------------------------------

# mutant -> (race, trials of its plan that must reach a catch, the verdicts that must be invalid there)
CAUGHT = {
    "fold-before-lock": ("two-resumers", 1, {"I2", "I5"}),
    "create-no-excl": ("two-creates", 1, {"I2", "I4", "I5"}),
    "release-before-last-append": ("two-writers", 1, {"I8"}),
    "unlock-before-close": ("two-writers", 1, {"I8"}),
    "stale-lock-file": ("holder-killed", 1, {"I6", "I8"}),
    "blocking-lock": ("two-writers", 1, {"I8"}),  # the rival waits in flock: waited_for_lock
    "reader-locks": ("readers-during-appends", 2, {"I10"}),  # the status command fails while the writer holds
}


def test_every_race_mutant_is_listed_as_caught_by_its_race():
    assert set(MUTANTS) <= set(CAUGHT)
    for name, mutant in MUTANTS.items():
        assert mutant.race == CAUGHT[name][0] and get(name).scenario == f"race-{mutant.race}"


def _patchable():
    """Every name of every fiskj module and class, by the id of what it holds: what a mutant's patch would change
    if it were applied in this process."""
    import importlib
    import pkgutil

    import fiskj

    out = {}
    for info in pkgutil.iter_modules(fiskj.__path__):
        mod = importlib.import_module(f"fiskj.{info.name}") if info.name != "__main__" else None
        for k, v in vars(mod).items() if mod is not None else ():
            out[(mod.__name__, k)] = id(v)
            if isinstance(v, type):
                out.update({(mod.__name__, k, a): id(b) for a, b in vars(v).items()})
    return out


@pytest.mark.parametrize("mutant", sorted(CAUGHT))
def test_each_broken_variant_is_caught_by_its_race_applied_in_its_legs_only(mutant):
    # the race family's mutants' catch (test_mutants.py runs the other families' rows): the row's race, each of
    # its invariants invalid, the reproducer naming the mutant, a fault needed, and nothing patched here
    race, trials, invalid = CAUGHT[mutant]
    sc = scenario(race)
    before = _patchable()
    with Runner(subject_for(mutant)) as runner:
        result = Campaign([sc], trials=trials, seed=1, jobs=1, runner=runner, shrink_budget=0,
                          first_violation=True).run()
    assert _patchable() == before  # the mutant was applied in the legs only, never in this process
    assert not result.errors, result.errors
    assert result.violations, f"{mutant} not caught in {len(result.trials)} trial(s)"
    (first, *_) = result.violations
    statuses = {v.invariant: v.status for v in first.verdicts}
    assert {i for i in invalid if statuses.get(i) != "invalid"} == set(), statuses
    assert f"FISKJ_MUTANT={mutant}" in first.reproduce
    assert first.schedule and first.faults.get("race", 0) >= 1  # caught under a race, not by a plain run
    if mutant == "blocking-lock":  # the rival was ended the moment it was seen waiting on the held leg's lock
        (rival,) = [leg for leg in first.history.legs if "rival_of" in leg.fault.detail]
        assert rival.timed_out and rival.fault.detail["waited_on_kept_lock"]["op"] == "flock"
