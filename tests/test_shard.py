"""--shard I/N and merge: shards are disjoint, cover the campaign, and merge to the single run's verdict."""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import pytest

from harness.runner.trial import Runner

from harness.campaign.campaign import Campaign
from harness.campaign.shard import parse_shard, shard_positions
from harness.cli.main import main
from harness.report.report import campaign_report, merge_reports
from harness.scenario.parse import load_scenario
from harness.selftest.mutants import subject_for

# Event kills (exhaustive and hypothesis-drawn over the seam events), a race and a no-op scenario:
# their plans are a function of the seed alone, so one campaign and its shards draw the same trials.
EVENTS = """\
name = "shard-events"
purpose = "event kills over two legs"

[workload]
seed = 7
turns = 1
tools_per_turn = 2
tool_ms = 1

[faults]
family = "kill"
kill_points = "events"
startup_points = true   # every crash point from the first event (the plans these tests were written on)
legs = 2
max_events = 6

[trials]
count = 6   # its 5 exhaustive points and a hypothesis-drawn one (tests/README.md "What the suite costs")
"""

RACE = """\
name = "shard-race"
purpose = "a race"

[faults]
family = "race"
races = ["two-writers", "two-creates"]

[trials]
count = 4   # two trials of each race
timeout_s = 20

[check]
invariants = ["I4", "I5", "I8", "I9"]
"""

NOOP = """\
name = "shard-noop"
purpose = "no faults"

[workload]
turns = 1
tools_per_turn = 1

[trials]
count = 3
"""


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory):
    d = tmp_path_factory.mktemp("shard-scenarios")
    (d / "shard-events.toml").write_text(EVENTS, encoding="utf-8")
    (d / "shard-noop.toml").write_text(NOOP, encoding="utf-8")
    (d / "shard-race.toml").write_text(RACE, encoding="utf-8")
    return [load_scenario(d / f"shard-{n}.toml") for n in ("events", "noop", "race")]


def _key(trial) -> tuple[str, int, str]:
    return (trial.scenario, trial.seed, json.dumps(trial.schedule, sort_keys=True))


@pytest.mark.parametrize("text,expected", [("0/1", (0, 1)), ("2/4", (2, 4)), (" 1/2", (1, 2))])
def test_a_shard_is_i_of_n_counted_from_zero(text, expected):
    assert parse_shard(text) == expected


@pytest.mark.parametrize("text", ["2/2", "-1/3", "1", "a/b", "1/0", "0/", "/3"])
def test_a_shard_outside_zero_to_n_or_not_i_slash_n_is_refused(text):
    with pytest.raises(ValueError, match="I/N"):
        parse_shard(text)


@pytest.mark.parametrize("total", [0, 1, 5, 17])
@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_shard_positions_are_disjoint_and_together_cover_every_position(total, n):
    parts = [list(shard_positions(total, (i, n))) for i in range(n)]
    flat = sorted(p for part in parts for p in part)
    assert flat == list(range(total))
    assert max((len(p) for p in parts), default=0) - min((len(p) for p in parts), default=0) <= 1


def test_the_shards_of_a_campaign_are_disjoint_and_cover_it_and_merge_to_its_verdict(scenarios):
    with Runner() as runner:  # one runner: the reference runs and fork servers are shared by the four campaigns
        whole = Campaign(scenarios, jobs=2, shrink_budget=0, runner=runner).run()
        shards = [Campaign(scenarios, jobs=2, shrink_budget=0, shard=(i, 3), runner=runner).run() for i in range(3)]
    everything = collections.Counter(_key(t) for t in whole.trials)
    parts = [collections.Counter(_key(t) for t in s.trials) for s in shards]
    # As multisets (a no-op scenario repeats one schedule): every trial of the whole campaign is in
    # exactly one shard, and no shard runs a trial the campaign does not have.
    assert sum(parts, collections.Counter()) == everything
    assert all(len(s.trials) > 0 for s in shards)
    merged = merge_reports([campaign_report(s, None) for s in shards])
    single = campaign_report(whole, None)
    assert merged["verdict"] == single["verdict"] == "valid"
    assert merged["trials"] == single["trials"] == len(whole.trials)
    assert {k: v["checked"] for k, v in merged["invariants"].items()} == \
        {k: v["checked"] for k, v in single["invariants"].items()}
    assert sorted(r["trial"] for r in merged["runs"]) == list(range(len(whole.trials)))


