"""Mutant ``recall-after-final-answer``: a resume asks the model again although the journal holds the answer.

When a run is resumed after its final answer was journaled but before its
terminal record (a crash in between), the resumed leg drops that answer
from the conversation and calls the model for it again, instead of
settling it: the model is asked twice for one turn, and with a model that
does not answer the same way twice, the answer changes (I3: a repeated
model call whose reply the journal held).
"""

from __future__ import annotations

NAME = "recall-after-final-answer"
DEFECT = "resume calls the model again when the journal already holds the final answer (no terminal yet)"
FAMILY = "kill"


def apply() -> None:
    from fiskj import loop

    from harness.selftest.mutants._patch import wrap

    @wrap(loop._Run, "_settle_state")
    def _settle_state(original, self, state):
        last = self.messages[-1] if self.messages else None
        final = (state.pending is None and isinstance(last, dict) and last.get("role") == "assistant"
                 and not any(isinstance(b, dict) and b.get("type") == "tool_use" for b in last.get("content") or []))
        if final:
            self.messages.pop()  # the bug: the journaled answer is ignored; the loop asks the model again
            return None
        return original(self, state)


apply()  # a preload: importing this module applies the patch (in a child process only)
