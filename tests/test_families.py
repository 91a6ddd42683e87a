"""The fault families through the one campaign path: the registry, plans, executors, replays and shards."""

import json
import re
import shlex
import sys
from pathlib import Path

import jsonschema
import pytest

from harness.campaign.campaign import Campaign
from harness.cli.main import main
from harness.families.base import smaller_schedules
from harness.families.race.params import RACES
from harness.families.registry import FAMILIES, MODES, by_mode
from harness.runner.trial import Runner
from harness.scenario.parse import bundled_scenario_dir, load_scenario
from harness.selftest.mutants import subject_for


def scenario(name):
    return load_scenario(bundled_scenario_dir() / f"{name}.toml")


def family_trials(name, count, runner, **kwargs):
    """The trials of one scenario's family, run by a campaign (no shrinking), as a third party gets them."""
    return Campaign([scenario(name)], trials=count, seed=1, runner=runner, shrink_budget=0, **kwargs).run().trials


@pytest.fixture(scope="module")
def runner():
    r = Runner()
    yield r
    r.close()


@pytest.fixture(scope="module")
def reference_states(runner):
    return family_trials("power-loss-basic", 12, runner)


def test_every_scenario_mode_belongs_to_one_registered_family_with_a_params_schema():
    assert len(set(MODES)) == len(MODES)
    for family in FAMILIES:
        for mode in family.modes:
            assert by_mode(mode) is family
        assert family.Params() is not None  # every key has a default
    with pytest.raises(KeyError, match="known"):
        by_mode("earthquake")


def test_power_loss_trials_on_the_reference_are_all_valid_every_state_judged_cheaply_a_sample_resumed(reference_states):
    trials = reference_states
    assert len(trials) == 12 and all(not t.failed and not t.unknown for t in trials)  # --trials bounds the plan
    cheap = [t for t in trials if "cheap" in t.schedule[0]]
    full = [t for t in trials if t not in cheap]
    assert len(cheap) == 1 and cheap[0].invariants == ("I4", "I5")
    assert cheap[0].schedule[0]["cheap"] == [0, cheap[0].faults["crash_states"]]  # every distinct state, one batch
    assert cheap[0].faults["crash_states"] > len(full) > 0
    assert all(t.faults == {"power_loss": 1, "crash_resumes": 1} and t.schedule[0]["state"] for t in full)
    assert all(len(t.history.legs) == 0 for t in cheap if t.history is not None)
    assert "I4" in full[0].invariants and "I6" in full[0].invariants


#: A one-tool run: its crash states under a store that never fsyncs are a few hundred, not thousands.
SMALL_POWER_LOSS = """
name = "power-loss-small"
purpose = "power loss in a one-tool run (tests)"
[workload]
turns = 1
tools_per_turn = 1
[faults]
family = "power_loss"
"""


def test_a_power_loss_failure_replays_alone_from_its_schedule():
    from harness.scenario.parse import parse_scenario

    small = parse_scenario(SMALL_POWER_LOSS)
    # a store that never fsyncs: caught by the cheap tier (I4 on the crash model) under a bound of 2 trials
    mutant = Runner(subject_for("no-fsync"))
    try:
        trials = Campaign([small], trials=2, seed=1, runner=mutant, shrink_budget=0).run().trials
        failed = [t for t in trials if "I4" in t.failed]
        assert len(trials) == 2 and failed, "no trial caught the missing fsync"
        assert "--subject" in failed[0].reproduce and "--seed 1" in failed[0].reproduce
        assert '"state"' in failed[0].reproduce  # the reproducer names its crash state: it replays that one
        assert any("not valid, first " + failed[0].schedule[0]["state"] in n for n in failed[0].history.notes)
        again = Campaign([small], seed=1, runner=mutant, shrink_budget=0,
                         schedules=[failed[0].schedule], origin="replay").run().trials
    finally:
        mutant.close()
    assert [t.schedule for t in again] == [failed[0].schedule] and "I4" in again[0].failed
    assert again[0].faults == {"power_loss": 1, "crash_states": 1}  # that one state, judged alone


