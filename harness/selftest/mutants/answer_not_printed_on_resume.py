"""Mutant ``answer-not-printed-on-resume``: a resume that settles a journaled final answer prints nothing.

When a run crashed after its final answer was journaled, the resumed leg
settles that answer (no new model call) and completes the run, but prints
the answer only for a reply it received itself: a user who resumes sees an
empty output where the uninterrupted run printed its answer.  The journal
is right; only what the user reads differs (I6 ``answer_not_printed``).
"""

from __future__ import annotations

NAME = "answer-not-printed-on-resume"
DEFECT = "a resume that settles a journaled final answer completes the run without printing the answer"
FAMILY = "kill"


def apply() -> None:
    from fiskj import loop

    from harness.selftest.mutants._patch import wrap

    @wrap(loop._Run, "_settle")
    def _settle(original, self, message, stop, *, done=None, fresh):
        if not fresh:  # the bug: a settled answer is printed only in interactive runs, never after a crash
            interactive, output = self.interactive, self.output
            self.output = None if not interactive else output
            try:
                return original(self, message, stop, done=done, fresh=fresh)
            finally:
                self.output = output
        return original(self, message, stop, done=done, fresh=fresh)


apply()  # a preload: importing this module applies the patch (in a child process only)
