"""Scenarios as data: TOML files read into a frozen :class:`Scenario`, every key checked.

The keys (types, units, defaults, which family takes which) and the errors are docs/scenarios.md; a
:class:`ScenarioError` names the file, the line (found by scanning the text: :mod:`tomllib` keeps no
positions) and the key.
"""

from __future__ import annotations

import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from harness.errors import ScenarioError
from harness.families.registry import FAMILIES, MODES, by_mode
from harness.names import INVARIANTS
from harness.scenario.fields import Bad, Check, int_, list_of, name, num, range_ms, str_, toml_keys, bool_, choice
from harness.suggest import did_you_mean
from harness.tomlwhere import load_toml, located
from harness.scenario.model import (ANSWER_STOP_REASONS, DRIFT_FIELDS, FINAL_STOPS, LIMIT_OUTPUTS, OUTPUT_KINDS,
                                    REPLY_BLOCKS, UNFINISHED_STOP_REASONS, CheckSpec, FaultSpec, Scenario, TrialSpec,
                                    WorkloadSpec)

__all__ = ["ScenarioError", "Scenario", "SCHEMA", "FAMILY_KEYS", "INVARIANTS", "load_scenario", "parse_scenario",
           "bundled_scenario_dir", "bundled_scenarios", "regression_scenarios"]


def _schedule(v: Any) -> tuple[dict[str, Any], ...]:
    """A list of per-leg fault tables; checked against the family once it is known (see parse_scenario)."""
    if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
        raise Bad(f"expected a list of fault tables like [{{kind = \"kill\", event = 7}}], got {v!r}")
    return tuple(dict(x) for x in v)


def _reply_blocks(v: Any) -> tuple[tuple[str, ...], ...]:
    """A list of lists of :data:`REPLY_BLOCKS` names (``[]`` for a reply without extra blocks), no name twice in
    one list, as a tuple of tuples."""
    if not isinstance(v, list) or not all(isinstance(x, list) for x in v):
        raise Bad(f"expected a list of lists like [[\"thinking\"], [\"redacted_thinking\", \"web_search\"], []], "
                  f"got {v!r}")
    out = tuple(list_of(REPLY_BLOCKS)(entry) for entry in v)
    for i, blocks in enumerate(out):
        if len(set(blocks)) != len(blocks):
            raise Bad(f"entry {i} names a block twice: {v[i]!r}")
    return out


def _answer_stop_reasons(v: Any) -> tuple[str, ...]:
    """A list of :data:`ANSWER_STOP_REASONS`; another stop reason of the API is refused saying why."""
    if isinstance(v, list):
        for item in v:
            if isinstance(item, str) and item in UNFINISHED_STOP_REASONS:
                raise Bad(f"{item!r} cannot end a final answer: {UNFINISHED_STOP_REASONS[item]}")
    return list_of(ANSWER_STOP_REASONS)(v)


def _thinking_mode(v: Any) -> str:
    """A thinking mode the run is started with, as fiskj's ``--thinking`` takes it (``adaptive`` or
    ``enabled:N``, N >= 1024: :func:`fiskj.model.thinking_param`); ``""``: none given."""
    from fiskj.errors import UsageError
    from fiskj.model import thinking_param

    if v == "":
        return v
    try:
        if isinstance(v, str) and thinking_param(v) is not None:
            return v
    except UsageError:
        pass
    raise Bad(f"expected \"adaptive\" or \"enabled:N\" with N >= 1024, got {v!r}")


#: section -> key -> checker; the key is the field's name.  Section "" is the top level.  The ``[faults]``
#: keys other than these are the families' (:data:`FAMILY_KEYS`).
SCHEMA: dict[str, dict[str, Check]] = {
    "": {"name": name, "purpose": str_},
    "workload": {
        "turns": int_(0), "tools_per_turn": int_(1), "tool_ms": range_ms, "model_ms": num(),
        "chat_followups": int_(0), "max_tokens": int_(1), "max_iterations": int_(0), "vary_on_repeat": bool_,
        "seed": int_(), "drift": list_of(DRIFT_FIELDS), "outputs": list_of(OUTPUT_KINDS),
        "limit_outputs": list_of(LIMIT_OUTPUTS), "reply_blocks": _reply_blocks,
        "answer_stop_reasons": _answer_stop_reasons, "pause_turn": bool_, "cache_tokens": int_(0),
        "thinking": _thinking_mode, "final_stop": choice("", *FINAL_STOPS), "generate": int_(0),
    },
    "faults": {"family": choice(*MODES), "schedule": _schedule},
    "trials": {"count": int_(1), "seed": int_(), "timeout_s": num(0.0, strict=True), "max_legs": int_(0)},
    "check": {"invariants": list_of(INVARIANTS, nonempty=True), "resume_after_completed": bool_},
}

#: ``[faults]`` keys of each family (by family name): key -> checker, from the fields of its ``Params``.
FAMILY_KEYS: dict[str, dict[str, Check]] = {f.name: toml_keys(f.Params) for f in FAMILIES}

_SECTIONS = ("workload", "faults", "trials", "check")


def _key_owner(key: str) -> Any:
    """The family whose ``Params`` has ``key``, or ``None``."""
    return next((f for f in FAMILIES if key in FAMILY_KEYS[f.name]), None)


def _modes_of(family: Any, key: str) -> tuple[str, ...]:
    """The ``[faults] family`` values with which ``key`` of ``family`` may be given."""
    meta = next(f.metadata for f in fields(family.Params) if f.name == key)
    return tuple(meta.get("modes", family.modes))


