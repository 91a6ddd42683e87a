"""Code probes (fiskj/probes.py, harness/report/probes.py): the reference's recovery branches, reported when reached."""

import re
from pathlib import Path

import pytest

from fiskj import probes
from fiskj.errors import ConsistencyError, CorruptJournal, RunLocked, RunNotFound
from fiskj.lock import acquire
from fiskj.paths import lock_path
from fiskj.store import FileStore

from harness.history.readers import read_probes
from harness.report.probes import for_one_trial, merge_probe_sections, probe_lines, probe_section

from builders import M, U

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def probe_file(tmp_path, monkeypatch):
    path = tmp_path / "probes"
    monkeypatch.setenv(probes.ENV, str(path))
    monkeypatch.setenv("FISKJ_HARNESS_LEG", "3")
    return path


def test_every_probe_of_the_catalogue_is_hit_somewhere_in_fiskj_and_every_hit_is_catalogued():
    source = "\n".join(p.read_text() for p in (ROOT / "fiskj").glob("*.py") if p.name != "probes.py")
    literal = set(re.findall(r'probes\.hit\("([a-z_.]+)"', source))
    mapped = set(re.findall(r'"((?:open|create|resume|journal|run)\.[a-z_.]+)"', source))
    store = (ROOT / "fiskj" / "store.py").read_text()
    mapping = store[store.index("def refusal_probe"):store.index("def _never_created")]
    built = {f"open.refused.{n}" for n in re.findall(r'\(\w+, "([a-z_]+)"\)', mapping)}
    used = literal | (mapped & set(probes.PROBES)) | built
    assert used <= set(probes.PROBES), used - set(probes.PROBES)
    assert set(probes.PROBES) <= used, set(probes.PROBES) - used
    with pytest.raises(KeyError):
        probes.hit("no.such.probe")


def test_a_hit_appends_leg_and_name_only_when_the_variable_is_set(tmp_path, monkeypatch, probe_file):
    probes.hit("resume.forced")
    probes.hit("open.torn_tail_cut")
    assert read_probes(probe_file) == [{"leg": 3, "probe": "resume.forced"}, {"leg": 3, "probe": "open.torn_tail_cut"}]
    monkeypatch.delenv(probes.ENV)
    probes.hit("resume.forced")
    assert len(read_probes(probe_file)) == 2
    monkeypatch.setenv(probes.ENV, str(tmp_path / "no" / "such" / "dir" / "probes"))
    probes.hit("resume.forced")  # an unwritable probe file changes nothing the engine does
    assert read_probes(tmp_path / "missing") == []


def _store_with_run(tmp_path, run_id="r1"):
    store = FileStore(tmp_path / "store")
    with store.create(run_id, M(run_id)) as j:
        j.append(U())
    return store


def test_the_store_reaches_the_torn_tail_and_refusal_probes(tmp_path, probe_file):
    store = _store_with_run(tmp_path)
    path = tmp_path / "store" / "r1.json"
    with open(path, "ab") as f:
        f.write(b'{"seq":3,"kind":"us')
    store.open("r1").close()
    held = acquire(lock_path(str(tmp_path / "store"), "r1"), "r1")
    try:
        with pytest.raises(RunLocked):
            store.open("r1")
    finally:
        held.release()
    with pytest.raises(RunNotFound):
        store.open("r2")
    good = path.read_bytes()
    path.write_bytes(good.replace(b'"seq":2', b'"seq":9'))
    with pytest.raises(ConsistencyError):
        store.open("r1")
    first, rest = good.split(b"\n", 1)
    path.write_bytes(first + b"\n" + b"\x00" * 40 + b"\n" + rest)
    with pytest.raises(CorruptJournal):
        store.open("r1")
    reached = [h["probe"] for h in read_probes(probe_file)]
    assert reached == ["open.torn_tail_cut", "open.refused.locked", "open.refused.not_found",
                       "open.refused.consistency", "open.refused.corrupt"], reached


def test_the_section_counts_trials_per_probe_and_names_the_unreached():
    section = probe_section([("a", ["resume.forced", "resume.forced"]), ("b", ["resume.forced"]), ("b", [])],
                            applies=True)
    assert section["reached"] == {"resume.forced": {"trials": 2, "scenarios": ["a", "b"]}}
    assert len(section["unreached"]) == len(probes.PROBES) - 1 and "resume.forced" not in section["unreached"]
    assert section["note"] == f"1 of {len(probes.PROBES)} recovery branches of fiskj reached"
    lines = probe_lines(section)
    assert lines[0].startswith("code probes: 1 of") and "not reached" in lines[1]
    merged = merge_probe_sections([section, probe_section([("c", ["open.torn_tail_cut"])], applies=True), None])
    assert set(merged["reached"]) == {"resume.forced", "open.torn_tail_cut"}
    assert merged["reached"]["resume.forced"]["trials"] == 2
    assert merge_probe_sections([None]) is None


def test_a_replayed_trial_names_the_branches_it_reached_not_the_catalogues_others():
    one = for_one_trial(probe_section([("a", ["resume.forced", "open.torn_tail_cut"])], applies=True))
    assert one["unreached"] == [] and one["note"].endswith("reached 2 recovery branch(es) of fiskj: "
                                                           "open.torn_tail_cut, resume.forced")
    assert probe_lines(one) == [f"code probes: {one['note']}"]      # one line, no catalogue
    off = probe_section([("a", [])], applies=False)
    assert for_one_trial(off) == off and for_one_trial(None) is None


def test_a_subject_without_probes_is_said_not_to_apply_not_reported_as_reaching_nothing():
    section = probe_section([("a", [])], applies=False, subject="node-agent")
    assert section["applies"] is False and section["unreached"] == []
    assert probe_lines(section) == [f"code probes: not applicable ({section['note']})"]
    assert "node-agent" in section["note"]


def test_a_resume_refused_before_the_lock_reaches_its_refusal_probe(tmp_path, probe_file, capsys):
    from fiskj.cli import main
    _store_with_run(tmp_path)
    path = tmp_path / "store" / "r1.json"
    first, rest = path.read_bytes().split(b"\n", 1)
    path.write_bytes(first + b"\n" + b"\x00" * 40 + b"\n" + rest)  # damage inside the journal
    assert main(["run", "--resume", "r1", "--store", str(tmp_path / "store"), "--model", "scripted:1"]) != 0
    assert [h["probe"] for h in read_probes(probe_file)] == ["open.refused.corrupt"]