def test_a_shard_of_the_power_loss_family_runs_every_nth_state(runner, reference_states):
    whole = reference_states
    part = family_trials("power-loss-basic", 12, runner, shard=(1, 3))
    assert [t.schedule for t in part] == [t.schedule for t in whole[1::3]]


def test_tail_trials_on_the_reference_are_all_valid(runner):
    trials = family_trials("tails-basic", None, runner)  # the whole plan: no --trials
    assert len(trials) > 50 and all(not t.failed and not t.unknown for t in trials)
    assert {"I4", "I5"} <= {v.invariant for t in trials for v in t.verdicts}
    assert {t.schedule[0]["check"] for t in trials} == {"reader", "resume"}


def test_a_tail_trial_s_first_leg_keeps_what_the_uninterrupted_run_printed(runner):
    # a resume of the damaged journal may be trimmed as after the run's end: leg 0 then completed the run,
    # and its answer is judged from what it printed (I6 answer_not_printed)
    trials = [t for t in family_trials("tails-basic", 4, runner, keep_histories=True) if t.history.legs]
    assert trials and all("Final answer" in t.history.legs[0].stdout for t in trials)


@pytest.mark.parametrize("name, invariant", [("reader-tolerates-corruption", "I5"),
                                             ("reader-drops-final-record", "I5"),
                                             ("torn-tail-not-cut", "I4")])
def test_tail_catches_a_broken_reader_or_writer(name, invariant):
    mutant = Runner(subject_for(name))
    try:
        trials = family_trials("tails-basic", 5, mutant)  # --trials 5: the strata a bounded plan takes first
    finally:
        mutant.close()
    assert any(invariant in t.failed for t in trials), f"{name} was not caught by {invariant}"


def test_a_family_that_cannot_run_for_a_subject_is_a_setup_error_named_before_any_trial_never_a_pass():
    from harness.campaign.campaign import subject_limits
    from harness.subject.contract import default_subject, parse_subject

    other = Runner(parse_subject("python3 -m somebody.elses.agent"))
    try:
        limits = subject_limits([scenario("race-readers-during-appends"), scenario("tails-basic"), scenario("kill-random")],
                                other.subject)
        result = Campaign([scenario("race-readers-during-appends")], trials=2, runner=other, shrink_budget=0).run()
    finally:
        other.close()
    assert [line.split(":")[0] for line in limits] == ["I10 not applicable", "race-readers-during-appends",
                                                       "tails-basic"]
    assert "status command" in limits[0] and "reader checks" in limits[2]
    assert result.trials == [] and len(result.errors) == 1 and "reading command" in result.errors[0]
    assert result.limits == limits[:1]  # I10; the named scenario that cannot run is an error, said once
    # the reference races through its own commands like any subject, its reading command included: no limit
    races = [scenario(f"race-{race}") for race in RACES]
    assert subject_limits(races + [scenario("tails-basic")], default_subject()) == []


def test_io_errors_at_every_journal_write_and_fsync_leave_the_reference_valid_and_name_their_call(runner):
    trials = family_trials("io-errors", 4, runner)  # --trials 4: one failing call of each class
    assert trials and all(not t.failed and not t.unknown for t in trials) and len(trials) == 4
    ops = {(t.schedule[0]["op"], t.schedule[0]["action"]) for t in trials}
    assert ops == {("write", "eio"), ("write", "enospc"), ("fsync", "eio"), ("fsync", "enospc")}
    assert all(t.faults.get("io_error") == 1 for t in trials)  # every planned error was injected


def test_power_loss_during_a_resume_keeps_every_acknowledged_record_and_catches_a_torn_tail_glued_on(runner):
    trials = family_trials("power-loss-resume", 8, runner)
    assert trials and all(not t.failed and not t.unknown for t in trials)
    mutant = Runner(subject_for("torn-tail-not-cut"))
    try:
        bad = family_trials("power-loss-resume", 8, mutant)
    finally:
        mutant.close()
    cheap = [t for t in bad if "I5" in t.failed and not t.history.legs]
    assert cheap, "the cheap tier's recovery did not show the torn tail left by power loss during a resume"
    assert "torn tail" in cheap[0].verdicts[-1].summary or "torn" in str(cheap[0].verdicts[-1].evidence)
    resumed = [t for t in bad if t.failed and t.history.legs]
    assert resumed, "no full resume caught the record glued onto the torn tail"
    history = resumed[0].history
    assert [leg.fault.kind for leg in history.legs] == ["kill", "power_loss", "none"]  # killed, resumed, lost power


