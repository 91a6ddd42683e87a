"""What the agent-loop tests (``test_loop_*.py``) share: a recording model, side-effect tools, a run and a resume.

A test module takes the ``store`` and ``fx`` fixtures by importing them from here
(``store`` overrides conftest's: an empty :class:`fiskj.store.FileStore` in ``tmp_path / "store"``).
"""

from __future__ import annotations

import copy
import os

import pytest

from fake_anthropic import tool_use
from fiskj.loop import RunConfig, SuspendFlag, resume_run, start_run
from fiskj.reader import read_records
from fiskj.records import AssistantRecord, TerminalRecord, ToolResultRecord, UserRecord
from fiskj.store import FileStore
from fiskj.tools import Tool, ToolOutcome, ToolRegistry, builtin_tools

CONFIG = RunConfig(model="fake-1", system="be brief", max_tokens=10_000, max_iterations=10)


class Killed(BaseException):
    """Stands for a SIGKILL landing inside a tool: nothing after it runs."""


class Recorder:
    """A model double: answers with ``handler`` and records each request and the journal length then."""

    def __init__(self, handler, journal_path=None):
        self.handler, self.journal_path = handler, journal_path
        self.requests, self.lines_at_call = [], []

    def complete(self, request):
        self.requests.append(copy.deepcopy(request))
        if self.journal_path is not None:
            self.lines_at_call.append(open(self.journal_path, "rb").read().count(b"\n"))
        answer = self.handler(request)
        if isinstance(answer, Exception):
            raise answer
        return answer


class Effects:
    """Tools ``effect`` (append its ``id`` to a file; die after the effect when told) and ``flag_suspend``."""

    def __init__(self, path, flag=None):
        self.path, self.flag, self.die_on = str(path), flag, set()

    def effect(self, tool_input, call):
        with open(self.path, "a") as fh:
            fh.write(tool_input["id"] + "\n")
        if tool_input["id"] in self.die_on:
            raise Killed()
        return ToolOutcome(f"did {tool_input['id']}")

    def suspend(self, tool_input, call):
        self.flag.request()  # what a SIGINT mid-tool does
        return ToolOutcome("asked to suspend")

    def registry(self):
        return ToolRegistry(builtin_tools() + [
            Tool("effect", "side effect", {"type": "object", "properties": {"id": {"type": "string"}}}, self.effect),
            Tool("flag_suspend", "suspend request", {"type": "object"}, self.suspend)])

    def counts(self):
        lines = open(self.path).read().split() if os.path.exists(self.path) else []
        return {i: lines.count(i) for i in sorted(set(lines))}


def effect(tid):
    return tool_use(tid, "effect", {"id": tid})


@pytest.fixture
def store(tmp_path):
    return FileStore(str(tmp_path / "store"))


@pytest.fixture
def fx(tmp_path):
    return Effects(tmp_path / "effects.log", SuspendFlag())


def kinds(store, run_id):
    records, torn = read_records(os.path.join(store.directory, f"{run_id}.json"))
    assert torn is None
    out = []
    for r in records:
        if isinstance(r, TerminalRecord):
            out.append(f"T({r.reason})")
        elif isinstance(r, AssistantRecord):
            out.append("A")
        elif isinstance(r, ToolResultRecord):
            out.append(f"R({r.tool_use_id})")
        elif isinstance(r, UserRecord):
            out.append("U")
        else:
            out.append("M")
    return out


def journal_bytes(store, run_id):
    return open(os.path.join(store.directory, f"{run_id}.json"), "rb").read()


def run(store, fx, handler, run_id="r1", config=CONFIG, **kw):
    model = Recorder(handler, os.path.join(store.directory, f"{run_id}.json"))
    result = start_run("do it", config=config, model=model, tools=fx.registry(), store=store, run_id=run_id,
                       suspend=fx.flag, **kw)
    return result, model


def resume(store, fx, handler, run_id="r1", config=CONFIG, **kw):
    fx.flag = kw.pop("suspend", SuspendFlag())
    model = Recorder(handler, os.path.join(store.directory, f"{run_id}.json"))
    result = resume_run(run_id, config=config, model=model, tools=fx.registry(), store=store, suspend=fx.flag, **kw)
    return result, model
