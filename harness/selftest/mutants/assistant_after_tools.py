"""Mutant ``assistant-after-tools``: a turn's assistant record is journaled after its tools ran.

The model's turn is held in memory while its tools run; the assistant
record and the results are appended together at the end of the batch.  A
crash inside the batch leaves no trace of the turn in the journal, so the
resume asks the model again and re-runs every tool of the batch, including
the ones that had finished: more than one re-run per crash (I2).
"""

from __future__ import annotations

NAME = "assistant-after-tools"
DEFECT = "the assistant record is journaled after its tools ran, so a crash mid-batch re-runs finished tools"
FAMILY = "kill"


def apply() -> None:
    from fiskj import loop
    from fiskj.records import AssistantRecord, ToolResultRecord, tool_use_ids
    from fiskj.tools import ToolCall

    from harness.selftest.mutants._patch import wrap

    class _Deferring:
        """Stands in for the journal during a model call: keeps back an assistant turn that has tools."""

        def __init__(self, run, journal):
            self.run, self.journal = run, journal

        def append(self, record):
            if isinstance(record, AssistantRecord) and tool_use_ids(record.message):
                self.run._mutant_deferred = record  # the bug: not journaled before the tools run
                return 0
            return self.journal.append(record)

        def __getattr__(self, name):
            return getattr(self.journal, name)

    @wrap(loop._Run, "_call_model")
    def _call_model(original, self):
        journal = self.journal
        self.journal = _Deferring(self, journal)
        try:
            return original(self)
        finally:
            self.journal = journal

    @wrap(loop._Run, "_run_batch")
    def _run_batch(original, self, blocks, done):
        deferred = getattr(self, "_mutant_deferred", None)
        self._mutant_deferred = None
        if deferred is None:  # a resumed pending batch: its assistant record is in the journal
            return original(self, blocks, done)
        results, records = {}, []
        for block in blocks:
            tid = block.get("id")
            if tid in results:
                continue
            outcome = self.tools.run(block.get("name"), block.get("input", {}), ToolCall(tid, self.run_id))
            result = {"type": "tool_result", "tool_use_id": tid, "content": outcome.content,
                      "is_error": outcome.is_error}
            results[tid] = result
            records.append(ToolResultRecord(tool_use_id=tid, result=result))
        self.journal.append(deferred)
        for record in records:
            self.journal.append(record)
        return list(results.values())


apply()  # a preload: importing this module applies the patch (in a child process only)
