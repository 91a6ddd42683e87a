"""The tool registry, the built-in tools and command tools (fiskj.tools)."""

from __future__ import annotations

import json
import os
import sys

import pytest

from fiskj.errors import ToolError
from fiskj.fingerprint import sha256_hex
from fiskj.tools import Tool, ToolCall, ToolOutcome, ToolRegistry, builtin_tools, load_command_tools, make_registry

PY = sys.executable


def write_tools(tmp_path, entries):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(entries))
    return str(path)


def cmd_tool(name, code, **extra):
    return {"name": name, "description": f"{name} tool", "input_schema": {"type": "object"},
            "command": [PY, "-c", code], **extra}


def test_the_built_ins_are_echo_sleep_and_append_line_in_that_order():
    assert make_registry().names() == ["echo", "sleep", "append_line"]
    assert [set(d) for d in make_registry().definitions()] == [{"name", "description", "input_schema"}] * 3


def test_echo_returns_its_input():
    out = make_registry().run("echo", {"text": "hi", "n": 1})
    assert out == ToolOutcome(json.dumps({"n": 1, "text": "hi"}), False)


def test_sleep_waits_and_refuses_a_bad_duration():
    reg = make_registry()
    assert reg.run("sleep", {"ms": 1}) == ToolOutcome("slept 1 ms", False)
    assert reg.run("sleep", {"ms": -1}).is_error
    assert reg.run("sleep", {"ms": "5"}).is_error


def test_append_line_appends_one_line_per_call(tmp_path):
    target = tmp_path / "effects.log"
    reg = make_registry()
    for line in ("one", "two"):
        assert not reg.run("append_line", {"path": str(target), "line": line}).is_error
    assert target.read_text() == "one\ntwo\n"
    assert reg.run("append_line", {"path": str(target), "line": "a\nb"}).is_error


def test_an_unknown_tool_or_a_raising_tool_is_an_error_result_not_an_exception():
    def boom(tool_input, call):
        raise RuntimeError("kaput")

    reg = ToolRegistry([Tool("boom", "fails", {"type": "object"}, boom)])
    assert reg.run("nope", {}).is_error and "nope" in reg.run("nope", {}).content
    assert reg.run("boom", {}) == ToolOutcome("tool 'boom' failed: RuntimeError: kaput", True)


def test_a_duplicate_or_invalid_tool_name_is_refused():
    with pytest.raises(ToolError):
        ToolRegistry(builtin_tools() + builtin_tools()[:1])
    with pytest.raises(ToolError):
        ToolRegistry([Tool("bad name", "", {"type": "object"}, lambda i, c: ToolOutcome(""))])


def test_a_command_tool_gets_its_input_on_stdin_and_returns_stdout(tmp_path):
    code = "import json,os,sys; d=json.load(sys.stdin); print(d['x']*2, os.environ['FISKJ_TOOL_USE_ID'], end='')"
    reg = make_registry(write_tools(tmp_path, [cmd_tool("double", code)]))
    assert reg.names()[-1] == "double"
    assert reg.run("double", {"x": 21}, ToolCall("toolu_9", "run1")) == ToolOutcome("42 toolu_9", False)


def test_a_failing_command_is_an_error_result_with_its_stderr(tmp_path):
    code = "import sys; sys.stderr.write('disk on fire'); sys.exit(3)"
    reg = make_registry(write_tools(tmp_path, [cmd_tool("fail", code)]))
    assert reg.run("fail", {}) == ToolOutcome("disk on fire", True)


def test_a_command_that_cannot_start_or_times_out_is_an_error_result(tmp_path):
    entries = [{**cmd_tool("missing", ""), "command": [str(tmp_path / "no-such-binary")]},
               cmd_tool("slow", "import time; time.sleep(30)", timeout_seconds=0.3)]
    reg = make_registry(write_tools(tmp_path, entries))
    assert reg.run("missing", {}).is_error and "could not start" in reg.run("missing", {}).content
    assert reg.run("slow", {}) == ToolOutcome("command tool 'slow' timed out after 0.3 s", True)


def test_a_command_tool_inherits_no_descriptor_of_the_agent(tmp_path):
    r, w = os.pipe()
    os.set_inheritable(w, True)
    try:
        code = f"import os; print(os.path.exists('/proc/self/fd/{w}'), end='')"
        reg = make_registry(write_tools(tmp_path, [cmd_tool("fds", code)]))
        assert reg.run("fds", {}) == ToolOutcome("False", False)
    finally:
        os.close(r)
        os.close(w)


def test_the_tools_hash_covers_definitions_but_not_command_lines(tmp_path):
    one = make_registry(write_tools(tmp_path, [cmd_tool("t", "print(1)")])).definitions()
    two = make_registry(write_tools(tmp_path, [cmd_tool("t", "print(2)")])).definitions()
    three = make_registry(write_tools(tmp_path, [{**cmd_tool("t", "print(1)"), "description": "new"}])).definitions()
    assert sha256_hex(one) == sha256_hex(two) != sha256_hex(three)


@pytest.mark.parametrize("content, field", [
    ("not json", None),
    ('{"name": "x"}', None),
    ('[{"name": "a b", "description": "", "input_schema": {"type": "object"}, "command": ["x"]}]', "name"),
    ('[{"name": "a", "description": "", "input_schema": {"type": "array"}, "command": ["x"]}]', "input_schema"),
    ('[{"name": "a", "description": "", "input_schema": {"type": "object"}, "command": []}]', "command"),
    ('[{"name": "a", "description": "", "input_schema": {"type": "object"}, "command": ["x"], '
     '"timeout_seconds": 0}]', "timeout_seconds"),
])
def test_a_bad_tools_file_is_a_tool_error_naming_the_file(tmp_path, content, field):
    path = tmp_path / "tools.json"
    path.write_text(content)
    with pytest.raises(ToolError) as info:
        load_command_tools(str(path))
    assert info.value.path == str(path) and info.value.field == field


def test_a_missing_tools_file_is_a_tool_error(tmp_path):
    with pytest.raises(ToolError, match="cannot read"):
        load_command_tools(str(tmp_path / "absent.json"))


def test_a_command_tool_may_not_shadow_a_built_in(tmp_path):
    with pytest.raises(ToolError, match="defined twice"):
        make_registry(write_tools(tmp_path, [cmd_tool("echo", "print(1)")]))
