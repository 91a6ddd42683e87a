"""harness/families/jetstream: faults of the JetStream server a subject's store is on (issue 28, docs/jetstream.md).

Power loss of a single server after the run's last acknowledged publish: with the server's default sync interval
the crash state that keeps no unsynced write loses acknowledged records (I4 invalid: Jepsen's NATS 2.12.1
finding); with ``sync_interval: always`` the same state keeps every one (I4 valid).  No timing: the fault is laid
from the server's observed writes and fsyncs.  Mid-run points (after the K-th ack, after the server's K-th block
write or fsync) judge only what was acknowledged by then; a kill right after a block fsync loses nothing.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from harness.campaign.campaign import unsupported
from harness.checkers import check_all
from harness.families.base import Planned
from harness.families.jetstream.family import JETSTREAM
from harness.families.jetstream.midrun import (CrashPointError, PastEnd, by_exit, crash_plan, crash_point, cut_leg,
                                               held, server_prefix)
from harness.history.model import Fault, History, Leg
from harness.runner.trial import Runner
from harness.scenario.parse import load_scenario
from harness.subject.contract import default_subject
from harness.errors import ProfileError
from harness.subject.profile import load_profile, parse_profile

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "jetstream" / "jetstream-power-loss.toml"


def _trial(profile: str, state: int, tmp_path, fault=None, scenario=SCENARIO, subject=None):
    scenario = load_scenario(scenario)
    subject = subject or load_profile(ROOT / "subjects" / "jetstream" / profile)
    with Runner(subject, tmp_root=str(tmp_path)) as runner:
        plan = JETSTREAM.plan(scenario, None, 1, 1, [[fault or {"kind": "power_loss", "state": state}]])
        ran = JETSTREAM.open(scenario, runner, None).run(plan[0])
    return ran, {v.invariant: v for v in check_all(ran.history, ["I4", "I5", "I6"])}


def test_power_loss_of_a_server_with_the_default_sync_interval_loses_acknowledged_records(tmp_path):
    ran, verdicts = _trial("r1-default.toml", 0, tmp_path)
    assert ran.faults == {"power_loss": 1}
    assert verdicts["I4"].status == "invalid"
    lost = [v for v in verdicts["I4"].evidence["violations"] if v["kind"] == "lost"]
    assert lost and lost[0]["seq"] == 1 and len(lost) == len(verdicts["I4"].evidence["acknowledged_seqs"])


def test_power_loss_of_a_server_that_syncs_always_keeps_every_acknowledged_record(tmp_path):
    ran, verdicts = _trial("r1-always.toml", 0, tmp_path)
    assert verdicts["I4"].status == "valid" and verdicts["I4"].evidence["checked"] >= 5
    state = ran.history.legs[0].fault.detail["states"]["n1"]
    assert verdicts["I6"].status == "valid" and state["dropped"] == state["units"]  # state 0: no unsynced unit kept


def test_jetstream_scenarios_run_only_for_jetstream_subjects_and_those_run_nothing_else():
    scenario = load_scenario(SCENARIO)
    js = load_profile(ROOT / "subjects" / "jetstream" / "r1-default.toml")
    assert js.jetstream == (1, "default") and unsupported(js, scenario) is None
    assert "[jetstream]" in unsupported(default_subject(), scenario)
    assert "only the jetstream family" in unsupported(js, load_scenario(ROOT / "scenarios" / "kill-random.toml"))


def test_every_bundled_jetstream_profile_loads_and_names_its_store():
    for path in sorted((ROOT / "subjects" / "jetstream").glob("*.toml")):
        subject = load_profile(path)
        assert subject.jetstream is not None and "{store_url}" in " ".join(subject.start_args)


KILL = ROOT / "scenarios" / "jetstream" / "jetstream-server-kill.toml"


def test_a_server_killed_between_persisting_a_record_and_acking_it_loses_nothing_and_the_writer_adopts_it(tmp_path):
    ran, verdicts = _trial("r1-default.toml", 0, tmp_path, {"kind": "server_kill", "event": 3}, KILL)
    assert ran.faults == {"server_kill": 1} and ran.history.legs[0].fault.detail["after_write"] == 3
    assert all(v.status == "valid" for v in verdicts.values()), {k: v.evidence.get("summary") for k, v in verdicts.items()}
    assert [leg.exit_code for leg in ran.history.legs] == [0]  # no resume needed: the lost ack was adopted


def test_the_mutant_that_appends_its_own_record_again_after_a_lost_ack_is_caught(tmp_path):
    from harness.selftest.mutants import subject_for

    subject = subject_for("jetstream-ignores-lost-ack")
    assert subject.jetstream is not None
    ran, verdicts = _trial("", 0, tmp_path, {"kind": "server_kill", "event": 3}, KILL, subject)
    assert ran.faults == {"server_kill": 1}
    assert verdicts["I5"].status == "invalid" or verdicts["I6"].status == "invalid"


STALE = ROOT / "scenarios" / "jetstream" / "jetstream-stale-writer.toml"


def _store_arg(leg):
    return leg.argv[leg.argv.index("--store") + 1]


@pytest.mark.slow
def test_a_writer_whose_run_was_deleted_under_it_is_refused_by_the_fence_and_the_run_ends_as_the_reference(tmp_path):
    ran, verdicts = _trial("r3-always.toml", 0, tmp_path, {"kind": "stale_writer", "after_publish": 2}, STALE)
    stale, second = ran.history.legs
    assert ran.faults == {"stale_writer": 1} and stale.fault.injected
    assert [ev["op"] for ev in stale.trace] == ["publish", "publish"]  # held after its 2nd ack; nothing after
    assert stale.fault.detail["run_deleted_after_n"] == stale.trace[-1]["n"]
    assert stale.exit_code == 1 and "RunLocked" in stale.stderr and "or it was deleted" in stale.stderr
    assert _store_arg(stale) != _store_arg(second) and "," not in _store_arg(stale)  # one node each
    assert second.kind == "start" and second.exit_code == 0
    assert all(v.status == "valid" for v in verdicts.values()), {k: v.evidence.get("summary") for k, v in verdicts.items()}
    assert [r["seq"] for r in verdicts["I4"].evidence["retired_by_unlink"]] == [1, 2]  # the delete took them


@pytest.mark.slow
def test_the_mutant_that_publishes_without_the_fence_writes_into_the_deleted_run_and_is_caught(tmp_path):
    from harness.selftest.mutants import subject_for

    subject = subject_for("jetstream-no-fence")
    assert subject.jetstream == (3, "always")
    ran, verdicts = _trial("", 0, tmp_path, {"kind": "stale_writer", "after_publish": 1}, STALE, subject)
    assert [leg.exit_code for leg in ran.history.legs] == [0]  # it "completed" a run that no longer exists
    lost = [v["seq"] for v in verdicts["I4"].evidence["violations"] if v["kind"] == "lost"]
    assert verdicts["I4"].status == "invalid" and lost == list(range(2, 8))
    assert verdicts["I6"].status == "invalid" and verdicts["I6"].evidence["violations"][0]["kind"] == "run_missing"


def test_a_profile_asking_for_a_memory_storage_stream_is_refused_before_any_trial():
    text = (ROOT / "subjects" / "jetstream" / "r1-always.toml").read_text()
    memory = parse_profile(text.replace('sync_interval = "always"', 'sync_interval = "always"\nstorage = "memory"'),
                           "memory.toml")
    assert memory.jetstream_storage == "memory"
    why = unsupported(memory, load_scenario(STALE))
    assert why and 'storage = "memory"' in why and "StreamRefused" in why
    assert unsupported(parse_profile(text, "file.toml"), load_scenario(STALE)) is None
    with pytest.raises(ProfileError, match="storage"):
        parse_profile(text.replace('sync_interval = "always"', 'sync_interval = "always"\nstorage = "tape"'), "t.toml")


# Mid-run crash points (tracker issue 28, item 3): the pure part first, then a few points end to end.

MIDRUN = ROOT / "scenarios" / "jetstream" / "jetstream-power-loss-midrun.toml"
EVENTS = ROOT / "scenarios" / "jetstream" / "jetstream-power-loss-events.toml"
KILL_FSYNC = ROOT / "scenarios" / "jetstream" / "jetstream-server-kill-fsync.toml"
BLK = "/s/n1/store/jetstream/$G/streams/FISKJ/msgs/1.blk"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _recording(sync: bool):
    """A recorded run of 3 records: the server writes record k (fsyncs it with ``sync``), then the agent sees its
    ack; times in ns, 100 apart; an index write of another goroutine in flight across the second ack."""
    server, agent, t = [{"n": 1, "op": "open", "path": BLK, "t0": 1, "t": 2}], [], 10
    for k in (1, 2, 3):
        line = b'{"seq":%d,"body":"r%d"}' % (k, k)
        server.append({"op": "write", "path": BLK, "offset": 0, "data": _b64(b"HDR" + line + b"SUM"), "t0": t, "t": t + 10})
        if sync:
            server.append({"op": "fsync", "path": BLK, "t0": t + 20, "t": t + 30})
        agent.append({"op": "publish", "path": "nats://x/FISKJ fiskj.run.>", "data": _b64(line + b"\n"), "t0": t + 50,
                      "t": t + 60})
        if k == 2:  # entered before ack 2, returned after it
            server.append({"op": "write", "path": "/s/n1/store/jetstream/$G/streams/FISKJ/msgs/index.db",
                           "data": _b64(b"idx"), "t0": t + 40, "t": t + 200})
        t += 100
    for n, ev in enumerate(server, 1):
        ev["n"] = n
    return agent, server


def test_a_crash_point_at_ack_k_takes_the_server_events_that_returned_by_that_ack():
    agent, server = _recording(sync=True)
    server = by_exit(server)
    p1, p2, p3 = (crash_point("ack", k, agent, server, "run") for k in (1, 2, 3))
    assert (p1.server, p1.acked, p1.t) == (3, 1, 70)  # open, write 1, fsync 1
    assert (p2.server, p2.acked) == (5, 2)  # ... write 2, fsync 2; the index write in flight at the ack: left out
    assert (p3.server, p3.acked) == (7, 3)  # ... write 3, fsync 3: the index write, still in flight, does not hold them
    assert server[7]["path"].endswith("index.db") and server_prefix(server, 310) == 8 and server_prefix(server, 0) == 0
    assert held(server, p2.server, agent, "run", p2.t) == 2 and held(server, 1, agent, "run", p2.t) == 0


def test_a_crash_point_at_a_server_event_cuts_the_agent_before_the_ack_it_never_saw():
    agent, server = _recording(sync=True)
    w2 = crash_point("event", 3, agent, by_exit(server), "run")  # write 2, before its fsync and its ack
    assert (w2.server, w2.acked) == (4, 1)
    assert crash_plan("every-event", 1, 3) == [{"kind": "power_loss", "at": "event", "point": k, "state": 0}
                                               for k in (1, 2, 3)]


def test_a_crash_point_whose_traces_disagree_or_that_the_run_never_reached_is_refused():
    agent, server = _recording(sync=False)
    with pytest.raises(PastEnd):
        crash_point("ack", 4, agent, server, "run")
    with pytest.raises(PastEnd):
        crash_point("event", 4, agent, server, "run")  # 3 block writes, no fsync with the default sync interval
    early = [dict(ev, t=ev["t"] - 55) if ev["op"] == "publish" else ev for ev in agent]  # an ack before its write
    with pytest.raises(CrashPointError, match="disagree"):
        crash_point("ack", 2, early, server, "run")


def test_the_crash_plan_is_point_major_with_each_state():
    assert [(e["point"], e["state"]) for e in crash_plan("every-ack", 2, 5)] == [(1, 0), (1, 1), (2, 0), (2, 1), (3, 0)]
    with pytest.raises(ValueError):
        crash_plan("end", 2, 5)
    midrun = JETSTREAM.plan(load_scenario(MIDRUN), None, 3, 1, None)
    assert [p.schedule for p in midrun] == [[{"kind": "power_loss", "at": "ack", "point": 1, "state": s}] for s in (0, 1)] \
        + [[{"kind": "power_loss", "at": "ack", "point": 2, "state": 0}]]
    assert JETSTREAM.plan(load_scenario(KILL_FSYNC), None, 2, 1, None)[1].schedule == [
        {"kind": "server_kill", "event": 2, "op": "fsync"}]
    assert JETSTREAM.plan(load_scenario(SCENARIO), None, 2, 1, None)[1].schedule == [{"kind": "power_loss", "state": 1}]


def test_the_agent_leg_is_cut_at_the_crash_point_with_the_calls_and_effects_made_by_then():
    from types import SimpleNamespace

    agent, _ = _recording(sync=True)
    history = History(scenario="s", seed=1, schedule=[], run_id="run")
    history.legs = [Leg(index=0, kind="start", argv=["a"], trace=agent, exit_code=0)]
    history.model_calls = [SimpleNamespace(t=t) for t in (5, 100, 250)]
    history.effects = [SimpleNamespace(t=t) for t in (90, 171, 300)]
    pre = cut_leg(history, 170, Fault(kind="power_loss", injected=True))
    assert [ev["t"] for ev in pre.leg.trace] == [70, 170] and pre.leg.exit_signal == "SIGKILL" and pre.leg.t_end == 170
    assert [c.t for c in pre.calls] == [5, 100] and [e.t for e in pre.effects] == [90]
    assert pre.leg.fault.kind == "power_loss" and pre.files == {}


def _acked_in_leg0(ran) -> int:
    return sum(1 for ev in ran.history.legs[0].trace if ev.get("op") == "publish")


@pytest.mark.slow
def test_power_loss_at_the_third_ack_with_the_default_sync_interval_loses_exactly_the_three_records_acked(tmp_path):
    ran, verdicts = _trial("r1-default.toml", 0, tmp_path, {"kind": "power_loss", "at": "ack", "point": 3, "state": 0},
                           MIDRUN)
    detail = ran.history.legs[0].fault.detail
    assert ran.faults == {"power_loss": 1} and detail["acked"] == 3 and _acked_in_leg0(ran) == 3
    assert ran.history.legs[0].exit_signal == "SIGKILL"  # the agent died at the crash point too
    lost = sorted(v["seq"] for v in verdicts["I4"].evidence["violations"] if v["kind"] == "lost")
    assert verdicts["I4"].status == "invalid" and lost == [1, 2, 3]  # only what was acked before the crash
    assert verdicts["I6"].status == "valid"  # the resume starts the run again and ends as the reference


@pytest.mark.slow
def test_power_loss_mid_run_of_a_server_that_syncs_always_keeps_what_was_acked_and_drops_the_unacked_write(tmp_path):
    # event 5: the write of record 3, before its fsync and ack; state 0 drops it: nothing acked is lost
    ran, verdicts = _trial("r1-always.toml", 0, tmp_path, {"kind": "power_loss", "at": "event", "point": 5, "state": 0},
                           EVENTS)
    detail = ran.history.legs[0].fault.detail
    assert detail["acked"] == 2 and _acked_in_leg0(ran) == 2 and detail["states"]["n1"]["dropped"] >= 1
    verdicts.update({v.invariant: v for v in check_all(ran.history, ["I10"])})  # read after the resume, not cached
    assert all(v.status == "valid" for v in verdicts.values()), {k: v.evidence.get("summary") for k, v in verdicts.items()}
    assert [leg.kind for leg in ran.history.legs] == ["start", "resume"]  # records 1-2 on the stream: resumed


@pytest.mark.slow
def test_a_server_killed_after_fsyncing_a_record_and_before_acking_it_loses_nothing(tmp_path):
    ran, verdicts = _trial("r1-always.toml", 0, tmp_path, {"kind": "server_kill", "event": 3, "op": "fsync"}, KILL_FSYNC)
    assert ran.faults == {"server_kill": 1} and ran.history.legs[0].fault.detail == {"server": "n1", "after_fsync": 3}
    assert all(v.status == "valid" for v in verdicts.values()), {k: v.evidence.get("summary") for k, v in verdicts.items()}


def test_a_reproducer_of_a_trial_on_a_jetstream_profile_names_the_profile():
    # the profile runs the reference (python -m fiskj) yet is not the default subject: without --subject the
    # printed command would be a setup error
    from harness.report.reproduce import reproduce_command

    subject = load_profile(ROOT / "subjects" / "jetstream" / "r1-default.toml")
    line = reproduce_command(load_scenario(SCENARIO), 1, [{"kind": "power_loss", "state": 0}], subject)
    assert "--subject" in line and line.endswith("subjects/jetstream/r1-default.toml")
    assert "--subject" not in reproduce_command(load_scenario(SCENARIO), 1, None, default_subject())


def test_a_jetstream_profile_with_no_scenario_named_runs_the_jetstream_family_s_scenarios():
    from harness.cli.resolve import resolve_scenarios

    subject = load_profile(ROOT / "subjects" / "jetstream" / "r1-default.toml")
    names = {s.name for s in resolve_scenarios([], subject)}
    assert names == {p.stem for p in (ROOT / "scenarios" / "jetstream").glob("*.toml")} and "jetstream-power-loss" in names
    assert "kill-random" in {s.name for s in resolve_scenarios([], default_subject())}
