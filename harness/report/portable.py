"""Portable reports: where a report's scenarios and subject profile are, so it replays from anywhere
(``campaign.scenario_refs``, ``campaign.subject_ref``: docs/results.md "Portable reports").
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from harness.errors import ResultsError

__all__ = ["scenario_ref", "profile_ref", "portable", "scenario_path", "subject_profile", "bundled_profile_dir"]


def bundled_profile_dir() -> Path:
    """The repository's ``subjects/`` folder (next to the ``harness`` package; it may not exist in an install)."""
    return Path(__file__).resolve().parents[2] / "subjects"


def _bundled_scenario_dir() -> Path | None:
    from harness.errors import ScenarioError
    from harness.scenario.parse import bundled_scenario_dir

    try:
        return bundled_scenario_dir().resolve()
    except ScenarioError:
        return None


def _ref(path: str | None, root: Path | None, suffix: str, report_path: str | None) -> dict[str, str] | None:
    """The reference of the file ``path`` for a report written to ``report_path``: ``{"bundled": NAME}`` when it
    lies under ``root`` and ends with ``suffix`` (``NAME``: its path there, POSIX form, ``suffix`` cut off), else
    ``{"file": REL}`` (relative to the report's folder, the working directory when ``report_path`` is ``None``);
    ``None`` without a path."""
    if not path:
        return None
    resolved = Path(path).resolve()
    if root is not None and resolved.is_relative_to(root) and resolved.name.endswith(suffix):
        return {"bundled": resolved.relative_to(root).as_posix().removesuffix(suffix)}
    base = Path(report_path).resolve().parent if report_path else Path.cwd()
    return {"file": os.path.relpath(resolved, base)}


def scenario_ref(path: str | None, report_path: str | None) -> dict[str, str] | None:
    """The reference of the scenario file ``path`` for a report written to ``report_path`` (:func:`_ref`):
    ``{"bundled": NAME}`` (``NAME``: the path under ``scenarios/`` without ``.toml``, e.g. ``kill-random``
    or ``regressions/regression-x``) for a bundled scenario, ``{"file": REL}`` for another, ``None``
    without a path (a scenario parsed from text)."""
    return _ref(path, _bundled_scenario_dir() if path else None, ".toml", report_path)


def profile_ref(profile: str | None, report_path: str | None) -> dict[str, str] | None:
    """The reference of a subject profile file (as :func:`scenario_ref`; bundled: the path under
    ``subjects/``, ``.toml`` kept); ``None`` for a subject that is not a profile."""
    return _ref(profile, bundled_profile_dir().resolve(), "", report_path)


def portable(report: dict[str, Any], report_path: str | None) -> dict[str, Any]:
    """A copy of ``report`` with ``campaign.scenario_refs`` (and ``campaign.subject_ref`` for a profile
    subject) set for a report written to ``report_path``; ``report`` itself is not changed.  A report
    without a ``campaign`` block is returned as a copy, unchanged."""
    out = copy.copy(report)
    campaign = report.get("campaign")
    if not isinstance(campaign, dict):
        return out
    campaign = dict(campaign)
    campaign["scenario_refs"] = {name: ref for name, path in (campaign.get("scenarios") or {}).items()
                                 if (ref := scenario_ref(path, report_path)) is not None}
    subject = campaign.get("subject")
    if isinstance(subject, str) and subject.endswith(".toml"):
        campaign["subject_ref"] = profile_ref(subject, report_path)
    out["campaign"] = campaign
    return out


def _from_ref(ref: Any, report_path: str, field: str, bundled_root: Path | None, suffix: str) -> Path:
    if not isinstance(ref, dict) or len(ref) != 1 or not isinstance(next(iter(ref.values())), str):
        raise ResultsError(f'expected {{"bundled": NAME}} or {{"file": PATH}}, found {ref!r:.120}',
                           path=report_path, field=field)
    (how, value), = ref.items()
    if how == "bundled":
        if bundled_root is None:
            raise ResultsError(f"names the bundled {value!r}, and this installation has no bundled folder for it",
                               path=report_path, field=field)
        return bundled_root / (value + suffix)
    if how == "file":
        return Path(os.path.normpath(Path(report_path).resolve().parent / value))
    raise ResultsError(f"unknown reference {how!r} (expected bundled or file)", path=report_path, field=field)


def _locate(report_path: str, field: str, ref: Any, bundled_root: Path | None, suffix: str, path: Any,
            what: str) -> str:
    """The first file that is there of: ``ref`` resolved, ``path`` as is, ``path`` relative to the report's
    folder.  Raises :class:`ResultsError` (``field``) naming what was tried."""
    candidates = [] if ref is None else [_from_ref(ref, report_path, field, bundled_root, suffix)]
    if isinstance(path, str) and path:
        candidates.append(Path(path))
        if not os.path.isabs(path):
            candidates.append(Path(report_path).resolve().parent / path)
    for p in candidates:
        if p.is_file():
            return str(p)
    tried = ", ".join(str(p) for p in candidates) or "nothing"
    raise ResultsError(f"{what} is not where the report says (tried {tried})", path=report_path, field=field)


def scenario_path(report: dict[str, Any], name: str, report_path: str) -> str:
    """The file of scenario ``name`` of the report read from ``report_path``: its ``scenario_refs`` entry,
    else its ``scenarios`` path (as is, then relative to the report's folder).

    Raises :class:`harness.errors.ResultsError` (report file and field) when the report does not say, or
    no file is where it says.
    """
    campaign = report.get("campaign") or {}
    ref = (campaign.get("scenario_refs") or {}).get(name)
    path = (campaign.get("scenarios") or {}).get(name)
    if ref is None and not (isinstance(path, str) and path):
        raise ResultsError(f"the report does not say where scenario {name!r} is", path=report_path,
                           field="campaign.scenarios")
    field = f"campaign.scenario_refs.{name}" if ref is not None else f"campaign.scenarios.{name}"
    return _locate(report_path, field, ref, _bundled_scenario_dir(), ".toml", path, f"scenario {name!r}")


def subject_profile(report: dict[str, Any], report_path: str) -> str | None:
    """The profile file of the report's subject (its ``subject_ref``, else its ``subject`` path), or ``None``
    when the subject is not a profile.  Raises :class:`harness.errors.ResultsError` when no file is where
    the report says."""
    campaign = report.get("campaign") or {}
    subject, ref = campaign.get("subject"), campaign.get("subject_ref")
    if ref is None and not (isinstance(subject, str) and subject.endswith(".toml")):
        return None
    return _locate(report_path, "campaign.subject_ref" if ref is not None else "campaign.subject", ref,
                   bundled_profile_dir(), "", subject, "the subject's profile")
