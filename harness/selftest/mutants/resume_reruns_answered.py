"""Mutant ``resume-reruns-answered``: a resume runs every tool of the pending batch again.

The journaled results of the answered tools are kept (so the journal stays
consistent), but their tools are executed again before the batch is
completed: each answered tool's side effect happens twice after one crash
(I2: a re-run no crash accounts for).
"""

from __future__ import annotations

NAME = "resume-reruns-answered"
DEFECT = "resume re-runs the answered tools of a pending batch instead of only the unanswered ones"
FAMILY = "kill"


def apply() -> None:
    from fiskj import loop
    from fiskj.tools import ToolCall

    from harness.selftest.mutants._patch import wrap

    @wrap(loop._Run, "_run_batch")
    def _run_batch(original, self, blocks, done):
        for block in blocks:
            tid = block.get("id")
            if tid in done:  # the bug: the answered tool runs again
                self.tools.run(block.get("name"), block.get("input", {}), ToolCall(tid, self.run_id))
        return original(self, blocks, done)


apply()  # a preload: importing this module applies the patch (in a child process only)