def parse_scenario(text: str, path: str | None = None) -> Scenario:
    """Parse scenario TOML ``text`` (``path`` is used in errors only) into a :class:`Scenario`.  Raises
    :class:`ScenarioError` naming the file, line and key on a syntax error, an unknown table or key, a value of
    the wrong type or range, a key of another family, a broken family rule, or a missing ``name``/``purpose``."""
    where = path or "<scenario>"
    doc = load_toml(text, where, ScenarioError)

    def fail(section: str, key: str | None, message: str) -> ScenarioError:
        return located(ScenarioError, text, where, section, key, message)

    def checked(section: str, key: str, check: Check, value: Any) -> Any:
        try:
            return check(value)
        except Bad as bad:
            raise fail(section, key, str(bad)) from None

    top: dict[str, Any] = {}
    given: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {name: {} for name in _SECTIONS}
    for key, value in doc.items():
        if key in SCHEMA[""]:
            top[key] = checked("", key, SCHEMA[""][key], value)
            continue
        if key not in _SECTIONS:
            known = sorted(list(SCHEMA[""]) + [f"[{s}]" for s in _SECTIONS])
            raise fail("", key, f"unknown key{did_you_mean(key, known)} (known: {', '.join(known)})")
        if not isinstance(value, dict):
            raise fail("", key, f"expected a table [{key}], got {type(value).__name__}")
        schema = SCHEMA[key]
        for sub, subval in value.items():
            owner = _key_owner(sub) if key == "faults" and sub not in schema else None
            if owner is not None:
                given[sub] = checked(key, sub, FAMILY_KEYS[owner.name][sub], subval)
            elif sub in schema:
                sections[key][sub] = checked(key, sub, schema[sub], subval)
            else:
                known = sorted(schema) + (sorted({k for keys in FAMILY_KEYS.values() for k in keys} - set(schema))
                                          if key == "faults" else [])  # a key two families take, named once
                raise fail(key, sub, f"unknown key in [{key}]{did_you_mean(sub, known)} (known: {', '.join(known)})")
    for required in ("name", "purpose"):
        if required not in top:
            raise ScenarioError(f"missing required key {required!r}", path=where, line=None, key=required)

    mode = sections["faults"].get("family", FaultSpec.family)
    family = by_mode(mode)
    for sub in given:
        modes = _modes_of(_key_owner(sub), sub)
        if mode not in modes:
            raise fail("faults", sub, f"{sub} is only used with family = {' or '.join(repr(m) for m in modes)}, "
                                      f"not {mode!r}")
    params = family.Params(**given)
    faults = FaultSpec(family=mode, schedule=sections["faults"].get("schedule"), params=params,
                       given=tuple(given.items()))
    if faults.schedule is not None:
        check_schedule = getattr(family, "check_schedule", None)
        if check_schedule is not None:
            try:
                faults = replace(faults, schedule=tuple(check_schedule(list(faults.schedule))))
            except ValueError as exc:
                raise fail("faults", "schedule", str(exc)) from None
        elif not faults.schedule:
            raise fail("faults", "schedule", f"family {mode!r} needs a non-empty schedule (or none)")
    workload = WorkloadSpec(**sections["workload"])
    if workload.final_stop and workload.chat_followups:
        raise fail("workload", "final_stop", "final_stop ends the run with error at its last reply: a chat run "
                                             "(chat_followups) would never read its follow-ups")
    if workload.drift and not family.resumes:
        raise fail("workload", "drift", f"drift needs resumed legs (families "
                                        f"{', '.join(m for f in FAMILIES if f.resumes for m in f.modes)}), "
                                        f"not {mode!r}")
    scenario = Scenario(top["name"], top["purpose"], workload, faults, TrialSpec(**sections["trials"]),
                        CheckSpec(**sections["check"]), path=path, raw=doc)
    broken = family.check(scenario)
    if broken is not None:
        raise fail("faults", broken[0], broken[1])
    return scenario


def load_scenario(path: str | Path) -> Scenario:
    """Read and parse the scenario file ``path``; :class:`ScenarioError` as :func:`parse_scenario` raises it, or
    when the file cannot be read or is not UTF-8."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario: {exc.strerror or exc}", path=str(p)) from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"not UTF-8 at byte {exc.start}", path=str(p)) from None
    return parse_scenario(text, str(p))


def bundled_scenario_dir() -> Path:
    """Return the bundled ``scenarios/`` directory: the repository's (next to the ``harness`` package) in a checkout
    or an editable install, else ``<prefix>/share/fiskj/scenarios`` where a regular install puts them.  Raises
    :class:`ScenarioError` when neither exists."""
    d = Path(__file__).resolve().parents[2] / "scenarios"
    for candidate in (d, Path(sys.prefix) / "share" / "fiskj" / "scenarios"):
        if candidate.is_dir():
            return candidate
    raise ScenarioError("the bundled scenarios directory is missing; pass scenario files explicitly", path=str(d))


def bundled_scenarios() -> list[Path]:
    """Return every ``scenarios/*.toml`` of the repository, sorted by name (not the subdirectories)."""
    return sorted(bundled_scenario_dir().glob("*.toml"))


def regression_scenarios() -> list[Path]:
    """Return every ``scenarios/regressions/*.toml`` (one scenario per bug the suite found: ``run
    --save-regression``), sorted by name (empty when there is none)."""
    d = bundled_scenario_dir() / "regressions"
    return sorted(d.glob("*.toml")) if d.is_dir() else []