def test_a_resume_bug_the_cheap_tier_cannot_see_is_caught_by_the_sampled_full_resumes():
    mutant = Runner(subject_for("resume-skips-completed"))
    try:
        trials = family_trials("power-loss-basic", 6, mutant)
    finally:
        mutant.close()
    cheap = [t for t in trials if "cheap" in t.schedule[0]]
    assert cheap and not any(t.failed for t in cheap)  # its recovery is right: only a resume shows the bug
    assert any("I6" in t.failed for t in trials if t not in cheap)


def test_the_pending_point_is_the_fsync_of_the_first_batch_or_its_write_when_it_is_never_fsynced():
    import base64

    from harness.families.trace_points import pending_point
    from harness.history.journal_location import JournalLocation

    batch = base64.b64encode(b'{"protocol":"io.choria.fisk-ai.v1.session.assistant","x":"tool_use"}\n').decode()
    path = "/s/fisk-ai/runs/r.json"
    synced = [{"n": 1, "op": "write", "path": path, "data": batch}, {"n": 2, "op": "fsync", "path": path}]
    journal = JournalLocation()
    assert pending_point(synced, "r", journal) == 2
    assert pending_point(synced[:1] + [{"n": 2, "op": "write", "path": path, "data": ""}], "r", journal) == 1
    assert pending_point([{"n": 1, "op": "write", "path": path, "data": ""}], "r", journal) is None
    # the batch written in two writes (its line ended by the second), then its fsync
    raw = base64.b64decode(batch)
    cut = raw.index(b"session.assistant") + 5  # neither half holds both marks
    halves = [{"n": 1, "op": "write", "path": path, "data": base64.b64encode(raw[:cut]).decode()},
              {"n": 2, "op": "write", "path": path, "data": base64.b64encode(raw[cut:]).decode()},
              {"n": 3, "op": "fsync", "path": path}]
    assert pending_point(halves, "r", journal) == 3


def test_a_race_trial_replays_alone_with_the_sequence_point_it_held(runner):
    first = Campaign([scenario("race-two-creates")], trials=1, seed=3, runner=runner, shrink_budget=0,
                     keep_histories=True).run().trials
    (drawn,) = first
    assert drawn.schedule[-1]["kind"] == "hold" and drawn.schedule[-1]["at"] >= 1   # the sequence point, named
    again = Campaign([scenario("race-two-creates")], seed=3, runner=runner, shrink_budget=0, keep_histories=True,
                     schedules=[drawn.schedule], origin="replay").run().trials
    legs = lambda t: [(lg.index, lg.kind, lg.exit_code, lg.fault.kind, lg.fault.detail.get("held_at"))
                      for lg in t.history.legs]
    assert [t.schedule for t in again] == [drawn.schedule] and legs(again[0]) == legs(drawn)


def test_a_timed_kill_replays_alone_as_the_op_counted_kill_it_landed_as(runner):
    s = scenario("kill-random")
    half = runner.reference(s).duration_ms / 2
    (timed,) = Campaign([s], seed=1, runner=runner, shrink_budget=0, keep_histories=True,
                        schedules=[[{"kind": "kill", "after_ms": half}]]).run().trials
    (fault,) = timed.schedule
    assert fault["when"] == "before" and "after_ms" not in fault and timed.reproduce.count('"event"') == 1
    (again,) = Campaign([s], seed=1, runner=runner, shrink_budget=0, keep_histories=True,
                        schedules=[timed.schedule], origin="replay").run().trials
    calls = lambda t: len(t.history.legs[0].trace)                     # the killed leg's journal and tool calls
    assert again.schedule == timed.schedule and calls(again) == calls(timed)
    assert again.history.legs[0].fault.kind == "kill" and len(again.history.legs) == len(timed.history.legs)


