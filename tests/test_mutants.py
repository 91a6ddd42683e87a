"""The mutant self-test: every deliberately broken variant of fiskj is caught by the campaign that targets it.

One test per mutant (xdist spreads them); each runs that mutant's target
campaign with the mutant applied in the agent processes only.
"""

from __future__ import annotations

import functools
import inspect
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.families.race.params import RACES
from harness.names import MUTANT_PRELOAD
from harness.scenario.parse import bundled_scenario_dir
from harness.selftest import mutants as registry
from harness.selftest import patches
from harness.selftest.mutants import MUTANTS, UNIT, get, mutants, race_mutants, subject_for, with_preload
from harness.selftest.run import render_table, run_mutant
from harness.subject.contract import parse_subject

NAMES = [m.name for m in MUTANTS]
RACE_MUTANTS = race_mutants()
#: The techniques the patches are grouped by: one module of harness/selftest/patches/ each.
TECHNIQUES = ("fingerprint", "tails", "lock", "loop", "store", "reader")

#: The bug classes of issue 7 item 4, each with the mutant that reintroduces it.
BUG_CLASSES = {
    "no fsync": "no-fsync",
    "fsync before write": "fsync-before-write",
    "no directory fsync on first append": "no-dir-fsync",
    "new store directory not made durable": "store-dir-not-durable",
    "torn tail not cut before appending": "torn-tail-not-cut",
    "fold before lock": "fold-before-lock",
    "create without O_EXCL": "create-no-excl",
    "tool result journaled before the tool runs": "result-before-tool",
    "assistant record journaled after its tools": "assistant-after-tools",
    "suspend honoured mid-batch": "suspend-mid-batch",
    "resume re-runs answered tools": "resume-reruns-answered",
    "reader tolerates interior corruption": "reader-tolerates-corruption",
    "reader drops a complete final record": "reader-drops-final-record",
    "counters kept in memory instead of folded": "counters-in-memory",
    "a fingerprint field ignored": "fingerprint-ignores-model",
    "lock released before the last append": "release-before-last-append",
}


def test_there_are_at_least_14_mutants_one_per_bug_class_and_each_has_a_target():
    assert len(NAMES) >= 14
    assert set(BUG_CLASSES.values()) <= set(NAMES)
    assert len({m.defect for m in MUTANTS}) == len(NAMES), "two mutants share a bug class"
    for m in MUTANTS:  # every row names a bundled scenario that must catch it and what should, or its unit tests
        if m.family == UNIT:
            assert (Path(__file__).parents[1] / m.scenario).is_file() and not m.expect, m
            continue
        assert (Path(bundled_scenario_dir()) / f"{m.scenario}.toml").is_file(), m
        assert m.trials >= 1 and m.expect and m.defect and m.family, m
    assert set(RACE_MUTANTS) <= set(NAMES) and len(RACE_MUTANTS) == 7
    assert len(set(NAMES)) == len(MUTANTS) == len(mutants())


def _function(patch):
    """The plain function behind a row's patch (a ``functools.partial`` gives its arguments)."""
    return patch.func if isinstance(patch, functools.partial) else patch


def test_every_mutant_is_one_row_whose_patch_is_a_plain_function_of_a_technique_module_and_every_patch_is_used():
    used = set()
    for m in MUTANTS:
        fn = _function(m.patch)
        assert inspect.isfunction(fn) and fn.__module__ in {f"harness.selftest.patches.{t}" for t in TECHNIQUES}, m
        assert fn.__doc__, f"{fn.__module__}.{fn.__name__} says what it changes"
        used.add((fn.__module__, fn.__name__))
        assert (m.race is not None) == (m.family == "race")
    folder = Path(patches.__file__).parent
    assert {p.stem for p in folder.glob("*.py") if p.stem != "__init__"} == set(TECHNIQUES)
    for technique in TECHNIQUES:
        module = sys.modules[f"harness.selftest.patches.{technique}"]
        assert {(module.__name__, name) for name in module.__all__} <= used, f"a patch of {technique} no row uses"


def test_each_race_mutant_names_a_race_and_is_caught_by_that_race_s_scenario():
    for name, m in RACE_MUTANTS.items():
        assert m.race in RACES
        assert get(name).scenario == f"race-{m.race}"


