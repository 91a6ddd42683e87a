"""The durability report card (harness/report/card.py, `fiskj-harness card`): built from real small campaign
reports of the reference, a mutant of it and the reference through a profile that declares an invariant not
applicable and cannot run a chat scenario."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.errors import ResultsError
from harness.report.card import card_pages, check_card_report

MUTANT = f"FISKJ_MUTANT=no-fsync {sys.executable} -m harness.selftest.subject"
PROFILE = """name = "reference-profiled"
about = "the reference through a profile that takes no chat and declares I8 not applicable"
command = ["{python}", "-m", "fiskj"]
chat = false
[not_applicable]
I8 = "pretend it takes no lock"
"""


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Three campaign reports of one trial per scenario: the reference (valid), the no-fsync mutant (I4
    violated) and the profiled reference (I8 and I10 not applicable; chat-kill a setup error, not run)."""
    tmp = tmp_path_factory.mktemp("card")
    (tmp / "profiled.toml").write_text(PROFILE)
    runs = {"reference.json": ([], [], 0), "mutant.json": (["--subject", MUTANT], [], 1),
            "profiled.json": (["--subject", str(tmp / "profiled.toml")], ["chat-kill"], 2)}
    for name, (subject, more, code) in runs.items():
        assert main(["run", "--trials", "1", "--shrink-budget", "0", "--keep", "none", "-q", *subject,
                     "--report-json", str(tmp / name), "noop-baseline", "kill-random", *more]) == code, name
        assert json.loads((tmp / name).read_text())["trials"] >= 2
    return tmp


def _card(folder, *names, out="card/README.md"):
    assert main(["card", *(str(folder / n) for n in names), "--out", str(folder / out)]) == 0
    return (folder / out).read_text(encoding="utf-8")


def _row(card, agent, table="## By invariant"):
    """The cells of ``agent``'s row in the card's ``table``, by column name."""
    lines = card.split(table)[1].strip().splitlines()
    head = [c.strip() for c in lines[0].strip("|").split(" | ")]
    row = next(line for line in lines[2:] if line.startswith(f"| [{agent}]"))
    return dict(zip(head, (c.strip() for c in row.strip().strip("|").split(" | "))))


def test_the_card_shows_a_finding_linked_to_its_reproducer_valid_for_the_reference_and_n_a_with_its_reason(
        reports, capsys):
    card = _card(reports, "reference.json", "mutant.json", "profiled.json")
    ref = _row(card, "fiskj, the reference (python -m fiskj)")
    assert all(ref[i].startswith("✅ ") for i in ("I2", "I4", "I5", "I6", "I8")), ref
    mutant = next(line for line in card.splitlines() if line.startswith("| [") and "harness.selftest.subject" in line)
    name = mutant[3:mutant.index("](")]
    cell = _row(card, name)["I4"]
    assert cell.startswith("❌ [signals](findings/") and _row(card, name)["I2"].startswith("✅"), cell
    page_name, anchor = re.search(r"\]\((findings/[^#)]+)#([^)]+)\)", cell).groups()
    page = (reports / "card" / page_name).read_text(encoding="utf-8")
    headings = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-"): h for h in re.findall(r"^### (.+)$", page, re.M)}
    assert anchor in headings and "I4 append_not_synced" in headings[anchor]  # the link lands on its finding
    section = page.split(f"### {headings[anchor]}")[1].split("\n### ")[0]
    assert "was never fsynced before the agent went on" in section           # its short sentence
    command = re.search(r"```sh\n(.+)\n```", section).group(1)                # and the exact reproducer
    mutant_report = json.loads((reports / "mutant.json").read_text())
    assert command in {g["reproducer"]["reproduce_run"] for g in mutant_report["groups"]}
    assert command.startswith("fiskj-harness run ") and "FISKJ_MUTANT=no-fsync" in command
    profiled = _row(card, "reference-profiled")
    assert profiled["I8"] == "[n/a](findings/reference-profiled.md#not-applicable)"
    assert profiled["I10"].startswith("[n/a]") and profiled["I4"].startswith("✅")
    prof_page = (reports / "card" / "findings" / "reference-profiled.md").read_text(encoding="utf-8")
    assert "- **I8**: pretend it takes no lock" in prof_page.split("## Not applicable")[1]
    assert "`chat-kill` (signals): a chat scenario" in prof_page.split("## Not run")[1]
    family = _row(card, "reference-profiled", "## By fault family")["signals"]
    assert family.startswith("✅ 2 scenario(s) · [1 not run](findings/reference-profiled.md#not-run)"), family
    assert _row(card, name, "## By fault family")["signals"].startswith("❌ [I4](findings/")
    # where each report came from: its file, start, command, harness version
    report = json.loads((reports / "reference.json").read_text())
    line = next(x for x in card.splitlines() if x.startswith(f"| `{reports / 'reference.json'}`"))
    assert report["campaign"]["started"] in line and "fiskj-harness run --trials 1" in line
    assert report["campaign"]["version"] in line


