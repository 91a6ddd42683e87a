"""Mutant ``thinking-stripped-on-resume``: a resumed leg sends the earlier turns without their reasoning.

Rule 8 of docs/spec.md section 12 drops the thinking blocks of earlier
turns only when the resume runs another model; this leg drops them on
every resume, the turn in flight included, and still asks with thinking
on.  The Messages API refuses such a request (HTTP 400: with thinking on,
the assistant turn whose tool results end the request must start with
its thinking block), so a run killed inside a tool loop cannot finish
(I6).  An uninterrupted run, which inherits nothing, goes well.
"""

from __future__ import annotations

NAME = "thinking-stripped-on-resume"
DEFECT = "a resume strips the thinking blocks of every inherited turn, the tool loop in flight included"
FAMILY = "kill"


def apply() -> None:
    from fiskj import loop

    from harness.selftest.mutants._patch import wrap

    @wrap(loop._Run, "_request")
    def _request(original, self):
        saved = self.messages
        self.messages = [loop._without_thinking(m) if i < self.inherited and m.get("role") == "assistant" else m
                         for i, m in enumerate(saved)]  # the bug: every resume, not only another model's
        try:
            return original(self)
        finally:
            self.messages = saved


apply()  # a preload: importing this module applies the patch (in a child process only)
