"""What a campaign produces: judged trials, per-scenario bookkeeping, the whole result (data only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.history.model import History
from harness.scenario.model import Scenario
from harness.subject.contract import Subject

__all__ = ["TrialResult", "ScenarioRun", "CampaignResult"]


@dataclass
class TrialResult:
    """One judged trial: ``index`` (its place in the campaign, replay's ``--trial K``), its scenario, the seed
    its ``schedule`` was drawn from (the schedule names the trial exactly), ``origin`` (``exhaustive``,
    ``hypothesis``, ``shrink``, ``replay``, ``crash-state``, ...), the checkers' ``verdicts`` on the
    ``invariants`` judged, ``history`` (kept for invalid or unknown trials, or all with ``keep_histories``;
    else ``None``), ``shrunk_from`` (a shrink's source trial), ``shrink`` (what a shrink made smaller, or why it could not), ``elapsed_s``, ``faults`` (per kind),
    ``family``, ``probes`` (the code probes its legs reached), and its ``round`` and ``draw`` in the trial
    stream (``None``: not from the stream)."""

    index: int
    scenario: str
    scenario_path: str | None
    seed: int
    schedule: list[dict[str, Any]]
    origin: str
    verdicts: list[Any]
    history: History | None
    elapsed_s: float
    reproduce: str = ""
    shrunk_from: int | None = None
    shrink: str = ""
    invariants: tuple[str, ...] = ()
    faults: dict[str, int] = field(default_factory=dict)
    family: str = ""
    probes: tuple[str, ...] = ()
    round: int | None = None
    draw: int | None = None

    @property
    def failed(self) -> list[str]:
        """Ids of the checked invariants judged ``invalid``."""
        return [v.invariant for v in self.verdicts if v.status == "invalid" and v.invariant in self.invariants]

    @property
    def unknown(self) -> list[str]:
        """Ids of the checked invariants judged ``unknown``."""
        return [v.invariant for v in self.verdicts if v.status == "unknown" and v.invariant in self.invariants]


@dataclass
class ScenarioRun:
    """Per-scenario bookkeeping: its family, the reference, planned trials (``plan``: every draw's, all shards),
    errors, shrink statistics, and its place in the trial stream (:mod:`harness.campaign.stream`)."""

    scenario: Scenario
    seed: int
    family: Any = None
    reference: Any = None
    plan: list[Any] = field(default_factory=list)
    error: str | None = None
    shrink_runs: int = 0
    not_run: str = ""  # why the campaign ran none of its trials: it cannot apply to the subject (the default set)
    skipped: bool = False  # no faulted trial runs: its uninterrupted run ended wrong (judged as a trial), or the
    #                        scenario cannot apply to the subject and the campaign runs the default set
    seeds: list[int] = field(default_factory=list)  # the seed of each plan drawn (harness.campaign.stream)
    started: int = 0  # trials handed out to run
    ended: str = ""  # why it left the trial stream ("" while in it): plan, spent, stopped, error, skipped, draws


@dataclass
class CampaignResult:
    """The outcome of :meth:`harness.campaign.campaign.Campaign.run`: ``trials`` in index order, setup
    ``errors`` (one line each), per scenario bookkeeping, wall time, how it ran (``jobs``, ``subject``),
    ``limits`` (what could not be done for this subject, said before the first trial),
    ``not_applicable`` (invariant id -> why it is never judged for this subject) and ``interrupted``."""

    trials: list[TrialResult]
    errors: list[str]
    scenarios: list[ScenarioRun]
    elapsed_s: float
    jobs: int
    subject: Subject
    limits: list[str] = field(default_factory=list)
    not_applicable: dict[str, str] = field(default_factory=dict)
    interrupted: dict[str, Any] | None = None  # {"signal", "planned", "done"} when a signal cut it short

    @property
    def violations(self) -> list[TrialResult]:
        """Trials with at least one invalid checked invariant."""
        return [t for t in self.trials if t.failed]
