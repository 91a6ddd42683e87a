"""Mutant ``result-before-tool``: a tool's result record is journaled before the tool runs.

The record written first cannot hold the tool's output (the tool has not
run), so it holds an empty placeholder; the model is sent the real output,
kept only in memory.  A crash between that append and the tool's effect
loses the effect while the journal says the tool was answered, and every
resume (and the final fold) sees the placeholder: the result differs from
the reference run's (I6).
"""

from __future__ import annotations

NAME = "result-before-tool"
DEFECT = "a tool_result record is journaled before its tool runs (the journal claims an effect that has not happened)"
FAMILY = "kill"


def apply() -> None:
    from fiskj import loop
    from fiskj.records import ToolResultRecord
    from fiskj.tools import ToolCall

    def _run_batch(self, blocks, done):
        results = {}
        for block in blocks:
            tid = block.get("id")
            if tid in results:
                continue
            if tid in done:
                results[tid] = done[tid]
                continue
            placeholder = {"type": "tool_result", "tool_use_id": tid, "content": "", "is_error": False}
            self.journal.append(ToolResultRecord(tool_use_id=tid, result=placeholder))  # the bug: first
            outcome = self.tools.run(block.get("name"), block.get("input", {}), ToolCall(tid, self.run_id))
            results[tid] = {"type": "tool_result", "tool_use_id": tid, "content": outcome.content,
                            "is_error": outcome.is_error}
        return list(results.values())

    loop._Run._run_batch = _run_batch


apply()  # a preload: importing this module applies the patch (in a child process only)
