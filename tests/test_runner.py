"""harness.runner.trial: one trial of the reference agent, its legs, and the history it leaves."""

from __future__ import annotations

import os
import sys

import pytest

from harness.history.model import history_from_json, history_to_json
from harness.runner.trial import Runner, run_id_for
from harness.scenario.parse import parse_scenario
from harness.subject.contract import parse_subject

SMALL_TOML = """
name = "runner-small"
purpose = "two tool turns"
[workload]
turns = 2
tools_per_turn = 2
tool_ms = 1
"""
SMALL = parse_scenario(SMALL_TOML, "runner-small.toml")

SLOW_TOOLS = parse_scenario("""
name = "runner-slow-tools"
purpose = "one turn of slow tools, so a signal lands inside a tool"
[workload]
turns = 1
tools_per_turn = 1
tool_ms = 400
""", "runner-slow-tools.toml")

CHAT = parse_scenario("""
name = "runner-chat"
purpose = "a chat run with two follow-ups"
[workload]
turns = 1
tools_per_turn = 1
chat_followups = 2
""", "runner-chat.toml")


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    with Runner(tmp_root=str(tmp_path_factory.mktemp("trials"))) as r:
        yield r


def view(state):
    return state["messages"], state["counters"], state["status"]


def test_a_noop_trial_of_the_reference_agent_completes_and_matches_the_reference(runner):
    ref = runner.reference(SMALL)
    assert ref.events > 5 and ref.reference.model_calls == 3 and ref.reference.effects >= 2
    h = runner.run_trial(SMALL, 1, [])
    assert [(leg.kind, leg.exit_code, leg.exit_signal) for leg in h.legs] == [("start", 0, None)]
    assert h.final_error is None
    assert view(h.final_state) == view(ref.reference.state)
    assert h.final_state["status"] == "completed"
    assert len(h.model_calls) == ref.reference.model_calls
    assert sorted((e.tool_use_id, e.attempt) for e in h.effects) == sorted(
        (e.tool_use_id, e.attempt) for e in ref.history.effects)
    assert all(e.leg == 0 for e in h.effects) and all(c.leg == 0 for c in h.model_calls)
    leg = h.legs[0]
    assert leg.journal and leg.journal.endswith(b"\n") and len(leg.trace) == ref.events
    assert leg.t_start < leg.t_end and leg.pid > 0
    assert h.reference == ref.reference and h.run_id == run_id_for(SMALL)


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_suspend_at_an_event_lands_right_after_that_call_and_the_resume_completes(runner, signal_name):
    ref = runner.reference(SMALL)
    event = ref.events // 2
    h = runner.run_trial(SMALL, 3, [{"kind": "suspend", "signal": signal_name, "event": event}])
    first, second = h.legs
    assert (first.exit_code, first.fault.kind, first.fault.signal, first.fault.injected) == (3, "suspend", signal_name, True)
    assert first.fault.detail["landed_after_event"] == event
    assert [ev["n"] for ev in first.trace if ev.get("fault")] == [event]  # the seam's mark: sent after call n
    assert second.kind == "resume" and second.exit_code == 0 and h.final_state["status"] == "completed"
    # past the run's last call: nothing is sent, nothing is counted as a suspend
    h = runner.run_trial(SMALL, 4, [{"kind": "suspend", "signal": signal_name, "event": ref.events + 5}])
    assert [(leg.exit_code, leg.fault.injected) for leg in h.legs] == [(0, False)]


def test_event_suspend_points_are_planned_at_every_event_in_turn_of_signals(runner):
    from harness.families.signals.schedules import plan_schedules
    scenario = parse_scenario(SMALL_TOML.replace("[workload]", "[faults]\nfamily = \"suspend\"\nsuspend_points = "
                                                 "\"events\"\n[workload]"), "s.toml")
    ref = runner.reference(scenario)
    plan = plan_schedules(scenario, ref, 100, 1)
    journal, run_id = ref.history.journal, ref.history.run_id
    first = next(ev["n"] for ev in ref.history.legs[0].trace if journal.is_journal(ev["path"], run_id))
    assert first > 3  # its folders and lock come first
    # from the one before the journal's first call: the start-up before it is one point (startup_points: each)
    for startup, start in ((False, first - 1), (True, 1)):
        plan = plan_schedules(parse_scenario(SMALL_TOML.replace("[workload]", "[faults]\nfamily = \"suspend\"\n"
                              f"suspend_points = \"events\"\nstartup_points = {str(startup).lower()}\n[workload]"),
                              "s.toml"), ref, 100, 1)
        assert [sch for sch, _ in plan] == [[{"kind": "suspend", "signal": ("SIGINT", "SIGTERM")[k % 2], "event": k}]
                                            for k in range(start, ref.events + 1)]
    assert {origin for _, origin in plan} == {"exhaustive"}


