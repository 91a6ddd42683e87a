"""The example CI workflow fails when it should: its own commands, run the way GitHub runs them.

.github/workflows/durability-gate.yml is read with PyYAML (the ``test`` extra;
booleans as YAML 1.2 has them, so ``on`` is a key: :func:`load_yaml`), each ``run``
step becomes a script run by its shell as GitHub runs it (``shell: bash`` is
``bash --noprofile --norc -eo pipefail {0}``; no shell at all is ``bash -e
{0}``, where a failing command before ``| tee`` goes unnoticed), with the
workflow's ``${{ }}`` expressions and environment, in a workspace of its own.

* the gate step, with a broken subject (a mutant whose resume guard ignores
  the model) on a one-trial scenario, exits 1 and its report is invalid;
* the merge step, given only shard 0 of 2 (the other job died before its
  upload), exits 2 and names the missing shard;
* the mutants step fails when the self-test fails, and passes when it passes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from drift_text import BROKEN, drift_scenario

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "durability-gate.yml"

#: How GitHub Actions runs a ``run`` step on Linux, by its shell (docs: "jobs.<job_id>.steps[*].shell").
SHELLS = {"bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail"], None: ["bash", "-e"]}

#: One deterministic violation for the broken subject: a kill, then a resume with another model, which a
#: correct agent refuses and the mutant fingerprint-ignores-model accepts (I9).
DRIFT = drift_scenario("ci-drift")



# --- reading the workflow as GitHub does --------------------------------------------------------------


class WorkflowLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2's booleans (only ``true`` and ``false``), as GitHub reads a workflow:
    the ``on`` key stays the string ``"on"`` (YAML 1.1 would make it ``True``)."""


WorkflowLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
WorkflowLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|false)$"), list("tf"))


def load_yaml(text: str) -> Any:
    """``text`` loaded as a workflow (:class:`WorkflowLoader`); raises ``yaml.YAMLError`` naming the line."""
    return yaml.load(text, Loader=WorkflowLoader)


# --- running a step as GitHub does ---------------------------------------------------------------


def _expression(expr: str, context: dict[str, Any]) -> str:
    """The ``${{ }}`` expressions the workflow uses: ``a.b.c``, ``X || 'literal'``."""
    value: Any = None
    for alt in (a.strip() for a in expr.split("||")):
        if alt.startswith("'") and alt.endswith("'"):
            value = alt[1:-1]
        else:
            node: Any = context
            for part in alt.split("."):
                if isinstance(node, dict) and part in node:
                    node = node[part]
                elif alt.startswith("github.event.inputs."):
                    node = None  # an input not given (a push): null, as in GitHub
                    break
                else:
                    raise KeyError(f"unknown expression ${{{{ {expr} }}}} (part {alt!r})")
            value = node
        if value not in (None, ""):
            break
    return "" if value is None else str(value)


def expand(text: str, context: dict[str, Any]) -> str:
    """``text`` with every ``${{ expr }}`` replaced as GitHub would (for the expressions the workflow uses)."""
    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", lambda m: _expression(m.group(1), context), text)


def shell_of(workflow: dict[str, Any], job: dict[str, Any], step: dict[str, Any]) -> str | None:
    """A run step's shell: its own, else its job's ``defaults.run.shell``, else the workflow's, else none."""
    for where in (step, (job.get("defaults") or {}).get("run") or {},
                  (workflow.get("defaults") or {}).get("run") or {}):
        if where.get("shell"):
            return where["shell"]
    return None


