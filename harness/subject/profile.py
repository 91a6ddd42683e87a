"""Subject profiles: a TOML file that says how to run a real agent under the harness, without a wrapper.

docs/subject.md "Subject profiles" is the reference; in short::

    name = "my-agent"
    command = ["node", "{profile_dir}/agent.mjs"]   # the command prefix
    home = true                 # each trial gets its own $HOME (TRIAL/home)
    chat = false                # the agent cannot take follow-ups on stdin

    [env]                       # per leg: a string sets, false removes an inherited variable
    NODE_EXTRA_CA_CERTS = false

    [files]                     # written before every leg ({{ and }} are literal braces)
    "{trial_dir}/agent.json" = '{{"model": "{model}", "max_tokens": {max_tokens}}}'

    [commands]                  # argument templates after the prefix (default: docs/subject.md)
    start = ["run", "--name", "{run_id}", "--", "{prompt}"]
    resume = ["run", "--resume", "{run_id}", "{force_args}", "--", "{resume_prompt}"]
    force_args = ["--force"]
    chat_args = ["--chat"]
    system_args = ["--system", "{system_file}"]     # spliced where {system_args} stands (a drifted system prompt)
    thinking_args = ["--thinking", "{thinking}"]   # spliced where {thinking_args} stands (a drifted thinking mode)
    resume_prompt = "continue"

    [exit]                      # exit statuses of each outcome (one status may serve several)
    completed = [0]
    suspended = [0]
    error = [1]
    refused = [1]

    [journal]
    path = "{home}/.local/state/my-agent/{run_id}.json"
    format = "fisk-ai-v2"

    [reading]                   # the agent's own reading of a journal (judged by I10)
    command = ["status", "{run_id}"]
    status = "status"           # dotted paths into the JSON object it prints
    pending = "pending.unanswered"
    records = "records"

    [not_applicable]            # invariants that do not apply to this agent, with the reason
    I1 = "the agent has no suspend"

Templates use ``{name}`` for :data:`harness.subject.contract.TEMPLATE_VARS`;
a word that is exactly ``{chat_args}`` or ``{force_args}`` is replaced by
that list when it applies.  :func:`load_profile` returns a
:class:`harness.subject.contract.Subject`; every mistake is a
:class:`harness.errors.ProfileError` naming the file, line and key.
"""

from __future__ import annotations

import os
import re
import shlex
import string
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from harness.errors import ProfileError
from harness.names import FISK_AI_V2, INVARIANTS, JOURNAL_FORMATS
from harness.subject.contract import (CONTRACT_EXITS, CONTRACT_JOURNAL, CONTRACT_RESUME, CONTRACT_START, OUTCOMES,
                                      TEMPLATE_VARS, Subject, parse_subject)
from harness.tomlwhere import load_toml, located

__all__ = ["load_profile", "parse_profile", "is_profile_path", "resolve_subject", "JOURNAL_FORMATS",
           "bundled_profiles"]


_TOP = {"name", "about", "command", "home", "chat", "env", "files", "commands", "exit", "journal", "reading",
        "not_applicable"}
_COMMANDS = {"start", "resume", "force_args", "chat_args", "system_args", "thinking_args", "resume_prompt"}
_JOURNAL = {"path", "format"}
_READING = {"command", "status", "pending", "records"}
_SPLICED = {"{chat_args}", "{force_args}", "{system_args}", "{thinking_args}"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def is_profile_path(value: str) -> bool:
    """True when a ``--subject`` value names a profile file (it ends in ``.toml``), not a command."""
    return value.strip().endswith(".toml") and " " not in value.strip()


def resolve_subject(command: str | Sequence[str] | None) -> Subject:
    """The subject a ``--subject`` value names: a profile file (``path.toml``, optionally after
    ``NAME=value`` words, which are added to its variables) or a command prefix
    (:func:`harness.subject.contract.parse_subject`).

    Raises :class:`ProfileError` for a bad profile, ``ValueError`` for a bad command.
    """
    if not command:
        return parse_subject(command)
    words = shlex.split(command) if isinstance(command, str) else list(command)
    env = []
    while words and _ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env.append((name, value))
    if len(words) == 1 and is_profile_path(words[0]):
        subject = load_profile(words[0])
        return replace(subject, extra_env=tuple(subject.extra_env) + tuple(env)) if env else subject
    return parse_subject(command)


def bundled_profiles() -> list[Path]:
    """The profiles shipped in the repository's ``subjects/`` folder (sorted)."""
    root = Path(__file__).resolve().parents[2] / "subjects"
    return sorted(root.glob("**/*.toml"))


def load_profile(path: str | os.PathLike[str]) -> Subject:
    """Read the profile at ``path``; returns its :class:`Subject` (``profile`` = the absolute path).

    Raises :class:`ProfileError` (file, line, key) when the file cannot be
    read or holds a mistake (:func:`parse_profile`).
    """
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError("no such profile file", path=where) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"cannot read the profile: {exc}", path=where) from None
    return parse_profile(text, os.path.abspath(where))