def test_trials_n_bounds_an_exhaustive_kill_or_suspend_plan_to_n_points_first_and_last_kept():
    from harness.families.base import Planned
    from harness.families.signals.family import SIGNALS
    from harness.families.signals.schedules import exhaustive_schedules

    points = [Planned(s, "exhaustive", 1) for s in exhaustive_schedules(30, 200, 1)]
    drawn = [Planned([{"kind": "kill", "after_ms": 1.0}], "hypothesis", 1)]
    kill = scenario("kill-every-event")
    for n in (1, 2, 5, 12):
        kept = SIGNALS.bound(kill, points + drawn, n, seed=3)
        assert len(kept) == n and all(p in points for p in kept)
        assert kept[-1] is points[-1] and (n == 1 or kept[0] is points[0])
        assert [points.index(p) for p in kept] == sorted(points.index(p) for p in kept)
        assert kept == SIGNALS.bound(kill, points + drawn, n, seed=3)  # deterministic for the seed
    assert SIGNALS.bound(kill, points + drawn, 40, seed=3) == points + drawn  # a plan within N is kept whole


def test_trials_n_bounds_every_family_s_plan_to_n_trials(runner):
    # a campaign with --trials N runs at most N trials of each scenario, whatever its family (on the module's
    # runner of the reference: its fork servers and the reference runs of the other tests serve it too)
    names = ["io-errors", "power-loss-basic", "tails-basic", "kill-every-event", "race-two-resumers"]
    result = Campaign([scenario(n) for n in names], trials=2, jobs=2, runner=runner, shrink_budget=0).run()
    assert not result.errors, result.errors
    per = {n: sum(1 for t in result.trials if t.scenario == n) for n in names}
    assert all(1 <= k <= 2 for k in per.values()), per


# --- shrinking: every family ---------------------------------------------------------------------------------

def _faults(words: str) -> tuple[int, int]:
    """A fault schedule's words (``kill at event 9 + kill at write #1``): (faults, sum of their positions)."""
    return words.count(" + ") + 1, sum(map(int, re.findall(r"\d+", words)))


def _numbers(words: str) -> tuple[int, ...]:
    return tuple(map(int, re.findall(r"\d+", words)))


# family, scenario, mutant (harness/selftest/mutants.py), run options, how big a side of the shrink's words is
CASES = [
    ("power_loss", "power-loss-basic", "no-fsync", ["--trials", "1"], _numbers),
    ("tail", "tails-basic", "torn-tail-is-corrupt", ["--trials", "4"], _numbers),
    ("io_error", "io-errors", "write-error-swallowed", ["--trials", "2"], _faults),
    ("race", "race-two-writers", "release-before-last-append", ["--trials", "1", "--shrink-budget", "1"], _faults),
    # seed 2: the chain's first draw (both kills at their first event) holds, its second fails and drops a kill
    ("chain", "chain-crash-in-pending-batch", "assistant-after-tools", ["--trials", "2", "--seed", "2"], _faults),
]


def _violations(report: dict, trial: int) -> set[tuple[str, str]]:
    return {(v["invariant"], (v.get("evidence") or {}).get("violations", [{}])[0].get("kind", ""))
            for v in report["violations"] if v["trial"] == trial}


