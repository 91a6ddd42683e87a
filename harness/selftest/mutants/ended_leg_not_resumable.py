"""Mutant ``ended-leg-not-resumable``: a run whose last leg ended with ``error``, ``budget`` or ``max_iterations``
is refused, not resumed.

fisk-ai v2 resumes every run that is not completed (docs/spec.md section 12,
rule 2): a leg that ended for a reason that still holds ends the same way
again, one whose reason is gone goes on (a model that answers again after a
model error).  This variant refuses them, as if only open and suspended
runs could go on: a run stopped by a passing error is stranded for good
(I9 ``refused_resumable``: the status its journal folds to is resumable).
"""

from __future__ import annotations

NAME = "ended-leg-not-resumable"
DEFECT = "a run whose last leg ended with error, budget or max_iterations is refused instead of resumed"
FAMILY = "kill"


def apply() -> None:
    from fiskj import loop
    from fiskj.errors import ResumeRefused

    from harness.selftest.mutants._patch import wrap

    @wrap(loop, "check_resumable")
    def check_resumable(original, state, current, force=False):
        if state.status in ("error", "budget", "max_iterations"):  # the bug: only open and suspended go on
            raise ResumeRefused(f"run {state.run_id} is {state.status!r}; only an open or suspended run can be "
                                "resumed", run_id=state.run_id)
        return original(state, current, force)


apply()  # a preload: importing this module applies the patch (in a child process only)
