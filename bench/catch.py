"""Section 4 of the bench: time from a cold start to the first detection of each mutant."""

from __future__ import annotations

import dataclasses
from typing import Any

from bench.common import median, row



# --- 4. time to catch ----------------------------------------------------------------------------


def bench_catch(*, seeds: tuple[int | None, ...] = (None,), names: list[str] | None = None, budget_s: float = 60.0,
                jobs: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Section 4: per mutant (:data:`harness.selftest.mutants.MUTANTS`), the median time to its first detection over ``seeds``.

    Each run is the mutant self-test's campaign (:func:`harness.selftest.run.run_mutant`, the target
    scenario of its row, no shrinking) with campaign seed ``seed``
    (``None``: the target's own); the time runs from the start of the campaign, reference run
    included, to the first violating trial judged.
    """
    from harness.selftest.mutants import mutants
    from harness.selftest.run import run_mutant

    rows, details = [], {}
    for mutant in mutants():
        if names is not None and mutant.name not in names:
            continue
        times, caught, errors, by = [], [], [], set()
        for seed in seeds:
            result = run_mutant(dataclasses.replace(mutant, seed=seed, shrink=0), budget_s=budget_s, jobs=jobs)
            caught.append(result.caught)
            if result.caught and result.first_detection_s is not None:
                times.append(result.first_detection_s)
            by.update(result.invariants)
            errors += result.errors
        med = median(times) if times else None
        details[mutant.name] = {"family": mutant.family, "scenario": mutant.scenario, "seeds": list(seeds),
                                "first_detection_s": times, "caught": caught, "invariants": sorted(by),
                                "errors": errors[:3]}
        ok = all(caught) and med is not None and med < 10
        rows.append(row("catch", mutant.name, med, None, unit="s", target="< 10 s", met=ok,
                        note=f"{sum(caught)}/{len(caught)} seed(s) caught by {','.join(sorted(by)) or '-'} "
                             f"on {mutant.scenario}; times " + ", ".join(f"{x:.1f}" for x in times)
                             + (f"; error: {errors[0][:120]}" if errors else "")))
    return rows, details