def run_steps(workflow: dict[str, Any], name: str, workspace: Path, *, env: dict[str, str],
              matrix: dict[str, Any] | None = None, artifacts: Path | None = None) -> list[subprocess.CompletedProcess]:
    """Run job ``name``'s steps in ``workspace`` as a runner would, up to the first that fails (as a job stops):
    ``run`` steps by their shell (``pip install`` skipped: this interpreter has the package), ``uses`` steps
    skipped but ``actions/download-artifact``, which copies ``artifacts``'s files to its ``path``."""
    job = workflow["jobs"][name]
    github = {"event": {"inputs": {}}}
    base_env = {k: expand(str(v), {"github": github, "env": {}}) for k, v in (workflow.get("env") or {}).items()}
    full_env = {**base_env, **{k: str(v) for k, v in (job.get("env") or {}).items()}, **env}
    context = {"github": github, "env": full_env, "matrix": matrix or {}}
    done = []
    for step in job["steps"]:
        if "uses" in step:
            if step["uses"].startswith("actions/download-artifact") and artifacts is not None:
                dest = workspace / step["with"]["path"]
                dest.mkdir(parents=True, exist_ok=True)
                for f in artifacts.iterdir():
                    shutil.copy(f, dest / f.name)
            continue
        script = expand(step["run"], context)
        if script.strip().startswith("pip install"):
            continue
        path = workspace / f".step-{len(done)}.sh"
        path.write_text(script, encoding="utf-8")
        argv = SHELLS[shell_of(workflow, job, step)] + [str(path)]
        proc = subprocess.run(argv, cwd=workspace, env={**os.environ, **full_env}, capture_output=True, text=True,
                              timeout=180)
        done.append(proc)
        if proc.returncode != 0:
            break
    return done


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    return load_yaml(WORKFLOW.read_text(encoding="utf-8"))


def _shim(bin_dir: Path, body: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "fiskj-harness"
    exe.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    exe.chmod(0o755)


@pytest.fixture
def harness_on_path(tmp_path) -> dict[str, str]:
    """``fiskj-harness`` on PATH as this checkout's (an editable install's script may point at another one)."""
    bin_dir = tmp_path / "bin"
    _shim(bin_dir, f'exec "{sys.executable}" -m harness.cli.main "$@"\n')
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": os.pathsep.join([str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH")
                                                         else [])),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "step-summary.md")}


# --- the loader ----------------------------------------------------------------------------------


def test_the_loader_reads_a_workflow_as_github_does():
    doc = load_yaml("""\
# a comment
on:
  push:
  workflow_dispatch:
    inputs:
      budget:
        default: "240"   # trailing comment
env:
  A: ${{ x || '1' }}
jobs:
  j:
    strategy:
      matrix:
        shard: [0, 1]
    steps:
      - uses: a/b@v1
        with:
          k: v
      - name: two lines
        run: |
          echo one
          echo "two # not a comment"
      - run: >
          folded
          line
      - run: plain
""")
    assert doc["on"] == {"push": None, "workflow_dispatch": {"inputs": {"budget": {"default": "240"}}}}
    assert doc["env"] == {"A": "${{ x || '1' }}"}
    steps = doc["jobs"]["j"]["steps"]
    assert doc["jobs"]["j"]["strategy"]["matrix"]["shard"] == [0, 1]
    assert steps[0] == {"uses": "a/b@v1", "with": {"k": "v"}}
    assert steps[1]["run"] == 'echo one\necho "two # not a comment"\n'
    assert steps[2]["run"] == "folded line\n" and steps[3]["run"] == "plain"
    assert load_yaml("a: yes\nb: on\nc: true\n") == {"a": "yes", "b": "on", "c": True}  # YAML 1.2 booleans
    with pytest.raises(yaml.YAMLError) as bad:
        load_yaml("a: 1\n  b: 2\n")
    assert bad.value.problem_mark.line + 1 == 2  # the line it names


# --- the workflow --------------------------------------------------------------------------------


def test_every_run_step_runs_under_bash_with_pipefail(workflow):
    runs = [(name, step) for name, job in workflow["jobs"].items() for step in job["steps"] if "run" in step]
    assert {name for name, _ in runs} == {"tests", "gate", "merge", "mutants", "claude-code"}
    for name, step in runs:
        assert shell_of(workflow, workflow["jobs"][name], step) == "bash", (name, step)
    # the shard matrix and SHARDS agree (merge refuses an incomplete set)
    assert workflow["jobs"]["gate"]["strategy"]["matrix"]["shard"] == list(range(int(workflow["env"]["SHARDS"])))


