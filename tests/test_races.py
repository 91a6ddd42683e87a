"""The race nemesis (harness/races/): every race passes on the reference, every broken variant is caught.

The agents run in a tmpfs scratch directory when there is one: the races
test locking and ordering, not durability, and fsync on a real disk costs
milliseconds per append.
"""

import base64
import json
import os
import tempfile

import pytest

import fiskj.journal
import fiskj.lock
import fiskj.store
from harness.history.model import history_from_json, history_to_json
from harness.checkers import check_all
from harness.selftest.mutants import race_mutants
from harness.families.race import (AT_ONCE_MS, INVARIANTS_BY_RACE, RACES, SCHEDULES, RaceDriver, race_summary, races_of,
                           run_race_trial, run_races)
from harness.scenario.parse import load_scenario
from harness.families.race.family import RACE
from harness.subject.contract import default_subject

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS_PER_SCHEDULE = 2
MUTANTS = race_mutants()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        d = tempfile.mkdtemp(prefix="fiskj-races-", dir="/dev/shm")
        yield d
        import shutil
        shutil.rmtree(d, ignore_errors=True)
    else:
        yield str(tmp_path_factory.mktemp("races"))


@pytest.fixture(scope="module")
def driver():
    with RaceDriver() as d:
        yield d


def kinds(result, invariant="race"):
    """The violation kinds of one verdict of ``result``."""
    (verdict,) = [v for v in result.verdicts if v.invariant == invariant]
    return {v["kind"] for v in verdict.evidence.get("violations", [])}


def status(result, invariant):
    return {v.invariant: v.status for v in result.verdicts}[invariant]


# --- the reference passes ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("race", RACES)
def test_each_race_passes_on_the_reference_under_every_schedule(race, driver, workdir):
    results = []
    for schedule in SCHEDULES[race]:
        for seed in range(SEEDS_PER_SCHEDULE):
            result = run_race_trial(None, race, seed, workdir, driver=driver, schedule=schedule)
            assert result.ok, result.summary() + "\n" + json.dumps(result.reproducer(), indent=1)[:3000]
            assert {v.invariant for v in result.verdicts} == set(INVARIANTS_BY_RACE[race]) | {"race"}
            results.append(result)
    summary = race_summary(results)
    assert summary["by_race"][race]["valid"] == len(results)
    for name, stats in summary["latency_ms"].items():
        assert stats["max"] <= AT_ONCE_MS, (name, stats)


def test_a_second_writer_is_refused_at_once_and_changes_no_byte(driver, workdir):
    result = run_race_trial(None, "two-writers", 7, workdir, driver=driver, schedule="holder-mid-append")
    assert result.ok, result.summary()
    setup, a, b = result.history.legs
    assert (a.fault.detail["outcome"], b.fault.detail["outcome"]) == ("ok", "refused")
    assert "RunLocked" in b.fault.detail["error"] and b.exit_code == 1
    assert not [ev for ev in b.trace if ev.get("op") in ("write", "ftruncate")]
    assert max(result.metrics["refusal_ms"]) <= AT_ONCE_MS


def test_of_two_resumers_exactly_one_proceeds_and_each_tool_runs_once(driver, workdir):
    result = run_race_trial(None, "two-resumers", 3, workdir, driver=driver, schedule="loser-waits-at-lock")
    assert result.ok, result.summary()
    outcomes = sorted(leg.fault.detail["outcome"] for leg in result.history.legs[1:])
    assert outcomes == ["ok", "refused"]
    ids = [e.tool_use_id for e in result.history.effects]
    assert ids and len(ids) == len(set(ids))


def test_of_two_creates_exactly_one_wins_and_all_its_records_land(driver, workdir):
    result = run_race_trial(None, "two-creates", 5, workdir, driver=driver, schedule="both-paused-at-first-open")
    assert result.ok, result.summary()
    legs = result.history.legs
    winner = next(leg for leg in legs if leg.fault.detail["outcome"] == "ok")
    loser = next(leg for leg in legs if leg.fault.detail["outcome"] == "refused")
    assert "RunExists" in loser.fault.detail["error"]
    assert result.history.final_state["records"] == result.history.final_state["last_seq"]
    assert winner.journal == legs[-1].journal


