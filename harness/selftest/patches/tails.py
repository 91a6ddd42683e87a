"""Patches of the torn-tail repair on open and of readers of a torn tail (docs/spec.md sections 7, 9, 10)."""

from __future__ import annotations

import os
from typing import Any, Callable

from fiskj import store
from fiskj.errors import CorruptJournal

from harness.selftest.patches import wrap

__all__ = ["keep_torn_tail", "keep_complete_torn_line", "overcut_torn_tail", "torn_tail_is_corrupt"]


def _after_fold(change: Callable[[int, Any], None]) -> Callable[[int, Any], None]:
    """Decorator: ``store.fold_open_file`` calls ``change(fd, reader)`` on the reader it folded with, before
    open reads it."""

    @wrap(store, "fold_open_file")
    def fold_open_file(original: Any, fd: int, path: str) -> Any:
        folder, reader = original(fd, path)
        change(fd, reader)
        return folder, reader

    return change


def keep_torn_tail() -> None:
    """Open is told there is no torn tail, so it cuts nothing and appends (``O_APPEND``) after the torn bytes."""

    @_after_fold
    def change(fd: int, reader: Any) -> None:
        reader.torn_tail = None


def keep_complete_torn_line() -> None:
    """Open is told there is no torn tail when the torn final line ends in its newline (zeros, garbage)."""

    @_after_fold
    def change(fd: int, reader: Any) -> None:
        torn = reader.torn_tail
        if torn is not None and os.pread(fd, 1, torn.offset + torn.length - 1) == b"\n":
            reader.torn_tail = None


def overcut_torn_tail() -> None:
    """Open is told the good size ends one complete line earlier when there is a torn tail: the repair cuts an
    acknowledged record while the fold still holds it, so the next append leaves a gap in the sequence."""

    @_after_fold
    def change(fd: int, reader: Any) -> None:
        if reader.torn_tail is not None:
            good = os.pread(fd, reader.good_size, 0)
            reader.good_size = good[:-1].rfind(b"\n") + 1


def torn_tail_is_corrupt() -> None:
    """``FileStore._read`` (``load``, ``list``) raises ``CorruptJournal`` on a torn final line: a writer's
    partial last line, which a reader that does not lock must report as a torn tail (section 10, rule 5)."""

    @wrap(store.FileStore, "_read")
    def _read(original: Any, self: Any, run_id: str) -> Any:
        state, info = original(self, run_id)
        if state.torn_tail is not None:
            raise CorruptJournal("unparsable final line", path=store.journal_path(self.directory, run_id),
                                 line=state.records + 1, offset=state.torn_tail.offset)
        return state, info
