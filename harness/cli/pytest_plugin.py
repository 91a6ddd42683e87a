"""pytest plugin: run a crash-consistency campaign on your own agent from a pytest test (docs/scenarios.md
"pytest"): the ``durability_campaign`` fixture, the ``durability`` marker (its defaults) and
:func:`run_durability_campaign`, the same without pytest.  Registered by the ``pytest11`` entry point.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import pytest

__all__ = ["DurabilityFailure", "DurabilitySetupError", "CampaignOutcome", "run_durability_campaign",
           "format_failure"]


class DurabilityFailure(AssertionError):
    """A campaign found a violation (or an undecided verdict); the message holds the reproducers."""


class DurabilitySetupError(RuntimeError):
    """A campaign could not run: a scenario that does not load, a subject that does not start, ..."""


@dataclass
class CampaignOutcome:
    """What :func:`run_durability_campaign` found: ``report`` (the JSON report dict), ``result``
    (the :class:`harness.campaign.result.CampaignResult`) and ``report_path`` (where it was written, if anywhere)."""

    report: dict[str, Any]
    result: Any
    report_path: str | None = None
    reproducers: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every checked invariant held in every trial (no invalid, no unknown)."""
        return self.report.get("verdict") == "valid"

    @property
    def violations(self) -> list[dict[str, Any]]:
        """The report's ``violations`` rows (invariant, scenario, seed, schedule, evidence, reproduce)."""
        return list(self.report.get("violations", []))

    def assert_ok(self) -> None:
        """Raise :class:`DurabilityFailure` (an ``AssertionError``) with the reproducers unless :attr:`ok`."""
        if not self.ok:
            raise DurabilityFailure(format_failure(self.report))


def format_failure(report: dict[str, Any], limit: int = 10) -> str:
    """The failure message of a report: counts, then per violation its summary and reproducer command."""
    rows = report.get("violations", []) + report.get("unknowns", [])
    lines = [f"durability campaign: {len(report.get('violations', []))} violation(s) and "
             f"{len(report.get('unknowns', []))} unknown verdict(s) in {report.get('trials', 0)} trial(s)"]
    for row in rows[:limit]:
        status = "violated" if row in report.get("violations", []) else "unknown"
        lines.append(f"- {row['invariant']} {status} in {row['scenario']} (seed {row['seed']}, trial {row['trial']}): "
                     f"{' '.join(str(row.get('summary', '')).split())[:300]}")
        lines.append(f"  schedule: {json.dumps(row.get('schedule'))[:300]}")
        lines.append(f"  reproduce: {row.get('reproduce_run') or row.get('reproduce')}")
    if len(rows) > limit:
        path = report.get("report_path")
        lines.append(f"- ... {len(rows) - limit} more " + (f"in {path}" if path not in (None, "REPORT") else
                                                          "(not shown: pass report_json=FILE to keep them all)"))
    if report.get("report_path") and report["report_path"] != "REPORT":
        lines.append(f"report: {report['report_path']}")
    return "\n".join(lines)


