"""Mutant ``resume-writer-no-record-limit``: a resumed leg's writer has no record-size limit.

The record limit (16 MiB, docs/spec.md section 6) and the cut of a tool
output too large for one record are set up when a run is created; a run
reopened by a resume gets a writer without them.  A resumed leg that runs
a tool whose output is over the limit journals it whole: a line longer
than any reader accepts, after which every read of the journal fails
(RecordTooLarge: I5; the final result cannot be read, I6; the subject's
own reading fails, I10) and the run can never be resumed again.  (A writer
with no limit at all fails the self-test's own uninterrupted run, which
the runner must be able to read, before any trial: see the report of
issue 15.)
"""

from __future__ import annotations

NAME = "resume-writer-no-record-limit"
DEFECT = "the writer of a resumed leg has no record-size limit: an oversized tool output is journaled whole"
FAMILY = "kill"


def apply() -> None:
    from fiskj import encode, store

    from harness.selftest.mutants._patch import wrap

    @wrap(store.FileStore, "open")
    def open(original, self, run_id, *args, **kwargs):  # noqa: A001 - the method's own name
        journal = original(self, run_id, *args, **kwargs)
        encode.MAX_RECORD_BYTES = 1 << 62  # the bug: no limit, so fit_tool_result cuts nothing either
        return journal


apply()  # a preload: importing this module applies the patch (in a child process only)
