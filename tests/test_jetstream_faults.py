"""harness/families/jetstream: faults of the JetStream server a subject's store is on (issue 28, docs/jetstream.md).

Power loss of a single server after the run's last acknowledged publish: with the server's default sync interval
the crash state that keeps no unsynced write loses acknowledged records (I4 invalid: Jepsen's NATS 2.12.1
finding); with ``sync_interval: always`` the same state keeps every one (I4 valid).  No timing: the fault is laid
from the server's observed writes and fsyncs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.campaign.campaign import unsupported
from harness.checkers import check_all
from harness.families.base import Planned
from harness.families.jetstream.family import JETSTREAM
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
