"""Subject profiles: a TOML file that says how to run a real agent under the harness, without a wrapper.

docs/subject.md "Subject profiles" is the reference: every table and key, the templates (``{name}`` for
:data:`harness.subject.contract.TEMPLATE_VARS`, a word ``{chat_args}`` or ``{force_args}`` spliced when it applies)
and an example.  :func:`load_profile` returns a :class:`harness.subject.contract.Subject`; every mistake is a
:class:`harness.errors.ProfileError` naming the file, line and key.
"""

from __future__ import annotations

import os
import re
import string
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from harness.errors import ProfileError
from harness.history.promises import (CUT_OFF_TURN, DRIFTED_RESUME, DURABLE, INTERRUPTED_TOOL, RESUME_COMPLETED, SUSPEND_SIGNALS,
                                      Promises)
from harness.names import FISK_AI_V2, INVARIANTS, JOURNAL_FORMATS, OPAQUE
from harness.subject.capabilities import this_python
from harness.subject.contract import (CONTRACT_EXITS, CONTRACT_JOURNAL, CONTRACT_RESUME, CONTRACT_START, OUTCOMES,
                                      TEMPLATE_VARS, Subject, parse_subject)
from harness.suggest import did_you_mean
from harness.tomlwhere import load_toml, located
from harness.workload.mcp_setup import McpSetupError, McpSpec
from harness.workload.tools import ToolNameError

__all__ = ["load_profile", "parse_profile", "is_profile_path", "resolve_subject", "JOURNAL_FORMATS",
           "bundled_profiles"]


_TOP = {"name", "about", "command", "home", "chat", "server_tools", "cwd", "env", "files", "mcp", "commands", "exit", "journal",
        "reading", "not_applicable", "promises", "jetstream", "time_scale", "fork_server"}
