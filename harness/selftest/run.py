"""The mutant self-test, ``fiskj-harness mutants``: every mutant must be caught (docs/selftest.md "The run")."""

from __future__ import annotations

import json
import time
from itertools import accumulate
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from harness.selftest.mutants import UNIT, Mutant, get, mutants, subject_for

__all__ = ["MutantResult", "run_mutant", "run_selftest", "render_table", "results_json"]


@dataclass
class MutantResult:
    """The self-test's finding for one mutant (docs/selftest.md "The run")."""

    mutant: str
    defect: str
    family: str
    scenario: str
    caught: bool
    invariants: list[str] = field(default_factory=list)
    first_detection_s: float | None = None
    shrunk_length: int | None = None
    trials: int = 0
    rounds: int = 0
    elapsed_s: float = 0.0
    reproduce: str | None = None
    errors: list[str] = field(default_factory=list)


def _faults(schedule: list[dict[str, Any]]) -> int:
    return sum(1 for f in schedule if isinstance(f, dict) and f.get("kind", "none") != "none")


def run_mutant(mutant: str | Mutant, *, budget_s: float = 120.0, jobs: int | None = None,
               scenario_dir: str | None = None) -> MutantResult:
    """Run the self-test of ``mutant`` (a name, or a row run as given: another target, seed or shrink bound).

    One campaign with a seed stream that stops at its first violating trial
    (docs/selftest.md "The run"); ``budget_s``: seconds after which no further
    draw's trial starts (the first draw always runs whole); ``jobs``: parallel
    trials; ``scenario_dir``: where the target's scenario lives (default the
    bundled ``scenarios/``).  Never raises for a campaign that fails to set up
    (see ``errors``); raises ``KeyError`` for an unknown name.
    """
    from pathlib import Path

    from harness.campaign.campaign import Campaign
    from harness.scenario.parse import bundled_scenario_dir, load_scenario

    target = get(mutant) if isinstance(mutant, str) else mutant
    out = MutantResult(target.name, target.defect, target.family, target.scenario, False)
    if target.family == UNIT:
        out.errors.append(f"no campaign can catch {target.name}: the unit tests of {target.scenario} catch it "
                          "(pytest)")
        return out
    started = time.monotonic()
    try:
        path = Path(scenario_dir or bundled_scenario_dir()) / f"{target.scenario}.toml"
        scenario = load_scenario(path)
    except Exception as exc:  # a missing scenario is an error of the self-test, never a pass
        out.errors.append(f"{type(exc).__name__}: {exc}")
        return out
    seed = target.seed if target.seed is not None else scenario.trials.seed
    first: list[float] = []

    def progress(done: int, total: int, failing: int) -> None:
        if failing and not first:
            first.append(time.monotonic() - t0)

    from harness.runner.trial import Runner

    with Runner(subject=subject_for(target.name)) as runner:
        t0 = time.monotonic()
        result = Campaign([scenario], trials=target.trials, seed=seed, jobs=jobs, runner=runner, progress=progress,
                          shrink_budget=target.shrink, first_violation=True, seed_stream=True,
                          budget_s=max(budget_s - (t0 - started), 0.0), whole_first_draw=True).run()
    out.rounds = sum(len(run.seeds) for run in result.scenarios)
    out.trials = len(result.trials)
    out.errors += [e for e in result.errors if e not in out.errors]
    violating = result.violations
    if violating:
        out.caught = True
        out.invariants = sorted({inv for t in violating for inv in t.failed}, key=lambda i: (not i.startswith("I"), i))
        ordered = sorted(result.trials, key=lambda t: t.index)
        until_first = next((s for t, s in zip(ordered, accumulate(t.elapsed_s for t in ordered)) if t.failed), None)
        # The progress callback sees a family executor's trials only when it returns: take the earlier of the two.
        detection = min([x for x in (first[0] if first else None, until_first) if x is not None], default=None)
        out.first_detection_s = round((t0 - started) + (detection or 0.0), 3)
        shrunk = [t for t in violating if t.origin == "shrink"]
        best = min(shrunk or violating, key=lambda t: (_faults(t.schedule), t.index))
        out.shrunk_length = _faults(best.schedule)
        out.reproduce = min(violating, key=lambda t: t.index).reproduce  # --subject: FISKJ_MUTANT, FISKJ_PRELOAD
    out.elapsed_s = round(time.monotonic() - started, 3)
    return out


def run_selftest(names: list[str] | None = None, *, budget_s: float = 600.0, jobs: int | None = None,
                 on_result: Callable[[MutantResult], None] | None = None) -> list[MutantResult]:
    """Run :func:`run_mutant` for ``names`` (default: every mutant but those of family :data:`UNIT`), each
    given an equal share of what is left of ``budget_s``; ``on_result`` is called after each."""
    names = list(names) if names else [m.name for m in mutants() if m.family != UNIT]
    started = time.monotonic()
    results = []
    for k, name in enumerate(names):
        left = max(budget_s - (time.monotonic() - started), 0.0)
        result = run_mutant(name, budget_s=left / (len(names) - k), jobs=jobs)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def render_table(results: list[MutantResult]) -> str:
    """The self-test table: mutant, caught, by which invariants, first detection, shrunk length, trials."""
    head = f"{'mutant':<30}{'caught':<8}{'by':<14}{'first detection':>16}{'shrunk':>8}{'trials':>8}  scenario"
    lines = [head, "-" * len(head)]
    for r in results:
        first = f"{r.first_detection_s:.2f} s" if r.first_detection_s is not None else "-"
        shrunk = str(r.shrunk_length) if r.shrunk_length is not None else "-"
        lines.append(f"{r.mutant:<30}{'yes' if r.caught else 'NO':<8}{','.join(r.invariants) or '-':<14}"
                     f"{first:>16}{shrunk:>8}{r.trials:>8}  {r.scenario}")
        for err in r.errors[:3]:
            lines.append(f"    error: {err[:200]}")
    caught = sum(1 for r in results if r.caught)
    lines += ["", f"{caught} of {len(results)} mutants caught"
              + ("" if caught == len(results) else f"; NOT caught: {', '.join(r.mutant for r in results if not r.caught)}")]
    return "\n".join(lines) + "\n"


def results_json(results: list[MutantResult]) -> str:
    """The results as a JSON document: ``{"mutants": [...], "caught": n, "total": n}``."""
    return json.dumps({"mutants": [asdict(r) for r in results], "caught": sum(r.caught for r in results),
                       "total": len(results)}, indent=1)