def test_reading_the_table_changes_nothing_in_fiskj_and_a_name_twice_is_refused():
    assert mutants() and registry.get("no-fsync").defect
    script = _SNAPSHOT.replace("from harness.subject.preload import load_preload\nprint(load_preload())",
                               "import harness.selftest.mutants, harness.selftest.run\nprint('imported')")
    out = subprocess.run([sys.executable, "-c", script], env=_child_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["imported", "0"]      # importing the table and its patches patches nothing
    with pytest.raises(ValueError, match="'no-fsync' has two rows"):
        registry._check((get("no-fsync"), get("lockf"), get("no-fsync")))


def test_a_mutant_subject_names_the_mutant_and_its_preload_and_reads_back_from_its_command_line():
    s = subject_for("no-fsync")
    assert s.argv == (sys.executable, "-m", "harness.selftest.subject")
    assert s.extra_env == (("FISKJ_MUTANT", "no-fsync"), ("FISKJ_PRELOAD", "harness.selftest.mutants"))
    assert parse_subject(s.command_line()) == s
    with pytest.raises(KeyError, match="unknown mutant 'nope'; known: no-fsync, "):
        subject_for("nope")


def test_a_mutant_named_alone_gets_its_preload_from_the_subject_or_the_inherited_environment():
    named = parse_subject(f"FISKJ_MUTANT=lockf {sys.executable} -m harness.selftest.subject")
    assert with_preload(named, {}) == subject_for("lockf")
    bare = parse_subject([sys.executable, "-m", "harness.selftest.subject"])
    assert with_preload(bare, {"FISKJ_MUTANT": "lockf"}) == subject_for("lockf")
    assert with_preload(bare, {}) == bare                                   # no mutant: plain fiskj
    assert with_preload(subject_for("no-fsync"), {"FISKJ_MUTANT": "lockf"}) == subject_for("no-fsync")
    other = parse_subject("FISKJ_MUTANT=whatever python3 -m myagent")         # another agent's variables are its own
    assert with_preload(other, {}) == other
    with pytest.raises(KeyError):
        with_preload(parse_subject(f"FISKJ_MUTANT=nope {sys.executable} -m harness.selftest.subject"), {})


_SNAPSHOT = """
import sys, types, fiskj, pkgutil, importlib
mods = [importlib.import_module(f"fiskj.{i.name}") for i in pkgutil.iter_modules(fiskj.__path__) if i.name != "__main__"]
def snap():
    out = {}
    for mod in mods:
        for k, v in vars(mod).items():
            out[(mod.__name__, k)] = id(v)
            if isinstance(v, type):
                out.update({(mod.__name__, k, a): id(b) for a, b in vars(v).items()})
            elif isinstance(v, dict):
                out.update({(mod.__name__, k, a): id(b) for a, b in list(v.items()) if isinstance(a, str)})
    return out
before = snap()
from harness.subject.preload import load_preload
print(load_preload())
after = snap()
print(len([k for k in after if after[k] != before.get(k)]))
"""


def _child_env(**extra: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(registry.__file__).parents[2]), **extra}


#: _SNAPSHOT for every mutant named on the command line, each in a process of its own forked from one that
#: imported fiskj and the table once (importing the table patches nothing: the test above): per mutant, a JSON
#: line [name, what load_preload() loaded with FISKJ_MUTANT=name, how many fiskj names it changed].
_SNAPSHOT_EACH = _SNAPSHOT.split("before = snap()")[0] + """
import json, os
import harness.selftest.mutants
from harness.subject.preload import load_preload
before = snap()
for name in sys.argv[1:]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.environ["FISKJ_MUTANT"] = name
            loaded = load_preload()
            after = snap()
            row = [name, loaded, len([k for k in after if after[k] != before.get(k)])]
        except BaseException as exc:
            row = [name, f"{type(exc).__name__}: {exc}", -1]
        os.write(w, json.dumps(row).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        print(f.read().decode())
    os.waitpid(pid, 0)
"""


@pytest.fixture(scope="module")
def preloaded() -> dict[str, list]:
    """Each mutant's [loaded, changed] from one run of _SNAPSHOT_EACH (one interpreter, not one per mutant)."""
    env = _child_env(FISKJ_PRELOAD=MUTANT_PRELOAD)
    out = subprocess.run([sys.executable, "-c", _SNAPSHOT_EACH, *NAMES], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return {row[0]: row[1:] for row in map(json.loads, out.stdout.splitlines())}


@pytest.mark.parametrize("name", NAMES)
def test_the_preload_applies_the_mutant_named_in_the_environment_and_patches_fiskj_in_that_process(name, preloaded):
    loaded, changed = preloaded[name]
    assert loaded == "harness.selftest.mutants" and changed >= 1, (loaded, changed)


def _fiskj_names() -> dict[tuple, int]:
    """Every name of every fiskj module (and of its classes and tables), by the id of what it holds: what a
    mutant's patch would change if it were applied in this process (_SNAPSHOT's snap())."""
    snapshot: dict = {}
    exec(_SNAPSHOT.split("before = snap()")[0], snapshot)
    return snapshot["snap"]()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(m.name for m in MUTANTS if m.family not in (UNIT, "race")))