_MCP = {"transport", "server", "tool_name", "config"}
_COMMANDS = {"start", "resume", "force_args", "chat_args", "system_args", "thinking_args", "resume_prompt"}
_JOURNAL = {"path", "format"}
_READING = {"command", "format", "status", "pending", "records", "tool_results", "answer"}
#: The [reading] fields each journal format takes (an opaque store is seen only through its reading).
_READING_FIELDS = {FISK_AI_V2: ("status", "pending", "records"), OPAQUE: ("status", "tool_results", "answer")}
_SPLICED = {"{chat_args}", "{force_args}", "{system_args}", "{thinking_args}"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_profile_path(value: str) -> bool:
    """True when a ``--subject`` value names a profile file (it ends in ``.toml``), not a command."""
    return value.strip().endswith(".toml") and " " not in value.strip()


def resolve_subject(command: str | Sequence[str] | None) -> Subject:
    """The subject a ``--subject`` value names: a profile file (``path.toml``, optionally after
    ``NAME=value`` words, which are added to its variables) or a command prefix
    (:func:`harness.subject.contract.parse_subject`).

    Raises :class:`ProfileError` for a bad profile, ``ValueError`` for a bad command, a folder (naming the profiles
    in it) or a module its legs' folder shadows (:func:`module_shadowed`).
    """
    subject = parse_subject(command)
    if len(subject.argv) == 1 and os.path.isdir(subject.argv[0]):  # a subject's folder: its profile is a file in it
        folder = subject.argv[0]
        inside = sorted(p.name for p in Path(folder).glob("*.toml"))
        example = os.path.join(folder, min(inside, key=lambda n: n != "profile.toml")) if inside else ""
        hint = f" (in it: {', '.join(inside)}; e.g. {example})" if inside else " (PROFILE.toml) or a command"
        raise ValueError(f"{folder} is a folder; --subject takes a profile file{hint}")
    if len(subject.argv) == 1 and is_profile_path(subject.argv[0]):
        profile = load_profile(subject.argv[0])
        subject = replace(profile, extra_env=profile.extra_env + subject.extra_env) if subject.extra_env else profile
    shadow = module_shadowed(subject)
    if shadow:
        raise ValueError(shadow)
    return subject


#: Run by another interpreter with ``-c`` in the folder its legs run in: where module ``argv[1]`` is found with that
#: folder first on sys.path (as ``-m`` puts it), then without it.
_WHERE = """import importlib.util, os, sys
def where():
    importlib.invalidate_caches()
    spec = importlib.util.find_spec(sys.argv[1])
    return "" if spec is None else spec.origin or next(iter(spec.submodule_search_locations or [""]), "")
print(where())
sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
sys.path_importer_cache.clear()
print(where())
"""


def module_shadowed(subject: Any, cwd: str | None = None) -> str:
    """Why ``subject`` would not run the module it names, or ``""``: a ``PYTHON -m MODULE`` command of another
    interpreter than the harness's, its legs run in ``cwd`` (default: this process's; a profile's own ``cwd``
    is the trial's), that finds a copy of MODULE in that folder (Python puts the working folder first on
    sys.path for ``-m``) other than the one its environment holds: a broken copy of fiskj installed in its own
    venv and run from a checkout of fiskj would run the checkout's.  Runs the interpreter once (``""`` when it
    cannot: the first leg then says why)."""
    argv = tuple(subject.argv)
    if len(argv) < 3 or argv[1] != "-m" or subject.cwd or this_python(argv[0]):
        return ""
    top = argv[2].split(".")[0]
    cwd = cwd or os.getcwd()
    try:
        out = subprocess.run([argv[0], "-c", _WHERE, top], cwd=cwd, capture_output=True, text=True, timeout=30,
                             env={k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"})
    except (OSError, subprocess.SubprocessError):
        return ""
    found = out.stdout.splitlines()
    if out.returncode != 0 or len(found) != 2 or not all(found) or found[0] == found[1]:
        return ""
    return (f"run from {cwd}, `{argv[0]} -m {argv[2]}` imports {top} from {found[0]} "
            f"(Python puts the working folder first on sys.path for -m, and the legs run in this folder), not the "
            f"{top} its environment holds ({found[1]}): the legs would run that other copy.  Start fiskj-harness "
            f"from another folder, or give a profile whose cwd is the trial's (docs/subject.md)")


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
    src = _ProfileText(text, path)  # each table in the order of docs/subject.md: the first mistake is named
    name, argv, home, chat, server_tools = _top_level(src)
    env_set, env_unset = _env(src)
    files = _files(src, home)
    mcp = _mcp(src)
    commands = _commands(src)
    exits, error_stdout = _exits(src)
    journal, fmt = _journal(src, home)
    status_args, status_fields, reading_format = _reading(src, fmt)
    prefix = tuple(src.doc["command"])  # as written, templates and all, as the words are
    for table, key, words in (("commands", "start", commands["start_args"]),
                              ("commands", "resume", commands["resume_args"]), ("reading", "command", status_args)):
        if words and tuple(words[:len(prefix)]) in (prefix, tuple(argv)):
            raise src.fail(table, key, f"it starts with the profile's command ({' '.join(prefix)}), which the "
                                       "harness puts before it already: give only the words that follow")
    return Subject(argv=argv, profile_env=env_set, env_unset=env_unset, **commands, exits=exits, journal=journal,
                   journal_format=fmt, home=home, chat=chat, server_tools=server_tools, status_args=status_args,
                   status_fields=status_fields, reading_format=reading_format, not_applicable=_not_applicable(src),
                   files=files, name=name, profile=path, about=src.doc.get("about", ""), error_stdout=error_stdout,
                   promises=_promises(src), cwd=_cwd(src), **_jetstream(src), time_scale=_time_scale(src),
                   fork_server=_fork_server(src, argv), **mcp)


class _ProfileText:
    """A profile's parsed TOML with the checks every table shares; each mistake a located :class:`ProfileError`."""

    def __init__(self, text: str, path: str) -> None:
        self.text, self.path = text, path
        self.doc = load_toml(text, path, ProfileError)

    def fail(self, section: str, key: str | None, message: str) -> ProfileError:
        """The error about ``key`` of table ``section`` (``""``: the top level), naming its line."""
        return located(ProfileError, self.text, self.path, section, key, message)

    def table(self, name: str, allowed: set[str] | None) -> dict[str, Any]:
        """Table ``[name]`` (``{}`` when absent), its keys checked against ``allowed`` (None: any key)."""
        value = self.doc.get(name, {})
        if not isinstance(value, dict):
            raise self.fail("", name, f"expected a table [{name}], got {type(value).__name__}")
        for key in value:
            if allowed is not None and key not in allowed:
                raise self.fail(name, key, f"unknown key{did_you_mean(key, allowed)}; [{name}] takes "
                                           f"{', '.join(sorted(allowed))}")
        return value

    def words(self, section: str, key: str, value: Any, *, nonempty: bool = True) -> tuple[str, ...]:
        """``value`` as a list of templates (:meth:`template`), non-empty unless ``nonempty`` is false."""
        if not isinstance(value, list) or not all(isinstance(w, str) for w in value) or (nonempty and not value):
            raise self.fail(section, key, f"expected a{' non-empty' if nonempty else ''} list of strings, "
                                          f"got {value!r}")
        for w in value:
            self.template(section, key, w)
        return tuple(value)

    def template(self, section: str, key: str, value: str) -> str:
        """``value`` when it uses only :data:`TEMPLATE_VARS` (or is one of the spliced words)."""
        if value in _SPLICED:
            return value
        try:
            fields = [(f, spec) for _, f, spec, _ in string.Formatter().parse(value) if f is not None]
        except ValueError as exc:
            raise self.fail(section, key, f"bad template {value!r}: {exc}") from None
        bad = [f"{n}:{spec}" if spec else n for n, spec in fields
               if n not in TEMPLATE_VARS or bool(spec) != (n == "env") or (spec and not _ENV_NAME.match(spec))]
        if bad:
            raise self.fail(section, key, f"unknown template variable(s) {bad} in {value!r}; known: "
                                          f"{', '.join(TEMPLATE_VARS[:-1])}, env:NAME (and the words "
                                          f"{', '.join(sorted(_SPLICED))})")
        return value


def _top_level(src: _ProfileText) -> tuple[str, tuple[str, ...], bool, bool]:
    """The top-level keys: ``(name, argv, home, chat)``, the command prefix with ``{profile_dir}`` and
    ``{python}`` filled in (``{env:NAME}`` is filled per leg; ``about`` is checked: a string, for people only)."""
    for key in src.doc:
        if key not in _TOP:
            raise src.fail("", key, f"unknown key{did_you_mean(key, _TOP)}; a profile takes {', '.join(sorted(_TOP))}")
    name = src.doc.get("name", "")
    if not isinstance(name, str) or not name:
        raise src.fail("", "name", "expected a non-empty string: the subject's name in reports")
    about = src.doc.get("about", "")
    if not isinstance(about, str):
        raise src.fail("", "about", f"expected a string, got {about!r}")
    if "command" not in src.doc:
        raise src.fail("", None, "missing key 'command': the command prefix that starts the agent")
    command = src.words("", "command", src.doc["command"])
    for w in command:
        if {f for _, f, _, _ in string.Formatter().parse(w) if f} - {"profile_dir", "python", "env"}:
            raise src.fail("", "command", f"the command prefix may only use {{profile_dir}}, {{python}} and "
                                          f"{{env:NAME}}: {w!r}")
    flags = []
    for key in ("home", "chat", "server_tools"):
        value = src.doc.get(key, key != "home")
        if not isinstance(value, bool):
            raise src.fail("", key, f"expected true or false, got {value!r}")
        flags.append(value)
    profile_dir = os.path.dirname(src.path)
    argv = tuple(w.replace("{profile_dir}", profile_dir).replace("{python}", sys.executable) for w in command)
    return name, argv, *flags


def _time_scale(src: _ProfileText) -> float:
    """``time_scale``: how many times a scenario's trial budget (``[trials] timeout_s``) this agent's trial may
    take (a number from 1 to 20; default 1): an agent whose every leg starts seconds of imports is not hung."""
    scale = src.doc.get("time_scale", 1)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 1 <= scale <= 20:
        raise src.fail("", "time_scale", f"expected a number from 1 to 20, got {scale!r}")
    return float(scale)


def _cwd(src: _ProfileText) -> str:
    """``cwd``: the legs' working directory, a template (``""``: the harness's own)."""
    cwd = src.doc.get("cwd", "")
    if not isinstance(cwd, str):
        raise src.fail("", "cwd", f"expected a path template, got {cwd!r}")
    return src.template("", "cwd", cwd)


def _mcp(src: _ProfileText) -> dict[str, Any]:
    """``[mcp]``: the :class:`Subject` fields ``mcp`` (an :class:`McpSpec`, ``None`` without the table) and
    ``mcp_config`` (where its configuration is written before each leg)."""
    table = src.table("mcp", _MCP)
    if "mcp" not in src.doc:
        return {}
    for key, value in table.items():
        if not isinstance(value, str) or not value:
            raise src.fail("mcp", key, f"expected a non-empty string, got {value!r}")
    try:
        spec = McpSpec(**{k: v for k, v in table.items() if k != "config"})
    except (McpSetupError, ToolNameError) as exc:
        key = "tool_name" if isinstance(exc, ToolNameError) else "transport" if "transport" in str(exc) else "server"
        raise src.fail("mcp", key, str(exc)) from None
    config = src.template("mcp", "config", table.get("config", Subject.mcp_config))
    return {"mcp": spec, "mcp_config": config}


def _env(src: _ProfileText) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """``[env]``: the variables a leg sets (name, value template) and those it removes (``false``)."""
    env_set, env_unset = [], []
    for key, value in src.table("env", None).items():
        if not _ENV_NAME.match(key):
            raise src.fail("env", key, "not a variable name")
        if value is False:
            env_unset.append(key)
        elif isinstance(value, str):
            env_set.append((key, src.template("env", key, value)))
        else:
            raise src.fail("env", key, f"expected a string (set it) or false (remove it), got {value!r}")
    return tuple(env_set), tuple(env_unset)


def _files(src: _ProfileText, home: bool) -> tuple[tuple[str, str], ...]:
    """``[files]``: (path template, content template) of each file written before every leg, in the trial's
    directories (under ``{home}`` only with ``home = true``)."""
    files = []
    for key, value in src.table("files", None).items():
        src.template("files", key, key)
        if not key.startswith(("{state_home}/", "{home}/", "{trial_dir}/")):
            raise src.fail("files", key, "a file must be written in the trial's directories: start its path with "
                                         "{state_home}/, {home}/ or {trial_dir}/")
        if key.startswith("{home}/") and not home:
            raise src.fail("files", key, "a file under {home} needs home = true")
        if not isinstance(value, str):
            raise src.fail("files", key, f"expected the file's content as a string template, got {value!r}")
        src.template("files", key, value)
        files.append((key, value))
    return tuple(files)


def _commands(src: _ProfileText) -> dict[str, Any]:
    """``[commands]``: the :class:`Subject` fields of the argument templates, the contract's where unset."""
    commands = src.table("commands", _COMMANDS)

    def args(key: str, default: Sequence[str]) -> tuple[str, ...]:
        return src.words("commands", key, commands.get(key, list(default)), nonempty=False)

    start = src.words("commands", "start", commands["start"]) if "start" in commands else CONTRACT_START
    resume = src.words("commands", "resume", commands["resume"]) if "resume" in commands else CONTRACT_RESUME
    spliced = {"force_args": args("force_args", ["--force"]), "chat_args": args("chat_args", ["--chat"]),
               "system_args": args("system_args", Subject.system_args),
               "thinking_args": args("thinking_args", Subject.thinking_args)}
    resume_prompt = commands.get("resume_prompt", "")
    if not isinstance(resume_prompt, str):
        raise src.fail("commands", "resume_prompt", f"expected a string, got {resume_prompt!r}")
    if "resume" in commands and not {"{run_id}", "{run_uuid}"} & set(re.findall(r"\{[a-z_]+\}", " ".join(resume))):
        raise src.fail("commands", "resume", "the resume command must name the run: put {run_id} or {run_uuid} in it")
    return {"start_args": start, "resume_args": resume, **spliced, "resume_prompt": resume_prompt}


def _exits(src: _ProfileText) -> tuple[tuple[tuple[str, tuple[int, ...]], ...], str]:
    """``[exit]``: each outcome's exit statuses (an outcome left out of a given table has none; the
    contract's when the table gives none) and ``error_stdout``, the regular expression whose match on
    standard output makes a completed exit an error (``""``: none).  A run must be able to complete."""
    exits_doc = dict(src.table("exit", {*OUTCOMES, "error_stdout"}))
    error_stdout = exits_doc.pop("error_stdout", "")
    try:
        re.compile(error_stdout)
    except (TypeError, re.error) as exc:
        raise src.fail("exit", "error_stdout", f"expected a regular expression, got {error_stdout!r}: {exc}") from None
    if not exits_doc:
        return CONTRACT_EXITS, error_stdout
    exits = []
    for outcome, _ in CONTRACT_EXITS:
        codes = exits_doc.get(outcome, [])
        if not isinstance(codes, list) or not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255
                                                  for c in codes):
            raise src.fail("exit", outcome, f"expected a list of exit statuses (0-255), got {codes!r}")
        exits.append((outcome, tuple(codes)))
    if not dict(exits)["completed"]:
        raise src.fail("exit", "completed", "a run must be able to complete: give its exit status")
    return tuple(exits), error_stdout


def _journal(src: _ProfileText, home: bool) -> tuple[str, str]:
    """``[journal]``: the journal's path template (naming the run, in the trial's directories) and format."""
    journal = src.table("journal", _JOURNAL)
    path = journal.get("path", CONTRACT_JOURNAL)
    if not isinstance(path, str) or not path:
        raise src.fail("journal", "path", f"expected a path template, got {path!r}")
    src.template("journal", "path", path)
    if "*" in path.rpartition("/")[0]:
        raise src.fail("journal", "path", "a * may stand only in the journal's file name, not in a folder")
    fmt = journal.get("format", FISK_AI_V2)
    if fmt == OPAQUE and "*" in path:
        raise src.fail("journal", "path", "an opaque store is a directory: its path takes no * (every file below it "
                                          "is the store)")
    if fmt != OPAQUE and "{run_id}" not in path and "{run_uuid}" not in path and "*" not in path:
        raise src.fail("journal", "path", "the journal path must name the run: put {run_id} or {run_uuid} in it, "
                                          "or a * in its file name for a name the agent chooses")
    if not path.startswith(("{state_home}", "{home}", "{trial_dir}", "{store_url}#")):
        raise src.fail("journal", "path", "the journal must live in the trial's directories: start the path with "
                                          "{state_home}, {home} or {trial_dir} (a JetStream store's: {store_url}#)")
    if path.startswith("{home}") and not home:
        raise src.fail("journal", "path", "a journal under {home} needs home = true")
    if fmt not in JOURNAL_FORMATS:
        raise src.fail("journal", "format", f"unsupported journal format {fmt!r}; known: {', '.join(JOURNAL_FORMATS)}")
    return path, fmt


def _reading(src: _ProfileText, fmt: str) -> tuple[tuple[str, ...] | None, tuple[tuple[str, str], ...], str]:
    """``[reading]``: the agent's own reading command (None: it has none), where its output holds each field
    (``status`` required; :data:`_READING_FIELDS` of the format) and how it prints them (``format``: ``"json"``,
    dotted paths into the JSON object it prints; ``"text"``, a regular expression per field whose group ``value``
    is the field); it needs a journal fiskj can fold (I10 compares the two), or an opaque store (the reading is
    how the harness sees inside it; then required)."""
    reading = src.table("reading", _READING)
    if not reading:
        if fmt == OPAQUE:
            raise src.fail("journal", "format", "an opaque store needs a [reading] (command, status, tool_results, "
                                                "answer): the harness sees inside it only through the agent's reading")
        return None, (), "json"
    if fmt not in _READING_FIELDS:
        raise src.fail("reading", None, f"a reading is compared with fiskj's fold of the journal (I10), which needs "
                                        f"journal format {FISK_AI_V2!r}; this profile says {fmt!r}")
    wrong = next((k for k in reading if k not in ("command", "format") and k not in _READING_FIELDS[fmt]), None)
    if wrong:
        raise src.fail("reading", wrong, f"journal format {fmt!r} takes no reading field {wrong!r}; it takes "
                                         f"{', '.join(_READING_FIELDS[fmt])}")
    if "command" not in reading:
        raise src.fail("reading", None, "missing key 'command': the command that prints the agent's reading")
    command = src.words("reading", "command", reading["command"])
    out = reading.get("format", "json")
    if out not in ("json", "text"):
        raise src.fail("reading", "format", f"expected \"json\" or \"text\", got {out!r}")
    fields = []
    for key in _READING_FIELDS[fmt]:
        if key in reading:
            value = reading[key]
            if not isinstance(value, str) or not value:
                raise src.fail("reading", key, f"expected a {'regular expression' if out == 'text' else 'dotted path'}"
                                               f" into the reading's {out.upper()}, got {value!r}")
            if out == "text":
                try:
                    group = "value" in re.compile(value).groupindex
                except re.error as exc:
                    raise src.fail("reading", key, f"bad regular expression {value!r}: {exc}") from None
                if not group:
                    raise src.fail("reading", key, f"the regular expression {value!r} names no group (?P<value>...)"
                                                   f": the part of the match that is the {key}")
            fields.append((key, value))
    for key in ("status", "tool_results", "answer") if fmt == OPAQUE else ("status",):
        if key not in reading:
            raise src.fail("reading", key, f"missing: where the reading holds the run's {key.replace('_', ' ')}")
    return command, tuple(fields), out


def _not_applicable(src: _ProfileText) -> tuple[tuple[str, str], ...]:
    """``[not_applicable]``: (invariant id, reason) of each invariant that does not apply to this agent."""
    out = []
    for inv, why in src.table("not_applicable", None).items():
        if inv not in INVARIANTS:
            raise src.fail("not_applicable", inv, f"unknown invariant{did_you_mean(inv, INVARIANTS)}; known: "
                                                  f"{', '.join(INVARIANTS)}")
        if not isinstance(why, str) or not why.strip():
            raise src.fail("not_applicable", inv, "expected the reason, as a non-empty string")
        out.append((inv, why.strip()))
    return tuple(out)


def _promises(src: _ProfileText) -> Promises:
    """``[promises]``: what the agent promises of its semantics (docs/spec.md section 15 "Declared promises");
    fisk-ai's rules for a key left out."""
    doc = src.table("promises", {"resume_completed", "suspend_signals", "interrupted_tool", "cut_off_turn", "durable",
                                 "drifted_resume"})
    out = {}
    for key, allowed in (("resume_completed", RESUME_COMPLETED), ("interrupted_tool", INTERRUPTED_TOOL),
                         ("cut_off_turn", CUT_OFF_TURN), ("durable", DURABLE), ("drifted_resume", DRIFTED_RESUME)):
        if key in doc:
            if doc[key] not in allowed:
                raise src.fail("promises", key, f"expected one of {', '.join(allowed)}, got {doc[key]!r}")
            out[key] = doc[key]
    if "suspend_signals" in doc:
        sigs = doc["suspend_signals"]
        if not isinstance(sigs, list) or any(s not in SUSPEND_SIGNALS for s in sigs):
            raise src.fail("promises", "suspend_signals", f"expected a list of {', '.join(SUSPEND_SIGNALS)} "
                                                          f"(those that suspend cleanly), got {sigs!r}")
        out["suspend_signals"] = tuple(s for s in SUSPEND_SIGNALS if s in sigs)
    return Promises(**out)


def _jetstream(src: _ProfileText) -> dict[str, Any]:
    """``[jetstream]``: the agent's store is a JetStream server each trial starts (docs/jetstream.md "Server
    faults"): the :class:`Subject` fields ``jetstream`` (``replicas`` 1 or 3, ``sync_interval`` ``"default"`` or
    ``"always"``; ``None`` without the table) and ``jetstream_storage`` (``"file"``, the default, or ``"memory"``,
    refused before any trial: the jetstream family's ``unsupported``); its commands name ``{store_url}``."""
    if "jetstream" not in src.doc:
        return {}
    doc = src.table("jetstream", {"replicas", "sync_interval", "storage"})
    replicas, sync, storage = doc.get("replicas", 1), doc.get("sync_interval", "default"), doc.get("storage", "file")
    if replicas not in (1, 3):
        raise src.fail("jetstream", "replicas", f"expected 1 or 3, got {replicas!r}")
    if sync not in ("default", "always"):
        raise src.fail("jetstream", "sync_interval", f"expected \"default\" or \"always\", got {sync!r}")
    if storage not in ("file", "memory"):
        raise src.fail("jetstream", "storage", f"expected \"file\" or \"memory\", got {storage!r}")
    return {"jetstream": (replicas, sync), "jetstream_storage": storage}


_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _fork_server(src: _ProfileText, argv: tuple[str, ...]) -> tuple[str, ...] | None:
    """``[fork_server]``: a Python agent's legs and readings are forked from an interpreter that imported
    ``preimport`` (module names) once (docs/subject.md "Fork servers"); its ``command`` must be
    ``[PYTHON, SCRIPT]`` or ``[PYTHON, "-m", MODULE]``.  ``None`` without the table."""
    table = src.table("fork_server", {"preimport"})
    if "fork_server" not in src.doc:
        return None
    modules = table.get("preimport")
    if not isinstance(modules, list) or not modules or not all(isinstance(m, str) and _MODULE.match(m)
                                                              for m in modules):
        raise src.fail("fork_server", "preimport", f"expected a non-empty list of module names, got {modules!r}")
    if not (len(argv) == 2 and not argv[1].startswith("-") or len(argv) == 3 and argv[1] == "-m"):
        raise src.fail("", "command", "with [fork_server] the command must be [PYTHON, SCRIPT] or "
                                      f"[PYTHON, \"-m\", MODULE] (the fork server runs it as __main__), not {list(argv)!r}")
    return tuple(modules)
