"""Mutant ``status-stays-suspended``: the fold's status is the last terminal record's, wherever it is.

fisk-ai defect 5: after a resume appended records behind a ``suspended``
terminal record, the fold still reads ``suspended`` (not ``open``), so a
resumed run that then crashed is listed as suspended.  The journal is
right; only the engine's own reading of it is wrong, so only the subject's
reading as an oracle (I10, ``fiskj session show --json``) sees it.
"""

from __future__ import annotations

NAME = "status-stays-suspended"
DEFECT = "a resumed run keeps reading 'suspended' after later records (defect 5)"
FAMILY = "kill"


def apply() -> None:
    import dataclasses

    from fiskj.fold import Folder

    from harness.selftest.mutants._patch import wrap

    @wrap(Folder, "state")
    def state(original, self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        terminal = getattr(self, "_terminal", None)
        if result.status == "open" and terminal is not None:  # the bug: an earlier terminal still decides
            return dataclasses.replace(result, status=terminal.reason)
        return result


apply()  # a preload: importing this module applies the patch (in a child process only)
