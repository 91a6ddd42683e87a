"""``python -m harness.families.journal_state.reader_child DIR RUN_ID QUESTION``: a fiskj-based subject's answers.

The one cheap question of the journal-state engine
(:mod:`harness.families.journal_state.ask`) to a fiskj-based subject.  Each
folder ``DIR/NAME`` is a run store holding one journal state: ``RUN_ID``'s
journal, named as fiskj names it (:func:`fiskj.paths.journal_path`).
For each, in order, this child answers QUESTION:

* ``read``: what fiskj's reader reads in the journal (:func:`answer_for`:
  what a reader answers about damaged bytes, docs/spec.md section 7);
* ``recovery``: what the journal holds after the subject's own recovery
  and nothing more (:func:`recover`: :meth:`fiskj.store.FileStore.open`
  takes the run lock, reads and folds the journal, cuts a torn tail and
  fsyncs, what ``run --resume`` does before its first append; then it is
  closed), read back with fiskj's reader.

It prints one JSON line per folder: ``{"file": NAME, "answer": ANSWER}``,
an ANSWER being :meth:`Answer.to_json` (after a recovery, its ``recovery``
says what the recovery did).  It runs with the subject's environment,
forked from the fork server (:meth:`harness.runner.starter.LegStarter.run_module`)
or started afresh, so a mutant's preload (``$FISKJ_PRELOAD``) applies here
and only here.  It imports nothing of the harness but the preload loader
(fiskj is imported inside the functions, after the
preload patched it), so a forked child starts in a few milliseconds.  Exit 2
on a usage error.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, replace
from typing import Any, BinaryIO

from harness.subject.preload import load_preload

__all__ = ["Answer", "answer_for", "recover", "main"]


@dataclass(frozen=True)
class Answer:
    """What a subject said about a journal: ``kind`` ``"read"`` (``seqs``, ``torn``, ``good_size``),
    ``"corrupt"`` (``line``), or ``"error"`` (any other failure; ``message``).  ``via``: ``"reader"``
    (fiskj's reader under the subject's preload, this module) or ``"status"`` (a subject's status command,
    docs/subject.md "Subject profiles", which says only whether it read the journal and, when its profile
    maps it, how many ``records``).  ``recovery``: for a reading after the subject's recovery, what the
    recovery did (``repaired``, ``opened``, ``refused: ...``), else ``None``."""

    kind: str
    seqs: tuple[int, ...] = ()
    torn: tuple[int, int] | None = None
    good_size: int | None = None
    line: int | None = None
    message: str = ""
    via: str = "reader"
    records: int | None = None
    recovery: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The answer as a JSON fact (lists for ``seqs`` and ``torn``; no ``recovery`` key when ``None``)."""
        raw = {"kind": self.kind, "seqs": list(self.seqs), "torn": list(self.torn) if self.torn else None,
               "good_size": self.good_size, "line": self.line, "message": self.message, "via": self.via,
               "records": self.records}
        if self.recovery is not None:
            raw["recovery"] = self.recovery
        return raw

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> "Answer":
        """The inverse of :meth:`to_json`; raises ``TypeError``/``KeyError`` for a dict that is no answer."""
        return cls(**{**raw, "seqs": tuple(raw.get("seqs") or ()),
                      "torn": tuple(raw["torn"]) if raw.get("torn") else None})


def answer_for(source: str | os.PathLike[str] | BinaryIO) -> Answer:
    """What this process's fiskj reader says about the journal at ``source`` (a path or a binary buffer;
    never raises: a missing file or a reader that crashes is an ``error`` answer)."""
    from fiskj.errors import CorruptJournal, FiskjError  # after the preload: a mutant patches these modules
    from fiskj.reader import JournalReader

    try:
        reader = JournalReader(source)
        seqs = tuple(r.seq for r in reader)
    except CorruptJournal as exc:
        return Answer("corrupt", line=exc.line, message=str(exc))
    except FiskjError as exc:
        return Answer("error", line=exc.line, message=f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - a reader that crashes is a wrong answer, not ours
        return Answer("error", message=f"reader crashed: {type(exc).__name__}: {exc}")
    torn = (reader.torn_tail.offset, reader.torn_tail.length) if reader.torn_tail else None
    return Answer("read", seqs, torn, reader.good_size)


def recover(store: str | os.PathLike[str], run_id: str) -> str:
    """Open run ``run_id`` of run store ``store`` for appending (the resume's recovery), then close it;
    says what happened: ``repaired`` (a torn tail cut), ``opened``, or ``refused: Kind: message``."""
    from fiskj.errors import FiskjError
    from fiskj.store import FileStore

    try:
        journal = FileStore(str(store)).open(run_id)
    except FiskjError as exc:
        return f"refused: {type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a recovery that crashes is an answer too
        return f"refused: crashed: {type(exc).__name__}: {exc}"
    repaired = journal.repaired_tail is not None
    journal.close()
    return "repaired" if repaired else "opened"


def main(argv: list[str] | None = None) -> int:
    """Answer QUESTION about every journal state of DIR (see the module docstring)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or not os.path.isdir(args[0]) or args[2] not in ("read", "recovery"):
        print("usage: python -m harness.families.journal_state.reader_child DIR RUN_ID read|recovery", file=sys.stderr)
        return 2
    load_preload()
    from fiskj.paths import journal_path  # after the preload, as every fiskj import here

    folder, run_id, question = args
    for name in sorted(os.listdir(folder)):
        store = os.path.join(folder, name)
        recovery = recover(store, run_id) if question == "recovery" else None
        answer = replace(answer_for(journal_path(store, run_id)), recovery=recovery)
        sys.stdout.write(json.dumps({"file": name, "answer": answer.to_json()}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
