"""The subject contract: how the harness starts, resumes and finds an agent under test (docs/subject.md).

A subject is a command prefix that takes fiskj's run command line (:data:`CONTRACT_START`,
:data:`CONTRACT_RESUME`); the default is the reference, ``python -m fiskj``."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import uuid
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Mapping, Sequence

from harness.errors import SetupError
from harness.history.journal_location import CONTRACT_JOURNAL
from harness.history.promises import FISK_AI, Promises
from harness.subject.capabilities import Capabilities, this_python
from harness.workload.mcp_setup import McpSpec
from harness.workload.tools import PLAIN
from harness.history.readers import store_journal
from harness.names import (VOLATILE, EXIT_COMPLETED, EXIT_ERROR, EXIT_SUSPENDED, EXIT_USAGE, MUTANT_ENV, MUTANT_SUBJECT,
                           PRELOAD_ENV)

__all__ = ["probes_path", "journal_bytes",
           "EXIT_COMPLETED", "EXIT_ERROR", "EXIT_USAGE", "EXIT_SUSPENDED", "Subject", "RunConfig",
           "default_subject", "parse_subject", "HARNESS_ENV", "fork_server_enabled", "with_fiskj_reading",
           "CONTRACT_START", "CONTRACT_RESUME", "CONTRACT_JOURNAL", "CONTRACT_EXITS", "OUTCOMES", "TEMPLATE_VARS"]

#: Variables the harness sets for every leg; inherited values of these are dropped.
HARNESS_ENV = ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "XDG_STATE_HOME", "FISKJ_LEDGER",
               "FISKJ_HARNESS_LEG", "FISKJ_PROBES", "FISKJ_IOSEAM_TRACE", "FISKJ_IOSEAM_FAULT")


def probes_path(ledger: str | os.PathLike[str]) -> str:
    """The code-probe file of a leg whose effects ledger is ``ledger``: ``probes`` in the same folder."""
    return str(Path(ledger).with_name("probes"))


@dataclass(frozen=True)
class RunConfig:
    """The configuration of one run, the same for every leg (it is the fingerprint): ``tools_file`` a path to
    fiskj's ``--tools`` JSON; ``chat`` only a flag (the follow-ups go to stdin); ``system_file`` and
    ``thinking`` passed only when set (a drifted resume)."""

    run_id: str
    model: str
    base_url: str
    tools_file: str
    max_tokens: int
    max_iterations: int
    prompt: str
    chat: bool = False
    system_file: str = ""  # a system prompt file: passed (``{system_args}``) only when set (a drifted resume)
    thinking: str = ""     # a thinking mode: passed (``{thinking_args}``) only when set (a drifted resume)


#: The run command of the contract (docs/subject.md "Commands") as templates after the command prefix: ``{name}``
#: is filled in; a word that is exactly ``{chat_args}`` (``{force_args}``, ...) is spliced when it applies.
CONTRACT_CONFIG = ("--model", "{model}", "--base-url", "{base_url}", "--tools", "{tools_file}",
                   "--max-tokens", "{max_tokens}", "--max-iterations", "{max_iterations}", "{system_args}",
                   "{thinking_args}")
CONTRACT_START = ("run", "--checkpoint", "--name", "{run_id}", *CONTRACT_CONFIG, "{chat_args}", "--", "{prompt}")
CONTRACT_RESUME = ("run", "--resume", "{run_id}", "{force_args}", *CONTRACT_CONFIG)
#: outcome -> the contract's exit status (:mod:`harness.names`), and as a profile's ``exits`` default.
_CANONICAL = {"completed": EXIT_COMPLETED, "suspended": EXIT_SUSPENDED, "error": EXIT_ERROR, "refused": EXIT_USAGE}
OUTCOMES = tuple(_CANONICAL)
CONTRACT_EXITS = tuple((outcome, (code,)) for outcome, code in _CANONICAL.items())
#: The reading of a fiskj-based subject: ``session show ID --json`` (docs/spec.md section 14).
FISKJ_STATUS = ("session", "show", "{run_id}", "--json")
FISKJ_STATUS_FIELDS = (("status", "status"), ("pending", "pending.unanswered"), ("records", "records"))
#: The template variables a profile may use (docs/subject.md "Subject profiles").
TEMPLATE_VARS = ("run_id", "model", "base_url", "tools_file", "max_tokens", "max_iterations", "prompt",
                 "resume_prompt", "state_home", "home", "trial_dir", "profile_dir", "python", "system_file",
                 "thinking", "run_uuid", "cwd", "cwd_slug", "tmp_dir", "mcp_config", "mcp_url", "mcp_tools", "env",
                 "store_url")
_FIELD = re.compile(r"\{\{|\}\}|\{([a-z_]+)(?::([A-Za-z_][A-Za-z0-9_]*))?\}")


def fill(template: str, values: Mapping[str, str], environ: Mapping[str, str] | None = None) -> str:
    """``template`` with each ``{name}`` of ``values`` and each ``{env:NAME}`` (``environ``'s, default
    ``os.environ``) filled in; ``{{``/``}}`` are literal braces, any other ``{...}`` is left as it is.
    Raises :class:`SetupError` for an ``{env:NAME}`` that is not set or is set empty (docs/subject.md
    "Templates": an empty program path or argument is a mistake, not a value)."""
    def one(m: re.Match[str]) -> str:
        name, var = m.groups()
        if name is None:
            return m.group(0)[0]
        if name == "env" and var:
            value = (os.environ if environ is None else environ).get(var)
            if not value:
                raise SetupError(f"the subject's template {template!r} reads ${var}, which is "
                                 f"{'not set' if value is None else 'set empty'}: set it in the harness's environment "
                                 f"(or as {var}=VALUE before the profile in --subject)")
            return value
        return values[name] if name in values and not var else m.group(0)
    return _FIELD.sub(one, template)


def journal_file(path: Path) -> Path:
    """``path``, or when its file name is a glob (``*``) the newest file that matches it (``path`` itself, glob
    and all, when none does yet: the agent has not made it).  Read again after each leg: the agent names it."""
    if "*" not in path.name:
        return path
    found = sorted(path.parent.glob(path.name), key=lambda p: (p.stat().st_mtime_ns, p.name))
    return found[-1] if found else path


def journal_bytes(path: Path) -> bytes | None:
    """The bytes of the journal at ``path`` (:func:`journal_file`; ``None``: none); a directory (an opaque store)
    as one snapshot of every regular file below it, sorted (:func:`harness.history.journal_location.store_files`),
    leaving out :data:`harness.names.VOLATILE` files (no durable state)."""
    if str(path).startswith("nats:"):  # {store_url}#{run_id}: the run's records read from its JetStream store
        return store_journal(path)
    path = journal_file(path)
    if not path.is_dir():
        try:
            return path.read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
    out = []
    for f in sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink() and not p.name.endswith(VOLATILE)):
        try:
            data = f.read_bytes()
        except FileNotFoundError:  # (removed while it was read: not in the store any more)
            continue
        out.append(b"%d %s\n" % (len(data), str(f.relative_to(path)).encode()) + data)
    return b"".join(out)


#: ``{env:NAME}`` in a template: the variables a subject reads from the harness's environment.
_ENV_REF = re.compile(r"\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def cwd_slug(path: str) -> str:
    """A directory as agents name a folder after it (Claude Code's ``~/.claude/projects/<slug>``): every
    character but an ASCII letter or digit made ``-``."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)


@dataclass(frozen=True)
class Subject:
    """An agent under test: how to start and resume it, read its exits, find its journal and ask its reading.

    ``argv``: the command prefix; ``extra_env``/``env_unset``: variables added
    to / removed from every leg; ``resume_config``: pass the run configuration
    again on resume.  Every other field is a subject profile's key of the same
    meaning, its default the contract's (docs/subject.md "Subject profiles"):
    argument templates, ``exits`` (:meth:`outcome`) and ``error_stdout``, ``promises``, the ``journal`` template
    and format, ``status_args``/``status_fields``/``reading_format`` (``None``: no reading), ``cwd`` and ``mcp`` (docs/subject.md
    "Tools over MCP"), ``fork_server`` (``[fork_server] preimport``: docs/subject.md "Fork servers").
    """

    argv: tuple[str, ...]
    resume_config: bool = True
    extra_env: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    profile_env: tuple[tuple[str, str], ...] = ()  # a profile's [env] (templates); extra_env: NAME=value words
    env_unset: tuple[str, ...] = ()
    start_args: tuple[str, ...] = CONTRACT_START
    resume_args: tuple[str, ...] = CONTRACT_RESUME
    chat_args: tuple[str, ...] = ("--chat",)
    force_args: tuple[str, ...] = ("--force",)
    system_args: tuple[str, ...] = ("--system", "{system_file}")
    thinking_args: tuple[str, ...] = ("--thinking", "{thinking}")
    resume_prompt: str = ""
    exits: tuple[tuple[str, tuple[int, ...]], ...] = CONTRACT_EXITS
    error_stdout: str = ""
    promises: Promises = FISK_AI
    journal: str = CONTRACT_JOURNAL
    journal_format: str = "fisk-ai-v2"
    home: bool = False
    chat: bool = True
    server_tools: bool = True  # it takes the model's server-tool blocks (web_search, pause_turn)
    time_scale: float = 1.0  # a trial may take this many times its scenario's budget (a slow agent)
    status_args: tuple[str, ...] | None = None
    status_fields: tuple[tuple[str, str], ...] = ()
    reading_format: str = "json"  # or "text": status_fields are regular expressions (docs/subject.md)
    not_applicable: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, str], ...] = ()
    name: str = ""
    about: str = ""  # the profile's ``about``: what the subject is, for people (reports, the report card)
    profile: str | None = None
    cwd: str = ""
    mcp: McpSpec | None = None
    mcp_config: str = "{trial_dir}/mcp.json"
    jetstream: tuple[int, str] | None = None  # [jetstream]: (replicas, sync_interval) of the server(s) a trial starts
    store_url: str = ""  # {store_url}: the JetStream store of this trial (set per trial by the jetstream family)
    jetstream_storage: str = "file"  # [jetstream] storage: "file", or "memory" (refused before any trial)
    fork_server: tuple[str, ...] | None = None  # [fork_server] preimport: a Python agent's legs forked (None: not)

    @property
    def is_reference(self) -> bool:
        """True for the bundled reference implementation: ``python -m fiskj`` run by this interpreter in this
        environment (:func:`harness.subject.capabilities.this_python`; another venv's python runs another fiskj)."""
        return tuple(self.argv[1:]) == ("-m", "fiskj") and this_python(self.argv[0])

    @property
    def is_mutant_subject(self) -> bool:
        """True for the mutant subject (``python -m harness.selftest.subject``: fiskj after ``$FISKJ_PRELOAD``)."""
        return tuple(self.argv[1:3]) == ("-m", MUTANT_SUBJECT)

    @cached_property
    def caps(self) -> Capabilities:
        """What this subject can do, computed once (:class:`harness.subject.capabilities.Capabilities`)."""
        return Capabilities.of(self)

    @property
    def label(self) -> str:
        """How reports name the subject: the profile's name, else the command line."""
        return self.name or self.command_line()

    @property
    def semantics(self) -> str:
        """What the subject declares of its semantics, one line for a report's header: its promises and what
        each exit status means (docs/spec.md section 15 "Declared promises")."""
        exits = ", ".join(f"{o} {'/'.join(map(str, codes)) or '-'}" for o, codes in self.exits)
        return (f"{self.promises.describe()}; exit: {exits}"
                + (f" (completed with stdout matching {self.error_stdout!r}: error)" if self.error_stdout else ""))

    def command_line(self) -> str:
        """The subject as one shell-quoted ``--subject`` value (for reproducers): ``extra_env`` as ``NAME=value``
        words, and each variable the subject's templates read (``{env:NAME}``) as it is set now, then the profile
        file or the command (a profile's own ``[env]`` is the profile's: not repeated)."""
        words = [self.profile] if self.profile else list(self.argv)
        return shlex.join([f"{k}={v}" for k, v in [*self.extra_env, *self.read_env().items()]] + words)

    def read_env(self) -> dict[str, str]:
        """Each variable the subject's templates read (``{env:NAME}``) and ``extra_env`` does not give, as it is
        set now (a report keeps them: a replay where one is unset sets it)."""
        given = dict(self.extra_env)
        read = sorted(set(_ENV_REF.findall(repr(self))) - set(given))
        return {k: os.environ[k] for k in read if k in os.environ}

    def spec(self) -> str | list[str]:
        """What a JSON report stores to rebuild the subject: the profile path, else the argv list."""
        return self.profile if self.profile else list(self.argv)

    def _words(self, template: tuple[str, ...], values: Mapping[str, str], *, chat: bool = False,
               force: bool = False) -> list[str]:
        spliced = {"{chat_args}": self.chat_args if chat else (), "{force_args}": self.force_args if force else (),
                   "{system_args}": self.system_args if values.get("system_file") else (),
                   "{thinking_args}": self.thinking_args if values.get("thinking") else ()}
        out: list[str] = []
        for word in template:
            out += [self.fill(w, values) for w in spliced.get(word, (word,))]
        return out

    def fill(self, template: str, values: Mapping[str, str]) -> str:
        """:func:`fill` with this subject's ``NAME=value`` words over ``os.environ`` for ``{env:NAME}``."""
        return fill(template, values, {**os.environ, **dict(self.extra_env)} if self.extra_env else None)

    @property
    def tool_name(self) -> str:
        """How the agent shows the workload's tools to the model (:meth:`McpSpec.tool_template`; plain without MCP)."""
        return self.mcp.tool_template() if self.mcp else PLAIN

    def values(self, cfg: RunConfig, **where: str) -> dict[str, str]:
        """The template variables of ``cfg`` and of the trial (``where``: :meth:`trial_where`'s, and ``mcp_url``
        for a leg; :data:`TEMPLATE_VARS`)."""
        run = {name: str(value) for name, value in asdict(cfg).items() if name != "chat"}
        return {**run, "resume_prompt": self.resume_prompt, "state_home": "", "home": "", "trial_dir": "",
                "profile_dir": os.path.dirname(self.profile or ""), "python": sys.executable, "mcp_url": "",
                "store_url": self.store_url, **where}

    def trial_where(self, tmp: Path, run_uuid: str | None = None, make: bool = True) -> dict[str, str]:
        """The values of a trial laid in folder ``tmp``, its folders made (``make``): ``state_home`` (``tmp/state``),
        ``home`` (``tmp/home`` with ``home = true``, else ``""``), ``trial_dir``, ``tmp_dir`` (``tmp/tmp``),
        ``run_uuid`` (a fresh UUID unless given: the run whose state is laid), ``cwd`` (the profile's, made;
        ``""``: the harness's) and its ``cwd_slug``, ``mcp_config`` and ``mcp_tools``."""
        where = {"state_home": str(tmp / "state"), "home": str(tmp / "home") if self.home else "",
                 "trial_dir": str(tmp), "tmp_dir": str(tmp / "tmp"), "run_uuid": run_uuid or str(uuid.uuid4())}
        where["cwd"] = self.fill(self.cwd, where) if self.cwd else ""
        where["cwd_slug"] = cwd_slug(where["cwd"] or os.getcwd())
        where["mcp_config"] = self.fill(self.mcp_config, where) if self.mcp else ""
        where["mcp_tools"] = ",".join(self.mcp.shown_tools()) if self.mcp else ""
        for key in ("state_home", "home", "tmp_dir", "cwd") if make else ():
            if where[key]:
                os.makedirs(where[key], 0o700, exist_ok=True)
        return where

    def start_argv(self, cfg: RunConfig, **where: str) -> list[str]:
        """argv that starts a checkpointed run named ``cfg.run_id`` (the prompt is one argument); ``where``:
        the trial's values (:meth:`trial_where`) for the templates that name them.  Raises
        :class:`SetupError` for an ``{env:NAME}`` not set."""
        return self._words(self.argv + self.start_args, self.values(cfg, **where), chat=cfg.chat)

    def resume_argv(self, cfg: RunConfig, force: bool = False, **where: str) -> list[str]:
        """argv that resumes ``cfg.run_id`` (``--force`` overrides a fingerprint mismatch); ``where``: as
        :meth:`start_argv`."""
        template = self.resume_args
        if not self.resume_config and template == CONTRACT_RESUME:
            template = CONTRACT_RESUME[:4]
        return self._words(self.argv + template, self.values(cfg, **where), force=force)

    def status_argv(self, cfg: RunConfig, **where: str) -> list[str] | None:
        """argv that prints the subject's own reading of ``cfg.run_id``'s journal, or ``None`` (no reading);
        ``where``: as :meth:`start_argv`."""
        if self.status_args is None:
            return None
        return self._words(self.argv + self.status_args, self.values(cfg, **where))

    def journal_path(self, cfg: RunConfig, **where: str) -> Path:
        """Where this subject keeps ``cfg.run_id``'s journal in a trial (the ``journal`` template:
        :meth:`harness.history.journal_location.JournalLocation.path`; a glob: :func:`journal_file`)."""
        return journal_file(Path(self.caps.journal.path(self.values(cfg, **where))))

    def write_files(self, cfg: RunConfig, **where: str) -> list[Path]:
        """Write the ``files`` templates filled with ``cfg`` (the leg's configuration: a drifted resume gets
        the drifted values) and the trial's values; returns the paths written (parents made)."""
        values = self.values(cfg, **where)
        out = []
        for path_t, content_t in self.files:
            path = Path(self.fill(path_t, values))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(self.fill(content_t, values), encoding="utf-8")
            out.append(path)
        return out

    def outcome(self, code: int | None, before: bytes | None, after: bytes | None, stdout: str = "") -> int | None:
        """The contract's exit status for this subject's ``code`` (docs/subject.md "Exit statuses").

        A status under one outcome maps to it; under several, the journal decides
        (``refused`` when ``before == after``, else the last terminal record's
        reason).  A status under none, or ``None`` (killed), is returned as is.  A completed status whose
        ``stdout`` matches ``error_stdout`` is an error.
        """
        mapped = self._outcome(code, before, after)
        if mapped == EXIT_COMPLETED and self.error_stdout and re.search(self.error_stdout, stdout or ""):
            return EXIT_ERROR
        return mapped

    def _outcome(self, code: int | None, before: bytes | None, after: bytes | None) -> int | None:
        if code is None:
            return None
        outcomes = [name for name, codes in self.exits if code in codes]
        if not outcomes:
            return code
        if len(outcomes) == 1:
            return _CANONICAL[outcomes[0]]
        if "refused" in outcomes and before == after:
            return EXIT_USAGE
        reason = _last_terminal(after)
        if reason in ("completed", "suspended") and reason in outcomes:
            return _CANONICAL[reason]
        return EXIT_ERROR if "error" in outcomes else _CANONICAL[outcomes[0]]

    def env(self, *, base: Mapping[str, str] | None = None, base_url: str, api_key: str, state_home: str,
            ledger: str, leg: int, trace: str | None, fault: str | None = None,
            home: str | None = None, values: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of one leg (docs/subject.md "Environment"): ``base`` (default ``os.environ``) minus
        :data:`HARNESS_ENV` and ``env_unset``, plus ``extra_env`` and the harness's variables (``HOME``,
        ``FISKJ_IOSEAM_TRACE``, ``FISKJ_IOSEAM_FAULT`` only when given); ``values``: the leg's template values
        (:meth:`values`), which fill ``extra_env`` (a profile's ``[env]``)."""
        drop = set(HARNESS_ENV) | set(self.env_unset)
        env = {k: v for k, v in (os.environ if base is None else base).items() if k not in drop}
        env.update((k, self.fill(v, values)) if values else (k, v) for k, v in self.profile_env + self.extra_env)
        env.update(ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY=api_key, XDG_STATE_HOME=state_home,
                   FISKJ_LEDGER=ledger, FISKJ_HARNESS_LEG=str(leg), FISKJ_PROBES=probes_path(ledger))
        optional = {"HOME": home, "FISKJ_IOSEAM_TRACE": trace, "FISKJ_IOSEAM_FAULT": fault}
        env.update({name: value for name, value in optional.items() if value})
        return env


def _last_terminal(journal: bytes | None) -> str | None:
    """The ``reason`` of the journal's last complete line when it is a terminal record, else ``None``."""
    complete = [line for line in (journal or b"").split(b"\n")[:-1] if line.strip()]
    try:
        record = json.loads(complete[-1]) if complete else None
    except ValueError:
        return None
    terminal = record.get("terminal") if isinstance(record, dict) else None
    return terminal.get("reason") if isinstance(terminal, dict) else None


def default_subject() -> Subject:
    """The reference implementation: ``[sys.executable, "-m", "fiskj"]``."""
    return with_fiskj_reading(Subject(argv=(sys.executable, "-m", "fiskj")))


def with_fiskj_reading(subject: Subject) -> Subject:
    """``subject`` with fiskj's own reading command (``session show ID --json``) as its status command."""
    return replace(subject, status_args=FISKJ_STATUS, status_fields=FISKJ_STATUS_FIELDS)


def parse_subject(command: str | Sequence[str] | None) -> Subject:
    """Build a :class:`Subject` from a ``--subject`` value (a shell-quoted string or an argv list; leading
    ``NAME=value`` words are ``extra_env``; none: :func:`default_subject`).  Raises ``ValueError`` on unbalanced
    quotes or assignments with no command."""
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
    subject = Subject(argv=tuple(argv), extra_env=tuple(env))
    return with_fiskj_reading(subject) if subject.caps.fiskj_based else subject


_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def fork_server_enabled(subject: Subject, environ: Mapping[str, str] | None = None) -> bool:
    """True when legs of ``subject`` may be forked from a :class:`harness.subject.forkserver.ForkServer`:
    a Python agent whose profile declares ``[fork_server]``, or the reference or the mutant subject on this very
    interpreter, unless ``FISKJ_HARNESS_FORKSERVER=0`` or the legs' environment (``environ``, default
    ``os.environ``) names a preload for the reference or a bare ``FISKJ_MUTANT`` for the mutant subject (those get
    fresh processes)."""
    base = os.environ if environ is None else environ
    if base.get("FISKJ_HARNESS_FORKSERVER", "1") == "0" or not subject.caps.forkable:
        return False
    if subject.fork_server is not None:
        return True
    env = {**base, **dict(subject.extra_env)}
    if subject.is_reference and len(subject.argv) == 3:
        return not env.get(PRELOAD_ENV)
    if subject.is_mutant_subject and len(subject.argv) == 3:
        return bool(env.get(PRELOAD_ENV)) or not env.get(MUTANT_ENV)
    return False