def test_a_kill_trial_yields_a_crashed_leg_then_a_completed_resume(runner):
    ref = runner.reference(SMALL)
    event = ref.events // 2  # well after the meta record, well before the end
    h = runner.run_trial(SMALL, 2, [{"kind": "kill", "event": event}])
    first, second = h.legs
    assert first.kind == "start" and first.crashed and first.exit_signal == "SIGKILL"
    assert first.fault.kind == "kill" and first.fault.injected and first.fault.at == {"event": event, "when": "after"}
    assert len(first.trace) == event  # the trace ends at the kill
    assert second.kind == "resume" and second.exit_code == 0 and "--resume" in second.argv
    assert h.final_state["status"] == "completed"
    assert view(h.final_state)[:2] == view(ref.reference.state)[:2]
    assert {c.leg for c in h.model_calls} <= {0, 1}
    # at most the one tool in flight ran twice
    assert sum(1 for e in h.effects if e.attempt > 1) <= 1


def test_a_timed_suspend_lands_inside_a_tool_and_the_resume_repeats_nothing(runner):
    runner.reference(SLOW_TOOLS)
    h = runner.run_trial(SLOW_TOOLS, 3, [{"kind": "suspend", "signal": "SIGINT", "after_ms": 150.0}])
    if h.legs[0].exit_code == 0:  # pragma: no cover - a very slow machine: the signal came too late
        pytest.skip("the suspend landed after the run completed")
    assert h.legs[0].exit_code == 3 and h.legs[0].fault.injected
    assert h.legs[1].kind == "resume" and h.legs[1].exit_code == 0
    assert all(e.attempt == 1 for e in h.effects)
    assert len({c.key for c in h.model_calls}) == len(h.model_calls)


def test_a_chat_trial_feeds_its_follow_ups_and_ends_at_the_end_of_input(runner):
    ref = runner.reference(CHAT)
    assert ref.reference.state["status"] == "suspended"
    users = [m for m in ref.reference.state["messages"] if m["role"] == "user"]
    assert any("follow-up 2" in str(m) for m in users)
    h = runner.run_trial(CHAT, 1, [{"kind": "kill", "event": ref.events - 3}])
    assert h.legs[0].crashed and h.legs[-1].exit_code == 3
    assert view(h.final_state)[:2] == view(ref.reference.state)[:2]


def test_the_history_survives_a_json_round_trip(runner):
    h = runner.run_trial(SMALL, 4, [{"kind": "kill", "event": 12}])
    back = history_from_json(history_to_json(h))
    assert back == h


def test_trial_directories_are_always_removed(tmp_path):
    with Runner(tmp_root=str(tmp_path)) as r:
        r.run_trial(SMALL, 1, [])
        with pytest.raises(ValueError):
            r.run_trial(SMALL, 1, [{"kind": "teleport"}])
    assert os.listdir(tmp_path) == []


def test_a_hung_agent_is_killed_and_recorded(tmp_path):
    hung = parse_subject([sys.executable, "-c", "import time; time.sleep(60)"])
    with Runner(subject=hung, tmp_root=str(tmp_path)) as r:
        h = r.run_trial(SMALL, 1, [], timeout_s=0.5, with_reference=False)
    [leg] = h.legs
    assert leg.timed_out and leg.exit_signal == "SIGKILL"
    assert any("hung" in n for n in h.notes)
    assert h.final_error is not None and h.final_error["kind"] == "RunNotFound"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("observe", [False, True])
def test_fresh_processes_and_the_fork_server_give_the_same_result(tmp_path, observe):
    # observed: a fresh interpreter under the tracer vs a forked leg the tracer attached to (fiskj-observe --attach)
    with Runner(tmp_root=str(tmp_path), fork_server=False, observe=observe) as fresh:
        assert not fresh.fork_server
        h = fresh.run_trial(SMALL, 1, [{"kind": "kill", "event": 14}])
    with Runner(tmp_root=str(tmp_path), observe=observe) as forked:
        assert forked.fork_server
        g = forked.run_trial(SMALL, 1, [{"kind": "kill", "event": 14}])
        assert bool(forked.legs._filters) == observe  # the observed legs were forked, the tracer attached
    assert [(leg.kind, leg.exit_code, leg.exit_signal) for leg in h.legs] == [
        (leg.kind, leg.exit_code, leg.exit_signal) for leg in g.legs]
    assert view(h.final_state) == view(g.final_state)
    assert [len(leg.trace) for leg in h.legs] == [len(leg.trace) for leg in g.legs]

    def ops(history):  # each leg's operations: kind, path in its trial folder, fault (not a write's length: a
        # record holds the time it was made, whose last digits may be zeros and dropped)
        return [[(ev["op"], ev["path"].split("fiskj-trial-")[-1].partition("/")[2], ev.get("fault"))
                 for ev in leg.trace] for leg in history.legs]
    if observe:
        assert ops(h) == ops(g) and h.legs[0].trace[-1].get("fault")


