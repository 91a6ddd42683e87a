"""Scenarios as data: TOML files that name a workload, its faults, its trials and its checks.

A scenario is read with :func:`load_scenario` into a frozen :class:`Scenario`.
Every key is checked against :data:`SCHEMA`; an unknown key, a value of the
wrong type or out of range, or a TOML syntax error raises
:class:`ScenarioError`, which names the file, the line and the key (the line
is found by scanning the text, since :mod:`tomllib` does not keep positions).

Shape (every key but ``name`` and ``purpose`` is optional; defaults below)::

    name = "kill-random"                 # str, required, [A-Za-z0-9_.-]+
    purpose = "one line"                 # str, required

    [workload]
    turns = 3              # int >= 0: tool-calling turns before the final answer
    tools_per_turn = 2     # int >= 1: max tool_use blocks per turn (1..k drawn per turn)
    tool_ms = 5            # number >= 0 or [min, max]: how long each tool sleeps (ms)
    model_ms = 0           # number >= 0: how long the fake model server takes per reply (ms)
    chat_followups = 0     # int >= 0: follow-up lines fed to a --chat run
    max_tokens = 1000000   # int >= 1: the run's token budget (--max-tokens)
    max_iterations = 0     # int >= 0: --max-iterations; 0 = enough for the script + 5
    vary_on_repeat = false # bool: a repeated model request gets a different reply
    seed = 1               # int: seed of the scripted conversation (tool counts, ids)
    drift = []             # fingerprint fields changed on resume: "model", "max_tokens",
                           # "max_iterations", "tools"; a drifted resume must be refused
                           # (I9), the next one is forced (--force) and must proceed

    [faults]
    family = "kill"        # "none" | "kill" | "suspend" | "chain" (others: see FAMILIES)
    kill_points = "random" # "random" (timed SIGKILL) | "events" (IO-seam event k) | "both"
    signals = ["SIGINT", "SIGTERM"]   # suspend signals to draw from
    legs = 1               # int >= 1: max faulted legs per trial
    chain = []             # per-leg fault kinds for family "chain": "kill", "kill-event",
                           # "suspend", "none" (e.g. ["suspend", "kill-event"])
    max_events = 0         # int >= 0: cap on exhaustive crash points (0 = trials.count)
    schedule = [...]       # one explicit schedule run by every trial, e.g.
                           # [{kind = "kill", event = 7}] (regression scenarios)
    races = [...]          # family "race": which races (default: from the name, else all)
    # family "power_loss" and "tail" parameters: see FAMILY_KEYS

    [trials]
    count = 20             # int >= 1: trials per campaign (``--trials`` overrides)
    seed = 1               # int: default campaign seed for this scenario (``--seed`` overrides)
    timeout_s = 60         # number > 0: wall-clock budget of one trial (seconds)
    max_legs = 0           # int >= 0: leg budget; 0 = faulted legs + 3

    [check]
    invariants = ["I1", ...]  # ids of docs/spec.md that must hold (default: all)

The full, normative key reference is docs/scenarios.md.
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, TypeVar

from fiskj.errors import FiskjError

__all__ = [
    "ScenarioError",
    "WorkloadSpec",
    "FaultSpec",
    "TrialSpec",
    "CheckSpec",
    "Scenario",
    "SCHEMA",
    "FAMILIES",
    "INVARIANTS",
    "load_scenario",
    "parse_scenario",
    "bundled_scenario_dir",
    "bundled_scenarios",
    "regression_scenario_dir",
    "regression_scenarios",
    "FAMILY_KEYS",
    "family_params",
    "DRIFT_FIELDS",
    "RACE_NAMES",
]

#: Invariant ids of docs/spec.md (docs/architecture.md "Invariants").
INVARIANTS = ("I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8", "I9")

#: Fault families a scenario may name.  This runner executes ``none``,
#: ``kill``, ``suspend`` and ``chain``; ``tail``, ``power_loss`` and ``race``
#: belong to the nemeses of issue 6.
FAMILIES = ("none", "kill", "suspend", "chain", "tail", "power_loss", "race")

#: Per-leg fault kinds of a ``chain``.
CHAIN_KINDS = ("none", "kill", "kill-event", "suspend")

_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


class ScenarioError(FiskjError, ValueError):
    """A scenario file cannot be used.

    Attributes: ``path`` (str, the file), ``line`` (int 1-based or ``None``
    when unknown), ``key`` (dotted key such as ``"workload.turns"`` or
    ``None``).  ``str(error)`` reads ``FILE:LINE: key 'K': message``.
    Survives pickling (inherited from :class:`fiskj.errors.FiskjError`).
    """

    key: str | None = None

    def __str__(self) -> str:
        where = str(self.path) if self.path is not None else "<scenario>"
        if self.line is not None:
            where += f":{self.line}"
        if self.key is not None:
            return f"{where}: key {self.key!r}: {self.message}"
        return f"{where}: {self.message}"


# --- typed sections ----------------------------------------------------------


@dataclass(frozen=True)
class WorkloadSpec:
    """What the agent does (the ``[workload]`` table).  Times in milliseconds."""

    turns: int = 3
    tools_per_turn: int = 2
    tool_ms: tuple[float, float] = (0.0, 0.0)
    model_ms: float = 0.0
    chat_followups: int = 0
    max_tokens: int = 1_000_000
    max_iterations: int = 0
    vary_on_repeat: bool = False
    seed: int = 1
    drift: tuple[str, ...] = ()


@dataclass(frozen=True)
class FaultSpec:
    """Which faults the nemesis injects (the ``[faults]`` table)."""

    family: str = "none"
    kill_points: str = "random"
    signals: tuple[str, ...] = ("SIGINT", "SIGTERM")
    legs: int = 1
    chain: tuple[str, ...] = ()
    max_events: int = 0
    schedule: tuple[dict[str, Any], ...] | None = None
    races: tuple[str, ...] = ()
    params: tuple[tuple[str, Any], ...] = ()

    def param(self, key: str, default: Any = None) -> Any:
        """The value of a family parameter (a key of :data:`FAMILY_KEYS`) given in the file, else ``default``."""
        return dict(self.params).get(key, default)


@dataclass(frozen=True)
class TrialSpec:
    """How many trials, their seed and their budgets (the ``[trials]`` table)."""

    count: int = 20
    seed: int = 1
    timeout_s: float = 60.0
    max_legs: int = 0


@dataclass(frozen=True)
class CheckSpec:
    """Which invariants must hold (the ``[check]`` table)."""

    invariants: tuple[str, ...] = INVARIANTS


@dataclass(frozen=True)
class Scenario:
    """One scenario file, parsed and checked.

    ``path`` is the file it came from (``None`` when parsed from text);
    ``raw`` the TOML document as parsed.
    """

    name: str
    purpose: str
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    faults: FaultSpec = field(default_factory=FaultSpec)
    trials: TrialSpec = field(default_factory=TrialSpec)
    check: CheckSpec = field(default_factory=CheckSpec)
    path: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def with_path(self, path: str | None) -> "Scenario":
        """Return a copy with ``path`` set."""
        return replace(self, path=path)


# --- schema ------------------------------------------------------------------

# A checker takes the raw value and returns the converted value, or raises
# _Bad(message).


class _Bad(Exception):
    pass


def _int(lo: int | None = None) -> Callable[[Any], int]:
    def check(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise _Bad(f"expected an integer, got {type(v).__name__} {v!r}")
        if lo is not None and v < lo:
            raise _Bad(f"must be >= {lo}, got {v}")
        return v

    return check


def _num(lo: float = 0.0, strict: bool = False) -> Callable[[Any], float]:
    def check(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _Bad(f"expected a number, got {type(v).__name__} {v!r}")
        if v < lo or (strict and v == lo):
            raise _Bad(f"must be {'>' if strict else '>='} {lo}, got {v}")
        return float(v)

    return check


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise _Bad(f"expected true or false, got {type(v).__name__} {v!r}")
    return v


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise _Bad(f"expected a string, got {type(v).__name__} {v!r}")
    return v


def _name(v: Any) -> str:
    v = _str(v)
    if not _NAME_RE.match(v):
        raise _Bad(f"must be 1 or more of [A-Za-z0-9_.-], got {v!r}")
    return v


def _choice(*options: str) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        v = _str(v)
        if v not in options:
            raise _Bad(f"must be one of {', '.join(repr(o) for o in options)}, got {v!r}")
        return v

    return check


def _list_of(options: tuple[str, ...], *, nonempty: bool = False) -> Callable[[Any], tuple[str, ...]]:
    def check(v: Any) -> tuple[str, ...]:
        if not isinstance(v, list):
            raise _Bad(f"expected a list of strings, got {type(v).__name__} {v!r}")
        if nonempty and not v:
            raise _Bad("must not be empty")
        out = []
        for item in v:
            if not isinstance(item, str) or item not in options:
                raise _Bad(f"items must be among {', '.join(options)}, got {item!r}")
            out.append(item)
        return tuple(out)

    return check


def _range_ms(v: Any) -> tuple[float, float]:
    if isinstance(v, list):
        if len(v) != 2:
            raise _Bad(f"expected a number or [min, max], got a list of {len(v)}")
        lo, hi = (_num()(x) for x in v)
        if hi < lo:
            raise _Bad(f"[min, max] with max < min: {v!r}")
        return (lo, hi)
    x = _num()(v)
    return (x, x)


#: Fingerprint fields a scenario may change on resume (``[workload] drift``).
DRIFT_FIELDS = ("model", "max_tokens", "max_iterations", "tools")

#: The races of the ``race`` family (:data:`harness.families.race.RACES`; a test keeps the two equal).
RACE_NAMES = ("two-writers", "two-resumers", "two-creates", "holder-killed", "readers-during-appends",
              "lock-survives-other-fds")


def _schedule(v: Any) -> tuple[dict[str, Any], ...]:
    """A list of per-leg fault tables; checked against the family once it is known (see parse_scenario)."""
    if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
        raise _Bad(f"expected a list of fault tables like [{{kind = \"kill\", event = 7}}], got {v!r}")
    return tuple(dict(x) for x in v)


#: section -> key -> (field name, checker).  Section "" is the top level.
SCHEMA: dict[str, dict[str, tuple[str, Callable[[Any], Any]]]] = {
    "": {"name": ("name", _name), "purpose": ("purpose", _str)},
    "workload": {
        "turns": ("turns", _int(0)),
        "tools_per_turn": ("tools_per_turn", _int(1)),
        "tool_ms": ("tool_ms", _range_ms),
        "model_ms": ("model_ms", _num()),
        "chat_followups": ("chat_followups", _int(0)),
        "max_tokens": ("max_tokens", _int(1)),
        "max_iterations": ("max_iterations", _int(0)),
        "vary_on_repeat": ("vary_on_repeat", _bool),
        "seed": ("seed", _int()),
        "drift": ("drift", _list_of(DRIFT_FIELDS)),
    },
    "faults": {
        "family": ("family", _choice(*FAMILIES)),
        "kill_points": ("kill_points", _choice("random", "events", "both")),
        "signals": ("signals", _list_of(("SIGINT", "SIGTERM"), nonempty=True)),
        "legs": ("legs", _int(1)),
        "chain": ("chain", _list_of(CHAIN_KINDS)),
        "max_events": ("max_events", _int(0)),
        "schedule": ("schedule", _schedule),
        "races": ("races", _list_of(RACE_NAMES, nonempty=True)),
    },
    "trials": {
        "count": ("count", _int(1)),
        "seed": ("seed", _int()),
        "timeout_s": ("timeout_s", _num(0.0, strict=True)),
        "max_legs": ("max_legs", _int(0)),
    },
    "check": {"invariants": ("invariants", _list_of(INVARIANTS, nonempty=True))},
}

#: ``[faults]`` keys that belong to one family: family -> key -> checker.  Read by that family's
#: executor from ``Scenario.raw`` (``harness.families.power_loss.executor.params_from``, ``harness.families.tail.executor.params_from``)
#: and kept in ``FaultSpec.params``; naming one with another family is an error.
FAMILY_KEYS: dict[str, dict[str, Callable[[Any], Any]]] = {
    "power_loss": {
        "max_states": _int(0),
        "sector_bytes": _int(1),
        "exhaustive_units": _int(0),
        "samples": _int(0),
        "zero_fill": _bool,
        "stop_on_violation": _bool,
    },
    "tail": {
        "cut_every_offset_of_last_record": _bool,
        "random_cuts": _int(0),
        "zero_tail_bytes": _int(0),
        "garbage_tails": _int(0),
        "flips": _int(0),
        "mid_run": _bool,
        "resume_checks": _int(0),
    },
}

_P = TypeVar("_P")


def family_params(cls: type[_P], scenario: Scenario, defaults: dict[str, Any], overrides: dict[str, Any]) -> _P:
    """The parameters ``cls`` (a dataclass) of a family's executor for ``scenario``.

    ``defaults`` (taken from the scenario's other tables), then the
    ``[faults]`` keys named as the fields of ``cls``, then the non-None
    ``overrides``, each over the one before; absent fields keep ``cls``'s
    defaults.  The one reading of :data:`FAMILY_KEYS` shared by
    ``harness.families.power_loss.executor.params_from`` and ``harness.families.tail.executor.params_from``.
    """
    raw = dict(scenario.raw.get("faults", {})) if scenario.raw else {}
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    values = dict(defaults)
    values.update({k: v for k, v in raw.items() if k in known})
    values.update({k: v for k, v in overrides.items() if v is not None})
    return cls(**values)


#: ``[faults]`` keys used by one family only (the others' are in :data:`FAMILY_KEYS`).
_FAMILY_ONLY = {"races": "race", "chain": "chain"}

_SECTION_TYPES = {"workload": WorkloadSpec, "faults": FaultSpec, "trials": TrialSpec, "check": CheckSpec}


# --- line finding ------------------------------------------------------------

_HEADER_RE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")


def _bare(key: str) -> str:
    key = key.strip()
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "\"'":
        return key[1:-1]
    return key


def find_line(text: str, section: str, key: str | None) -> int | None:
    """Return the 1-based line of ``key`` in table ``section`` of TOML ``text``.

    ``section`` is ``""`` for the top level.  With ``key`` ``None`` the
    table's header line is returned (or its first dotted key).  Dotted keys
    (``workload.turns = 3`` at the top level) and a table header naming the
    key (``[nemesis]`` for section ``""``, key ``"nemesis"``) are found too.
    Returns ``None`` when nothing matches.
    """
    wanted = ".".join(p for p in (section, key) if p)
    current = ""
    for number, line in enumerate(text.splitlines(), start=1):
        m = _HEADER_RE.match(line)
        if m:
            current = ".".join(_bare(p) for p in m.group(1).split("."))
            if current == wanted or (key is None and current == section):
                return number
            continue
        if "=" not in line or line.lstrip().startswith("#"):
            continue
        lhs = line.split("=", 1)[0]
        full = ".".join(([current] if current else []) + [_bare(p) for p in lhs.split(".")])
        if full == wanted or (key is None and full.startswith(wanted + ".")):
            return number
    return None


_ASSIGN_RE = re.compile(r"^\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*=")


def key_at(text: str, line: int) -> str | None:
    """The dotted key written on 1-based ``line`` of TOML ``text`` (``"faults.family"``), if it holds one.

    Used to name the key of a TOML syntax error (a bad value after ``key =``).
    The table is the last ``[header]`` above the line.  ``None`` when the
    line holds no ``key =``.
    """
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return None
    m = _ASSIGN_RE.match(lines[line - 1])
    if not m:
        return None
    table = ""
    for above in reversed(lines[:line - 1]):
        h = _HEADER_RE.match(above)
        if h:
            table = ".".join(_bare(p) for p in h.group(1).split("."))
            break
    key = ".".join(_bare(p) for p in m.group(1).split("."))
    return f"{table}.{key}" if table else key


# --- parsing -----------------------------------------------------------------


def parse_scenario(text: str, path: str | None = None) -> Scenario:
    """Parse scenario TOML ``text`` (``path`` is used in errors only).

    Returns a :class:`Scenario`.  Raises :class:`ScenarioError` naming the
    file, line and key on a syntax error, an unknown table or key, a value
    of the wrong type or range, or a missing ``name``/``purpose``.
    """
    where = path or "<scenario>"
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        line = int(m.group(1)) if m else None
        raise ScenarioError(f"TOML syntax error: {exc}", path=where, line=line,
                            key=key_at(text, line) if line else None) from None

    def fail(section: str, key: str | None, message: str) -> ScenarioError:
        dotted = ".".join(p for p in (section, key) if p) or None
        return ScenarioError(message, path=where, line=find_line(text, section, key), key=dotted)

    top: dict[str, Any] = {}
    params: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {name: {} for name in _SECTION_TYPES}
    for key, value in doc.items():
        if key in _SECTION_TYPES:
            if not isinstance(value, dict):
                raise fail("", key, f"expected a table [{key}], got {type(value).__name__}")
            schema = SCHEMA[key]
            for sub, subval in value.items():
                family_of = next((f for f, keys in FAMILY_KEYS.items() if sub in keys), None) \
                    if key == "faults" else None
                if family_of is not None:
                    try:
                        params[sub] = FAMILY_KEYS[family_of][sub](subval)
                    except _Bad as bad:
                        raise fail(key, sub, str(bad)) from None
                    continue
                if sub not in schema:
                    known = sorted(schema) + (sorted(k for keys in FAMILY_KEYS.values() for k in keys)
                                              if key == "faults" else [])
                    raise fail(key, sub, f"unknown key in [{key}] (known: {', '.join(known)})")
                attr, check = schema[sub]
                try:
                    sections[key][attr] = check(subval)
                except _Bad as bad:
                    raise fail(key, sub, str(bad)) from None
        elif key in SCHEMA[""]:
            attr, check = SCHEMA[""][key]
            try:
                top[attr] = check(value)
            except _Bad as bad:
                raise fail("", key, str(bad)) from None
        else:
            known = sorted(list(SCHEMA[""]) + [f"[{s}]" for s in _SECTION_TYPES])
            raise fail("", key, f"unknown key (known: {', '.join(known)})")
    for required in ("name", "purpose"):
        if required not in top:
            raise ScenarioError(f"missing required key {required!r}", path=where, line=None, key=required)

    faults = FaultSpec(**sections["faults"], params=tuple(params.items()))
    if faults.family == "chain" and not faults.chain:
        raise fail("faults", "family", "family 'chain' needs a non-empty [faults] chain list")
    for sub, family in _FAMILY_ONLY.items():
        if sub in doc.get("faults", {}) and faults.family != family:
            raise fail("faults", sub, f"{sub} is only used with family = {family!r}, not {faults.family!r}")
    for sub in params:
        family = next(f for f, keys in FAMILY_KEYS.items() if sub in keys)
        if faults.family != family:
            raise fail("faults", sub, f"{sub} is only used with family = {family!r}, not {faults.family!r}")
    if faults.schedule is not None:
        if faults.family in ("none", "kill", "suspend", "chain"):
            from harness.families.signals.faults import validate_schedule  # the kinds the agent-leg families run

            try:
                faults = replace(faults, schedule=tuple(validate_schedule(list(faults.schedule))))
            except ValueError as exc:
                raise fail("faults", "schedule", str(exc)) from None
        elif not faults.schedule:
            raise fail("faults", "schedule", f"family {faults.family!r} needs a non-empty schedule (or none)")
    workload = WorkloadSpec(**sections["workload"])
    if workload.drift and faults.family in ("race", "power_loss", "tail"):
        raise fail("workload", "drift", f"drift needs resumed legs (families none, kill, suspend, chain), "
                                        f"not {faults.family!r}")
    return Scenario(
        name=top["name"],
        purpose=top["purpose"],
        workload=workload,
        faults=faults,
        trials=TrialSpec(**sections["trials"]),
        check=CheckSpec(**sections["check"]),
        path=path,
        raw=doc,
    )


def load_scenario(path: str | Path) -> Scenario:
    """Read and parse the scenario file ``path``.

    Raises :class:`ScenarioError` (see :func:`parse_scenario`), also when the
    file cannot be read or is not UTF-8.
    """
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario: {exc.strerror or exc}", path=str(p)) from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"not UTF-8 at byte {exc.start}", path=str(p)) from None
    return parse_scenario(text, str(p))


def bundled_scenario_dir() -> Path:
    """Return the bundled ``scenarios/`` directory.

    That is the repository's (next to the ``harness`` package) in a checkout
    or an editable install, else ``<prefix>/share/fiskj/scenarios`` where a
    regular install puts them.  Raises :class:`ScenarioError` when neither
    exists.
    """
    d = Path(__file__).resolve().parents[2] / "scenarios"
    if d.is_dir():
        return d
    installed = Path(sys.prefix) / "share" / "fiskj" / "scenarios"
    if installed.is_dir():
        return installed
    raise ScenarioError("the bundled scenarios directory is missing; pass scenario files explicitly", path=str(d))


def bundled_scenarios() -> list[Path]:
    """Return every ``scenarios/*.toml`` of the repository, sorted by name (not the subdirectories)."""
    return sorted(bundled_scenario_dir().glob("*.toml"))


def regression_scenario_dir() -> Path:
    """Return ``scenarios/regressions/``: one scenario per bug the suite found (``run --save-regression``)."""
    return bundled_scenario_dir() / "regressions"


def regression_scenarios() -> list[Path]:
    """Return every ``scenarios/regressions/*.toml``, sorted by name (empty when there is none)."""
    d = regression_scenario_dir()
    return sorted(d.glob("*.toml")) if d.is_dir() else []
