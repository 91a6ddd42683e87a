"""The harness's errors: one small hierarchy under :class:`HarnessError` (a :class:`fiskj.errors.FiskjError`,
so it carries ``path``/``line`` and survives pickling).  A misbehaving agent is never an error: it is
recorded in the history and judged."""

from __future__ import annotations

from fiskj.errors import FiskjError

__all__ = ["HarnessError", "ScenarioError", "ProfileError", "SetupError", "SubjectDidNotStart", "BrokenReference",
           "ResultsError"]


class HarnessError(FiskjError):
    """Base of the harness's errors."""


class _Located(HarnessError):
    """An error about a file that says where: ``str(error)`` reads ``FILE:LINE: NAMED 'K': message``, where
    NAMED is the attribute :attr:`_named` names (``key`` or ``field``) and each part is left out when unknown."""

    _unnamed = "<file>"
    _named = "key"

    def __str__(self) -> str:
        where = str(self.path) if self.path is not None else self._unnamed
        if self.line is not None:
            where += f":{self.line}"
        named = getattr(self, self._named, None)
        return f"{where}: {self._named} {named!r}: {self.message}" if named is not None else f"{where}: {self.message}"


class ScenarioError(_Located, ValueError):
    """A scenario file cannot be used: ``path`` (the file), ``line`` (1-based or ``None``), ``key`` (dotted,
    such as ``"workload.turns"``, or ``None``); ``str(error)`` reads ``FILE:LINE: key 'K': message``."""

    key: str | None = None
    _unnamed = "<scenario>"


class ProfileError(ScenarioError):
    """A subject profile (docs/subject.md "Subject profiles") cannot be used; as :class:`ScenarioError`."""

    _unnamed = "<profile>"


class SetupError(HarnessError, RuntimeError):
    """The harness cannot run a trial (the subject does not start, the reference run fails, ...)."""


class SubjectDidNotStart(SetupError):
    """The subject never got going in a scenario's uninterrupted run: no journal, no model call (a missing
    binary or module, a crash at start-up).  The message holds what the subject said on stderr and its
    command.  A campaign finds it once, before any trial, and names it once for every scenario."""


class BrokenReference(SetupError):
    """The subject's uninterrupted reference run ended wrong: a run to judge as a trial (I6 says how it
    should have ended), not a setup error to report.  ``history``: its :class:`harness.history.model.History`."""

    def __init__(self, message: str, *, history: object, path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.history = history


class ResultsError(_Located, ValueError):
    """A results folder, a trial folder or a stored history cannot be used (``check``, replay; docs/results.md):
    ``path``, ``line`` (where a JSON file stops parsing), ``field`` (dotted with indices, such as
    ``"legs[1].fault.kind"``); ``str(error)`` reads ``FILE:LINE: field 'F': message``."""

    _unnamed = "<results>"
    _named = "field"
