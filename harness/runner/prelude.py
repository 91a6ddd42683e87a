"""A trial's leg 0 taken from a recording instead of run (docs/persistence-model.md "Kills from the
recording"): what it left (:class:`Prelude`) and how it is laid in a fresh trial folder (:func:`lay_files`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.history.model import Leg
from harness.history.readers import write_ledger

__all__ = ["Prelude", "rehome", "lay_files"]


def rehome(path: str, old_home: str, old_slug: str = "", new_slug: str = "") -> str | None:
    """``path`` of a trial laid in folder ``old_home``, relative to that folder, its cwd-named folder
    ``old_slug`` renamed ``new_slug`` (a subject that names a folder after its cwd); ``None`` outside it."""
    if not path.startswith(old_home + "/"):
        return None
    rel = path[len(old_home) + 1:]
    return rel.replace(old_slug, new_slug) if old_slug else rel


@dataclass
class Prelude:
    """A trial's leg 0 taken from a recording instead of run (docs/persistence-model.md "Kills from the
    recording"): the files and folders it left (paths under ``old_home``, the recorded trial's folder; ``slug``:
    its cwd slug for a subject with a ``cwd``, else ``""``), the recorded ``leg`` cut at its crash point, and
    the model calls and tool effects made by then; ``run_uuid``: the recorded run's own id."""

    files: dict[str, bytes]
    dirs: list[str]
    old_home: str
    slug: str
    run_uuid: str
    leg: Leg
    calls: list[Any]
    effects: list[Any]


def lay_files(prelude: Prelude, root: Path, new_slug: str, ledger: Path) -> None:
    """Lay ``prelude``'s folders and files in trial folder ``root`` (its cwd slug ``new_slug``) and its effects
    in the trial's ledger ``ledger`` (IO)."""
    for rel in sorted(filter(None, (rehome(d, prelude.old_home, prelude.slug, new_slug) for d in prelude.dirs)),
                      key=len):
        os.makedirs(os.path.join(root, rel), 0o700, exist_ok=True)
    for path, data in prelude.files.items():
        rel = rehome(path, prelude.old_home, prelude.slug, new_slug)
        if rel is not None:
            os.makedirs(os.path.dirname(os.path.join(root, rel)), 0o700, exist_ok=True)
            with open(os.path.join(root, rel), "wb") as f:
                f.write(data)
    write_ledger(ledger, prelude.effects)
