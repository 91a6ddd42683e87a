"""What a subject can do is decided once (harness/subject/capabilities.py) and read by families, campaign
and report: fiskj-based, forkable, reading, journal location and format, chat, the drift its resume passes."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from harness.campaign.campaign import subject_limits, unsupported
from harness.names import MUTANT_SUBJECT
from harness.scenario.parse import load_scenario
from harness.subject.contract import default_subject, parse_subject
from harness.subject.profile import parse_profile

ROOT = Path(__file__).resolve().parent.parent


def _workload(chat: int = 0, drift: tuple[str, ...] = (), blocks=(), pause: bool = False) -> SimpleNamespace:
    return SimpleNamespace(chat_followups=("more",) * chat, drift=drift, reply_blocks=blocks, pause_turn=pause)


def test_the_reference_and_the_mutant_subject_are_fiskj_based_and_forkable_and_nothing_else_is():
    ref, mutant = default_subject().caps, parse_subject(f"{sys.executable} -m {MUTANT_SUBJECT}").caps
    assert ref.fiskj_based and ref.forkable and ref.reading and ref.decoded and ref.journal.is_contract
    assert mutant.fiskj_based and mutant.forkable
    other = parse_subject("python3 -m myagent").caps
    assert not other.fiskj_based and not other.forkable and not other.reading
    assert not parse_subject("/nowhere/python -m fiskj").caps.forkable      # fiskj, but not this interpreter


def test_the_capabilities_are_computed_once_per_subject_and_again_for_a_changed_one():
    subject = default_subject()
    assert subject.caps is subject.caps                                     # cached on the subject
    assert not replace(subject, status_args=None).caps.reading              # a changed subject: its own
    assert "I10" in dict(replace(subject, status_args=None).caps.not_applicable)


PROFILE = '''
name = "p"
command = ["agent"]
chat = false
home = true
[commands]
start = ["start", "{run_id}", "--model", "{model}", "--", "{prompt}"]
resume = ["resume", "{run_id}", "--model", "{model}"]
[journal]
path = "{home}/.agent/{run_id}.jsonl"
format = "jsonl"
'''


def test_a_profile_s_journal_chat_and_drift_are_its_capabilities():
    subject = parse_profile(PROFILE, "/p/profile.toml")
    caps = subject.caps
    assert not caps.chat and caps.drift == {"model"} and not caps.decoded and not caps.journal.is_contract
    assert caps.journal.is_journal("/t/home/.agent/r1.jsonl", "r1")
    assert caps.refuses(_workload(chat=1)).startswith("a chat scenario, and this subject cannot run a chat")
    assert "a drift of tools" in caps.refuses(_workload(drift=("tools",)))
    assert caps.refuses(_workload(drift=("model",))) is None
    assert any(line.startswith("journal format jsonl (not decoded)") for line in caps.limits())
    assert caps.server_tools and caps.refuses(_workload(pause=True)) is None      # the default: it takes them
    continues = parse_profile(PROFILE + '[promises]\ndrifted_resume = "continues"\n', "/p/profile.toml").caps
    assert caps.drift_refused and not continues.drift_refused
    assert "drifted_resume = \"continues\"" in continues.refuses(_workload(drift=("model",)))
    assert continues.refuses(_workload()) is None                                  # only drift scenarios
    assert subject.time_scale == 1.0 and parse_profile("time_scale = 4\n" + PROFILE, "/p/p.toml").time_scale == 4.0


def test_a_profile_without_server_tools_is_not_given_server_tool_replies():
    caps = parse_profile('name = "p"\ncommand = ["agent"]\nserver_tools = false\n', "/p/profile.toml").caps
    assert not caps.server_tools and caps.refuses(_workload(blocks=(("thinking",),))) is None
    for w in (_workload(pause=True), _workload(blocks=(("thinking",), ("redacted_thinking", "web_search")))):
        assert "never enabled server tools" in caps.refuses(w)
    payload = load_scenario(ROOT / "scenarios" / "payload-variety.toml")
    cc = parse_profile((ROOT / "subjects" / "claude-code" / "profile.toml").read_text(), "/p/profile.toml")
    assert "server_tools = false" in unsupported(cc, payload)


def test_every_family_runs_a_journal_wherever_it_lies_and_the_campaign_says_no_refusal():
    subject = parse_profile('name = "p"\ncommand = ["agent"]\n[journal]\npath = "{state_home}/a/{run_id}.log"\n',
                            "/p/profile.toml")
    scenarios = [load_scenario(ROOT / "scenarios" / f"{n}.toml") for n in ("power-loss-basic", "kill-every-event",
                                                                             "tails-basic")]
    assert all(unsupported(subject, sc) is None for sc in scenarios)
    assert not any("lays out" in line for line in subject_limits(scenarios, subject))