def test_a_violation_found_by_one_shard_makes_the_merged_verdict_invalid(scenarios):
    broken = subject_for("resume-reruns-answered")   # caught by an event kill after a batch's first result
    events = scenarios[:1]
    shards = [Campaign(events, jobs=2, shrink_budget=0, shard=(i, 2), subject=broken).run() for i in range(2)]
    reports = [campaign_report(s, None) for s in shards]
    assert sorted(r["verdict"] for r in reports) in (["invalid", "valid"], ["invalid", "invalid"])
    merged = merge_reports(reports)
    assert merged["verdict"] == "invalid"
    assert merged["violations"] and all("FISKJ_MUTANT=resume-reruns-answered" in v["reproduce_run"]
                                        for v in merged["violations"])


def test_run_shard_and_merge_on_the_command_line_exit_as_run_does(scenarios, tmp_path, capsys):
    path = scenarios[1].path
    outs = []
    for i in range(2):
        out = tmp_path / f"s{i}.json"
        assert main(["run", path, "--shard", f"{i}/2", "-q", "--report-json", str(out)]) == 0
        outs.append(out)
    report = json.loads(outs[0].read_text())
    assert report["campaign"]["shard"] == "0/2" and report["trials"] == 2
    merged = tmp_path / "merged.json"
    assert main(["merge", *map(str, outs), "--report-json", str(merged), "-q"]) == 0
    data = json.loads(merged.read_text())
    assert data["trials"] == 3 and data["verdict"] == "valid" and data["shards"] == 2
    assert data["campaign"]["scenarios"] == {"shard-noop": path}
    # merging an invalid shard exits 1; an unreadable report exits 2
    bad = dict(report, verdict="invalid")
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    assert main(["merge", str(tmp_path / "bad.json"), str(outs[1]), "-q"]) == 1
    assert main(["merge", str(tmp_path / "missing.json")]) == 2
    # only the complete set of shards merges: a shard twice, a missing one, or an unsharded report
    capsys.readouterr()
    assert main(["merge", str(outs[0]), str(outs[0]), "-q"]) == 2
    assert "given twice" in capsys.readouterr().err
    unsharded = dict(report, campaign={k: v for k, v in report["campaign"].items() if k != "shard"})
    (tmp_path / "whole.json").write_text(json.dumps(unsharded))
    assert main(["merge", str(outs[0]), str(tmp_path / "whole.json"), "-q"]) == 2
    assert "not a shard report" in capsys.readouterr().err
    three = dict(report, campaign=dict(report["campaign"], shard="0/3"))
    (tmp_path / "three.json").write_text(json.dumps(three))
    assert main(["merge", str(tmp_path / "three.json"), str(outs[1]), "-q"]) == 2
    # one shard of two alone is not the campaign (it once merged to "valid")
    capsys.readouterr()
    assert main(["merge", str(outs[0]), "--report-json", str(tmp_path / "half.json")]) == 2
    captured = capsys.readouterr()
    assert "shard(s) 1/2 missing" in captured.err and "valid" not in captured.out.lower()
    assert not (tmp_path / "half.json").exists()
    # a shard of another campaign (another seed), or an interrupted one, is refused too
    other = dict(report, campaign=dict(report["campaign"], shard="1/2", seeds={"shard-noop": 99}))
    (tmp_path / "other.json").write_text(json.dumps(other))
    assert main(["merge", str(outs[0]), str(tmp_path / "other.json"), "-q"]) == 2
    assert "different seeds" in capsys.readouterr().err
    cut = json.loads(outs[1].read_text())
    cut["interrupted"] = True
    (tmp_path / "cut.json").write_text(json.dumps(cut))
    assert main(["merge", str(outs[0]), str(tmp_path / "cut.json"), "-q"]) == 2
    assert "interrupted" in capsys.readouterr().err
    assert main(["run", path, "--shard", "2/2"]) == 2
    assert "I/N" in capsys.readouterr().err


