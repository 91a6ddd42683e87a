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
    """One judged trial.

    ``index``: position in the campaign (0-based, the ``--trial K`` of
    replay); ``scenario``/``scenario_path``: which scenario; ``seed``: the
    seed its schedule was drawn from; ``schedule``: what names the trial
    exactly (the fault per leg; a crash state; a tail mutation; a race);
    ``origin``: ``exhaustive``, ``hypothesis``, ``noop``, ``shrink``,
    ``explicit``, ``replay``, ``crash-state``, ...; ``verdicts``: the
    checkers' answers (:class:`harness.checkers.verdict.Verdict`);
    ``history``: kept for failing trials, invalid or unknown (and all
    trials with ``keep_histories``), else ``None``; ``shrunk_from``: for a shrink
    result, the index of the trial it shrank; ``shrink``: for a shrink result, what got smaller
    (``3 dropped units -> 1``), for the trial a shrink started from and could not shrink, why; ``elapsed_s``: wall time;
    ``family``: the fault family that ran it; ``probes``: the code probes
    its legs reached (sorted names, :mod:`fiskj.probes`; kept for every trial); ``round``: it was its
    scenario's ``round``-th trial, 0-based, from its draw ``draw`` (0: its plan for its count; ``j``: drawn with
    seed + j * SEED_STEP) (:mod:`harness.campaign.stream`; both ``None``: not from the stream).
    """

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
    skipped: bool = False  # no faulted trial runs: its uninterrupted run ended wrong (judged as a trial), or the
    #                        scenario cannot apply to the subject and the campaign runs the default set
    seeds: list[int] = field(default_factory=list)  # the seed of each plan drawn (harness.campaign.stream)
    started: int = 0  # trials handed out to run
    ended: str = ""  # why it left the trial stream ("" while in it): plan, spent, stopped, error, skipped, draws


@dataclass
class CampaignResult:
    """The outcome of :meth:`harness.campaign.campaign.Campaign.run`.

    ``trials``: every judged trial in index order; ``errors``: setup errors
    (a scenario whose reference run failed, a family that cannot run), one
    line each; ``scenarios``: per scenario bookkeeping; ``elapsed_s``:
    wall time; ``jobs``, ``subject``: how it ran; ``limits``: what a family
    could not do for this subject, one line each, known before the first
    trial (never a silent skip); ``not_applicable``: invariant id -> why it
    does not apply to this subject (never judged, never counted valid,
    :attr:`harness.subject.capabilities.Capabilities.not_applicable`).
    """

    trials: list[TrialResult]
    errors: list[str]
    scenarios: list[ScenarioRun]
    elapsed_s: float
    jobs: int
    subject: Subject
    limits: list[str] = field(default_factory=list)
    not_applicable: dict[str, str] = field(default_factory=dict)

    @property
    def violations(self) -> list[TrialResult]:
        """Trials with at least one invalid checked invariant."""
        return [t for t in self.trials if t.failed]

    @property
    def trials_per_second(self) -> float:
        """Judged trials per wall-clock second."""
        return len(self.trials) / self.elapsed_s if self.elapsed_s > 0 else 0.0
