"""Patches of the resume guard: a fingerprint field it ignores, the runs it refuses (docs/spec.md section 12)."""

from __future__ import annotations

import dataclasses
from typing import Any

from fiskj import fingerprint, loop
from fiskj.errors import ResumeRefused

from harness.selftest.patches import wrap

__all__ = ["ignore_field", "refuse_ended_legs"]


def ignore_field(field: str) -> None:
    """``fiskj.fingerprint.diff`` (and ``loop``'s copy of it) takes the stored value of ``field`` for the current
    one (``model``, ``system_hash``, ``tools_hash``, ``thinking_mode``, ``max_tokens``, ``max_iterations``): a
    resume with that field alone drifted is let through."""

    @wrap(fingerprint, "diff")
    def diff(original: Any, stored: Any, current: Any) -> Any:
        return original(stored, dataclasses.replace(current, **{field: getattr(stored, field)}))

    loop.diff = diff  # loop imported the name: patch its copy too


def refuse_ended_legs() -> None:
    """``loop.check_resumable`` refuses a run whose status is ``error``, ``budget`` or ``max_iterations``, as
    if only open and suspended runs could go on (rule 2 resumes every run that is not completed)."""

    @wrap(loop, "check_resumable")
    def check_resumable(original: Any, state: Any, current: Any, force: bool = False) -> Any:
        if state.status in ("error", "budget", "max_iterations"):
            raise ResumeRefused(f"run {state.run_id} is {state.status!r}; only an open or suspended run can be "
                                "resumed", run_id=state.run_id)
        return original(state, current, force)
