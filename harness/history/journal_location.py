"""Where a subject keeps a run's journal: a path template, and the one test of an observed path.  Pure.

A subject's profile names its journal with a path template (docs/subject.md
"Subject profiles", ``[journal] path``); the contract's is
:data:`CONTRACT_JOURNAL`, ``{state_home}/fisk-ai/runs/{run_id}.json``.  This
module is the only place that turns the template into a path
(:meth:`JournalLocation.path`: "where is the run's journal") and the only place
that says whether a path an agent opened, wrote or renamed is that journal
(:meth:`JournalLocation.is_journal`).  Nothing else in the harness names a
journal file.

The trial's directories (``{state_home}``, ``{home}``, ``{trial_dir}``) differ
between a trial and the fresh store a crash state is laid in, so
:meth:`~JournalLocation.is_journal` takes any directory in their place and
matches the rest of the template exactly, with ``{run_id}`` the run's id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping

from harness.names import FISK_AI_V2, OPAQUE

__all__ = ["CONTRACT_JOURNAL", "DIRECTORY_VARS", "JournalLocation", "store_files"]

#: The journal of the contract (docs/subject.md "Commands"; docs/spec.md section 1).
CONTRACT_JOURNAL = "{state_home}/fisk-ai/runs/{run_id}.json"
#: Template variables that stand for a trial's directories (any directory matches them).
DIRECTORY_VARS = ("state_home", "home", "trial_dir")
_VAR = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class JournalLocation:
    """A run's journal as a subject lays it out: a path ``template`` and the line ``format``.

    ``template`` uses the variables of :data:`harness.subject.contract.TEMPLATE_VARS` and names
    ``{run_id}`` or ``{run_uuid}``, or has a ``*`` in its file name (a glob: the agent names the file itself;
    the profile parser checks that: :func:`harness.subject.profile.parse_profile`);
    ``format`` is one of :data:`harness.names.JOURNAL_FORMATS`; an ``opaque`` one's template names a store
    directory (it need not name the run: one store may hold every run) and every file below it is the journal.
    """

    template: str = CONTRACT_JOURNAL
    format: str = FISK_AI_V2

    @property
    def decoded(self) -> bool:
        """True when the harness decodes the journal's lines as records (fisk-ai v2, docs/spec.md section 1)."""
        return self.format == FISK_AI_V2

    @property
    def is_store(self) -> bool:
        """True for an opaque store: the template names a directory, and every file below it is its state."""
        return self.format == OPAQUE

    @property
    def is_glob(self) -> bool:
        """True when the file name is a glob (``*``): the file is the one the agent made that matches it."""
        return "*" in self.template

    @property
    def is_contract(self) -> bool:
        """True when the journal lies where the contract puts it (:data:`CONTRACT_JOURNAL`)."""
        return self.template == CONTRACT_JOURNAL

    def path(self, values: Mapping[str, str]) -> str:
        """Where the run's journal is: the template filled with ``values`` (``run_id`` and the trial's
        directories at least).  Raises ``KeyError`` naming a variable ``values`` lacks."""
        return self.template.format_map(values)

    def is_journal(self, path: str | None, run_id: str) -> bool:
        """True when ``path`` (as the IO seam or the observer recorded it: a POSIX path, docs/ioseam.md)
        is ``run_id``'s journal: it ends as the template does after its last directory variable, with
        ``{run_id}`` filled in and any other variable (``{run_uuid}``, ``{cwd_slug}``, ...) standing for one
        path component or part of one.  For a store (:attr:`is_store`): any path strictly below its directory."""
        if not path:
            return False
        return _matches(self.template, run_id, self.is_store, path)

    def store_file(self, path: str | None, run_id: str = "") -> str | None:
        """``path`` relative to the store's folder when it lies below it (a store: :attr:`is_store`), else None."""
        m = _pattern(self.template, run_id, True).fullmatch(_lexical(path)) if path and self.is_store else None
        return m.group(1) if m else None


def _lexical(path: str) -> str:
    """``path`` with empty and ``.`` components dropped and ``..`` taken back, as text (no file is looked at)."""
    out: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == ".." and out and out[-1] != "..":
            out.pop()
        else:
            out.append(part)
    return ("/" if path.startswith("/") else "") + "/".join(out)


@lru_cache(maxsize=8192)
def _matches(template: str, run_id: str, below: bool, path: str) -> bool:
    """Whether ``path`` is a journal path of ``template`` for ``run_id`` (:meth:`JournalLocation.is_journal`; a
    function of these four strings only, asked for the same paths hundreds of times a history)."""
    return _pattern(template, run_id, below).fullmatch(_lexical(path)) is not None


@lru_cache(maxsize=256)
def _pattern(template: str, run_id: str, below: bool = False) -> re.Pattern[str]:
    """The regular expression of ``template``'s journal paths for ``run_id`` (:meth:`JournalLocation.is_journal`);
    ``below``: the paths under the directory it names."""
    cut = 0
    for m in _VAR.finditer(template):
        if m.group(1) in DIRECTORY_VARS:
            cut = m.end()
    head = "(?:.*)?" if cut else ""
    out, pos = [head], cut
    for m in _VAR.finditer(template, cut):
        out.append(_glob(template[pos:m.start()]))
        out.append(re.escape(run_id) if m.group(1) == "run_id" else r"[^/\n]+")
        pos = m.end()
    out.append(_glob(template[pos:].rstrip("/")) + ("/([^\n]+)" if below else ""))
    return re.compile("".join(out))


def _glob(text: str) -> str:
    """``text`` as a regular expression, a ``*`` (a glob in the file name) standing for any characters but ``/``."""
    return "[^/\n]*".join(re.escape(part) for part in text.split("*"))



def store_files(snapshot: bytes | None) -> dict[str, bytes]:
    """An opaque store's snapshot (:func:`harness.subject.contract.journal_bytes` of its directory: per file,
    sorted, a line ``SIZE RELPATH`` then its bytes) as relative path -> bytes; a malformed rest is ignored."""
    out, data, pos = {}, snapshot or b"", 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        size, _, name = data[pos:nl].partition(b" ") if nl >= 0 else (b"", b"", b"")
        if not size.isdigit():
            break
        out[name.decode("utf-8", "replace")] = data[nl + 1:nl + 1 + int(size)]
        pos = nl + 1 + int(size)
    return out
