"""Mutant ``create-no-excl``: ``create`` checks that the journal does not exist, then opens it without ``O_EXCL``.

fisk-ai's defect 3 (docs/spec.md section 16; section 11): two creators can
both pass the check, and the second treats the first's records as its own.
Caught by the race ``two-creates`` (one creator held before its lock while
the other creates and completes the run): it writes a second meta over the
winner's records (I4, I5) and runs the tools again (I2).
"""

from __future__ import annotations

NAME = "create-no-excl"
DEFECT = "create checks existence, then opens without O_EXCL (docs/spec.md section 16, defect 3)"
FAMILY = "race"
RACE = "two-creates"


def apply() -> None:
    import os

    from fiskj import ioseam
    from fiskj import store as st
    from fiskj.errors import RunExists, RunLocked
    from fiskj.journal import Journal
    from fiskj.lock import acquire
    from fiskj.paths import journal_path, lock_path, validate_run_id

    def create(self, run_id, meta):  # defect 3: check, then open without O_EXCL
        validate_run_id(run_id)
        jpath = journal_path(self.directory, run_id)
        if os.path.lexists(jpath):
            raise RunExists(f"run {run_id} already exists", path=jpath, run_id=run_id)
        self._ensure_dir(run_id)
        try:
            lock = acquire(lock_path(self.directory, run_id), run_id)
        except RunLocked:
            raise RunExists(f"run {run_id} already exists: another process holds it", path=jpath,
                            run_id=run_id) from None
        fd = ioseam.open(jpath, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        journal = Journal(run_id=run_id, path=jpath, directory=self.directory, fd=fd, lock=lock,
                          folder=None, size=0, new=True)
        journal.append(meta)
        return journal

    st.FileStore.create = create


apply()  # a preload: importing this module applies the patch (in a child process only)
