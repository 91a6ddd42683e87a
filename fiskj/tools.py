"""The agent's tools: a registry, the built-in tools and command tools.

A tool has a *definition* (``name``, ``description``, ``input_schema``), the
object sent to the model in the request's ``tools`` list, and a function
that runs it.  The definitions, in registration order, are what the
fingerprint's ``tools_hash`` covers (docs/spec.md section 4, fingerprint, and
section 12, rule 3): changing a tool's name, description or schema refuses a
resume, changing only its command line does not.

Running a tool never raises for a tool-level failure: a failing tool, an
unknown tool name or a command that cannot start becomes a result with
``is_error`` true, which the model sees.  Only a bad definition (at load
time) raises :class:`~fiskj.errors.ToolError`.

Built-ins: ``echo`` (returns its input as JSON), ``sleep`` (waits ``ms``
milliseconds: gives a kill a window inside a tool) and ``append_line``
(appends one line to a file: a real side effect).  Command tools come from
a JSON file (:func:`load_command_tools`) and get the tool input as JSON on
standard input; see :class:`CommandTool`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import ToolError

__all__ = [
    "ToolOutcome",
    "ToolCall",
    "Tool",
    "CommandTool",
    "ToolRegistry",
    "builtin_tools",
    "load_command_tools",
    "make_registry",
]

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
#: Longest ``sleep`` accepted, in milliseconds (ten minutes).
MAX_SLEEP_MS = 600_000


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool returned: ``content`` (text) and ``is_error``."""

    content: str
    is_error: bool = False


@dataclass(frozen=True)
class ToolCall:
    """Context of one execution: the ``tool_use_id`` and the ``run_id``."""

    tool_use_id: str = ""
    run_id: str = ""


@dataclass(frozen=True)
class Tool:
    """A tool: its definition and ``run(input: dict, call: ToolCall) -> ToolOutcome``.

    ``run`` may raise any exception; :meth:`ToolRegistry.run` turns it into
    an error result.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    run: Callable[[Any, ToolCall], ToolOutcome] = field(compare=False)

    def definition(self) -> dict[str, Any]:
        """Return ``{"name", "description", "input_schema"}`` as sent to the model."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