def run_durability_campaign(*scenarios: str, subject: str | list[str] | None = None,
                            env: dict[str, str] | None = None, trials: int | None = None, seed: int | None = None,
                            jobs: int | None = None, shrink_budget: int = 10, report_json: str | None = None,
                            check: bool = True) -> CampaignOutcome:
    """Run a campaign of ``scenarios`` on ``subject`` (a command prefix, a shell string or an argv list; default
    the reference) with ``env`` added to every leg; ``trials``, ``seed``, ``jobs``, ``shrink_budget`` as
    ``fiskj-harness run``; ``report_json``: also write the report there.  With ``check`` a violation or an
    unknown verdict raises :class:`DurabilityFailure`; a scenario or subject that cannot run raises
    :class:`DurabilitySetupError`.
    """
    from fiskj.errors import FiskjError

    from harness.campaign.campaign import Campaign
    from harness.cli.arguments import _Usage
    from harness.cli.resolve import resolve_scenarios, subject_of
    from harness.report.portable import portable
    from harness.report.report import campaign_report
    from harness.report.results_dir import write_json

    try:
        loaded = resolve_scenarios(list(scenarios))
        agent = subject_of(subject, env)
    except (_Usage, FiskjError, ValueError) as exc:
        raise DurabilitySetupError(f"durability campaign cannot start: {exc}") from None
    result = Campaign(loaded, trials=trials, seed=seed, jobs=jobs, subject=agent, shrink_budget=shrink_budget).run()
    report = campaign_report(result, report_json)
    if report_json:  # as `run --report-json` writes it: with the references that let it replay from anywhere
        write_json(report_json, portable(report, report_json))
    outcome = CampaignOutcome(report=report, result=result, report_path=report_json,
                              reproducers=[row.get("reproduce_run") or row["reproduce"]
                                           for row in report.get("violations", [])])
    if result.errors:
        raise DurabilitySetupError("durability campaign could not run: " + "; ".join(result.errors))
    if not result.trials:
        raise DurabilitySetupError("durability campaign ran no trial")
    if check:
        outcome.assert_ok()
    return outcome


# --- pytest hooks and fixture ----------------------------------------------------------------------


def pytest_addoption(parser: Any) -> None:
    """Add the ``--durability-subject``, ``--durability-trials`` and ``--durability-seed`` options and the
    ``durability_subject`` and ``durability_seed`` ini values."""
    group = parser.getgroup("fiskj-harness", "durability campaigns (fiskj-harness)")
    group.addoption("--durability-subject", metavar="CMD", default=None,
                    help="agent command prefix for durability_campaign tests that name none")
    group.addoption("--durability-trials", metavar="N", type=int, default=None,
                    help="trials per scenario for durability_campaign tests that name none")
    group.addoption("--durability-seed", metavar="S", type=int, default=None,
                    help="campaign seed for durability_campaign tests that name none (default: each scenario's)")
    parser.addini("durability_subject", "agent command prefix for durability_campaign tests", default="")
    parser.addini("durability_seed", "campaign seed for durability_campaign tests that name none", default="")


def pytest_configure(config: Any) -> None:
    """Declare the ``durability`` marker."""
    config.addinivalue_line(
        "markers", "durability(*scenarios, subject=None, trials=None, seed=None, env=None): defaults of the "
                   "durability_campaign fixture (a crash-consistency campaign of fiskj-harness)")


@pytest.fixture
def durability_campaign(request: Any, tmp_path: Any) -> Any:
    """A function ``(*scenarios, **options) -> CampaignOutcome`` that fails the test (:class:`DurabilityFailure`,
    with reproducers) on a violation.  Defaults: the ``durability`` marker's, then the ``--durability-*``
    options and ini values (a seed that is not an integer is a ``pytest.UsageError``).  Each call's report
    goes to ``tmp_path/durability-N.json``, named in the test's ``user_properties``.
    """
    marker = request.node.get_closest_marker("durability")
    marked_args = tuple(marker.args) if marker else ()
    marked_kwargs = dict(marker.kwargs) if marker else {}
    config = request.config
    default_subject = config.getoption("--durability-subject") or config.getini("durability_subject") or None
    default_trials = config.getoption("--durability-trials")
    default_seed = config.getoption("--durability-seed")
    if default_seed is None and str(config.getini("durability_seed")).strip():
        text = str(config.getini("durability_seed")).strip()
        try:
            default_seed = int(text)
        except ValueError:
            raise pytest.UsageError(f"ini value durability_seed: not an integer seed: {text!r}") from None
    calls = [0]

    def run(*scenarios: str, **kwargs: Any) -> CampaignOutcome:
        options = {"subject": default_subject, "trials": default_trials, "seed": default_seed, **marked_kwargs,
                   **kwargs}
        calls[0] += 1
        path = os.path.join(str(tmp_path), f"durability-{calls[0]}.json")
        options.setdefault("report_json", path)
        request.node.user_properties.append(("durability_report", options["report_json"]))
        return run_durability_campaign(*(scenarios or marked_args), **options)

    return run