DRIFT = parse_scenario("""
name = "runner-drift"
purpose = "a resume with another model and tool set"
[workload]
turns = 2
tools_per_turn = 1
tool_ms = 1
drift = ["model", "tools", "max_iterations"]
""", "runner-drift.toml")

BUDGET = parse_scenario("""
name = "runner-budget"
purpose = "a run that ends on its token budget"
[workload]
turns = 4
tools_per_turn = 1
tool_ms = 1
max_tokens = 300
""", "runner-budget.toml")


def test_field_case_f17_with_drift_a_resume_is_refused_first_then_forced_and_nothing_was_appended(runner):
    from harness.checkers import check_all

    history = runner.run_trial(DRIFT, 1, [{"kind": "kill", "event": 12}])
    crash, probe, forced = history.legs
    assert crash.exit_signal == "SIGKILL"
    assert (probe.kind, probe.exit_code, probe.fault.detail["expect"]) == ("resume", 2, "refused")
    assert "claude-fiskj-fake-drifted" in probe.argv and "--force" not in probe.argv
    assert "model" in probe.stderr and probe.journal == crash.journal          # zero bytes appended
    assert "--force" in forced.argv and forced.exit_code == 0 and forced.fault.detail["forced"] is True
    assert any(a.endswith("tools-drifted.json") for a in forced.argv)
    assert all(v.status == "valid" for v in check_all(history)), [v.summary for v in check_all(history)]


def test_a_workload_that_ends_on_its_budget_is_a_valid_reference_and_a_resume_ends_alike(runner):
    from harness.checkers import check_all

    ref = runner.reference(BUDGET)
    assert ref.reference.state["status"] == "budget" and ref.history.legs[-1].exit_code == 1
    history = runner.run_trial(BUDGET, 1, [{"kind": "kill", "event": 12}])
    assert history.final_state["status"] == "budget"
    assert all(v.status == "valid" for v in check_all(history))


def test_a_run_killed_after_its_budget_end_is_resumed_not_refused_and_ends_alike_running_nothing(runner):
    # fisk-ai resumes every run that is not completed (docs/spec.md section 12, rule 2): the leg after
    # a kill that lands once the `budget` terminal record is acknowledged resumes the run, finds its
    # budget spent again from the journal's counters, and appends its own `budget` record (exit 1),
    # with no model call and no tool run.  Under the old policy it was refused (exit 2).
    from harness.checkers import check_all

    ref = runner.reference(BUDGET)
    history = runner.run_trial(BUDGET, 1, [{"kind": "kill", "event": ref.events, "when": "after"}])
    crash, resumed = history.legs
    assert crash.exit_signal == "SIGKILL" and b'"terminal":{"reason":"budget"' in crash.journal.splitlines()[-1]
    assert (resumed.kind, resumed.exit_code) == ("resume", 1) and "ResumeRefused" not in resumed.stderr
    assert resumed.journal.startswith(crash.journal)
    (added,) = resumed.journal[len(crash.journal):].splitlines()
    assert b'"terminal":{"reason":"budget"' in added
    assert [c for c in history.model_calls if c.leg == 1] == [] and len(history.effects) == ref.reference.effects
    assert history.final_state["status"] == "budget"
    assert view(history.final_state)[:2] == view(ref.reference.state)[:2]
    verdicts = check_all(history)
    assert all(v.status == "valid" for v in verdicts), [v.summary for v in verdicts]
    assert next(v for v in verdicts if v.invariant == "I9").evidence["refused_legs"] == []


@pytest.mark.parametrize("final_stop", ["max_tokens", "refusal"])
def test_a_run_cut_short_at_its_last_reply_ends_with_error_and_a_correct_engine_passes_every_invariant(final_stop):
    from harness.campaign.campaign import Campaign

    scenario = parse_scenario(SMALL_TOML.replace("[workload]", "[faults]\nfamily = \"kill\"\nkill_points = \"events\"\n"
                                                 "[check]\nresume_after_completed = true\n[workload]")
                              + f'final_stop = "{final_stop}"\n', "cut.toml")
    result = Campaign([scenario], trials=6, jobs=2, shrink_budget=0, keep_histories=True).run()
    assert not result.errors and len(result.trials) == 6
    for trial in result.trials:
        assert not trial.failed and not trial.unknown, [(v.invariant, v.evidence.get("summary")) for v in trial.verdicts
                                                        if v.status != "valid"]
        assert trial.history.final_state["status"] == "error"
        last = trial.history.legs[-1]
        assert last.fault.detail.get("probe") == "resume after error" and last.exit_code == 1  # ended so again


def test_an_unobserved_runner_has_one_observed_twin_on_its_model_server_and_an_observing_one_is_its_own():
    with Runner(observe=False) as runner:
        twin = runner.observed()
        assert twin is runner.observed() and twin is not runner  # made once: its cached references serve every caller
        assert twin.observe and twin.subject == runner.subject and twin.server is runner.server
    with Runner(observe=True) as observing:
        assert observing.observed() is observing
