"""fiskj-harness run / replay end to end, and the campaign's schedules and shrinking."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from harness.campaign.campaign import Campaign
from harness.campaign.result import TrialResult
from harness.draws import seeded_draws
from harness.families.signals.schedules import exhaustive_schedules, plan_schedules, schedule_strategy
from harness.checkers import Verdict
from harness.cli.main import main
from harness.history.model import History, Reference
from harness.history.timeline import Timeline
from harness.runner.trial import ReferenceRun
from harness.scenario.parse import parse_scenario
from harness.subject.contract import default_subject

NOOP = """\
name = "tiny-noop"
purpose = "no faults"
[workload]
turns = 1
tools_per_turn = 2
[faults]
family = "none"
[trials]
count = 2
"""

SUSPEND = """\
name = "tiny-suspend"
purpose = "suspends right after durability events (never timed: the resumes it needs happen under load too)"
[workload]
turns = 2
tools_per_turn = 1
tool_ms = 5
[faults]
family = "suspend"
suspend_points = "events"
legs = 2
[trials]
count = 3
seed = 5
"""

KILL = """\
name = "tiny-kill"
purpose = "kills"
[workload]
turns = 2
tools_per_turn = 2
tool_ms = 1
[faults]
family = "kill"
kill_points = "random"
legs = 2
[trials]
count = 3
"""

# A broken agent: on resume it first drops the journal's last complete record
# (an acknowledged record is lost, and its work is done again), then runs fiskj.
BROKEN = """\
import os, sys
args = sys.argv[1:]
if "--resume" in args:
    rid = args[args.index("--resume") + 1]
    path = os.path.join(os.environ["XDG_STATE_HOME"], "fisk-ai", "runs", rid + ".json")
    data = open(path, "rb").read()
    cut = data.rstrip(b"\\n").rfind(b"\\n") + 1
    if cut > 0:
        open(path, "wb").write(data[:cut])
