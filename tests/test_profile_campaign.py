"""Subject profiles end to end: campaigns through `--subject PROFILE.toml`, the way a user runs a real agent.

The Node.js agent (subjects/node/) stands in for an agent with its own command line: through
subjects/node/fisk-ai-style.toml it takes a configuration file and exits as fisk-ai does (0 on a
suspend, 1 on a refusal), so the harness must tell outcomes apart by the journal.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STYLE = ROOT / "subjects" / "node" / "fisk-ai-style.toml"


def style_copy(tmp_path: Path, name: str, edit=lambda text: text) -> Path:
    """A copy of the fisk-ai-style profile elsewhere (its command made absolute), edited by ``edit``."""
    path = tmp_path / name
    path.write_text(edit(STYLE.read_text().replace("{profile_dir}", str(STYLE.parent))))
    return path

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed (every machine here "
                                                                     "has Node.js 20; install nodejs)")


MID_SUSPEND = """
name = "profile-mid-suspend"
purpose = "a SIGTERM right after the third journal write (mid-run on any machine load), and a drifted resume after it"
[workload]
seed = 11
turns = 2
tools_per_turn = 2
tool_ms = 5
drift = ["model"]
[faults]
family = "suspend"
legs = 2
[trials]
count = 2
seed = 1
"""


def campaign(tmp_path: Path, subject: str, scenarios: list[str], trials: int,
             extra: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess, dict | None]:
    report = tmp_path / "report.json"
    paths = [s if s.endswith(".toml") else str(ROOT / "scenarios" / f"{s}.toml") for s in scenarios]
    argv = [sys.executable, "-m", "harness.cli.main", "run", *paths, "--subject", subject, "--trials", str(trials),
            "--seed", "1", "--report-json", str(report), "--keep", "none", "--shrink-budget", "0", *extra]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=tmp_path,
                          env={k: v for k, v in os.environ.items() if not k.startswith("FISKJ_")})
    return proc, (json.loads(report.read_text()) if report.exists() else None)


def test_an_agent_that_exits_0_on_suspend_and_1_on_refusal_is_judged_through_its_profile(tmp_path):
    scenario = tmp_path / "mid-suspend.toml"
    scenario.write_text(MID_SUSPEND)
    schedule = json.dumps([{"kind": "suspend", "signal": "SIGTERM", "event": 3, "op": "write"}])
    proc, report = campaign(tmp_path, str(STYLE), [str(scenario)], 1, ("--schedule", schedule))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    inv = report["invariants"]
    assert inv["I1"]["valid"] > inv["I1"]["vacuous"]      # the suspend was seen as one (exit 0 + the journal)
    assert inv["I9"]["valid"] > inv["I9"]["vacuous"]      # the drifted resume was seen as refused (exit 1, no byte)
    assert inv["I10"]["valid"] > inv["I10"]["vacuous"]    # its own reading was asked and agreed
    assert report["campaign"]["subject"] == str(STYLE)
    assert report["campaign"]["subject_name"] == "node-agent-fisk-ai-style"


def test_without_its_exit_map_the_same_agent_is_misjudged_so_the_map_is_what_made_it_pass(tmp_path):
    plain = style_copy(tmp_path, "no-exit-map.toml", lambda t: t[:t.index("[exit]")] + t[t.index("[journal]"):])
    scenario = tmp_path / "mid-suspend.toml"
    scenario.write_text(MID_SUSPEND)
    schedule = json.dumps([{"kind": "suspend", "signal": "SIGTERM", "event": 3, "op": "write"}])
    proc, report = campaign(tmp_path, str(plain), [str(scenario)], 1, ("--schedule", schedule))
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert {row["invariant"] for row in report["violations"] + report["unknowns"]} & {"I6", "I9"}


def test_a_profile_s_limits_are_said_before_the_first_trial_and_in_the_report(tmp_path):
    profile = style_copy(tmp_path, "limited.toml",
                         lambda t: t + '\n[not_applicable]\nI1 = "pretend it has no suspend"\n')
    proc, report = campaign(tmp_path, str(profile), ["noop-baseline", "chat-kill"], 2)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]  # the chat scenario cannot run
    before = proc.stderr.split("fiskj-harness: setup error")[0]
    assert "limit for this subject: I1 not applicable: pretend it has no suspend" in before
    assert "chat-kill: a chat scenario, and this subject cannot run a chat" in before
    assert "I1" not in report["invariants"] and report["campaign"]["not_applicable"] == {
        "I1": "pretend it has no suspend"}
    assert "I1        not applicable to this subject: pretend it has no suspend" in proc.stdout
    assert report["invariants"]["I6"]["valid"] == report["trials"] > 0


def test_a_bad_profile_is_a_usage_error_naming_the_file_line_and_key(tmp_path):
    bad = style_copy(tmp_path, "bad.toml", lambda t: t.replace('"{run_id}", "--config"', '"{runid}", "--config"', 1))
    proc, _ = campaign(tmp_path, str(bad), ["noop-baseline"], 1)
    assert proc.returncode == 2
    line = next(n for n, text in enumerate(bad.read_text().splitlines(), 1) if text.startswith("start ="))
    assert f"{bad}:{line}: key 'commands.start': unknown template variable(s) ['runid']" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_agent_on_the_official_sdk_streams_and_runs_a_campaign_through_its_profile_without_a_wrapper(tmp_path):
    # subjects/sdk-agent: the anthropic SDK (client.messages.stream), its own command line and exits,
    # fiskj as its journal library; judged from outside through subjects/sdk-agent/profile.toml
    pytest.importorskip("anthropic")
    from harness.campaign.campaign import Campaign
    from harness.scenario.parse import parse_scenario
    from harness.subject.profile import load_profile

    scenario = parse_scenario(MID_SUSPEND, str(tmp_path / "mid-suspend.toml"))
    subject = load_profile(ROOT / "subjects" / "sdk-agent" / "profile.toml")
    result = Campaign([scenario], seed=1, subject=subject, keep_histories=True, shrink_budget=0, jobs=1,
                      schedules=[[{"kind": "suspend", "signal": "SIGTERM", "event": 3, "op": "write"}]]).run()
    assert not result.errors and len(result.trials) == 1, result.errors
    for trial in result.trials:
        assert not trial.failed, [(v.invariant, v.summary) for v in trial.verdicts if v.status != "valid"]
        calls = trial.history.model_calls
        assert calls and all(c.stream for c in calls)           # every model call streamed
        assert any(leg.raw_exit_code in (4, 5) for leg in trial.history.legs)  # its own exits, mapped
        assert all(leg.reading is None or leg.reading["error"] is None for leg in trial.history.legs)
    by = {v.invariant: v for t in result.trials for v in t.verdicts if v.evidence.get("checked")}
    assert {"I1", "I9", "I10"} <= set(by)
