"""What the command line's SCENARIO arguments, ``--subject`` and REPORT name: the scenarios to run (files,
directories, bundled names, ``NAME@wK`` draws; the gate's default set), the subject under test, a report's JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from harness.cli.arguments import _Usage
from harness.suggest import did_you_mean

__all__ = ["resolve_scenarios", "subject_of", "read_report"]


def resolve_scenarios(args: list[str], subject: Any = None) -> list[Any]:
    """Load the scenarios named on the command line: ``.toml`` files, directories (their ``*.toml``), bundled
    scenario names (``kill-random``: a bare bundled name wins over a local file of that name; ``./NAME`` is the
    local one), each optionally with ``@wK`` (draw K of a generated scenario, :mod:`harness.scenario.generate`);
    none: every bundled scenario (for a ``subject`` whose store is a JetStream server the harness starts, a
    profile with ``[jetstream]``: every scenario of the jetstream family, ``scenarios/jetstream/``).  Raises :class:`harness.scenario.parse.ScenarioError` (file, line, key) or
    ``_Usage`` (an unknown name, with the bundled names closest to it).
    """
    from harness.scenario.generate import expand_all, split_draw
    from harness.scenario.parse import ScenarioError, bundled_scenario_dir, bundled_scenarios, load_scenario

    def _bundled(arg: str) -> Path | None:  # the bundled scenario of that name (``.toml`` optional), if any
        try:
            candidate = bundled_scenario_dir() / f"{arg.removesuffix('.toml')}.toml"
        except ScenarioError:
            return None
        return candidate if candidate.exists() else None

    def _unknown(arg: str) -> _Usage:
        try:
            names = [p.stem for p in bundled_scenarios()]
        except ScenarioError:
            names = []
        return _Usage(f"no scenario {arg!r}: not a file, a directory or a bundled scenario name"
                      + did_you_mean(arg.removesuffix(".toml"), names))

    # a file, a directory or a bundled scenario by that very name is never read as NAME@wK
    draws = [(a, None) if Path(a).exists() or _bundled(a) is not None else split_draw(a) for a in args]
    if any(k is not None for _, k in draws):  # NAME@wK: draw K of a generated scenario (its reproducers)
        picked = []
        for base, k in draws:
            for s in resolve_scenarios([base]):
                if k is None:
                    picked.append(s)
                    continue
                if s.draw is None and not s.workload.generate:
                    raise _Usage(f"{base}@w{k}: scenario {s.name!r} generates no workloads")
                if s.draw == k:
                    picked.append(s)
            if k is not None and not any(s.draw == k for s in picked):
                n = len([s for s in resolve_scenarios([base]) if s.draw is not None])
                raise _Usage(f"{base}@w{k}: the scenario has no draw {k} (its draws: @w0 .. @w{n - 1})")
        return picked
    paths: list[Path] = []
    if not args and subject is not None and getattr(subject, "jetstream", None) is not None:
        paths = sorted((bundled_scenario_dir() / "jetstream").glob("*.toml"))
    elif not args:
        paths = bundled_scenarios()
        if not paths:
            raise _Usage(f"no scenarios in {bundled_scenario_dir()}")
    for arg in args:
        p = Path(arg)
        bundled = _bundled(arg)
        bare = os.sep not in arg and not arg.endswith(".toml") and not arg.startswith(".")
        if bundled is not None and (bare or not p.exists()):  # a bare bundled name wins over a local one
            paths.append(bundled)
        elif p.is_dir():
            found = sorted(p.glob("*.toml"))
            if not found:
                raise _Usage(f"no *.toml scenarios in directory {arg}")
            paths += found
        elif p.exists():
            paths.append(p)
        else:
            raise _unknown(arg)
    scenarios = expand_all([load_scenario(p) for p in paths])  # a generated scenario: one per drawn workload
    names: dict[str, str] = {}
    for s in scenarios:
        if s.name in names and names[s.name] != s.path:
            raise _Usage(f"two scenarios are named {s.name!r}: {names[s.name]} and {s.path}")
        names[s.name] = str(s.path)
    return scenarios


def _gate_scenarios(args: list[str]) -> list[Any]:
    """The gate's scenarios: those named, else every bundled and every regression scenario."""
    from harness.scenario.parse import bundled_scenarios, regression_scenarios

    if args:
        return resolve_scenarios(args)
    paths = bundled_scenarios() + regression_scenarios()
    if not paths:
        raise _Usage("no bundled or regression scenarios")
    return resolve_scenarios([str(p) for p in paths])


def subject_of(command: str | list[str] | None, extra_env: dict[str, str] | None = None) -> Any:
    """The :class:`harness.subject.contract.Subject` of a ``--subject`` value (a command prefix or a profile
    file, :func:`harness.subject.profile.resolve_subject`), plus ``extra_env``, with the
    preload of a mutant named by ``FISKJ_MUTANT`` (:func:`harness.selftest.mutants.with_preload`).

    Raises ``_Usage`` for a subject that does not parse or an unknown mutant.
    """
    from dataclasses import replace

    from harness.selftest.mutants import with_preload
    from harness.subject.profile import resolve_subject

    try:
        subject = resolve_subject(command)
        if extra_env:
            subject = replace(subject, extra_env=tuple(subject.extra_env) + tuple(sorted(extra_env.items())))
        return with_preload(subject)
    except ValueError as exc:
        raise _Usage(f"--subject: {exc}") from None
    except KeyError as exc:
        raise _Usage(f"--subject: {exc.args[0]}") from None


def read_report(path: str) -> Any:
    """The JSON of the report file ``path`` (``replay``'s and ``merge``'s REPORT); raises ``_Usage``
    (``cannot read report PATH: why``) for a file that cannot be read or is not JSON."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise _Usage(f"cannot read report {path}: {exc}") from None