def test_each_mutant_is_caught_by_the_campaign_that_targets_it_applied_in_the_agent_processes_only(name):
    # caught is all this asks: the campaign stops at its first violating trial and shrinks nothing (a shrink
    # runs after the catch; the self-test's shrinking is the mutants command's test below and the shrinker's own).
    # One trial at a time: a trial in flight beside the catching one is spent for nothing.  The race family's
    # mutants are caught by their race, each of its invariants asserted, in test_races.py
    # (test_each_broken_variant_is_caught_by_its_race): the same mutant, scenario and subject.
    before = _fiskj_names()
    result = run_mutant(replace(get(name), shrink=0), budget_s=45.0, jobs=1)
    assert _fiskj_names() == before  # the mutant was applied in the agent processes only, never in this one
    assert not result.errors, result.errors
    assert result.caught, f"{name} was not caught by {result.scenario} in {result.trials} trial(s)"
    # a bug the uninterrupted run already shows needs no fault to reproduce (noop-baseline's targets, and a
    # cut-off reply's tool run in every run of max-tokens-kill)
    faults = 0 if get(name).scenario == "noop-baseline" or name == "cut-off-turn-run" else 1
    assert result.invariants and result.first_detection_s is not None and result.shrunk_length >= faults
    assert f"FISKJ_MUTANT={name}" in result.reproduce  # a race too runs the mutant subject's own commands


def test_a_mutant_its_campaign_cannot_catch_is_reported_not_caught_and_the_command_exits_1(monkeypatch, capsys):
    # A model-ignoring resume guard is invisible without fingerprint drift: the no-op scenario cannot see it.
    monkeypatch.setattr(registry, "MUTANTS", tuple(
        replace(m, scenario="noop-baseline", trials=1, expect=("I9",), shrink=0)
        if m.name == "fingerprint-ignores-model" else m for m in MUTANTS))
    result = run_mutant("fingerprint-ignores-model", budget_s=0.0, jobs=2)
    assert not result.caught and result.trials == 1 and result.first_detection_s is None
    table = render_table([result])
    assert "fingerprint-ignores-model" in table and " NO " in table and "NOT caught: fingerprint-ignores-model" in table
    assert main(["mutants", "fingerprint-ignores-model", "--budget", "0.01", "-q"]) == 1
    assert "NOT caught" in capsys.readouterr().out


def test_the_mutants_command_prints_json_with_caught_invariant_detection_time_and_shrunk_length(capsys):
    assert main(["mutants", "fingerprint-ignores-model", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (row,) = data["mutants"]
    assert data["caught"] == data["total"] == 1
    assert row["caught"] is True and row["invariants"] == ["I9"] and row["scenario"] == "drift-refused"
    assert row["first_detection_s"] > 0 and row["shrunk_length"] == 1
    assert main(["mutants", "no-such-mutant"]) == 2


def test_the_mutants_command_lists_every_mutant_with_its_target_and_what_it_breaks_without_running_one(capsys):
    before = _fiskj_names()
    assert main(["mutants", "--list"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split()[0] == "mutant" and [r.split()[0] for r in rows] == NAMES
    no_fsync = next(r for r in rows if r.startswith("no-fsync "))
    assert "power-loss-basic (I4)" in no_fsync and "never fsynced" in no_fsync
    ended = next(r for r in rows if r.startswith("ended-leg-not-resumable "))
    assert ended.endswith("is refused instead of resumed")  # the whole defect, not its first line
    assert _fiskj_names() == before                        # nothing applied: listing calls no patch
    assert "tests/test_lock.py (unit tests)" in next(r for r in rows if r.startswith("lockf "))


def test_no_target_row_is_written_twice_a_duplicate_would_silently_replace_the_first():
    import ast

    from harness.selftest import targets

    tree = ast.parse(inspect.getsource(targets))
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") in ("FOREIGN_TARGETS", "JSONL_TARGETS",
                                                                                 "OPAQUE_TARGETS"):
            rows = [call.args[0].value for call in ast.walk(node.value)
                    if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "Target"]
            assert len(rows) == len(set(rows)) == len(getattr(targets, node.target.id)), node.target.id


def test_a_misspelt_mutant_name_is_refused_with_the_closest_one():
    with pytest.raises(KeyError, match="did you mean 'no-fsync'"):
        get("no-fsyn")
    assert main(["mutants", "no-fsyn", "--list"]) == 2
