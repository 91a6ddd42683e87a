"""Mutant ``fingerprint-ignores-system``: the resume guard does not compare the system prompt (``system_hash``).

A resume configured with another system prompt is let through as if nothing changed, so
it appends to a run started with a different one: caught only by a drift of
that one field alone (I9, ``not_refused``; scenario ``drift-system``), since
any other drifted field would still refuse the resume.
"""

from __future__ import annotations

NAME = "fingerprint-ignores-system"
DEFECT = "one fingerprint field (the system prompt) is ignored by the resume guard: its drift alone is not refused"
FAMILY = "suspend"


def apply() -> None:
    from harness.selftest.mutants._patch import ignore_fingerprint_field

    ignore_fingerprint_field("system_hash")


apply()  # a preload: importing this module applies the patch (in a child process only)