def test_a_merged_report_can_replay_any_of_its_trials(scenarios, tmp_path):
    path = scenarios[1].path
    outs = []
    for i in range(2):
        out = tmp_path / f"s{i}.json"
        main(["run", path, "--shard", f"{i}/2", "-q", "--report-json", str(out)])
        outs.append(str(out))
    for out in outs:  # the variables a profile's templates read, as a shard kept them: the merge keeps them too
        shard = json.loads(Path(out).read_text())
        shard["campaign"]["subject_env_read"] = {"MY_AGENT_BIN": "/opt/agent"}
        Path(out).write_text(json.dumps(shard))
    merged = tmp_path / "merged.json"
    main(["merge", *outs, "--report-json", str(merged), "-q"])
    assert json.loads(merged.read_text())["campaign"]["subject_env_read"] == {"MY_AGENT_BIN": "/opt/agent"}
    assert main(["replay", str(merged), "--trial", "2", "-q"]) == 0


def _shard_report(shard: str | None, *, kind: str = "run", seeds=None, subject=None, scenarios=("a", "b")):
    campaign = {"scenarios": {n: f"/x/{n}.toml" for n in scenarios}, "seeds": seeds or {n: 1 for n in scenarios},
                "subject": subject, "subject_env": {}}
    report = {"format": "fiskj-harness-report/1", "trials": 1, "interrupted": False, "campaign": campaign}
    if kind == "gate":
        report["gate"] = {"shard": shard, "budget_s": 10, "rounds": 1, "plan": []}
    elif shard is not None:
        campaign["shard"] = shard
    return report


@pytest.mark.parametrize("shards,message", [
    (["0/3", "2/3"], "shard(s) 1/3 missing"),
    (["0/2", "1/2", "1/2"], "shard 1/2 is given twice (r1.json and r2.json)"),
    (["0/2", "1/4"], "different shard counts [2, 4]"),
    (["1/2"], "shard(s) 0/2 missing"),
    (["0/2", None], "not a shard report"),
    (["0/2", "x/2"], "field 'campaign.shard': cannot merge: a shard is I/N"),
])
def test_only_one_complete_set_of_shards_merges(shards, message):
    from harness.campaign.shard import ShardSetError, check_shard_set

    reports = [_shard_report(s) for s in shards]
    paths = [f"r{k}.json" for k in range(len(shards))]
    with pytest.raises(ShardSetError) as info:
        check_shard_set(paths, reports)
    assert message in str(info.value)


def test_a_complete_set_of_one_campaign_merges_and_the_shards_must_share_it():
    from harness.campaign.shard import ShardSetError, check_shard_set

    assert check_shard_set(["w.json"], [_shard_report(None)]) == [None]  # a whole campaign alone
    assert check_shard_set(["a", "b"], [_shard_report("1/2"), _shard_report("0/2")]) == [(1, 2), (0, 2)]
    gate = [_shard_report(f"{i}/2", kind="gate", seeds={"a": i, "b": i}) for i in range(2)]
    assert check_shard_set(["a", "b"], gate) == [(0, 2), (1, 2)]  # a gate's seeds are its rounds': not compared
    for other, what in ((_shard_report("1/2", scenarios=("a", "c")), "different scenarios"),
                        (_shard_report("1/2", subject=["agent"]), "different subjects"),
                        (_shard_report("1/2", kind="gate"), "different kinds of report (run, gate)")):
        with pytest.raises(ShardSetError, match=re.escape(what)):
            check_shard_set(["a", "b"], [_shard_report("0/2"), other])
    with pytest.raises(ShardSetError, match="not a fiskj-harness report"):
        check_shard_set(["a", "b"], [_shard_report("0/2"), ["not", "a", "report"]])
