"""The subject contract: how the harness starts, resumes and finds an agent under test.

A subject is a command prefix (``--subject CMD``) that accepts fiskj's run
command line; the full contract is docs/subject.md.  In short::

    CMD run --checkpoint --name ID --model M --base-url URL --tools FILE \\
        --max-tokens N --max-iterations N [--chat] PROMPT
    CMD run --resume ID [--force] --model M --base-url URL --tools FILE \\
        --max-tokens N --max-iterations N

exit 0 completed, 3 suspended, 1 error, 2 usage (:mod:`harness.names`);
journal at ``$XDG_STATE_HOME/fisk-ai/runs/ID.json`` in the fisk-ai v2
format (docs/spec.md section 1).  The environment of every leg is built by
:meth:`Subject.env`.

The default subject is the reference implementation:
``[sys.executable, "-m", "fiskj"]``.  The mutant subject,
``python -m harness.selftest.subject``, is fiskj with the module named in
``$FISKJ_PRELOAD`` imported first (:mod:`harness.subject.preload`).
Either may be forked from a pre-imported interpreter instead of started
afresh (:mod:`harness.subject.forkserver`; :func:`fork_server_enabled`
says when).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from harness.names import (EXIT_COMPLETED, EXIT_ERROR, EXIT_SUSPENDED, EXIT_USAGE, MUTANT_ENV, MUTANT_SUBJECT,
                           PRELOAD_ENV)

__all__ = [
    "EXIT_COMPLETED",
    "EXIT_ERROR",
    "EXIT_USAGE",
    "EXIT_SUSPENDED",
    "Subject",
    "RunConfig",
    "default_subject",
    "parse_subject",
    "journal_path",
    "store_dir",
    "HARNESS_ENV",
    "fork_server_enabled",
]

#: Variables the harness sets for every leg; inherited values of these are dropped.
HARNESS_ENV = (
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "XDG_STATE_HOME",
    "FISKJ_LEDGER",
    "FISKJ_HARNESS_LEG",
    "FISKJ_IOSEAM_TRACE",
    "FISKJ_IOSEAM_FAULT",
)


def store_dir(state_home: str | os.PathLike[str]) -> Path:
    """The run store under an XDG state home: ``STATE_HOME/fisk-ai/runs``."""
    return Path(state_home) / "fisk-ai" / "runs"


def journal_path(state_home: str | os.PathLike[str], run_id: str) -> Path:
    """The journal of ``run_id``: ``STATE_HOME/fisk-ai/runs/RUN_ID.json``."""
    return store_dir(state_home) / f"{run_id}.json"


@dataclass(frozen=True)
class RunConfig:
    """The configuration of one run, the same for every leg (it is the fingerprint).

    ``tools_file`` is a path to fiskj's ``--tools`` JSON; ``followups`` is
    only a flag here (``chat``): the lines go to stdin.
    """

    run_id: str
    model: str
    base_url: str
    tools_file: str
    max_tokens: int
    max_iterations: int
    prompt: str
    chat: bool = False


@dataclass(frozen=True)
class Subject:
    """A command prefix that accepts fiskj's ``run`` command line.

    ``argv``: the prefix (e.g. ``[python, "-m", "fiskj"]``).
    ``resume_config``: pass the run configuration again on resume (needed:
    the journal stores only hashes of the tools, so a resumer must be told
    the tool commands).  ``extra_env``: variables added to every leg.
    """

    argv: tuple[str, ...]
    resume_config: bool = True
    extra_env: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def is_reference(self) -> bool:
        """True for the bundled reference implementation (``python -m fiskj``)."""
        return tuple(self.argv[1:]) == ("-m", "fiskj")

    @property
    def is_mutant_subject(self) -> bool:
        """True for the mutant subject (``python -m harness.selftest.subject``: fiskj after ``$FISKJ_PRELOAD``)."""
        return tuple(self.argv[1:3]) == ("-m", MUTANT_SUBJECT)

    @property
    def is_fiskj_based(self) -> bool:
        """True when the subject runs fiskj's own code: the reference or the mutant subject."""
        return self.is_reference or self.is_mutant_subject

    def command_line(self) -> str:
        """The prefix as one shell-quoted string (for ``--subject`` in reproducers).

        ``extra_env`` comes first as ``NAME=value`` words, as a shell would
        take them (:func:`parse_subject` reads them back).
        """
        return shlex.join([f"{k}={v}" for k, v in self.extra_env] + list(self.argv))

    def _config_args(self, cfg: RunConfig, *, resume: bool = False) -> list[str]:
        args = [
            "--model", cfg.model,
            "--base-url", cfg.base_url,
            "--tools", cfg.tools_file,
            "--max-tokens", str(cfg.max_tokens),
            "--max-iterations", str(cfg.max_iterations),
        ]
        if cfg.chat and not resume:  # a resume takes the chat flag from the journal
            args.append("--chat")
        return args

    def start_argv(self, cfg: RunConfig) -> list[str]:
        """argv that starts a checkpointed run named ``cfg.run_id`` (the prompt is one argument)."""
        return [*self.argv, "run", "--checkpoint", "--name", cfg.run_id, *self._config_args(cfg), "--", cfg.prompt]

    def resume_argv(self, cfg: RunConfig, force: bool = False) -> list[str]:
        """argv that resumes ``cfg.run_id`` (``--force`` overrides a fingerprint mismatch)."""
        argv = [*self.argv, "run", "--resume", cfg.run_id]
        if force:
            argv.append("--force")
        if self.resume_config:
            argv += self._config_args(cfg, resume=True)
        return argv

    def env(
        self,
        *,
        base: Mapping[str, str] | None = None,
        base_url: str,
        api_key: str,
        state_home: str,
        ledger: str,
        leg: int,
        trace: str | None,
        fault: str | None = None,
    ) -> dict[str, str]:
        """The environment of one leg.

        Starts from ``base`` (default ``os.environ``) minus every variable of
        :data:`HARNESS_ENV`, then sets ``ANTHROPIC_BASE_URL``,
        ``ANTHROPIC_API_KEY``, ``XDG_STATE_HOME``, ``FISKJ_LEDGER``,
        ``FISKJ_HARNESS_LEG``, ``FISKJ_IOSEAM_TRACE`` (when ``trace``) and
        ``FISKJ_IOSEAM_FAULT`` (when ``fault``, e.g. ``"kill-after@12"``).
        """
        env = {k: v for k, v in (os.environ if base is None else base).items() if k not in HARNESS_ENV}
        env.update(self.extra_env)
        env["ANTHROPIC_BASE_URL"] = base_url
        env["ANTHROPIC_API_KEY"] = api_key
        env["XDG_STATE_HOME"] = state_home
        env["FISKJ_LEDGER"] = ledger
        env["FISKJ_HARNESS_LEG"] = str(leg)
        if trace:
            env["FISKJ_IOSEAM_TRACE"] = trace
        if fault:
            env["FISKJ_IOSEAM_FAULT"] = fault
        return env