def test_the_next_writer_takes_over_at_once_after_the_holder_is_killed_mid_write(driver, workdir):
    result = run_race_trial(None, "holder-killed", 11, workdir, driver=driver, schedule="kill-mid-write")
    assert result.ok, result.summary()
    holder, nxt = result.history.legs[1:]
    assert holder.exit_signal == "SIGKILL" and holder.crashed
    assert nxt.fault.detail["outcome"] == "ok"
    assert max(result.metrics["takeover_ms"]) <= AT_ONCE_MS


def test_readers_see_a_half_written_line_as_a_torn_tail(driver, workdir):
    result = run_race_trial(None, "readers-during-appends", 2, workdir, driver=driver, schedule="split-writes")
    assert result.ok, result.summary()
    observed = [s for s in result.history.schedule if s["step"] == "observed"]
    assert observed and all(s["load"]["torn"] is not None for s in observed)
    poller = result.history.legs[1]
    assert poller.fault.detail["poll"]["loops"] > 0


def test_a_split_write_is_one_write_event_in_the_trace(driver, workdir):
    result = run_race_trial(None, "readers-during-appends", 2, workdir, driver=driver, schedule="split-writes")
    writer = result.history.legs[2]
    merged = [ev for ev in writer.trace if ev.get("split") == "merged"]
    assert merged
    for ev in merged:
        data = base64.b64decode(ev["data"])
        assert data.endswith(b"\n") and data.count(b"\n") == 1 and ev["len"] == len(data)


def test_trace_events_carry_times_for_the_one_writer_check(driver, workdir):
    result = run_race_trial(None, "two-writers", 1, workdir, driver=driver, schedule="free")
    for leg in result.history.legs:
        assert leg.trace and all("t" in ev and ev["t0"] <= ev["t1"] for ev in leg.trace)


def test_a_trial_counts_one_race_fault_and_one_kill_per_killed_holder(driver, workdir):
    from harness.history.faults import fault_counts
    assert fault_counts(run_race_trial(None, "two-writers", 3, workdir, driver=driver).history) == {"race": 1}
    killed = run_race_trial(None, "holder-killed", 3, workdir, driver=driver, schedule="kill-at-call")
    assert fault_counts(killed.history) == {"race": 1, "kill": 1}


def test_a_trial_is_replayed_by_its_race_and_seed(driver, workdir):
    first = run_race_trial(None, "two-creates", 42, workdir, driver=driver)
    again = run_race_trial(None, "two-creates", 42, workdir, driver=driver)
    assert first.schedule == again.schedule
    steps = lambda r: [(s["leg"], s["step"], s.get("op")) for s in r.history.schedule if s["step"] == "send"]
    assert steps(first) == steps(again)


def test_a_race_history_round_trips_through_json_with_the_same_verdicts(driver, workdir):
    result = run_race_trial(None, "holder-killed", 4, workdir, driver=driver)
    again = history_from_json(json.loads(json.dumps(history_to_json(result.history))))
    wanted = list(INVARIANTS_BY_RACE["holder-killed"])
    assert [v.status for v in check_all(again, wanted)] == [v.status for v in result.verdicts if v.invariant != "race"]
    assert result.to_json()["status"] == "valid"
    # the race's own verdict is judged from the facts in the history too (harness.checkers.race)
    assert again.race == result.history.race and again.race.expectations
    assert [v.to_json() for v in check_all(again, wanted + ["race"])] == [v.to_json() for v in result.verdicts]
    assert result.verdicts[-1].checker == "harness.checkers.race"


def test_a_race_records_facts_and_judges_nothing_itself(driver, workdir):
    with RaceDriver("lockf", at_once_timeout_s=0.5, spares=0, start=2) as d:
        result = run_race_trial(None, "lock-survives-other-fds", 3, workdir, driver=d, schedule="fds-and-children")
    facts = result.history.race
    assert facts.race == "lock-survives-other-fds" and facts.schedule == "fds-and-children"
    probes = [f for f in facts.expectations if f["name"] == "refused"]
    assert probes and all({"expected", "observed", "leg", "holder", "what"} <= set(f) for f in probes)
    assert any(f["observed"]["answer"].get("ok") for f in probes)  # lockf: the probe got the lock
    (race,) = [v for v in result.verdicts if v.invariant == "race"]
    assert race.status == "invalid" and race == check_all(result.history, ["race"])[0]


