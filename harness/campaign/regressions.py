"""Regression scenarios: one scenario file per bug the suite found, written from its shrunk reproducer
(``run --save-regression DIR``; docs/scenarios.md "Regression scenarios").
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import MISSING, asdict, fields, is_dataclass
from pathlib import Path
from typing import Any

from harness.report.reproduce import schedule_key
from harness.scenario.model import FaultSpec, Scenario, TrialSpec
from harness.scenario.parse import load_scenario

__all__ = ["pick_regressions", "regression_text", "save_regressions", "toml_value"]

#: How often a regression scenario repeats its schedule: timed faults land a little differently each time.
REPEAT_TIMED = 3


def toml_value(value: Any) -> str:
    """``value`` as a TOML value (str, int, float, bool, list, dict as an inline table).

    Raises ``TypeError`` for anything else (``None`` has no TOML form).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"TOML cannot hold {value!r} here")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items() if v is not None) + "}"
    raise TypeError(f"no TOML form for {type(value).__name__} {value!r}")


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _size(schedule: list[dict[str, Any]]) -> tuple[int, str]:
    return (sum(1 for f in schedule if f.get("kind", "none") != "none"), schedule_key(schedule))


def pick_regressions(trials: list[Any]) -> list[Any]:
    """The trials to save of ``trials`` (TrialResults): per (scenario, violated invariants) the failing one with
    the fewest faults, then the shrink result, then the earliest; in campaign order."""
    groups: dict[tuple[str, str | None, tuple[str, ...]], list[Any]] = {}
    for t in trials:
        if t.failed:
            groups.setdefault((t.scenario, t.scenario_path, tuple(sorted(t.failed))), []).append(t)
    chosen = [min(members, key=lambda t: (_size(t.schedule)[0], t.origin != "shrink", _size(t.schedule)[1], t.index))
              for members in groups.values()]
    return sorted(chosen, key=lambda t: t.index)


def _violation_lines(trial: Any) -> list[str]:
    return [f"{v.invariant} {v.name}: {' '.join(str(v.summary).split())[:300]}" for v in trial.verdicts
            if v.status == "invalid" and v.invariant in trial.failed]


def _family_keys(faults: FaultSpec) -> list[tuple[str, Any]]:
    """The family's ``[faults]`` keys to write: those the source file gave, else (a scenario built in code)
    its parameters that differ from their defaults."""
    if faults.given:
        return list(faults.given)
    params = faults.params
    if params is None or not is_dataclass(params):
        return []
    out = []
    for f in fields(params):
        value = getattr(params, f.name)
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else MISSING)
        if value is not None and value != default:
            out.append((f.name, value))
    return out


def regression_text(scenario: Scenario, trial: Any, name: str) -> str:
    """The TOML text of the regression scenario ``name`` for failing ``trial`` of ``scenario``."""
    failed = sorted(trial.failed)
    timed = any("after_ms" in f for f in trial.schedule if isinstance(f, dict))
    count = REPEAT_TIMED if timed else 1
    violated = _violation_lines(trial)
    purpose = f"Regression ({', '.join(failed)}) from {scenario.name}: {violated[0] if violated else ', '.join(failed)}"
    lines = ["# A regression scenario written by `fiskj-harness run --save-regression` from a shrunk reproducer.",
             f"# Source scenario: {scenario.path or scenario.name} (trial {trial.index}, origin {trial.origin}"
             + (f", shrunk from trial {trial.shrunk_from}" if trial.shrunk_from is not None else "") + ")",
             "# Violated:"]
    lines += [f"#   {line}" for line in violated]
    if trial.reproduce:
        lines.append(f"# Reproduced by: {trial.reproduce}")
    lines += ["", f"name = {toml_value(name)}", f"purpose = {toml_value(' '.join(purpose.split())[:400])}", "",
              "[workload]"]
    workload = asdict(scenario.workload)
    for key, value in workload.items():
        if key == "tool_ms":
            value = list(value) if value[0] != value[1] else value[0]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if key == "drift" and not value:
            continue
        lines.append(f"{key} = {toml_value(value)}")
    faults = scenario.faults
    lines += ["", "[faults]", f"family = {toml_value(faults.family)}"]
    lines += [f"{key} = {toml_value(value)}" for key, value in _family_keys(faults)]
    lines.append(f"schedule = {toml_value(list(trial.schedule))}")
    lines += ["", "[trials]", f"count = {count}", f"seed = {int(trial.seed)}"]
    if scenario.trials.timeout_s != TrialSpec().timeout_s:
        lines.append(f"timeout_s = {toml_value(scenario.trials.timeout_s)}")
    if scenario.trials.max_legs:
        lines.append(f"max_legs = {scenario.trials.max_legs}")
    lines += ["", "[check]", f"invariants = {toml_value(list(scenario.check.invariants))}", ""]
    return "\n".join(lines)


def save_regressions(result: Any, directory: str | Path) -> list[Path]:
    """Write one regression scenario per picked violation of campaign ``result`` (a CampaignResult) into
    ``directory``, each checked by loading it back; returns the paths (a file of that name that exists is
    kept as it is, and returned too)."""
    out_dir = Path(directory)
    by_name = {(r.scenario.name, r.scenario.path): r.scenario for r in result.scenarios}
    written = []
    picked = pick_regressions(result.trials)
    if picked:
        out_dir.mkdir(parents=True, exist_ok=True)
    for trial in picked:
        scenario = by_name.get((trial.scenario, trial.scenario_path))
        if scenario is None:
            continue
        digest = hashlib.sha256(schedule_key(trial.schedule).encode()).hexdigest()[:8]
        base = re.sub(r"[^A-Za-z0-9_.-]", "-", scenario.name).removeprefix("regression-")
        name = f"regression-{base}-{'-'.join(i.lower() for i in sorted(trial.failed))}-{digest}"
        path = out_dir / f"{name}.toml"
        if not path.exists():
            text = regression_text(scenario, trial, name)
            tmp = path.with_suffix(".toml.tmp")
            tmp.write_text(text, encoding="utf-8")
            load_scenario(tmp)  # never leave a file that does not load
            tmp.replace(path)
        written.append(path)
    return written
