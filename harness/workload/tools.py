"""The workload's tools: their names, input schema and descriptions, and the names the model sees (pure).

Every route that gives an agent the tools takes them from here: the command
tool definitions (:func:`harness.workload.build.tool_definitions`, fiskj's
``--tools FILE``) and the MCP server (:mod:`harness.workload.mcp_server`).
Each tool records one effect in the effects ledger and answers
(:mod:`harness.workload.ledger_tool`, whose docstring is the contract).

The names the model sees (a *tool name template*, :func:`check_template`, :func:`shown_name`; the fake model's
``tool_name``): docs/subject.md "Tools over MCP".
"""

from __future__ import annotations

import re
import string
from typing import Any

__all__ = ["TOOL_NAMES", "INPUT_SCHEMA", "PLAIN", "ToolNameError", "description", "check_template", "shown_name"]

#: The ledger tools an agent is given; turns draw from them in order.
TOOL_NAMES = ("effect_a", "effect_b", "effect_c")

#: The input schema of every tool (JSON Schema; other keys of the ledger tool's input, ``fail`` and ``out``,
#: are accepted too: the harness's own workload sends them).
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool_use_id": {"type": "string", "description": "the id of this tool_use block"},
        "sleep_ms": {"type": "number", "description": "milliseconds to work after the effect"},
        "n": {"type": "integer", "description": "a payload number echoed in the result"},
    },
    "required": ["tool_use_id"],
}

#: The template of an agent that shows tools by their plain name.
PLAIN = "{tool}"

# What the Messages API accepts as a tool name.
_NAME = re.compile(r"[a-zA-Z0-9_-]{1,128}")


class ToolNameError(ValueError):
    """A tool name template that cannot name the tools: ``template`` is the text, the message says why."""

    def __init__(self, template: str, why: str) -> None:
        super().__init__(f"tool name template {template!r}: {why}")
        self.template = template


def description(name: str, drifted: bool = False) -> str:
    """The description of tool ``name``; ``drifted``: says so (fingerprint drift ``"tools"``, nothing else)."""
    return f"Record one side effect in the harness ledger ({name})." + (" Drifted description." if drifted else "")


def check_template(template: str, server: str = "") -> str:
    """Return ``template`` with ``{server}`` filled in: a ``str.format`` template over ``{tool}`` only.

    ``template`` may name ``{server}`` (the MCP server's name, ``server``) and must name ``{tool}`` (the
    plain tool name) exactly once; every tool name it gives must be a Messages API tool name
    (``[a-zA-Z0-9_-]``, 1-128 characters).  Raises :class:`ToolNameError` otherwise.
    """
    fields = []
    try:
        for _, name, spec, conv in string.Formatter().parse(template):
            if name is not None:
                if name not in ("tool", "server") or spec or conv:
                    raise ToolNameError(template, f"unknown field {{{name}}} (only {{server}} and {{tool}})")
                fields.append(name)
    except ValueError as exc:
        if isinstance(exc, ToolNameError):
            raise
        raise ToolNameError(template, str(exc)) from None
    if fields.count("tool") != 1:
        raise ToolNameError(template, "must name {tool} exactly once")
    if "server" in fields and not server:
        raise ToolNameError(template, "names {server} but no server name is given")
    filled = template.replace("{server}", server)
    for tool in TOOL_NAMES:
        shown = filled.replace("{tool}", tool)
        if not _NAME.fullmatch(shown):
            raise ToolNameError(template, f"gives {shown!r}, not a tool name ([a-zA-Z0-9_-], 1-128 characters)")
    return filled


def shown_name(template: str, tool: str) -> str:
    """The name the model sees for plain tool name ``tool`` under a template from :func:`check_template`."""
    return template.replace("{tool}", tool)
