"""Mutant ``suspend-mid-batch``: a suspend request is honoured between two tools of a batch.

The loop checks the suspend flag before every tool instead of only at the
top of an iteration, so a SIGINT/SIGTERM that lands during a batch ends the
run with a ``suspended`` record while tool_use ids of the batch are still
unanswered: the suspend is not at a boundary (I1, ``suspended_mid_batch``).
"""

from __future__ import annotations

NAME = "suspend-mid-batch"
DEFECT = "suspend is honoured in the middle of a tool batch, not only at a loop boundary"
FAMILY = "suspend"


def apply() -> None:
    from fiskj import loop

    from harness.selftest.mutants._patch import wrap

    @wrap(loop._Run, "_run_batch")
    def _run_batch(original, self, blocks, done):
        tools = self.tools

        class _Checking:
            def run(inner, *args, **kwargs):
                if self.suspend.requested:  # the bug: honoured before any tool of the batch
                    raise loop._End("suspended", "suspended by signal (in the middle of a batch)")
                return tools.run(*args, **kwargs)

            def __getattr__(inner, name):
                return getattr(tools, name)

        self.tools = _Checking()
        try:
            return original(self, blocks, done)
        finally:
            self.tools = tools


apply()  # a preload: importing this module applies the patch (in a child process only)