def parse_profile(text: str, path: str) -> Subject:
    """Parse profile TOML ``text`` (``path``: its file, for ``{profile_dir}`` and errors).

    Returns a :class:`Subject` whose unset parts are the contract's
    (docs/subject.md "Commands").  Raises :class:`ProfileError` on a TOML
    syntax error, an unknown table or key, a value of the wrong type, an
    unknown template variable, an exit status of no known outcome, an
    unsupported journal format or an unknown invariant id.
    """
    doc = load_toml(text, path, ProfileError)

    def fail(section: str, key: str | None, message: str) -> ProfileError:
        return located(ProfileError, text, path, section, key, message)

    def table(name: str, allowed: set[str] | None) -> dict[str, Any]:
        value = doc.get(name, {})
        if not isinstance(value, dict):
            raise fail("", name, f"expected a table [{name}], got {type(value).__name__}")
        for key in value:
            if allowed is not None and key not in allowed:
                raise fail(name, key, f"unknown key; [{name}] takes {', '.join(sorted(allowed))}")
        return value

    def words(section: str, key: str, value: Any, *, nonempty: bool = True) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(w, str) for w in value) or (nonempty and not value):
            raise fail(section, key, f"expected a{' non-empty' if nonempty else ''} list of strings, got {value!r}")
        for w in value:
            template(section, key, w)
        return tuple(value)

    def template(section: str, key: str, value: str) -> str:
        if value in _SPLICED:
            return value
        try:
            names = [f for _, f, _, _ in string.Formatter().parse(value) if f is not None]
        except ValueError as exc:
            raise fail(section, key, f"bad template {value!r}: {exc}") from None
        bad = [n for n in names if n not in TEMPLATE_VARS]
        if bad:
            raise fail(section, key, f"unknown template variable(s) {bad} in {value!r}; "
                                     f"known: {', '.join(TEMPLATE_VARS)} (and the words {{chat_args}}, {{force_args}}, {{system_args}}, {{thinking_args}})")
        return value

    for key in doc:
        if key not in _TOP:
            raise fail("", key, f"unknown key; a profile takes {', '.join(sorted(_TOP))}")
    name = doc.get("name", "")
    if not isinstance(name, str) or not name:
        raise fail("", "name", "expected a non-empty string: the subject's name in reports")
    if "command" not in doc:
        raise fail("", None, "missing key 'command': the command prefix that starts the agent")
    command = words("", "command", doc["command"])
    for w in command:
        if {f for _, f, _, _ in string.Formatter().parse(w) if f} - {"profile_dir", "python"}:
            raise fail("", "command", f"the command prefix may only use {{profile_dir}} and {{python}}: {w!r}")
    flags = {}
    for key in ("home", "chat"):
        value = doc.get(key, key == "chat")
        if not isinstance(value, bool):
            raise fail("", key, f"expected true or false, got {value!r}")
        flags[key] = value

    env_set, env_unset = [], []
    for key, value in table("env", None).items():
        if not _ENV_NAME.match(key):
            raise fail("env", key, "not a variable name")
        if value is False:
            env_unset.append(key)
        elif isinstance(value, str):
            env_set.append((key, value))
        else:
            raise fail("env", key, f"expected a string (set it) or false (remove it), got {value!r}")

    files = []
    for key, value in table("files", None).items():
        template("files", key, key)
        if not key.startswith(("{state_home}/", "{home}/", "{trial_dir}/")):
            raise fail("files", key, "a file must be written in the trial's directories: start its path with "
                                     "{state_home}/, {home}/ or {trial_dir}/")
        if key.startswith("{home}/") and not flags["home"]:
            raise fail("files", key, "a file under {home} needs home = true")
        if not isinstance(value, str):
            raise fail("files", key, f"expected the file's content as a string template, got {value!r}")
        template("files", key, value)
        files.append((key, value))

    commands = table("commands", _COMMANDS)
    start = words("commands", "start", commands["start"]) if "start" in commands else CONTRACT_START
    resume = words("commands", "resume", commands["resume"]) if "resume" in commands else CONTRACT_RESUME
    force_args = words("commands", "force_args", commands.get("force_args", ["--force"]), nonempty=False)
    chat_args = words("commands", "chat_args", commands.get("chat_args", ["--chat"]), nonempty=False)
    system_args = words("commands", "system_args", commands.get("system_args", list(Subject.system_args)),
                        nonempty=False)
    thinking_args = words("commands", "thinking_args", commands.get("thinking_args", list(Subject.thinking_args)),
                          nonempty=False)
    resume_prompt = commands.get("resume_prompt", "")
    if not isinstance(resume_prompt, str):
        raise fail("commands", "resume_prompt", f"expected a string, got {resume_prompt!r}")
    if "{run_id}" not in " ".join(resume) and "resume" in commands:
        raise fail("commands", "resume", "the resume command must name the run: put {run_id} in it")

    exits_doc = table("exit", set(OUTCOMES))
    exits = []
    for outcome, default in CONTRACT_EXITS:
        codes = exits_doc.get(outcome, list(default) if not exits_doc else [])
        if not isinstance(codes, list) or not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255
                                                  for c in codes):
            raise fail("exit", outcome, f"expected a list of exit statuses (0-255), got {codes!r}")
        exits.append((outcome, tuple(codes)))
    if exits_doc and not any(codes for outcome, codes in exits if outcome == "completed"):
        raise fail("exit", "completed", "a run must be able to complete: give its exit status")

    journal = table("journal", _JOURNAL)
    journal_path = journal.get("path", CONTRACT_JOURNAL)
    if not isinstance(journal_path, str) or not journal_path:
        raise fail("journal", "path", f"expected a path template, got {journal_path!r}")
    template("journal", "path", journal_path)
    if "{run_id}" not in journal_path:
        raise fail("journal", "path", "the journal path must name the run: put {run_id} in it")
    if not journal_path.startswith(("{state_home}", "{home}", "{trial_dir}")):
        raise fail("journal", "path", "the journal must live in the trial's directories: start the path with "
                                      "{state_home}, {home} or {trial_dir}")
    if journal_path.startswith("{home}") and not flags["home"]:
        raise fail("journal", "path", "a journal under {home} needs home = true")
    fmt = journal.get("format", FISK_AI_V2)
    if fmt not in JOURNAL_FORMATS:
        raise fail("journal", "format", f"unsupported journal format {fmt!r}; known: {', '.join(JOURNAL_FORMATS)}")

    reading = table("reading", _READING)
    status_args = None
    fields: list[tuple[str, str]] = []
    if reading:
        if fmt != FISK_AI_V2:
            raise fail("reading", None, f"a reading is compared with fiskj's fold of the journal (I10), which needs "
                                        f"journal format {FISK_AI_V2!r}; this profile says {fmt!r}")
        if "command" not in reading:
            raise fail("reading", None, "missing key 'command': the command that prints the agent's reading")
        status_args = words("reading", "command", reading["command"])
        for key in ("status", "pending", "records"):
            if key in reading:
                value = reading[key]
                if not isinstance(value, str) or not value:
                    raise fail("reading", key, f"expected a dotted path into the reading's JSON, got {value!r}")
                fields.append((key, value))
        if not any(k == "status" for k, _ in fields):
            raise fail("reading", "status", "missing: where the reading's JSON holds the run's status")

    not_applicable = []
    for inv, why in table("not_applicable", None).items():
        if inv not in INVARIANTS:
            raise fail("not_applicable", inv, f"unknown invariant; known: {', '.join(INVARIANTS)}")
        if not isinstance(why, str) or not why.strip():
            raise fail("not_applicable", inv, "expected the reason, as a non-empty string")
        not_applicable.append((inv, why.strip()))

    about = doc.get("about", "")
    if not isinstance(about, str):
        raise fail("", "about", f"expected a string, got {about!r}")
    profile_dir = os.path.dirname(path)
    argv = tuple(w.replace("{profile_dir}", profile_dir).replace("{python}", sys.executable) for w in command)
    return Subject(argv=argv, extra_env=tuple(env_set), env_unset=tuple(env_unset), start_args=start,
                   resume_args=resume, chat_args=chat_args, force_args=force_args, resume_prompt=resume_prompt,
                   system_args=system_args, thinking_args=thinking_args,
                   exits=tuple(exits) if exits_doc else CONTRACT_EXITS, journal=journal_path, journal_format=fmt,
                   home=flags["home"], chat=flags["chat"], status_args=status_args, status_fields=tuple(fields),
                   not_applicable=tuple(not_applicable), files=tuple(files), name=name, profile=path)
