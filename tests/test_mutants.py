"""The mutant self-test: every deliberately broken variant of fiskj is caught by the campaign that targets it.

One test per mutant (xdist spreads them); each runs that mutant's target
campaign with the mutant applied in the agent processes only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fiskj import fingerprint, loop, store
from harness.cli.main import main
from harness.families.race.params import RACES
from harness.names import MUTANTS_PACKAGE
from harness.selftest import mutants as registry
from harness.selftest.mutants import MODULES, RACE_MUTANTS, mutants, subject_for, with_preload
from harness.selftest.run import all_mutants, render_table, run_mutant
from harness.selftest.targets import TARGETS, UNIT_TESTED, Target
from harness.subject.contract import parse_subject

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
    names = all_mutants()
    assert len(names) >= 14
    assert set(BUG_CLASSES.values()) <= set(names)
    assert len({defect for defect, _ in names.values()}) == len(names), "two mutants share a bug class"
    assert set(TARGETS) | set(UNIT_TESTED) == set(names), \
        "harness/selftest/targets.py must name a campaign (or the unit tests) for every mutant"
    assert not set(TARGETS) & set(UNIT_TESTED)
    assert set(RACE_MUTANTS) <= {m.name for m in mutants()} and len(RACE_MUTANTS) == 7
    assert len(MODULES) == len(mutants()) == len(names)


def test_every_mutant_is_one_module_of_the_package_and_every_module_is_registered():
    folder = Path(registry.__file__).parent
    files = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")}
    assert files == set(MODULES) and len(set(MODULES)) == len(MODULES)
    for m in mutants():
        assert m.preload == f"{MUTANTS_PACKAGE}.{m.module}" == f"harness.selftest.mutants.{m.module}"
        assert m.module == m.name.replace("-", "_")      # named after the mutant: a name gives its module
        assert f"``{m.name}``" in (folder / f"{m.module}.py").read_text().split("\n", 1)[0]  # its docstring names it
        assert (m.race is not None) == (m.family == "race")


def test_each_race_mutant_names_a_race_and_is_caught_by_that_race_s_scenario():
    for name, m in RACE_MUTANTS.items():
        assert m.race in RACES
        assert TARGETS[name].scenario == f"race-{m.race}"


def test_reading_the_registry_imports_no_mutant_module():
    assert mutants() and registry.get("no-fsync").defect
    assert not [name for name in sys.modules if name.startswith("harness.selftest.mutants.")
                and not name.rpartition(".")[2].startswith("_")]


def test_a_mutant_subject_names_the_mutant_and_its_preload_and_reads_back_from_its_command_line():
    s = subject_for("no-fsync")
    assert s.argv == (sys.executable, "-m", "harness.selftest.subject")
    assert s.extra_env == (("FISKJ_MUTANT", "no-fsync"), ("FISKJ_PRELOAD", "harness.selftest.mutants.no_fsync"))
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


@pytest.mark.parametrize("module", MODULES)
def test_importing_a_mutant_module_by_its_preload_name_patches_fiskj_in_that_process(module):
    env = {"PATH": "/usr/bin:/bin", "FISKJ_PRELOAD": f"harness.selftest.mutants.{module}",
           "PYTHONPATH": str(Path(registry.__file__).parents[3])}
    out = subprocess.run([sys.executable, "-c", _SNAPSHOT], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    loaded, changed = out.stdout.split()
    assert loaded == f"harness.selftest.mutants.{module}" and int(changed) >= 1


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_each_mutant_is_caught_by_the_campaign_that_targets_it(name):
    result = run_mutant(name, budget_s=45.0, jobs=2)
    assert not result.errors, result.errors
    assert result.caught, f"{name} was not caught by {result.scenario} in {result.trials} trial(s)"
    # a bug the uninterrupted run already shows needs no fault to reproduce (noop-baseline's targets)
    faults = 0 if TARGETS[name].scenario == "noop-baseline" else 1
    assert result.invariants and result.first_detection_s is not None and result.shrunk_length >= faults
    assert f"FISKJ_MUTANT={name}" in result.reproduce  # a race too runs the mutant subject's own commands


def test_a_mutant_its_campaign_cannot_catch_is_reported_not_caught_and_the_command_exits_1(monkeypatch, capsys):
    # A model-ignoring resume guard is invisible without fingerprint drift: the no-op scenario cannot see it.
    monkeypatch.setitem(TARGETS, "fingerprint-ignores-model",
                        Target("fingerprint-ignores-model", "noop-baseline", 1, ("I9",), shrink=0))
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
    before = set(sys.modules)
    assert main(["mutants", "--list"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split()[0] == "mutant" and [r.split()[0] for r in rows] == list(all_mutants())
    no_fsync = next(r for r in rows if r.startswith("no-fsync "))
    assert "power-loss-basic (I4)" in no_fsync and "never fsynced" in no_fsync
    ended = next(r for r in rows if r.startswith("ended-leg-not-resumable "))
    assert ended.endswith("is refused instead of resumed")  # the whole defect, not its first line
    assert "tests/test_lock.py (unit tests)" in next(r for r in rows if r.startswith("lockf "))
    assert not [m for m in set(sys.modules) - before if m.startswith(MUTANTS_PACKAGE + ".")]  # (importing one patches fiskj)


def test_mutants_are_applied_in_the_agent_processes_only():
    before = (loop._Run._run_batch, loop._Run.__init__, loop._Run._call_model, fingerprint.diff, loop.diff,
              store._never_created)
    for name in ("resume-reruns-answered", "create-not-reclaimed"):
        assert run_mutant(name, budget_s=0.0, jobs=2).caught
    assert before == (loop._Run._run_batch, loop._Run.__init__, loop._Run._call_model, fingerprint.diff,
                      loop.diff, store._never_created)


def test_no_target_row_is_written_twice_a_duplicate_would_silently_replace_the_first():
    import ast
    import inspect

    from harness.selftest import targets

    tree = ast.parse(inspect.getsource(targets))
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") in ("TARGETS", "FOREIGN_TARGETS"):
            rows = [call.args[0].value for call in ast.walk(node.value)
                    if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "Target"]
            assert len(rows) == len(set(rows)) == len(getattr(targets, node.target.id)), node.target.id