def test_several_reports_of_one_agent_merge_into_one_row(reports, tmp_path):
    one = json.loads((reports / "reference.json").read_text())
    pages = card_pages([("a.json", one), ("b.json", one)])
    card = pages["README.md"]
    assert len([x for x in card.split("## By fault family")[0].splitlines() if x.startswith("| [fiskj")]) == 1
    assert _row(card, "fiskj, the reference (python -m fiskj)")["I4"] == f"✅ {2 * one['invariants']['I4']['checked']}"
    assert "`a.json`" in pages["findings/reference.md"] and "`b.json`" in pages["findings/reference.md"]


def test_an_agent_whose_campaign_ran_no_trial_is_a_row_not_run_with_why(reports):
    report = json.loads((reports / "reference.json").read_text())
    report["campaign"] = dict(report["campaign"], subject="/x/subjects/fisk-ai/profile.toml", subject_name="fisk-ai",
                              subject_ref={"bundled": "fisk-ai/profile.toml"},
                              not_run={"noop-baseline": "the subject did not start: no fisk-ai binary"})
    report.update(trials=0, invariants={}, scenarios={}, violations=[], runs=[], verdict="unknown")
    card = card_pages([("fa.json", report)])["README.md"]
    cells = _row(card, "fisk-ai")
    assert [cells[f"I{n}"] for n in range(1, 12)] == ["[not run](findings/fisk-ai.md#not-run)"] * 11
    assert _row(card, "fisk-ai", "## By fault family")["signals"] == "[not run](findings/fisk-ai.md#not-run)"
    assert "not run: the subject did not start: no fisk-ai binary" in card


def test_the_card_is_rebuilt_byte_for_byte_from_the_same_reports(reports):
    names = ("reference.json", "mutant.json", "profiled.json")
    first = _card(reports, *names, out="one/README.md")
    second = _card(reports, *names, out="two/README.md")
    assert first == second
    for page in (reports / "one" / "findings").iterdir():
        assert page.read_bytes() == (reports / "two" / "findings" / page.name).read_bytes()


def test_a_hand_written_page_beside_the_card_is_linked_from_its_agent(reports):
    (reports / "hand").mkdir()
    (reports / "hand" / "reference.md").write_text("# the reference, explained\n")
    card = _card(reports, "reference.json", out="hand/README.md")
    assert "[findings](findings/reference.md), [explained](reference.md)" in card
    assert "[reference.md](../reference.md)" in (reports / "hand" / "findings" / "reference.md").read_text()
    one = json.loads((reports / "reference.json").read_text())
    one["campaign"] = dict(one["campaign"], subject="/x/subjects/lg/profile.toml", subject_name="lg-agent",
                           subject_ref={"bundled": "lg/profile.toml"})
    card = card_pages([("r.json", one)], {"lg": "lg.md"})["README.md"]  # named after its profile's folder
    assert "[findings](findings/lg-agent.md), [explained](lg.md)" in card


@pytest.mark.parametrize("content, says", [
    ("[1, 2]", "not a campaign report: a JSON list"),
    ('{"format": "other/1"}', "field 'format': not a campaign report: format 'other/1'"),
    ('{"format": "fiskj-harness-report/1", "trials": 1, "invariants": {}, "scenarios": {}}', "field 'campaign'"),
    ("{not json", "the campaign report is not JSON"),
])
def test_a_file_that_is_not_a_campaign_report_exits_2_naming_it_and_the_field(tmp_path, capsys, content, says):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert main(["card", str(bad), "--out", str(tmp_path / "README.md")]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and says in err, err
    assert not (tmp_path / "README.md").exists()
    assert main(["card", str(tmp_path / "none.json"), "--out", str(tmp_path / "README.md")]) == 2
    assert f"{tmp_path / 'none.json'}: no campaign report here" in capsys.readouterr().err
    with pytest.raises(ResultsError):
        check_card_report("x.json", {"format": "fiskj-harness-report/1", "trials": "3", "invariants": {},
                                     "scenarios": {}, "campaign": {}})


def test_the_script_rebuilds_the_card_from_the_reports_it_finds(reports, tmp_path):
    import shutil
    import subprocess

    from harness.report.card import card_pages as pages_of

    shutil.copy(reports / "reference.json", tmp_path / "reference.json")
    env = {**os.environ, "CARD_RESULTS": str(tmp_path), "CARD_OUT": str(tmp_path / "out" / "README.md"),
           "CARD_AGENTS": "reference", "FISKJ_HARNESS": f"{sys.executable} -m harness.cli.main"}
    script = Path(__file__).resolve().parents[1] / "scripts" / "report-card.sh"
    proc = subprocess.run(["sh", str(script), "card"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    expected = pages_of([(str(tmp_path / "reference.json"), json.loads((tmp_path / "reference.json").read_text()))])
    assert (tmp_path / "out" / "README.md").read_text(encoding="utf-8") == expected["README.md"]
    bad = subprocess.run(["sh", str(script), "fast"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown mode 'fast'" in bad.stderr
