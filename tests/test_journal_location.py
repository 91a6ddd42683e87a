"""Where a subject keeps its journal is its profile's to say: the harness finds the journal by the path
template (harness/history/journal_location.py), never by the contract's file name ``{run_id}.json``.

End to end with the Node.js agent writing its journal as ``<id>.jsonl`` (``AGENT_JOURNAL_SUFFIX``): its
journal writes are recognised by every reader of a trace (I4 judges acknowledged records instead of
"unknown: unobserved change", I8 counts the writes, the io-errors family finds the fsyncs to fail, the
timeline draws them), and the same agent through a profile that names the contract's file shows what
the recognition is worth: nothing is counted.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from harness.history.journal_location import CONTRACT_JOURNAL, JournalLocation
from harness.names import JSONL, OPAQUE
from harness.subject.profile import parse_profile

ROOT = Path(__file__).resolve().parent.parent
NODE_DIR = ROOT / "subjects" / "node"


def test_the_contract_journal_is_its_path_under_any_state_home_and_nothing_else():
    loc = JournalLocation()
    assert loc.template == CONTRACT_JOURNAL and loc.decoded and loc.is_contract
    assert loc.is_journal("/tmp/t1/state/fisk-ai/runs/r1.json", "r1")
    assert loc.is_journal("/a//b/fisk-ai/runs/./r1.json", "r1")                # as the kernel would resolve it
    assert loc.is_journal("/a/fisk-ai/x/../runs/r1.json", "r1")
    assert not loc.is_journal("/a/fisk-ai/runs/r1.json/../r2.json", "r1")
    assert not loc.is_journal("/tmp/t1/state/fisk-ai/runs/r1.lock", "r1")
    assert not loc.is_journal("/tmp/t1/state/fisk-ai/runs/r10.json", "r1")
    assert not loc.is_journal("/tmp/t1/state/fisk-ai/runs/r1.json.tmp", "r1")
    assert not loc.is_journal("/tmp/t1/trial/tools.json", "r1")
    assert not loc.is_journal(None, "r1") and not loc.is_journal("", "r1")
    assert loc.path({"state_home": "/s", "run_id": "r1"}) == "/s/fisk-ai/runs/r1.json"
    assert JournalLocation("{trial_dir}/{run_uuid}.jsonl").path({"trial_dir": "/x", "run_uuid": "u"}) == "/x/u.jsonl"


def test_a_profile_s_template_is_matched_with_its_own_directories_and_file_name():
    loc = JournalLocation("{home}/.agent/projects/{model}/{run_id}.jsonl", JSONL)
    assert not loc.decoded and not loc.is_contract
    assert loc.is_journal("/t/home/.agent/projects/claude-x/r1.jsonl", "r1")
    assert not loc.is_journal("/t/home/.agent/projects/claude-x/r1.json", "r1")
    assert not loc.is_journal("/t/state/fisk-ai/runs/r1.json", "r1")
    assert not loc.is_journal("/t/home/.agent/r1.jsonl", "r1")                  # the folders are part of it
    assert not loc.is_journal("/t/home/.agent/projects/a/b/r1.jsonl", "r1")     # {model}: one component
    with pytest.raises(KeyError):
        loc.path({"home": "/h", "run_id": "r1"})                                  # {model} not given


def test_an_opaque_store_is_every_file_below_its_directory_and_need_not_name_the_run(tmp_path):
    loc = JournalLocation("{state_home}/langgraph", OPAQUE)
    assert loc.is_store and not loc.decoded and not JournalLocation().is_store
    for path in ("/t/state/langgraph/checkpoints.db", "/t/state/langgraph/checkpoints.db-wal", "/t/s/langgraph/a/b"):
        assert loc.is_journal(path, "r1") and loc.is_journal(path, "any-other-run")
    for path in ("/t/state/langgraph", "/t/state/langgraphs/c.db", "/t/state/other/c.db", "/t/langgraph.db"):
        assert not loc.is_journal(path, "r1")
    assert JournalLocation("{state_home}/lg/", OPAQUE).is_journal("/t/s/lg/c.db", "r1")
    profile = 'name = "db-agent"\ncommand = ["agent"]\n[commands]\nstart = ["run", "{prompt}"]\n' \
              '[journal]\npath = "{state_home}/langgraph"\nformat = "opaque"\n' \
              '[reading]\ncommand = ["status"]\nstatus = "s"\ntool_results = "t"\nanswer = "a"\n'
    s = parse_profile(profile, str(tmp_path / "p.toml"))
    assert s.caps.journal == JournalLocation("{state_home}/langgraph", OPAQUE)


def _profile(tmp_path: Path, suffix_in_path: str, journal: str = "{run_id}", bug: str = "") -> Path:
    """The Node.js agent writing ``<id>.jsonl`` (with its variant ``bug``), through a profile whose journal path
    ends ``journal`` + ``suffix_in_path``."""
    path = tmp_path / f"node{suffix_in_path}.toml"
    path.write_text(f'''
name = "node-agent-jsonl-name"
command = ["node", "{NODE_DIR}/agent.mjs"]
[env]
NODE_EXTRA_CA_CERTS = false
AGENT_JOURNAL_SUFFIX = ".jsonl"
{f'FISKJ_FOREIGN_BUG = "{bug}"' if bug else ''}
[journal]
path = "{{state_home}}/fisk-ai/runs/{journal}{suffix_in_path}"
''')
    return path


def _run(profile: Path):
    from harness.campaign.campaign import Campaign
    from harness.scenario.parse import load_scenario
    from harness.subject.profile import load_profile

    scenario = load_scenario(ROOT / "scenarios" / "kill-every-event.toml")
    subject = load_profile(profile)
    result = Campaign([scenario], seed=1, subject=subject, keep_histories=True, shrink_budget=0, jobs=1,
                      schedules=[[{"kind": "kill", "event": 4, "when": "after", "op": "write"}]]).run()
    assert not result.errors and len(result.trials) == 1, result.errors
    (trial,) = result.trials
    return trial, {v.invariant: v for v in trial.verdicts}


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed (every machine here has Node.js 20)")
def test_an_agent_whose_journal_is_not_named_run_id_json_has_its_journal_writes_recognised(tmp_path):
    from harness.families.io_error.family import journal_calls
    from harness.report.timeline import timeline

    trial, by = _run(_profile(tmp_path, ".jsonl"))
    history = trial.history
    writes = [ev for leg in history.legs for ev in leg.trace if ev.get("op") == "write"
              and str(ev.get("path", "")).endswith(f"/{history.run_id}.jsonl")]
    assert writes, "the agent wrote no <id>.jsonl journal"
    assert all(history.journal.is_journal(ev["path"], history.run_id) for ev in writes)
    assert not any(JournalLocation().is_journal(ev["path"], history.run_id) for ev in writes)  # not the contract's name
    assert not trial.failed, [(v.invariant, v.summary) for v in trial.verdicts if v.status != "valid"]
    i4, i8 = by["I4"], by["I8"]
    assert i4.status == "valid" and i4.evidence["checked"] > 0, i4.evidence    # not "unknown: unobserved change"
    assert i4.evidence["acknowledged_seqs"]
    assert i8.evidence["journal_changes"] >= len(writes) > 0, i8.evidence      # every journal write counted
    assert journal_calls(history.legs[0].trace, history.run_id, history.journal, "fsync")  # io-errors has points
    drawn = timeline(history, [v.to_json() for v in trial.verdicts])
    assert any(ev["k"] == "write" for lane in drawn["lanes"] for ev in lane["events"])  # the timeline draws them


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed (every machine here has Node.js 20)")
def test_the_same_agent_through_a_profile_naming_the_contract_s_file_has_no_journal_write_counted(tmp_path):
    # the control: the writes are the same; only the profile's journal path says where they go
    trial, by = _run(_profile(tmp_path, ".json"))
    assert by["I8"].evidence["journal_changes"] == 0
    assert by["I4"].evidence["checked"] == 0


def test_a_glob_in_the_file_name_stands_for_a_name_the_agent_chooses(tmp_path):
    from harness.subject.contract import journal_file

    loc = JournalLocation("{state_home}/agent/sessions/*.jsonl", JSONL)
    assert loc.is_glob and loc.is_journal("/t/state/agent/sessions/8f3a-b2.jsonl", "r1")
    assert loc.is_journal("/t/state/agent/sessions/.jsonl", "r1")                  # any name, even none
    assert not loc.is_journal("/t/state/agent/sessions/x/8f3a.jsonl", "r1")       # never a folder
    assert not loc.is_journal("/t/state/agent/sessions/8f3a.json", "r1")
    pattern = tmp_path / "*.jsonl"
    assert journal_file(pattern) == pattern                                       # none made yet: the glob itself
    (tmp_path / "a.jsonl").write_text("1\n")
    (tmp_path / "b.txt").write_text("1\n")
    assert journal_file(pattern) == tmp_path / "a.jsonl"
    assert journal_file(tmp_path / "z.jsonl") == tmp_path / "z.jsonl"            # no glob: the path as it is


@pytest.mark.parametrize(("path", "why"), [("{state_home}/*/x.jsonl", "only in the journal's file name"),
                                           ("{state_home}/x.jsonl", "put {run_id} or {run_uuid} in it, or a *")])
def test_a_glob_journal_path_is_checked_where_it_is_written(path, why):
    from harness.errors import ProfileError
    from harness.subject.profile import parse_profile

    with pytest.raises(ProfileError, match=re.escape(why)):
        parse_profile(f'name = "a"\ncommand = ["agent"]\n[journal]\npath = "{path}"\nformat = "jsonl"\n', "p.toml")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed (every machine here has Node.js 20)")
@pytest.mark.parametrize("bug", ["", "no-fsync"])
def test_an_agent_whose_journal_is_found_by_a_glob_is_judged_by_every_family(tmp_path, bug):
    from harness.campaign.campaign import Campaign
    from harness.scenario.parse import load_scenario
    from harness.subject.profile import load_profile

    profile = _profile(tmp_path, ".jsonl", journal="*", bug=bug)
    scenarios = [load_scenario(ROOT / "scenarios" / f"{name}.toml")
                 for name in ("kill-every-event", "power-loss-basic", "tails-basic", "io-errors")]
    result = Campaign(scenarios, seed=1, subject=load_profile(profile), trials=2, shrink_budget=0, jobs=2).run()
    assert not result.errors, result.errors
    ran = {t.scenario for t in result.trials}
    assert ran == {s.name for s in scenarios}
    failed = {v.invariant for t in result.trials for v in t.verdicts if v.status != "valid"}
    if bug:
        assert "I4" in failed                                    # its unsynced appends are judged on the glob's file
    else:
        assert not failed, [(t.scenario, v.invariant, v.summary) for t in result.trials for v in t.verdicts
                             if v.status != "valid"]
    io = [t for t in result.trials if t.scenario == "io-errors"]
    assert io and all(t.faults.get("io_error") for t in io)     # its own journal's calls were failed
