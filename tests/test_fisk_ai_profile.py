"""subjects/fisk-ai/profile.toml: fisk-ai's real command line, as of fisk-ai 22033e0 (what the repository takes
from fisk-ai's command-line notes is stated in the profile's comments and schemas/fisk-ai-config.schema.json).

No fisk-ai binary runs here (it cannot be built: Go 1.19), so what can be checked without it is: the profile
loads and drives fisk-ai's documented commands; the configuration its [files] writes, filled by the harness's
own templating for every bundled scenario (drifted resumes too), is valid against fisk-ai's documented schema
decoded as strictly as fisk-ai decodes it (schemas/fisk-ai-config.schema.json); the old profile's keys are not;
no tool drift is expected of it; and its stand-in fisk application (subjects/fisk-ai/fakeapp) gives the
workload's tools and records each call's effect in the harness's ledger, called as fisk-ai calls a tool.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")
yaml = pytest.importorskip("yaml")

from harness.campaign.campaign import Campaign  # noqa: E402
from harness.runner.trial import drifted_config  # noqa: E402
from harness.scenario.parse import load_scenario  # noqa: E402
from harness.subject.contract import RunConfig  # noqa: E402
from harness.subject.profile import load_profile  # noqa: E402
from harness.workload.build import build_workload  # noqa: E402
from harness.workload.tools import INPUT_SCHEMA, TOOL_NAMES  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "subjects" / "fisk-ai" / "profile.toml"
FAKEAPP = ROOT / "subjects" / "fisk-ai" / "fakeapp"
LEDGER_TOOL = ROOT / "harness" / "workload" / "ledger_tool.py"
VALIDATOR = jsonschema.Draft202012Validator(json.loads((ROOT / "schemas" / "fisk-ai-config.schema.json").read_text()))
#: The configuration the profile wrote before this rewrite (its keys at the top level, a tools file).
OLD = {"model": "m", "tools_file": "/t/tools.json", "max_tokens": 1000, "max_iterations": 10, "base_url": "http://x"}


def rendered(tmp_path: Path, cfg: RunConfig) -> dict:
    """The configuration file the profile writes before a leg of ``cfg`` in a trial laid in ``tmp_path``, parsed."""
    subject = load_profile(PROFILE)
    (path,) = subject.write_files(cfg, **subject.trial_where(tmp_path))
    assert path.name == "fisk-ai.yaml"
    return yaml.safe_load(path.read_text())


def errors(doc: dict) -> list[str]:
    return sorted(f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(doc))


def test_the_profile_loads_and_drives_fisk_ai_s_documented_commands(monkeypatch):
    monkeypatch.setenv("FISK_AI_BIN", "/opt/fisk-ai")
    s = load_profile(PROFILE)
    cfg = RunConfig(run_id="r1", model="m", base_url="http://x", tools_file="/t/tools.json", max_tokens=9,
                    max_iterations=3, prompt="do it")
    where = {"state_home": "/s", "trial_dir": "/t"}
    assert s.start_argv(cfg, **where) == ["/opt/fisk-ai", "run", "--config", "/t/fisk-ai.yaml", "--no-tui",
                                          "--checkpoint", "--name", "r1", "--state-dir", "/s/fisk-ai/runs", "do it"]
    assert s.resume_argv(cfg, force=True, **where)[1:] == [
        "run", "--config", "/t/fisk-ai.yaml", "--no-tui", "--resume", "r1", "--force", "--state-dir", "/s/fisk-ai/runs"]
    assert s.status_argv(cfg, **where)[1:] == ["session", "--state-dir", "/s/fisk-ai/runs", "show", "r1"]
    assert s.journal_path(cfg, **where) == Path("/s/fisk-ai/runs/r1.json") and s.journal_format == "fisk-ai-v2"
    assert dict(s.exits) == {"completed": (0,), "suspended": (0,), "error": (1,), "refused": (1,)}
    assert s.reading_format == "text" and s.home and not s.chat and not s.server_tools
    env = s.env(base={"ANTHROPIC_MODEL": "x", "VERBOSE": "1", "PATH": "/bin"}, base_url="u", api_key="k",
                state_home="/s", ledger="/l", leg=0, trace=None, home="/h")
    assert env["NO_COLOR"] == "1" and "ANTHROPIC_MODEL" not in env and "VERBOSE" not in env and env["HOME"] == "/h"
    assert "{tools_file}" not in repr(s)   # fisk-ai has no tools file


@pytest.mark.parametrize("scenario", sorted(p.stem for p in (ROOT / "scenarios").glob("*.toml")))
def test_the_configuration_it_writes_is_valid_for_fisk_ai_for_every_bundled_scenario_and_its_drift(tmp_path, scenario):
    sc = load_scenario(ROOT / "scenarios" / f"{scenario}.toml")
    wl = build_workload(sc, scenario)
    cfg = RunConfig(run_id="r1", model=wl.model, base_url="http://x", tools_file="/t/tools.json",
                    max_tokens=wl.max_tokens, max_iterations=wl.max_iterations, prompt=wl.prompt)
    drifted = drifted_config(cfg, ("model", "max_tokens", "max_iterations", "system"), "/t/tools-drifted.json",
                             str(tmp_path / "system-drifted.txt"))
    run, resumed = rendered(tmp_path, cfg), rendered(tmp_path, drifted)
    assert errors(run) == [] and errors(resumed) == []
    assert run["application_path"] == str(FAKEAPP) and run["harness"] == {"no_tui": True}
    assert run["llm"]["budget"] == {"max_tokens": wl.max_tokens, "max_iterations": wl.max_iterations,
                                    "call_timeout": "20s"}
    # each drift changes a field of fisk-ai's fingerprint (model, system_hash, max_tokens, max_iterations)
    assert resumed["llm"]["model"] == run["llm"]["model"] + "-drifted"
    assert resumed["system_prompt"] != run["system_prompt"]
    assert [resumed["llm"]["budget"][k] - run["llm"]["budget"][k] for k in ("max_tokens", "max_iterations")] == [1, 1]


def test_the_old_profile_s_keys_and_every_other_mistake_fisk_ai_refuses_fail_the_schema(tmp_path):
    assert any("'application_path' is a required property" in e for e in errors(OLD))
    assert any("Additional properties" in e and "tools_file" in e for e in errors(OLD))
    good = rendered(tmp_path, RunConfig(run_id="r1", model="m", base_url="u", tools_file="t", max_tokens=0,
                                        max_iterations=0, prompt="p"))
    assert errors(good) == []      # 0: the default
    for path, value, message in (
            (("llm", "budget", "max_tokens_total"), 5, "Additional properties"),     # unknown at depth 3
            (("harness", "tui"), True, "Additional properties"),
            (("tools_file",), "/t", "Additional properties"),
            (("llm", "budget", "max_iterations"), -1, "less than the minimum"),
            (("llm", "budget", "call_timeout"), "-5s", "does not match"),
            (("identity",), "fisk.ai", "does not match"),
            (("llm", "model"), None, "'model' is a required property"),
            (("application_path",), None, "'application_path' is a required property"),
            (("system_prompt",), None, "is not valid under any of the given schemas")):
        doc = json.loads(json.dumps(good))
        *parents, key = path
        node = doc
        for p in parents:
            node = node[p]
        if value is None:
            del node[key]
        else:
            node[key] = value
        assert any(message in e for e in errors(doc)), (path, errors(doc))


def test_no_tool_drift_is_expected_of_it_so_drift_tools_is_not_run_and_said_before_the_first_trial():
    s = load_profile(PROFILE)
    assert s.caps.drift == {"model", "max_tokens", "max_iterations", "system"}
    drift_tools = load_scenario(ROOT / "scenarios" / "drift-tools.toml")
    assert "a drift of tools" in s.caps.refuses(drift_tools.workload)
    result = Campaign([drift_tools], subject=s, skip_unsupported=True).run()   # the bundled set
    assert result.errors == [] and result.trials == []
    assert any("drift-tools: NOT RUN for this subject" in line for line in result.limits)
    assert s.caps.refuses(load_scenario(ROOT / "scenarios" / "drift-system.toml").workload) is None


def fisk_argv(tool_input: dict) -> list[str]:
    """fisk's rendering of a tool input as flags (fisk ArgsFromJSON: ``--name=value``, a map flag once per entry
    sorted by key, a true boolean ``--name``), as fisk-ai runs a leaf command: ``APP <path> <flags>``."""
    out = []
    for name, value in tool_input.items():
        items = sorted(value.items()) if isinstance(value, dict) else [(None, value)]
        out += [f"--{name}=" + (f"{k}={v}" if k is not None else str(v)) for k, v in items]
    return out


def test_the_fake_fisk_app_gives_the_workload_s_tools_and_records_each_call_in_the_harness_s_ledger(tmp_path):
    model = json.loads(subprocess.run([str(FAKEAPP), "--fisk-introspect"], capture_output=True, check=True).stdout)
    leaves = [c for c in model["commands"] if not c.get("commands")]
    assert [c["name"] for c in leaves] == list(TOOL_NAMES)
    for leaf in leaves:
        schema = leaf["restricted_schema"]
        assert set(INPUT_SCHEMA["properties"]) <= set(schema["properties"]) == {f["name"] for f in leaf["flags"]}
        assert schema["required"] == ["tool_use_id"] and schema["additionalProperties"] is False
    ledger = tmp_path / "ledger.jsonl"
    env = {"PATH": os.environ["PATH"], "FISKJ_LEDGER": str(ledger), "FISKJ_HARNESS_LEG": "2", "LLMFORMAT": "1"}
    for k, tool_input in enumerate(({"tool_use_id": "toolu_1_0_0", "n": 3, "sleep_ms": 1},
                                    {"tool_use_id": "toolu_1_0_1", "n": 0, "out": {"text": "a=b ✓"}},
                                    {"tool_use_id": "toolu_1_0_2", "n": 1,
                                     "out": {"count": 3, "fill": "ab", "tail": "Z"}},
                                    {"tool_use_id": "toolu_1_0_3", "n": 2, "out": {"error": "boom"}})):
        tool = TOOL_NAMES[k % 3]
        proc = subprocess.run([str(FAKEAPP), tool, *fisk_argv(tool_input)], capture_output=True, env=env,
                              stdin=subprocess.DEVNULL, cwd=tmp_path)
        # the ledger tool's own answer to the input as JSON: the same stdout, stderr and exit status
        direct = subprocess.run([sys.executable, "-I", "-S", str(LEDGER_TOOL), tool], capture_output=True,
                                input=json.dumps(tool_input).encode(), env={**env, "FISKJ_LEDGER": str(tmp_path / "d")})
        assert (proc.returncode, proc.stdout, proc.stderr) == (direct.returncode, direct.stdout, direct.stderr)
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [(e["tool_use_id"], e["tool"], e["leg"], e["attempt"]) for e in lines] == [
        (f"toolu_1_0_{k}", TOOL_NAMES[k % 3], 2, 1) for k in range(4)]
    bad = subprocess.run([str(FAKEAPP), "effect_a", "--tool_use_id=x", "--bogus=1"], capture_output=True, env=env)
    assert bad.returncode == 2 and b"unknown argument '--bogus=1'" in bad.stderr
    assert len(ledger.read_text().splitlines()) == 4   # refused before any effect
