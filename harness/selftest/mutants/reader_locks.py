"""Mutant ``reader-locks``: ``load`` takes the run lock, so reading a run fails while it is written.

Load and List read without taking the lock (docs/spec.md section 10; the
design: "Load and List do not lock, since they only read"): a reader that
locks fails with RunLocked whenever a writer holds the run, which is
exactly when a user asks for its status.  Caught by the race
``readers-during-appends``: the subject's own status command, run while a
writer is held before a write, fails (I10).
"""

from __future__ import annotations

NAME = "reader-locks"
DEFECT = "load takes the run lock: reading a run that is being written fails (RunLocked)"
FAMILY = "race"
RACE = "readers-during-appends"


def apply() -> None:
    from fiskj import store as st
    from fiskj.lock import acquire

    original = st.FileStore.load

    def load(self, run_id):
        with acquire(st.lock_path(self.directory, run_id), run_id):  # the bug: a reader takes the writer's lock
            return original(self, run_id)

    st.FileStore.load = load


apply()  # a preload: importing this module applies the patch (in a child process only)
