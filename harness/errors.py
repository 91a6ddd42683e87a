"""The harness's errors: one small hierarchy.

:class:`HarnessError` is the base (a :class:`fiskj.errors.FiskjError`, so
it carries ``path``/``line`` and survives pickling); :class:`ScenarioError`
is a scenario file that cannot be used (also a ``ValueError``);
:class:`ProfileError` is a subject profile that cannot be used (also a
``ValueError``); :class:`SetupError` is a trial that cannot run (the subject does not start,
its uninterrupted run fails; also a ``RuntimeError``); :class:`ResultsError` is a
results folder or a stored history that cannot be read (also a ``ValueError``).  A misbehaving agent
is never an error: it is recorded in the history and judged.
"""

from __future__ import annotations

from fiskj.errors import FiskjError

__all__ = ["HarnessError", "ScenarioError", "ProfileError", "SetupError", "SubjectDidNotStart", "BrokenReference",
           "ResultsError"]


class HarnessError(FiskjError):
    """Base of the harness's errors."""


class ScenarioError(HarnessError, ValueError):
    """A scenario file cannot be used.

    Attributes: ``path`` (str, the file), ``line`` (int 1-based or ``None``
    when unknown), ``key`` (dotted key such as ``"workload.turns"`` or
    ``None``).  ``str(error)`` reads ``FILE:LINE: key 'K': message``.
    Survives pickling (inherited from :class:`fiskj.errors.FiskjError`).
    """

    key: str | None = None

    def __str__(self) -> str:
        where = str(self.path) if self.path is not None else "<scenario>"
        if self.line is not None:
            where += f":{self.line}"
        if self.key is not None:
            return f"{where}: key {self.key!r}: {self.message}"
        return f"{where}: {self.message}"


class ProfileError(ScenarioError):
    """A subject profile (docs/subject.md "Subject profiles") cannot be used.

    Same attributes and message shape as :class:`ScenarioError`
    (``FILE:LINE: key 'K': message``).
    """

    def __str__(self) -> str:
        text = super().__str__()
        return text.replace("<scenario>", "<profile>", 1)


class SetupError(HarnessError, RuntimeError):
    """The harness cannot run a trial (the subject does not start, the reference run fails, ...)."""


class SubjectDidNotStart(SetupError):
    """The subject never got going in a scenario's uninterrupted run: no journal, no model call (a missing
    binary or module, a crash at start-up).  The message holds what the subject said on stderr and its
    command.  A campaign finds it once, before any trial, and names it once for every scenario."""


class BrokenReference(SetupError):
    """The subject ran a scenario's uninterrupted reference run and it ended wrong (no terminal record, a
    torn last line, an error): not a setup error to report as such, but a run to judge as a trial (the
    campaign judges ``history`` with the checkers; I6 says how it should have ended).

    Attributes: ``history`` (:class:`harness.history.model.History` of the uninterrupted run), ``path``.
    """

    def __init__(self, message: str, *, history: object, path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.history = history


class ResultsError(HarnessError, ValueError):
    """A results folder, a trial folder or a stored history cannot be used (``fiskj-harness check``, replay of
    a stored report; docs/results.md).

    Attributes: ``path`` (str, the file or folder), ``line`` (int 1-based or ``None``: where a JSON file
    stops parsing), ``field`` (the JSON field, dotted with indices such as ``"legs[1].fault.kind"``, or
    ``None``).  ``str(error)`` reads ``FILE:LINE: field 'F': message``.
    """

    def __str__(self) -> str:
        where = str(self.path) if self.path is not None else "<results>"
        if self.line is not None:
            where += f":{self.line}"
        if self.field is not None:
            return f"{where}: field {self.field!r}: {self.message}"
        return f"{where}: {self.message}"