def test_a_pipe_into_tee_hides_a_failure_without_pipefail_and_not_with_it(tmp_path):
    """What the shell choice means: the failure the old mutants step could not see."""
    script = tmp_path / "s.sh"
    script.write_text("false | tee out.txt\n", encoding="utf-8")
    assert subprocess.run(SHELLS[None] + [str(script)], cwd=tmp_path).returncode == 0
    assert subprocess.run(SHELLS["bash"] + [str(script)], cwd=tmp_path).returncode == 1


def test_the_gate_step_fails_on_a_violation_and_the_merge_step_on_a_missing_shard(workflow, tmp_path,
                                                                                  harness_on_path):
    scenario = tmp_path / "ci-drift.toml"
    scenario.write_text(DRIFT, encoding="utf-8")
    env = {**harness_on_path, "SUBJECT": BROKEN, "SCENARIOS": str(scenario), "BUDGET": "30",
           "FISKJ_HARNESS_RESULTS": str(tmp_path / "results")}
    gate_ws = tmp_path / "gate-0"
    gate_ws.mkdir()
    (step,) = run_steps(workflow, "gate", gate_ws, env=env, matrix={"shard": 0})
    assert step.returncode == 1, step.stderr[-3000:]
    report = json.loads((gate_ws / "gate-0.json").read_text(encoding="utf-8"))
    assert report["verdict"] == "invalid" and report["gate"]["shard"] == "0/2"
    assert [v["invariant"] for v in report["violations"]] == ["I9"]
    assert "I9" in (gate_ws / "gate-0.md").read_text(encoding="utf-8")

    # the merge job gets only shard 0's files: shard 1's job died before its upload
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    for f in gate_ws.glob("gate-0.*"):
        shutil.copy(f, artifacts / f.name)
    merge_ws = tmp_path / "merge"
    merge_ws.mkdir()
    (step,) = run_steps(workflow, "merge", merge_ws, env=env, artifacts=artifacts)
    assert step.returncode == 2, step.stderr[-3000:]
    assert "shard(s) 1/2 missing" in step.stderr


@pytest.mark.parametrize("code", [1, 0])
def test_the_mutants_step_fails_exactly_when_the_self_test_fails(workflow, tmp_path, code):
    bin_dir = tmp_path / "bin"
    _shim(bin_dir, f'echo "NOT caught: no-fsync"\nexit {code}\n')
    summary = tmp_path / "summary.md"
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "GITHUB_STEP_SUMMARY": str(summary)}
    (step,) = run_steps(workflow, "mutants", tmp_path, env=env)
    assert step.returncode == code
    assert "NOT caught: no-fsync" in step.stdout and "NOT caught: no-fsync" in summary.read_text(encoding="utf-8")


@pytest.mark.parametrize("code, fails", [(0, False), (1, False), (2, True)])
def test_the_claude_code_step_fails_on_a_setup_error_not_on_its_findings(workflow, tmp_path, code, fails):
    bin_dir = tmp_path / "bin"
    _shim(bin_dir, f'mkdir -p cc-results/c/latest && echo "I4 append_not_synced" > cc-results/c/latest/summary.md\n'
                   f'exit {code}\n')
    summary = tmp_path / "summary.md"
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "GITHUB_STEP_SUMMARY": str(summary)}
    install, campaign = run_steps(workflow, "claude-code", tmp_path, env=env)  # (no install script here: skipped)
    assert install.returncode == 0 and "campaign is skipped" in install.stdout
    assert (campaign.returncode != 0) == fails and "I4 append_not_synced" in summary.read_text(encoding="utf-8")
