"""Mutant ``fingerprint-ignores-model``: the resume guard does not compare the model field.

A resume configured with another model is let through as if nothing
changed (no ``--force`` needed), so it appends to a run started with a
different model: a drifted resume that must be refused is not (I9,
``not_refused``; scenario ``drift-refused``).
"""

from __future__ import annotations

NAME = "fingerprint-ignores-model"
DEFECT = "one fingerprint field (the model) is ignored by the resume guard: model drift is not refused"
FAMILY = "suspend"


def apply() -> None:
    import dataclasses

    from fiskj import fingerprint, loop

    from harness.selftest.mutants._patch import wrap

    @wrap(fingerprint, "diff")
    def diff(original, stored, current):
        return original(stored, dataclasses.replace(current, model=stored.model))  # the bug

    loop.diff = diff  # loop imported the name: patch its copy too


apply()  # a preload: importing this module applies the patch (in a child process only)