def test_run_races_cycles_through_the_scenario_races(driver, workdir):
    scenario = load_scenario(os.path.join(ROOT, "scenarios", "race-two-creates.toml"))
    results = run_races(scenario, 100, workdir, trials=3, driver=driver)
    assert [r.race for r in results] == ["two-creates"] * 3 and [r.seed for r in results] == [100, 101, 102]
    assert all(r.ok for r in results), [r.summary() for r in results]
    # the race agent's trials judge the race's invariants; the others (I10: the subject's own readings) are
    # judged through a subject's own commands, and said as a limit for the race agent
    assert {v.invariant for v in results[0].verdicts} == set(INVARIANTS_BY_RACE["two-creates"]) | {"race"}


def test_every_race_has_a_scenario_that_parses():
    for race in RACES:
        scenario = load_scenario(os.path.join(ROOT, "scenarios", f"race-{race}.toml"))
        assert scenario.faults.family == "race"
        assert races_of(scenario) == [race]
        extra = set(scenario.check.invariants) - set(INVARIANTS_BY_RACE[race])
        assert set(INVARIANTS_BY_RACE[race]) <= set(scenario.check.invariants)
        said = " ".join(RACE.cannot(default_subject(), scenario))   # the race agent says what it does not judge
        assert all(inv in said for inv in extra), (race, extra, said)


def test_an_unknown_race_or_schedule_is_refused(workdir):
    with pytest.raises(ValueError, match="unknown race"):
        run_race_trial(None, "three-writers", 1, workdir)
    with RaceDriver(spares=0) as d, pytest.raises(ValueError, match="has no schedule"):
        run_race_trial(None, "two-writers", 1, workdir, driver=d, schedule="never")


# --- broken variants are caught ---------------------------------------------------------------------

# mutant -> (race, schedule, the verdicts that must be invalid, race-verdict kinds that must appear)
CAUGHT = {
    "fold-before-lock": ("two-resumers", "loser-waits-at-lock", {"I2", "I5", "race"}, {"not_exactly_one", "tool_runs"}),
    "create-no-excl": ("two-creates", "both-paused-at-first-open", {"I4", "I5", "race"}, {"not_exactly_one"}),
    "release-before-last-append": ("two-writers", "release-gap", {"I4", "I5", "I8"}, set()),
    "unlock-before-close": ("two-writers", "holder-idle", {"I8"}, set()),
    "lockf": ("lock-survives-other-fds", "fds-and-children", {"race"}, {"not_refused"}),
    "no-cloexec": ("lock-survives-other-fds", "fds-and-children", {"race"}, {"not_taken_over"}),
    "stale-lock-file": ("holder-killed", "kill-mid-write", {"race"}, {"not_taken_over"}),
    "blocking-lock": ("two-writers", "holder-idle", {"race"}, {"blocked"}),
    "torn-tail-is-corrupt": ("readers-during-appends", "split-writes", {"race"}, {"false_corruption"}),
    "reader-locks": ("readers-during-appends", "split-writes", {"race"}, set()),  # a reader refused, or the writer
    "torn-tail-not-cut": ("holder-killed", "kill-mid-write", {"I4", "I5"}, set()),  # harness.selftest.mutants (defect 1)
}


def test_every_race_mutant_is_listed_as_caught():
    assert set(MUTANTS) <= set(CAUGHT)
    for name, mutant in MUTANTS.items():
        assert mutant.race == CAUGHT[name][0]


@pytest.mark.parametrize("mutant", sorted(CAUGHT))
def test_each_broken_variant_is_caught_by_its_race(mutant, workdir):
    race, schedule, invalid, race_kinds = CAUGHT[mutant]
    with RaceDriver(mutant, at_once_timeout_s=0.5, spares=0, start=2) as d:
        result = run_race_trial(None, race, 3, workdir, driver=d, schedule=schedule)
    assert not result.ok, result.summary()
    statuses = {v.invariant: v.status for v in result.verdicts}
    assert {i for i in invalid if statuses[i] != "invalid"} == set(), result.summary()
    assert race_kinds <= kinds(result), result.summary()
    assert result.reproducer()["mutant"] == mutant and result.reproducer()["steps"]


def test_mutants_patch_the_child_processes_only(workdir):
    before = (fiskj.store.FileStore.open, fiskj.store.FileStore.create, fiskj.journal.Journal.append,
              fiskj.lock.acquire)
    with RaceDriver("fold-before-lock", spares=0, start=2) as d:
        run_race_trial(None, "two-resumers", 1, workdir, driver=d, schedule="together")
    assert (fiskj.store.FileStore.open, fiskj.store.FileStore.create, fiskj.journal.Journal.append,
            fiskj.lock.acquire) == before
