"""Deliberately broken variants of fiskj (mutants), applied in a child process only.

A mutant is one small module here with ``NAME`` (as given to
``FISKJ_MUTANT``), ``DEFECT`` (the bug class it reintroduces), ``FAMILY``
(the fault family that must catch it) and ``apply()``, which monkeypatches
:mod:`fiskj` in the running process.  The harness never applies one to
itself: it starts the agent as ``python -m harness.selftest.subject`` with
``FISKJ_MUTANT=name`` in the child's environment (:func:`subject_for`), and
the checkers judge that child's history without knowing which mutant ran.

Patches look functions up on their modules (``Journal._write_line``,
``FileStore.open``, ``JournalReader._scan``) so they reach every caller.
A patch that keeps the original and adds the bug around it is written
with :func:`wrap`; the durability mutants share :func:`unsynced_write_line`.

| name | defect | caught by |
|---|---|---|
| ``no-fsync`` | appends are written but never fsynced | power_loss (I4) |
| ``fsync-before-write`` | the fsync comes before the write, so the record is never synced | power_loss (I4) |
| ``no-dir-fsync`` | the first append of a new journal does not fsync the store directory (F09) | power_loss (I4) |
| ``store-dir-not-durable`` | new store directories are not made durable in their parents (defect 4) | power_loss (I4) |
| ``torn-tail-not-cut`` | open does not cut a torn tail before appending (defect 1) | tail (I4, I5) |
| ``reader-tolerates-corruption`` | the reader skips an unparsable interior line | tail (reader answer) |
| ``reader-drops-final-record`` | the reader drops a complete final record as if torn | tail (reader answer) |
| ``result-before-tool`` | a tool_result is journaled before its tool runs (a placeholder) | kill (I6) |
| ``assistant-after-tools`` | the assistant record is journaled after its tools ran | kill (I2) |
| ``suspend-mid-batch`` | a suspend is honoured between two tools of a batch | suspend (I1) |
| ``resume-reruns-answered`` | resume runs the answered tools of a pending batch again | kill (I2) |
| ``counters-in-memory`` | tokens spent and iteration restart at zero on resume | kill, budget end (I6) |
| ``fingerprint-ignores-model`` | the resume guard ignores the model field | suspend, drift (I9) |
| ``create-not-reclaimed`` | a journal left empty by a crashed create is never reclaimed | kill, regression (I6) |

The race family's mutants live in :mod:`harness.selftest.race_mutants` (same
``FISKJ_MUTANT`` variable, applied by the race agent).  Which scenario
catches which mutant is data, :mod:`harness.selftest.targets`; the self-test
``fiskj-harness mutants`` (:mod:`harness.selftest.run`) runs them all.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

__all__ = ["ENV", "MODULES", "Mutant", "mutants", "get", "apply", "apply_from_env", "subject_for", "wrap",
           "unsynced_write_line"]

#: Environment variable naming the mutant the child applies.
ENV = "FISKJ_MUTANT"

#: Mutant modules of this package, one bug class each.
MODULES = ("no_fsync", "fsync_before_write", "no_dir_fsync", "store_dir_not_durable", "torn_tail_not_cut",
           "reader_tolerates_corruption", "reader_drops_final_record",
           # the agent loop's bug classes (issue 7)
           "result_before_tool", "assistant_after_tools", "suspend_mid_batch", "resume_reruns_answered",
           "counters_in_memory", "fingerprint_ignores_model", "create_not_reclaimed")


@dataclass(frozen=True)
class Mutant:
    """A broken variant: ``name``, the ``defect`` it reintroduces, the ``family`` that must catch it."""

    name: str
    defect: str
    family: str
    module: str


def _load(module: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{module}")


def mutants() -> list[Mutant]:
    """Every mutant of this package, in :data:`MODULES` order."""
    out = []
    for module in MODULES:
        mod = _load(module)
        out.append(Mutant(mod.NAME, mod.DEFECT, mod.FAMILY, module))
    return out


def get(name: str) -> Mutant:
    """The mutant called ``name``; raises ``KeyError`` naming the known ones."""
    for mutant in mutants():
        if mutant.name == name:
            return mutant
    raise KeyError(f"unknown mutant {name!r}; known: {', '.join(m.name for m in mutants())}")


def apply(name: str) -> Mutant:
    """Monkeypatch fiskj in THIS process with mutant ``name`` (call it in a child only)."""
    mutant = get(name)
    _load(mutant.module).apply()
    return mutant


def apply_from_env() -> Mutant | None:
    """Apply the mutant named by ``$FISKJ_MUTANT``, if any; return it."""
    name = os.environ.get(ENV, "").strip()
    return apply(name) if name else None


def subject_for(name: str):  # -> harness.subject.contract.Subject
    """A :class:`harness.subject.contract.Subject` that runs fiskj with mutant ``name`` applied in the child."""
    from harness.subject.contract import Subject

    get(name)
    return Subject(argv=(sys.executable, "-m", "harness.selftest.subject"), extra_env=((ENV, name),))


def wrap(owner: Any, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator of a mutant's patch: ``owner.name`` (a module's function or a class's method) becomes the
    decorated function, called with the original first (``def _scan(original, self, f): ...``)."""
    original = getattr(owner, name)

    def install(patch: Callable[..., Any]) -> Callable[..., Any]:
        def patched(*args: Any, **kwargs: Any) -> Any:
            return patch(original, *args, **kwargs)

        setattr(owner, name, patched)
        return patched

    return install


def unsynced_write_line(fsync_first: bool = False) -> Callable[..., None]:
    """A ``Journal._write_line`` that returns with the line unsynced: one write and no fsync after it.

    With ``fsync_first`` an fsync comes before the write (and syncs none of
    the line).  Failures are reported as the write's; the store directory's
    fsync on a new journal's first append stays.  Shared by ``no-fsync`` and
    ``fsync-before-write``.
    """
    from fiskj import ioseam

    def _write_line(self: Any, line: bytes, seq: int) -> None:
        try:
            if fsync_first:
                ioseam.fsync(self._fd)
            written = ioseam.write(self._fd, line)
        except OSError as exc:
            raise self._fail("write", seq, exc) from None
        if written != len(line):
            raise self._fail("write", seq, OSError(0, "short write"))
        if self._sync_dir:
            ioseam.fsync_dir(self.directory)
            self._sync_dir = False

    return _write_line