@pytest.mark.slow
@pytest.mark.parametrize("family, scenario, mutant, options, size", CASES, ids=[c[0] for c in CASES])
def test_a_failure_of_every_family_shrinks_to_a_smaller_trial_that_replays_the_same_violation(
        tmp_path, capsys, family, scenario, mutant, options, size):
    """A broken engine fails a bundled scenario; the campaign shrinks the failing trial to a strictly smaller
    one failing the same invariant the same way; the report's smallest reproducer is that trial and says what
    got smaller; ``replay`` of it shows the same violation (issue 26 item 5)."""
    path, again = tmp_path / "report.json", tmp_path / "replay.json"
    # this interpreter: its legs are forked from the harness's fork server (PATH's ``python`` would start each leg
    # fresh, through a pyenv shim where there is one: several times the time of a row, the shrinking the same)
    subject = f"FISKJ_MUTANT={mutant} {shlex.quote(sys.executable)} -m harness.selftest.subject"
    assert main(["run", scenario, "--subject", subject, "--shrink-budget", "3", "--keep", "none",
                 "--report-json", str(path), *options]) == 1
    out = capsys.readouterr().out
    report = json.loads(path.read_text())
    (shrink,) = report["campaign"]["shrinks"]
    before, after = shrink["what"].split(" -> ")
    assert size(after) < size(before), shrink["what"]  # strictly smaller, by the family's own measure
    wanted = _violations(report, shrink["from_trial"]) & _violations(report, shrink["trial"])
    assert wanted, (shrink, report["violations"])  # the same invariant, the same first violation
    # the report's smallest reproducer is the shrunk trial, and says what got smaller
    assert f"smallest reproducer: trial {shrink['trial']} " in out
    assert f"shrunk from trial {shrink['from_trial']}: {shrink['what']}" in out
    assert f"shrunk: trial {shrink['from_trial']} -> trial {shrink['trial']}" in out
    assert main(["replay", str(path), "--trial", str(shrink["trial"]), "--report-json", str(again), "-q"]) == 1
    assert wanted & _violations(json.loads(again.read_text()), shrink["trial"])
    schema = json.loads((Path(__file__).resolve().parents[1] / "schemas" / "report.schema.json").read_text())
    jsonschema.validate(report, schema)  # the shrink's rows and lines as the report schema says


def test_smaller_fault_schedules_drop_a_fault_then_move_each_one_earlier():
    chain = [{"kind": "suspend", "signal": "SIGINT", "event": 6}, {"kind": "kill", "event": 4, "op": "write"}]
    out = smaller_schedules(chain)
    assert out[:2] == [[chain[1]], [chain[0]]]  # the fewest faults first
    assert [s[0]["event"] for s in out[2:5]] == [1, 3, 5] and [s[1]["event"] for s in out[5:]] == [1, 2, 3]
    assert smaller_schedules([{"kind": "kill", "event": 1, "when": "before"}]) == []  # nothing smaller
    assert smaller_schedules([{"kind": "kill", "after_ms": 40.0}]) == [[{"kind": "kill", "after_ms": 20.0}]]


def test_a_scenario_that_cannot_run_for_the_subject_is_said_once_without_its_family_s_limits():
    """Claude Code (chat = false, a jsonl journal) and power-loss-chat: the chat refusal is the one line; the
    power-loss family's limit for a subject without a reading (true, but beside the point) is not added to it."""
    from harness.campaign.campaign import subject_limits
    from harness.subject.profile import load_profile

    claude = load_profile(Path(__file__).resolve().parents[1] / "subjects" / "claude-code" / "profile.toml")
    lines = [line for line in subject_limits([scenario("power-loss-chat"), scenario("power-loss-basic")], claude)
             if line.startswith("power-loss-")]
    assert [line.split(":")[0] for line in lines] == ["power-loss-chat", "power-loss-basic"], lines
    assert "cannot run a chat" in lines[0] and "POWER LOSS" in lines[1]
    assert subject_limits([scenario("power-loss-chat")], claude, named=True) == claude.caps.limits()


def test_power_loss_does_not_run_for_a_subject_that_promises_to_survive_a_process_crash_only(tmp_path):
    """A power loss is no promise of such a subject's: every power-loss scenario is NOT RUN, said before the first
    trial; named on the command line, a setup error (exit 2, no trial)."""
    from harness.campaign.campaign import subject_limits
    from harness.subject.profile import load_profile

    text = (Path(__file__).resolve().parents[1] / "subjects" / "reference.toml").read_text()
    profile = tmp_path / "lossy.toml"
    profile.write_text(text.replace('name = "fiskj-reference"', 'name = "lossy"')
                       + '\n[promises]\ndurable = "process-crash"\n')
    lossy = load_profile(profile)
    lines = subject_limits([scenario("power-loss-basic"), scenario("kill-random")], lossy)
    assert [line for line in lines if line.startswith(("power-loss-basic", "kill-random"))] == [
        "power-loss-basic: power loss: the subject promises to survive a process crash only ([promises] durable = "
        "\"process-crash\"), so what a power loss takes is no broken promise; not run"]
    assert main(["run", "power-loss-basic", "-q", "--subject", str(profile), "--results", str(tmp_path / "r")]) == 2
