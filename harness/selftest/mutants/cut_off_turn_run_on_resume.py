"""Mutant ``cut-off-turn-run-on-resume``: a resume runs the tool calls of a reply cut off by ``max_tokens``.

A fresh leg ends the run with ``error`` at a reply whose stop reason is
``max_tokens`` (its tool_use blocks are never run, docs/spec.md section 12,
rule 6).  A resumed leg that finds that turn last in the journal settles it
as an ordinary tool turn instead: it runs the cut-off turn's tools, then asks
the model to go on (I6: the result differs from the uninterrupted run's; the
tool effect has no counterpart in it).
"""

from __future__ import annotations

NAME = "cut-off-turn-run-on-resume"
DEFECT = "a resume settles a turn cut off by max_tokens (or refused) as a tool turn: its tools run"
FAMILY = "kill"


def apply() -> None:
    from fiskj import loop

    from harness.selftest.mutants._patch import wrap

    @wrap(loop._Run, "_settle")
    def _settle(original, self, message, stop, *, done=None, fresh):
        if not fresh and stop in ("max_tokens", "refusal"):
            stop = "tool_use"  # the bug: the journaled stop reason is not consulted on resume
        return original(self, message, stop, done=done, fresh=fresh)


apply()  # a preload: importing this module applies the patch (in a child process only)