from fiskj.cli import main
sys.exit(main(args))
"""


@pytest.fixture
def files(tmp_path):
    for name, text in (("tiny-noop.toml", NOOP), ("tiny-suspend.toml", SUSPEND), ("tiny-kill.toml", KILL),
                       ("broken.py", BROKEN)):
        (tmp_path / name).write_text(text)
    return tmp_path


def test_a_tiny_campaign_runs_end_to_end_and_exits_0(files, capsys):
    report_path, junit = files / "report.json", files / "junit.xml"
    code = main(["run", str(files / "tiny-noop.toml"), str(files / "tiny-suspend.toml"), "--jobs", "2",
                 "--report-json", str(report_path), "--junit", str(junit), "--results", str(files / "res")])
    out, err = capsys.readouterr()
    assert code == 0, out
    # the results folder: reports, and no trial folder (none failed; --keep failures)
    (folder,) = (files / "res" / "campaign").glob("2*Z")
    assert (files / "res" / "campaign" / "latest").resolve() == folder.resolve()
    assert {p.name for p in folder.iterdir()} == {"report.json", "junit.xml", "summary.md", "summary.txt",
                                                  "command.txt", "report.html"}
    assert f"results: {folder}" in out
    assert "fiskj-harness run" in (folder / "command.txt").read_text()
    report = json.loads(report_path.read_text())
    assert {"trials", "faults", "invariants", "violations"} <= set(report)
    assert report["trials"] == 5 and report["violations"] == [] and report["verdict"] == "valid"
    assert set(report["faults"]) >= {"kill", "suspend", "tail", "power_loss", "race"}
    assert set(report["invariants"]) == {f"I{i}" for i in range(1, 12)}
    assert report["campaign"]["scenarios"]["tiny-noop"] == str(files / "tiny-noop.toml")
    assert [r["origin"] for r in report["runs"]].count("noop") == 2
    assert "I6" in out and "verdict: VALID" in out
    # code probes: the suspended runs were resumed; what no trial reached is named
    probes = report["probes"]
    assert probes["applies"] and "resume.after_suspend" in probes["reached"]
    assert probes["reached"]["resume.after_suspend"]["scenarios"] == ["tiny-suspend"]
    assert "open.refused.unsafe_file" in probes["unreached"] and "code probes: " in out
    assert ET.parse(junit).getroot().find("testsuite").get("tests") == "22"
    # the progress (stderr is not a terminal here): one total, the whole campaign's, said when done
    assert "fiskj-harness: 5/5 trials, 0 failing, done in" in err and "/4 trials" not in err


def test_an_explicit_schedule_runs_one_trial_and_replay_reruns_it(files, capsys):
    report_path = files / "report.json"
    code = main(["run", str(files / "tiny-kill.toml"), "--schedule", '[{"kind": "kill", "event": 14}]',
                 "--report-json", str(report_path), "-q", "--keep", "none", "--results", str(files / "res")])
    assert code == 0
    assert not (files / "res").exists()                                  # --keep none: no results folder at all
    report = json.loads(report_path.read_text())
    assert report["trials"] == 1 and report["faults"]["kill"] == 1
    assert report["runs"][0]["schedule"] == [{"kind": "kill", "event": 14, "when": "after"}]
    capsys.readouterr()
    assert main(["replay", str(report_path), "--trial", "0", "--history", str(files / "h.json"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "I2 valid" in " ".join(out.split())
    history = json.loads((files / "h.json").read_text())
    assert [leg["exit_signal"] for leg in history["legs"]] == ["SIGKILL", None]


def test_a_replayed_trial_keeps_its_number_in_what_replay_prints_and_writes(files, capsys):
    report_path, again = files / "report.json", files / "again.json"
    assert main(["run", str(files / "tiny-noop.toml"), "--report-json", str(report_path), "-q", "--keep", "none"]) == 0
    assert [r["trial"] for r in json.loads(report_path.read_text())["runs"]] == [0, 1]
    capsys.readouterr()
    assert main(["replay", str(report_path), "--trial", "1", "--report-json", str(again), "-q"]) == 0
    assert capsys.readouterr().out.startswith(f"trial 1 tiny-noop seed=1 schedule=[] (replayed from {report_path})")
    assert [r["trial"] for r in json.loads(again.read_text())["runs"]] == [1]       # not "trial 0"
    assert main(["replay", str(again), "--trial", "1", "-q"]) == 0                  # and it replays as trial 1


def test_a_violation_exits_1_with_the_evidence_and_a_reproducer_in_a_results_folder_and_a_portable_report(
        files, capsys, tmp_path_factory):
    project = files / "project"          # a scenario and the report next to it: moved together below
    project.mkdir()
    (files / "tiny-kill.toml").rename(project / "tiny-kill.toml")
    report_path = project / "report.json"
    subject = f"{sys.executable} {files / 'broken.py'}"
    code = main(["run", str(project / "tiny-kill.toml"), "--subject", subject, "--schedule",
                 '[{"kind": "kill", "event": 20}]', "--report-json", str(report_path), "--results", str(files / "res")])
    out = capsys.readouterr().out
    assert code == 1, out
    # the results folder holds the failing trial's evidence, and check judges it again without running it
    (trial,) = (files / "res" / "tiny-kill" / "latest" / "trials").iterdir()
    assert {p.name for p in trial.iterdir()} >= {"trial.json", "history.json", "effects.jsonl", "model_calls.jsonl",
                                                 "legs"}
    assert sorted(p.name for p in (trial / "legs").iterdir()) == ["0-start", "1-resume"]
    assert (trial / "legs" / "0-start" / "journal.jsonl").stat().st_size > 0
    assert main(["check", str(files / "res" / "tiny-kill")]) == 1
    checked = capsys.readouterr().out
    assert "trial 0 tiny-kill" in checked and "group(s) by cause" in checked
    report = json.loads(report_path.read_text())
    assert report["verdict"] == "invalid"
    # The lost record is re-created identically by the deterministic model, so the
    # evidence is the repeated work: a model call (I3) or a tool (I2) done twice.
    assert {v["invariant"] for v in report["violations"]} & {"I2", "I3", "I4"}
    v = report["violations"][0]
    assert v["scenario"] == "tiny-kill" and v["schedule"] == [{"kind": "kill", "event": 20, "when": "after"}]
    assert v["evidence"] and v["reproduce"] == f"fiskj-harness replay {report_path} --trial 0"
    assert "--schedule" in v["reproduce_run"] and "broken.py" in v["reproduce_run"]
    assert "reproduce:" in out
    # the report replays after it moved (the scenario is found relative to it, not where it ran)
    moved = tmp_path_factory.mktemp("elsewhere") / "project"
    project.rename(moved)
    assert main(["replay", str(moved / "report.json"), "--trial", "0", "-q"]) == 1


def test_usage_and_setup_errors_exit_2(files, capsys):
    bad = files / "bad.toml"
    bad.write_text(NOOP.replace("turns = 1", "turns = 1\nturnz = 2"))
    assert main(["run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:5" in err and "turnz" in err
    assert main(["run", "no-such-scenario"]) == 2
    assert main(["run", str(files / "tiny-noop.toml"), "--schedule", "[{"]) == 2
    assert main(["run", str(files / "tiny-noop.toml"), "--trials", "0"]) == 2
    capsys.readouterr()
    assert main(["run", str(files / "tiny-noop.toml"), "--results", str(files / "broken.py")]) == 2   # before a trial
    assert "cannot create the results folder" in capsys.readouterr().err
    failing = f"{sys.executable} -c 'import sys; sys.exit(1)'"
    assert main(["run", str(files / "tiny-noop.toml"), "--subject", failing, "-q"]) == 2
    assert "the subject did not run scenario" in capsys.readouterr().err
    assert main(["replay", str(files / "missing.json"), "--trial", "0"]) == 2
    capsys.readouterr()
    # a named scenario whose family cannot run for the subject: said once, as a setup error, before any work;
    # nothing judged, so no results folder and never "no violations"
    results = files / "never"
    assert main(["run", "jetstream/jetstream-power-loss", "--results", str(results)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and not results.exists()
    assert err.count("jetstream-power-loss") == 1 and "setup error" in err and "[jetstream]" in err


def test_a_subject_naming_an_unknown_mutant_is_a_usage_error(files, capsys):
    unknown = f"FISKJ_MUTANT=no-such-mutant {sys.executable} -m harness.selftest.subject"
    assert main(["run", str(files / "tiny-noop.toml"), "--subject", unknown, "-q"]) == 2
    assert "unknown mutant 'no-such-mutant'" in capsys.readouterr().err


def test_a_mutant_named_by_its_user_facing_name_runs_with_its_preload():
    from harness.cli.resolve import subject_of
    from harness.selftest.mutants import subject_for

    assert subject_of(f"FISKJ_MUTANT=no-fsync {sys.executable} -m harness.selftest.subject") == subject_for("no-fsync")
    assert subject_of([sys.executable, "-m", "harness.selftest.subject"], {"FISKJ_MUTANT": "lockf"}) == \
        subject_for("lockf")
    assert subject_of(None) == default_subject()


def test_the_bundled_scenarios_are_the_default():
    from harness.cli.resolve import resolve_scenarios

    names = {s.name for s in resolve_scenarios([])}
    assert {"noop-baseline", "kill-random", "kill-every-event", "suspend-clean", "chain-crash-during-resume"} <= names
    assert [s.name for s in resolve_scenarios(["kill-random"])] == ["kill-random"]


def test_a_bundled_name_wins_over_a_local_folder_of_that_name_unless_given_as_a_path(tmp_path, monkeypatch):
    from harness.cli.resolve import resolve_scenarios

    local = tmp_path / "kill-random"
    local.mkdir()
    (local / "mine.toml").write_text('name = "mine"\npurpose = "a local scenario"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert [s.name for s in resolve_scenarios(["kill-random"])] == ["kill-random"]
    assert [s.name for s in resolve_scenarios(["./kill-random"])] == ["mine"]


def test_an_unknown_scenario_name_is_refused_with_the_closest_bundled_names():
    from harness.cli.arguments import _Usage
    from harness.cli.resolve import resolve_scenarios

    with pytest.raises(_Usage, match="did you mean 'kill-random'"):
        resolve_scenarios(["kill-randm"])
    with pytest.raises(_Usage) as info:
        resolve_scenarios(["zzzzzz"])
    assert "did you mean" not in str(info.value)


# --- schedules and shrinking (no agent runs) ---------------------------------------------

REF = ReferenceRun(reference=Reference(state={}, model_calls=3, effects=2),
                   history=History(scenario="x", seed=0, schedule=[], run_id="x"), events=30, duration_ms=100.0)


def test_schedules_are_drawn_deterministically_from_the_seed():
    s = parse_scenario(KILL)
    one, again, other = (plan_schedules(s, REF, 12, seed) for seed in (1, 1, 2))
    assert one == again and one != other
    assert all(origin == "hypothesis" and 1 <= len(sch) <= 2 for sch, origin in one)
    for sch, _ in one:
        for fault in sch:
            assert fault["kind"] == "kill" and 0 <= fault["after_ms"] <= 110.0


def test_draws_do_not_depend_on_the_modules_the_process_imported_and_write_nothing(tmp_path, monkeypatch):
    # hypothesis mixes the constants of every loaded "local" module into its draws (parsing their sources, its
    # cache in ./.hypothesis): a campaign's plan would depend on what its process imported, and cost a parse
    import importlib
    import uuid

    from hypothesis import strategies as st

    monkeypatch.chdir(tmp_path)
    strategy = st.lists(st.integers(0, 10**6), min_size=3, max_size=3)
    before = seeded_draws(strategy, 200, 1)
    name = f"many_constants_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text(f"K = [{', '.join(str(i * 997) for i in range(1, 1000))}]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module(name)
    try:
        assert seeded_draws(strategy, 200, 1) == before
    finally:
        sys.modules.pop(name, None)
    assert not (tmp_path / ".hypothesis").exists()


def test_exhaustive_crash_points_cover_every_event_and_are_sampled_beyond_the_cap():
    points = exhaustive_schedules(30, cap=100, seed=1)
    assert points[0] == [{"kind": "kill", "event": 1, "when": "before"}]
    assert [p[0]["event"] for p in points[1:]] == list(range(1, 31))
    sampled = exhaustive_schedules(30, cap=8, seed=1)
    assert len(sampled) == 8 and sampled[0] == points[0] and sampled[-1] == points[-1]
    assert sampled == exhaustive_schedules(30, cap=8, seed=1)
    late = exhaustive_schedules(30, cap=100, seed=1, first=12)  # start-up before the first journal call: one point
    assert late[0] == points[0] and [p[0]["event"] for p in late[1:]] == list(range(11, 31))
    s = parse_scenario(KILL.replace('"random"', '"events"').replace("legs = 2", "legs = 1"))
    assert [origin for _, origin in plan_schedules(s, REF, 100, 1)] == ["exhaustive"] * 31


def test_chains_and_suspends_follow_their_scenario():
    chain = parse_scenario('name = "c"\npurpose = "p"\n[faults]\nfamily = "chain"\nchain = ["suspend", "kill-event"]\n')
    for sch in seeded_draws(schedule_strategy(chain, REF), 10, 3):
        assert [f["kind"] for f in sch] == ["suspend", "kill"]
        assert sch[0]["signal"] in ("SIGINT", "SIGTERM") and 1 <= sch[1]["event"] <= 30


class _StubRunner:
    subject = default_subject()

    def reference(self, scenario):
        return REF


def test_a_failing_trial_is_shrunk_to_a_minimal_schedule(monkeypatch):
    """A fake judge: a trial fails I2 when any kill lands after 40 ms.  A campaign shrinks its smallest failure
    (or says why it could not); a failure of two kills shrinks to one late kill that no smaller trial fails.

    Drawn times are scrambled over the span (so draws are not bunched at the start).
    """
    from harness.campaign.result import ScenarioRun
    from harness.families.base import Planned
    from harness.families.signals.family import SIGNALS

    runs = []

    def judge(self, run, planned, runner, index):
        schedule = planned.schedule
        runs.append(schedule)
        late = any(f.get("after_ms", 0) > 40.0 for f in schedule)
        verdict = Verdict("I2", "n", "invalid" if late else "valid", {"summary": "late kill"}, "stub")
        return TrialResult(index=index, scenario=run.scenario.name, scenario_path=run.scenario.path, seed=planned.seed,
                           schedule=schedule, origin=planned.origin, verdicts=[verdict], history=None, elapsed_s=0.0,
                           invariants=("I2",))

    monkeypatch.setattr(Campaign, "_judge", judge)
    s = parse_scenario(KILL, "tiny-kill.toml")
    result = Campaign([s], trials=20, seed=1, jobs=2, runner=_StubRunner(), shrink_budget=200).run()
    failing = [t for t in result.trials[:20] if t.failed]
    smallest = min(failing, key=lambda t: (len(t.schedule), sum(f["after_ms"] for f in t.schedule), t.index))
    shrunk = [t for t in result.trials if t.origin == "shrink"]
    assert len(result.trials) == 20 + len(shrunk) and len(shrunk) <= 1
    if shrunk:  # from the smallest failure, to a smaller one that fails too
        assert shrunk[0].shrunk_from == smallest.index and shrunk[0].failed == ["I2"] and "->" in shrunk[0].shrink
    else:  # it says why: its one smaller trial (half its time) does not fail
        assert smallest.shrink.startswith("not shrunk: none of the 1 smaller trial(s) tried failed I2"), smallest.shrink
    drawn = [f["after_ms"] for t in result.trials[:20] for f in t.schedule]
    assert sum(a < 5.5 for a in drawn) < len(drawn) / 2, drawn  # not bunched in the first 5% of the span
    # the engine on a failure of two kills: one dropped, then its time halved while it still fails
    runs.clear()
    run = ScenarioRun(scenario=s, seed=1, family=SIGNALS, reference=REF)
    target = judge(None, run, Planned([{"kind": "kill", "after_ms": 90.0}, {"kind": "kill", "after_ms": 30.0}],
                                      "hypothesis", 1), None, 7)
    one = Campaign([s], seed=1, runner=_StubRunner(), shrink_budget=200)._shrink(run, [target], target, _StubRunner())
    assert one.schedule == [{"kind": "kill", "after_ms": 45.0}] and one.shrunk_from == 7 and one.origin == "shrink"
    assert one.shrink == "kill at 90.0 ms + kill at 30.0 ms -> kill at 45.0 ms"
    assert runs[1:] == [[{"kind": "kill", "after_ms": 30.0}], [{"kind": "kill", "after_ms": 90.0}],
                        [{"kind": "kill", "after_ms": 45.0}], [{"kind": "kill", "after_ms": 22.5}]]  # each once


def test_a_shrink_keeps_what_the_faults_caused_not_a_rule_every_trial_breaks(monkeypatch):
    """An agent that never fsyncs fails I4 append_not_synced in every trial, with or without a fault; a late kill
    also makes it fail I3.  The shrunk trial must still fail I3 (was: any trial failed I4 the same way, so the
    shrink dropped the kill and kept only the fsync rule), and the campaign shrinks an I3 failure, not the
    smallest trial that failed the fsync rule alone."""
    from harness.campaign.result import ScenarioRun
    from harness.families.base import Planned
    from harness.families.signals.family import SIGNALS

    def judge(self, run, planned, runner, index):
        schedule = planned.schedule
        late = any(f.get("after_ms", 0) > 40.0 for f in schedule)
        verdicts = [Verdict("I4", "n", "invalid", {"violations": [{"kind": "append_not_synced"}]}, "stub"),
                    Verdict("I3", "n", "invalid" if late else "valid",
                            {"violations": [{"kind": "lost_delivered_reply"}]} if late else {}, "stub")]
        return TrialResult(index=index, scenario=run.scenario.name, scenario_path=run.scenario.path, seed=planned.seed,
                           schedule=schedule, origin=planned.origin, verdicts=verdicts, history=None, elapsed_s=0.0,
                           invariants=("I3", "I4"))

    monkeypatch.setattr(Campaign, "_judge", judge)
    s = parse_scenario(KILL, "tiny-kill.toml")
    run = ScenarioRun(scenario=s, seed=1, family=SIGNALS, reference=REF)
    target = judge(None, run, Planned([{"kind": "kill", "after_ms": 90.0}, {"kind": "kill", "after_ms": 30.0}],
                                      "hypothesis", 1), None, 7)
    one = Campaign([s], seed=1, runner=_StubRunner(), shrink_budget=200)._shrink(run, [target], target, _StubRunner())
    assert one.schedule == [{"kind": "kill", "after_ms": 45.0}] and "I3" in one.failed
    small = judge(None, run, Planned([{"kind": "kill", "after_ms": 10.0}], "hypothesis", 1), None, 3)  # I4 only
    c = Campaign([s], seed=1, runner=_StubRunner(), shrink_budget=200)
    [shrunk] = c._shrink_all([run], [small, target], _StubRunner())
    assert shrunk.shrunk_from == 7 and "I3" in shrunk.failed


def test_the_shrink_lines_say_what_got_smaller_and_why_a_failure_was_not_shrunk():
    from harness.cli.reporting import _shrink_lines

    one = {"scenario": "s", "from_trial": 3, "trial": 10, "schedule": [{"kind": "kill", "event": 2}],
           "what": "kill at event 6 + kill at event 4 -> kill at event 2", "reproduce": "fiskj-harness run s"}
    why = {"scenario": "p", "trial": 5, "why": "not shrunk: none of the 3 smaller trial(s) tried failed I4 the same "
                                                "way; it stays at 2 dropped write sector(s)"}
    text = _shrink_lines({"campaign": {"shrinks": [one], "not_shrunk": [why]}})
    first, reproduce, second = text.splitlines()
    assert first == ('shrunk: trial 3 -> trial 10 (s; kill at event 6 + kill at event 4 -> kill at event 2): '
                     '[{"kind": "kill", "event": 2}]') and reproduce == "    reproduce: fiskj-harness run s"
    assert second == ("not shrunk: trial 5 (p): none of the 3 smaller trial(s) tried failed I4 the same way; it "
                      "stays at 2 dropped write sector(s)")


def test_version_is_the_one_version_constant_of_the_package(capsys):
    import tomllib
    from pathlib import Path

    import fiskj
    from harness.cli.main import version_text

    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out == version_text() + "\n" and out.startswith(f"fiskj-harness {fiskj.__version__} (fiskj ")
    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["version"] == fiskj.__version__  # the package metadata says the same


def test_timed_faults_land_in_the_subjects_own_time_line_not_in_its_start_up():
    # a fast agent: ready 60 ms after its spawn, its work done by 100 ms; the draws cover its work only
    timeline = Timeline(ready_ms=60.0, last_ms=100.0, end_ms=104.0)
    ref = replace(REF, duration_ms=104.0, timeline=timeline)
    times = [f["after_ms"] for sched, _ in plan_schedules(parse_scenario(KILL), ref, 60, 3) for f in sched
             if "after_ms" in f]
    assert len(times) >= 20
    assert min(times) >= 60.0 and max(times) <= 60.0 + 40.0 * 1.05
    assert max(times) - min(times) > 20.0  # spread over the span, not bunched at its start
    # without a measured time line (an old reference) the whole leg is the span, from 0
    old = [f["after_ms"] for sched, _ in plan_schedules(parse_scenario(KILL), REF, 60, 3) for f in sched
           if "after_ms" in f]
    assert min(old) < 60.0


@pytest.mark.parametrize("command", [["run", "noop-baseline"], ["gate", "--budget", "5"], ["check", "."],
                                     ["merge", "a.json"]])
def test_an_output_file_that_cannot_be_written_is_refused_before_any_work(tmp_path, monkeypatch, capsys, command):
    from harness.cli.main import main

    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    (tmp_path / "afile").write_text("x")
    for option, value, why in (("--junit", str(tmp_path / "missing" / "r.xml"), "does not exist"),
                               ("--junit", str(tmp_path), "is a folder"),
                               ("--junit", str(tmp_path / "afile" / "r.xml"), "is a file, not a folder"),
                               ("--report-json", "/proc/version", "cannot write in its folder /proc")):
        code = main([*command, option, value] + (["--results", str(results)] if command[0] != "check"
                                                 and command[0] != "merge" else []))
        err = capsys.readouterr().err
        assert code == 2 and f"{option} {value}: " in err and why in err, err
        assert "Traceback" not in err and not results.exists()  # nothing ran, no results folder was made


def test_a_subject_that_cannot_start_is_found_once_and_its_error_shown_once(tmp_path, capsys):
    from harness.cli.main import main

    agent = tmp_path / "agent.py"
    agent.write_text("import sys\nprint('Traceback-like start-up failure:\\n  line two of it', file=sys.stderr)\n"
                     "open(sys.argv[0] + '.starts', 'a').write('x')\nsys.exit(1)\n")
    code = main(["run", "--subject", f"{sys.executable} {agent}", "kill-random", "tails-basic", "suspend-clean",
                 "--keep", "none"])
    out, err = capsys.readouterr()
    assert code == 2
    assert (out + err).count("line two of it") == 1, out + err            # the subject's own words, once
    assert (tmp_path / "agent.py.starts").read_text() == "x"            # started once, not once per scenario
    assert err.count("not run: the subject did not start") == 2 and "Traceback (most recent" not in err


def test_a_save_regression_folder_that_cannot_be_made_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    from harness.cli.main import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    for value in (str(tmp_path / "afile"), str(tmp_path / "afile" / "regressions")):
        code = main(["run", "kill-random", "--trials", "1", "--save-regression", value,
                     "--results", str(tmp_path / "results")])
        err = capsys.readouterr().err
        assert code == 2 and f"--save-regression {value}: {tmp_path / 'afile'} is a file, not a folder" in err, err
        assert "Traceback" not in err and not (tmp_path / "results").exists()


def test_a_schedule_the_user_gave_that_its_family_cannot_plan_is_named_as_theirs(tmp_path, capsys):
    """A --schedule of a kind no family knows is a setup error that says it is the --schedule's (its family
    checks it: kinds other than kill/suspend/io_error/hold are not known before the scenario's family plans)."""
    from harness.cli.main import main

    code = main(["run", "kill-random", "--schedule", '[{"kind":"kil","event":3}]', "--results", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and 'the --schedule given: unknown fault kind "kil"' in err, err
    assert "Traceback" not in err
