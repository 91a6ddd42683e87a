"""``python -m harness.families.power_loss.recovery_child DIR RUN_ID``: fiskj's recovery of every crash state in DIR.

The cheap tier of the power-loss family (:mod:`harness.families.power_loss.tiers`)
for a fiskj-based subject.  Each folder ``DIR/NAME`` is a run store holding
one crash state's journal ``RUN_ID.json``.  For each, in order, this child
runs the subject's own recovery and nothing more: :meth:`fiskj.store.FileStore.open`
(take the run lock, open, read and fold the journal, cut a torn tail and
fsync: what ``run --resume`` does before its first append), closes it, and
reads the journal back with fiskj's reader.  It prints one JSON line per
folder::

    {"file": NAME, "recovery": "repaired" | "opened" | "refused: Kind: message",
     "answer": {"kind": "read", "seqs": [...], "torn": [offset, length] | null, "good_size": N}
               | {"kind": "corrupt" | "error", "line": N | null, "message": "..."}}

It runs with the subject's environment, forked from the fork server
(:meth:`harness.runner.leg.LegStarter.run_module`) or started afresh, so a
mutant's preload (``$FISKJ_PRELOAD``) applies here and only here.  It
imports fiskj and nothing of the harness but the preload loader (and the
preload), so a forked child starts in a few milliseconds.  Exit 2 on a usage error.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from harness.subject.preload import load_preload


def read_back(path: str) -> dict[str, Any]:
    """What fiskj's reader (under this process's preload) says about the journal at ``path`` (never raises)."""
    from fiskj.errors import CorruptJournal, FiskjError
    from fiskj.reader import JournalReader

    reader = JournalReader(path)
    try:
        seqs = [r.seq for r in reader]
    except CorruptJournal as exc:
        return {"kind": "corrupt", "line": exc.line, "message": str(exc)}
    except FiskjError as exc:
        return {"kind": "error", "line": exc.line, "message": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # noqa: BLE001 - a reader that crashes is a wrong answer, not ours
        return {"kind": "error", "line": None, "message": f"reader crashed: {type(exc).__name__}: {exc}"}
    torn = [reader.torn_tail.offset, reader.torn_tail.length] if reader.torn_tail else None
    return {"kind": "read", "seqs": seqs, "torn": torn, "good_size": reader.good_size}


def recover(store: str, run_id: str) -> str:
    """Open run ``run_id`` of ``store`` for appending (the resume's recovery), then close it; says what happened."""
    from fiskj.errors import FiskjError
    from fiskj.store import FileStore

    try:
        journal = FileStore(store).open(run_id)
    except FiskjError as exc:
        return f"refused: {type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a recovery that crashes is an answer too
        return f"refused: crashed: {type(exc).__name__}: {exc}"
    repaired = journal.repaired_tail is not None
    journal.close()
    return "repaired" if repaired else "opened"


def main(argv: list[str] | None = None) -> int:
    """Recover and read back every store of DIR (see the module docstring)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not os.path.isdir(args[0]):
        print("usage: python -m harness.families.power_loss.recovery_child DIR RUN_ID", file=sys.stderr)
        return 2
    load_preload()
    from fiskj.paths import journal_path  # after the preload, as every fiskj import here

    folder, run_id = args
    out = sys.stdout
    for name in sorted(os.listdir(folder)):
        store = os.path.join(folder, name)
        recovery = recover(store, run_id)
        answer = read_back(journal_path(store, run_id))  # fiskj's own store layout
        out.write(json.dumps({"file": name, "recovery": recovery, "answer": answer}) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
