"""The ``Family`` protocol: what every fault family gives the campaign (docs/architecture.md "A campaign").

A fault family is data plus an executor, in the manner of Jepsen's nemesis packages: one package
``harness/families/<name>/`` with its ``Params`` (the schema of its ``[faults]`` keys,
:func:`harness.scenario.fields.toml_keys`), a pure plan (:meth:`Family.plan`: one :class:`Planned` per trial, no
IO) and an executor (:meth:`Family.open`) that runs a planned trial through the one leg runner and records a
:class:`harness.history.model.History`, judging nothing (the campaign hands it to
:func:`harness.checkers.check_all`).  Adding a family: docs/architecture.md "Where does it go?".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.history.model import History
from harness.scenario.model import Scenario

__all__ = ["Planned", "Ran", "Family", "Executor", "FamilyBase", "smaller_schedules"]


@dataclass(frozen=True)
class Planned:
    """One trial a family will run.

    ``schedule``: JSON data that names this trial exactly (the reproducer's
    ``--schedule``: a replay plans only the trials whose schedules it is
    given); ``origin``: why it was planned (``exhaustive``, ``hypothesis``,
    ``noop``, ``regression``, ``explicit``, ``crash-state``, ...); ``seed``:
    the seed it was drawn from; ``item``: the family's own object for its
    executor (a crash state, a mutation; not serialized); ``invariants``:
    the invariants judged on it (``None``: the scenario's ``[check]``).
    """

    schedule: list[dict[str, Any]]
    origin: str
    seed: int
    item: Any = None
    invariants: tuple[str, ...] | None = None


@dataclass
class Ran:
    """What an executor hands back: the trial's ``history``, the ``faults`` injected (by report family), and
    ``schedule`` when the run itself settled what names the trial (a race's drawn schedule), else ``None``."""

    history: History
    faults: dict[str, int] = field(default_factory=dict)
    schedule: list[dict[str, Any]] | None = None


class Executor(Protocol):
    """Runs planned trials of one scenario; thread-safe; :meth:`close` releases what it holds."""

    def run(self, planned: Planned) -> Ran:
        """Run one planned trial and record it; never raises for a misbehaving agent."""

    def close(self) -> None:
        """Release the executor's resources (directories, agent pools); idempotent."""


class Family(Protocol):
    """A fault family, as the campaign, the scenario parser and the report see it.

    ``name``: the family's name; ``modes``: the ``[faults] family`` values
    it runs; ``Params``: its keys' dataclass; ``resumes``: its trials resume
    runs (so ``[workload] drift`` applies).  A failing trial is shrunk by the campaign with
    :meth:`smaller` and :meth:`size` (docs/results.md "Shrinking").
    """

    name: str
    modes: tuple[str, ...]
    Params: type
    resumes: bool

    def params(self, scenario: Scenario) -> Any:
        """The scenario's ``Params``, with defaults taken from its other tables."""

    def check(self, scenario: Scenario) -> tuple[str, str] | None:
        """A rule the scenario breaks, as ``(key, message)``, or ``None``: the parser raises it."""

    def needs_reference(self, scenario: Scenario) -> bool:
        """Whether :meth:`plan` needs the scenario's uninterrupted run."""

    def fixed_plan(self, scenario: Scenario) -> bool:
        """Whether the plan is the same whatever the trial count and (but for seeded samples) the seed: a fresh
        draw of it keeps only trials no earlier draw planned (:mod:`harness.campaign.stream`)."""

    def cannot(self, subject: Any, scenario: Scenario | None = None) -> list[str]:
        """What this family cannot do for ``subject``, one line each (the campaign says so before it starts)."""

    def unsupported(self, subject: Any, scenario: Scenario | None = None) -> str | None:
        """Why this family cannot run ``scenario`` against ``subject`` at all (a setup error, never a pass), or ``None``."""

    def plan(self, scenario: Scenario, reference: Any, count: int, seed: int,
             schedules: list[list[dict[str, Any]]] | None, subject: Any = None) -> list[Planned]:
        """The trials to run (pure).  ``schedules``: explicit ones to replay instead of a plan;
        ``subject``: the agent under test (a family may plan less for it, and says so in :meth:`cannot`)."""

    def bound(self, scenario: Scenario, plan: list[Planned], n: int, seed: int) -> list[Planned]:
        """What ``--trials N`` runs of ``plan`` (pure, deterministic for ``seed``); the campaign calls it only
        when a count is given and no schedule is replayed.  A family whose plan does not grow with the count
        returns at most ``n`` trials (tail: :mod:`harness.families.tail.bound`); :class:`FamilyBase` keeps the
        plan as it is."""

    def open(self, scenario: Scenario, runner: Any, reference: Any) -> Executor:
        """An executor for this scenario's planned trials."""

    def smaller(self, scenario: Scenario, reference: Any, schedule: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """Schedules of trials strictly smaller than ``schedule``'s (by :meth:`size`), the most reduced first
        (pure; ``[]``: nothing smaller to try).  Each replays through :meth:`plan` with ``schedules``."""

    def size(self, scenario: Scenario, reference: Any, schedule: list[dict[str, Any]]) -> tuple[tuple, str]:
        """How big a trial's fault is: a key (smaller is smaller) and its words (``3 dropped units``)."""


class FamilyBase:
    """The defaults of :class:`Family` a family inherits and overrides where it differs: no cross-key rule,
    nothing it cannot do for any subject, a plan that grows with the trial count unless the scenario gives
    a schedule, a reference run needed, a schedule of per-leg faults shrunk by :func:`smaller_schedules`.
    Subclasses set ``name``, ``modes``, ``Params`` and
    implement :meth:`plan` and :meth:`open`."""

    resumes = False

    def params(self, scenario: Scenario) -> Any:
        params = scenario.faults.params
        return params if isinstance(params, self.Params) else self.Params()  # type: ignore[attr-defined]

    def check(self, scenario: Scenario) -> tuple[str, str] | None:
        return None

    def cannot(self, subject: Any, scenario: Scenario | None = None) -> list[str]:
        return []

    def unsupported(self, subject: Any, scenario: Scenario | None = None) -> str | None:
        return None

    def fixed_plan(self, scenario: Scenario) -> bool:
        return scenario.faults.schedule is not None

    def needs_reference(self, scenario: Scenario) -> bool:
        return True

    def bound(self, scenario: Scenario, plan: list[Planned], n: int, seed: int) -> list[Planned]:
        """The plan unchanged: a family whose plan grows with the count is bounded by it already (a family
        whose plan does not overrides this)."""
        return plan

    def prepare(self, scenario: Scenario, runner: Any, *, explicit: bool = False) -> Any:
        """What :meth:`plan` gets as ``reference`` (IO, once per scenario): the uninterrupted run itself
        (``runner.reference``; it raises as that does).  ``explicit``: the campaign runs given schedules only
        (a replay), so what only a drawn plan needs may be left out."""
        return runner.reference(scenario)

    def smaller(self, scenario: Scenario, reference: Any, schedule: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        return smaller_schedules(schedule)

    def size(self, scenario: Scenario, reference: Any, schedule: list[dict[str, Any]]) -> tuple[tuple, str]:
        faults = [f for f in schedule if f.get("kind") != "none"]
        return (len(faults), sum(f.get("event", f.get("at", f.get("after_ms", 0))) for f in faults)), \
            " + ".join(map(_words, faults)) or "no fault"


def _words(f: dict[str, Any]) -> str:
    """A fault in a few words: ``kill at event 7``, ``SIGINT at 12.5 ms``, ``eio at fsync #3``, ``hold at point 2``."""
    at = (f"{f['op']} #{f['event']}" if "op" in f and "event" in f else f"event {f['event']}" if "event" in f
          else f"point {f['at']}" if "at" in f else f"{f['after_ms']} ms" if "after_ms" in f else "")
    name = f.get("action") if f.get("kind") == "io_error" else f.get("signal") or f.get("kind")
    return f"{name} {'before' if f.get('when') == 'before' else 'at'} {at}" if at else str(name)


def smaller_schedules(schedule: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Smaller schedules of per-leg faults (docs/results.md "Shrinking"; pure): each fault dropped in turn
    (when there are two or more), then each fault's event or sequence point lowered to 1, half-way and one
    less (a timed fault's time halved)."""
    real = [i for i, f in enumerate(schedule) if f.get("kind") != "none"]
    out = [schedule[:i] + schedule[i + 1:] for i in real] if len(real) > 1 else []
    for i in real:
        f = schedule[i]
        key = next((k for k in ("event", "at", "after_ms") if isinstance(f.get(k), (int, float))), None)
        if key is None:
            continue
        v = f[key]
        lower = [round(v / 2, 3)] if key == "after_ms" and v >= 1 else \
            [] if key == "after_ms" else [x for x in dict.fromkeys((1, v // 2, v - 1)) if 1 <= x < v]
        out += [schedule[:i] + [{**f, key: x}] + schedule[i + 1:] for x in lower]
    return out
