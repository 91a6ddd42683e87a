"""Mutant ``fold-before-lock``: ``open`` reads and folds the journal, then takes the run lock.

fisk-ai's defect 2 (docs/spec.md section 16; section 12, rule 1): a second
resumer that folded while the first was still running continues from a
stale state and re-runs tools that already ran.  Caught by the race
``two-resumers`` (one resumer held at a sequence point between its
unlocked read and its lock while the other completes the run): it runs the
tools again (I2) and appends to a run that ended (I5).
"""

from __future__ import annotations

NAME = "fold-before-lock"
DEFECT = "resume folds the journal before taking the lock (docs/spec.md section 16, defect 2)"
FAMILY = "race"
RACE = "two-resumers"


def apply() -> None:
    import os

    from fiskj import store as st
    from fiskj.journal import Journal
    from fiskj.lock import acquire
    from fiskj.paths import journal_path, lock_path, validate_run_id

    def open_(self, run_id):  # defect 2: read and fold WITHOUT the lock, lock afterwards
        validate_run_id(run_id)
        self._require_dir(run_id)
        jpath = journal_path(self.directory, run_id)
        rfd = st._open_regular(jpath, os.O_RDONLY, run_id)
        try:
            folder, reader = st.fold_open_file(rfd, jpath)
        finally:
            st._close_quietly(rfd)
        lock = acquire(lock_path(self.directory, run_id), run_id)
        try:
            fd = st._open_regular(jpath, os.O_RDWR | os.O_APPEND, run_id)
        except BaseException:
            lock.release()
            raise
        return Journal(run_id=run_id, path=jpath, directory=self.directory, fd=fd, lock=lock, folder=folder,
                       size=reader.good_size, new=False, repaired_tail=None)

    st.FileStore.open = open_


apply()  # a preload: importing this module applies the patch (in a child process only)