class ToolRegistry:
    """Named tools in registration order.

    ``definitions()`` feeds both the request's ``tools`` list and
    :func:`fiskj.fingerprint.make_fingerprint` (its ``tools_hash``).
    Adding a second tool of one name raises :class:`ToolError`.
    """

    def __init__(self, tools: list[Tool] | tuple[Tool, ...] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        """Register ``tool``; raises :class:`ToolError` on a duplicate or invalid name."""
        if not _NAME.match(tool.name):
            raise ToolError(f"invalid tool name {tool.name!r}: use 1-64 of [a-zA-Z0-9_-]", field="name")
        if tool.name in self._tools:
            raise ToolError(f"tool {tool.name!r} is defined twice", field="name")
        self._tools[tool.name] = tool

    def names(self) -> list[str]:
        """Return the tool names in registration order."""
        return list(self._tools)

    def definitions(self) -> list[dict[str, Any]]:
        """Return the tool definitions in registration order (Messages API ``tools``)."""
        return [tool.definition() for tool in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def run(self, name: str, tool_input: Any, call: ToolCall = ToolCall()) -> ToolOutcome:
        """Run tool ``name`` on ``tool_input``; never raises for a tool failure.

        An unknown name, or any exception from the tool, gives an outcome
        with ``is_error`` true whose content names the problem.
        """
        tool = self._tools.get(name)
        if tool is None:
            return ToolOutcome(f"unknown tool {name!r}; available: {', '.join(self._tools) or 'none'}", True)
        try:
            return tool.run(tool_input, call)
        except Exception as exc:  # a tool's failure is the model's business
            return ToolOutcome(f"tool {name!r} failed: {type(exc).__name__}: {exc}", True)


# --- built-in tools ------------------------------------------------------------------


def _echo(tool_input: Any, call: ToolCall) -> ToolOutcome:
    return ToolOutcome(json.dumps(tool_input, sort_keys=True, ensure_ascii=False))


def _sleep(tool_input: Any, call: ToolCall) -> ToolOutcome:
    ms = tool_input.get("ms") if isinstance(tool_input, dict) else None
    if not isinstance(ms, int) or isinstance(ms, bool) or not 0 <= ms <= MAX_SLEEP_MS:
        return ToolOutcome(f"sleep needs an integer 'ms' from 0 to {MAX_SLEEP_MS}", True)
    time.sleep(ms / 1000)  # a signal handler runs and the sleep resumes (PEP 475)
    return ToolOutcome(f"slept {ms} ms")


def _append_line(tool_input: Any, call: ToolCall) -> ToolOutcome:
    if not isinstance(tool_input, dict):
        return ToolOutcome("append_line needs an object with 'path' and 'line'", True)
    path, line = tool_input.get("path"), tool_input.get("line")
    if not isinstance(path, str) or not path or not isinstance(line, str) or "\n" in line:
        return ToolOutcome("append_line needs a non-empty string 'path' and a one-line string 'line'", True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8", "surrogatepass"))
        os.fsync(fd)  # the side effect is durable before the result is journaled
    finally:
        os.close(fd)
    return ToolOutcome(f"appended 1 line to {path}")


def builtin_tools() -> list[Tool]:
    """Return the built-in tools ``echo``, ``sleep`` and ``append_line``, in that order."""
    return [
        Tool("echo", "Return the input object unchanged, as JSON.",
             {"type": "object", "properties": {"text": {"type": "string", "description": "Text to echo."}}},
             _echo),
        Tool("sleep", "Wait for the given number of milliseconds, then return.",
             {"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": MAX_SLEEP_MS,
                                                      "description": "Milliseconds to wait."}},
              "required": ["ms"]},
             _sleep),
        Tool("append_line", "Append one line of text to a file (created if missing).",
             {"type": "object", "properties": {"path": {"type": "string", "description": "File to append to."},
                                               "line": {"type": "string", "description": "Line, without newline."}},
              "required": ["path", "line"]},
             _append_line),
    ]


# --- command tools -------------------------------------------------------------------


@dataclass(frozen=True)
class CommandTool:
    """Runs ``argv`` with the tool input as JSON on stdin; stdout is the result.

    A non-zero exit gives ``is_error`` true with stderr (or stdout when
    stderr is empty) as content; ``timeout`` (seconds, ``None`` = no limit)
    kills the command and gives an error result.  The child gets the
    environment plus ``FISKJ_TOOL_NAME``, ``FISKJ_TOOL_USE_ID`` and
    ``FISKJ_RUN_ID``; it inherits no descriptor but 0-2 (``close_fds``;
    the run lock is also ``O_CLOEXEC``) and runs in its own process group,
    so a Ctrl-C meant for the agent (a suspend) does not kill the tool.
    """

    name: str
    argv: tuple[str, ...]
    timeout: float | None = None

    def __call__(self, tool_input: Any, call: ToolCall) -> ToolOutcome:
        env = dict(os.environ, FISKJ_TOOL_NAME=self.name, FISKJ_TOOL_USE_ID=call.tool_use_id,
                   FISKJ_RUN_ID=call.run_id)
        data = json.dumps(tool_input, ensure_ascii=False).encode("utf-8", "surrogatepass")
        try:
            proc = subprocess.run(list(self.argv), input=data, capture_output=True, env=env, close_fds=True,
                                  process_group=0, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return ToolOutcome(f"command tool {self.name!r} timed out after {self.timeout} s", True)
        except OSError as exc:
            return ToolOutcome(f"command tool {self.name!r} could not start {self.argv[0]!r}: {exc.strerror or exc}",
                               True)
        out = proc.stdout.decode("utf-8", "replace")
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace") or out
            return ToolOutcome(err or f"command tool {self.name!r} exited with status {proc.returncode}", True)
        return ToolOutcome(out)


def _command_tool(entry: Any, index: int, path: str) -> Tool:
    where = f"{path}: tool {index}"
    if not isinstance(entry, dict):
        raise ToolError(f"{where} is not an object", path=path)
    name, desc, schema, argv = (entry.get(k) for k in ("name", "description", "input_schema", "command"))
    if not isinstance(name, str) or not _NAME.match(name):
        raise ToolError(f"{where}: 'name' must be 1-64 of [a-zA-Z0-9_-]", path=path, field="name")
    if not isinstance(desc, str):
        raise ToolError(f"{where} ({name}): 'description' must be a string", path=path, field="description")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ToolError(f"{where} ({name}): 'input_schema' must be a JSON Schema object with type 'object'",
                        path=path, field="input_schema")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and a for a in argv):
        raise ToolError(f"{where} ({name}): 'command' must be a non-empty list of strings (argv)",
                        path=path, field="command")
    timeout = entry.get("timeout_seconds")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ToolError(f"{where} ({name}): 'timeout_seconds' must be a positive number", path=path,
                        field="timeout_seconds")
    return Tool(name, desc, schema, CommandTool(name, tuple(argv), timeout))


def load_command_tools(path: str) -> list[Tool]:
    """Load command tools from a JSON file.

    The file holds a list of ``{"name", "description", "input_schema",
    "command": [argv...], "timeout_seconds"?}``.  Raises
    :class:`ToolError` (with ``path``) when the file cannot be read or an
    entry is invalid.
    """
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read().decode("utf-8"))
    except OSError as exc:
        raise ToolError(f"cannot read tools file: {exc.strerror or exc}", path=path) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ToolError(f"tools file is not valid JSON: {exc}", path=path) from None
    if not isinstance(data, list):
        raise ToolError("tools file must hold a JSON list of tool definitions", path=path)
    return [_command_tool(entry, i, path) for i, entry in enumerate(data)]


def make_registry(tools_file: str | None = None, *, builtins: bool = True) -> ToolRegistry:
    """Return the registry of a run: the built-ins, then the tools of ``tools_file``.

    A command tool may not reuse a built-in's name (:class:`ToolError`).
    """
    tools = builtin_tools() if builtins else []
    if tools_file is not None:
        tools += load_command_tools(tools_file)
    return ToolRegistry(tools)
