"""Code-probe coverage: which recovery branches of fiskj (the reference, or a subject built on it) a campaign
reached, summed over its trials in the manner of FoundationDB's code probes (docs/results.md "Code probes").

The section (``report["probes"]``)::

    {"applies": bool, "catalogue": N, "reached": {name: {"trials": n, "scenarios": [..]}},
     "unreached": [name, ...], "note": str}

Pure: no IO.
"""

from __future__ import annotations

import textwrap
from typing import Any, Iterable

from fiskj.probes import PROBES

__all__ = ["probe_section", "merge_probe_sections", "probe_lines", "for_one_trial"]


def probe_section(trials: Iterable[tuple[str, Iterable[str]]], *, applies: bool, subject: str = "") -> dict[str, Any]:
    """The probes section of a report from ``trials``: ``(scenario name, probe names reached)`` pairs.

    ``applies``: the subject runs fiskj's code (the reference or a mutant
    of it); otherwise the section says so and lists no probe as unreached.
    Names not in the catalogue (an older or newer fiskj) are kept as reached.
    """
    return _finish(((name, 1, [scenario]) for scenario, names in trials for name in set(names)), applies, subject)


def _finish(rows: Iterable[tuple[str, int, Iterable[str]]], applies: bool, subject: str) -> dict[str, Any]:
    """The section of ``rows``, ``(probe name, trials that reached it, their scenarios)`` summed by name."""
    summed: dict[str, tuple[int, set[str]]] = {}
    for name, trials, scenarios in rows:
        n, seen = summed.get(name, (0, set()))
        summed[name] = (n + trials, seen | set(scenarios))
    reached = {k: {"trials": n, "scenarios": sorted(seen)} for k, (n, seen) in sorted(summed.items())}
    if not applies:
        return {"applies": False, "catalogue": len(PROBES), "reached": reached, "unreached": [],
                "note": f"the subject{(' ' + subject) if subject else ''} is not fiskj-based: it has no code "
                        "probes, so which of its recovery branches ran is not measured"}
    unreached = [name for name in PROBES if name not in reached]
    return {"applies": True, "catalogue": len(PROBES), "reached": reached, "unreached": unreached,
            "note": f"{len(PROBES) - len(unreached)} of {len(PROBES)} recovery branches of fiskj reached"}


def for_one_trial(section: dict[str, Any] | None) -> dict[str, Any] | None:
    """The probes section of a one-trial report (``replay``): the branches that trial reached, and no list of
    the catalogue's others (one trial is not meant to reach them; the campaign's report names those)."""
    if not section or not section.get("applies"):
        return section
    names = sorted(section.get("reached") or {})
    return {**section, "unreached": [],
            "note": f"this trial reached {len(names)} recovery branch(es) of fiskj" + (f": {', '.join(names)}"
                                                                                       if names else "")}


def merge_probe_sections(sections: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Sum the probes sections of shard reports (None when no shard has one)."""
    given = [s for s in sections if isinstance(s, dict)]
    if not given:
        return None
    rows = ((name, int(row.get("trials", 0)), row.get("scenarios", [])) for s in given
            for name, row in (s.get("reached") or {}).items())
    return _finish(rows, all(bool(s.get("applies")) for s in given), "")


def probe_lines(section: dict[str, Any] | None, *, width: int = 96) -> list[str]:
    """The text lines of a probes section for the terminal summary ([] when there is none)."""
    if not section:
        return []
    if not section.get("applies"):
        return [f"code probes: not applicable ({section.get('note', '')})"]
    lines = [f"code probes: {section.get('note', '')}"]
    unreached = section.get("unreached") or []
    if unreached:
        lines += textwrap.wrap(", ".join(unreached), width=width, initial_indent=f"  not reached ({len(unreached)}): ",
                               subsequent_indent="    ", break_on_hyphens=False)
    return lines