def default_subject() -> Subject:
    """The reference implementation: ``[sys.executable, "-m", "fiskj"]``."""
    return Subject(argv=(sys.executable, "-m", "fiskj"))


def parse_subject(command: str | Sequence[str] | None) -> Subject:
    """Build a :class:`Subject` from a ``--subject`` value.

    ``command``: a shell-quoted string (split with :func:`shlex.split`) or an
    argv list; ``None`` or empty gives :func:`default_subject`.  Leading
    ``NAME=value`` words are variables set for every leg (``extra_env``), as
    in a shell: ``--subject "FISKJ_MUTANT=no-fsync python -m harness.selftest.subject"``
    (:func:`harness.selftest.mutants.with_preload` adds the mutant's preload).
    Raises ``ValueError`` on unbalanced quotes or assignments with no command.
    """
    if not command:
        return default_subject()
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    env = []
    while argv and _ASSIGNMENT.match(argv[0]):
        name, _, value = argv.pop(0).partition("=")
        env.append((name, value))
    if not argv:
        if env:
            raise ValueError(f"--subject {command!r} sets variables but names no command")
        return default_subject()
    return Subject(argv=tuple(argv), extra_env=tuple(env))


_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def fork_server_enabled(subject: Subject, environ: Mapping[str, str] | None = None) -> bool:
    """True when legs of ``subject`` may be forked from a :class:`harness.subject.forkserver.ForkServer`.

    A forked leg imports the module named in ``$FISKJ_PRELOAD`` (if any),
    then runs :func:`fiskj.cli.main`: exactly what the mutant subject
    (``python -m harness.selftest.subject``) does, and what the reference
    (``python -m fiskj``) does when no preload is named.  So only those two,
    run by this very interpreter, are forked, and not when
    ``FISKJ_HARNESS_FORKSERVER=0``.  The environment of the legs is
    ``environ`` (default ``os.environ``) with the subject's variables: the
    reference with a preload in it, or the mutant subject with a bare
    ``FISKJ_MUTANT`` (no preload: the subject resolves the name itself)
    gets fresh processes.
    """
    base = os.environ if environ is None else environ
    if base.get("FISKJ_HARNESS_FORKSERVER", "1") == "0":
        return False
    if os.path.realpath(subject.argv[0]) != os.path.realpath(sys.executable):
        return False
    env = {**base, **dict(subject.extra_env)}
    if subject.is_reference and len(subject.argv) == 3:
        return not env.get(PRELOAD_ENV)
    if subject.is_mutant_subject and len(subject.argv) == 3:
        return bool(env.get(PRELOAD_ENV)) or not env.get(MUTANT_ENV)
    return False
