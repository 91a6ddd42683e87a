"""The resume guard's fingerprint (fiskj.fingerprint; docs/spec.md sections 4 and 12)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fiskj.codec import encode_record
from fiskj.fingerprint import FIELDS, Fingerprint, canonical_json, diff, make_fingerprint, sha256_hex

from builders import M, numbered

SYSTEM = "You are a careful agent. SECRET-SYSTEM-TEXT \u00e9\u2028"
TOOLS = [{"name": "ls", "description": "list files", "input_schema": {"type": "object", "properties": {}}},
         {"name": "cat", "description": "print a file", "input_schema": {"type": "object"}}]
HEX64 = re.compile(r"[0-9a-f]{64}")


def fp(**changes):
    base = dict(model="m1", system=SYSTEM, tools=TOOLS, thinking_mode="off", max_tokens=1000, max_iterations=10)
    base.update(changes)
    return make_fingerprint(**base)


def test_hashes_are_lowercase_hex_sha256_of_the_canonical_json():
    f = fp()
    assert HEX64.fullmatch(f.system_hash) and HEX64.fullmatch(f.tools_hash)
    # Canonical JSON: sorted keys, no whitespace, non-ASCII as UTF-8 (independent computation).
    expected_system = hashlib.sha256(b'"You are a careful agent. SECRET-SYSTEM-TEXT \xc3\xa9\xe2\x80\xa8"').hexdigest()
    tools_text = ('[{"description":"list files","input_schema":{"properties":{},"type":"object"},"name":"ls"},'
                  '{"description":"print a file","input_schema":{"type":"object"},"name":"cat"}]')
    assert f.system_hash == expected_system
    assert f.tools_hash == hashlib.sha256(tools_text.encode()).hexdigest()
    assert canonical_json({"b": 1, "a": [1, "\u00e9"]}) == '{"a":[1,"\u00e9"],"b":1}'.encode()
    assert sha256_hex("x") == hashlib.sha256(b'"x"').hexdigest()


def test_the_tools_hash_ignores_key_order_but_not_tool_order():
    reordered = [{k: t[k] for k in reversed(list(t))} for t in TOOLS]
    assert fp(tools=reordered).tools_hash == fp().tools_hash
    assert fp(tools=list(reversed(TOOLS))).tools_hash != fp().tools_hash


def test_the_plain_fields_are_kept_as_given():
    f = fp(model="claude-x", thinking_mode="enabled", max_tokens=5, max_iterations=7)
    assert (f.model, f.thinking_mode, f.max_tokens, f.max_iterations) == ("claude-x", "enabled", 5, 7)
    assert list(f.to_json()) == list(FIELDS)


def test_the_system_prompt_and_tool_text_are_never_stored():
    line = encode_record(numbered(M(fingerprint=fp()))[0])
    assert b"SECRET-SYSTEM-TEXT" not in line and b"list files" not in line
    assert set(json.loads(line)["meta"]["fingerprint"]) == set(FIELDS)


def test_diff_is_empty_for_equal_fingerprints_even_with_other_unknown_fields():
    assert diff(fp(), fp()) == []
    assert diff(dataclasses.replace(fp(), extra={"future": 1}), fp()) == []


@pytest.mark.parametrize("field, change", [
    ("model", {"model": "m2"}),
    ("system_hash", {"system": SYSTEM + " changed"}),
    ("tools_hash", {"tools": TOOLS[:1]}),
    ("thinking_mode", {"thinking_mode": "enabled"}),
    ("max_tokens", {"max_tokens": 2000}),
    ("max_iterations", {"max_iterations": 11}),
])
def test_diff_names_one_changed_field_in_one_line(field, change):
    lines = diff(fp(), fp(**change))
    assert len(lines) == 1 and "\n" not in lines[0]
    assert field in lines[0]
    assert SYSTEM not in lines[0]  # a diff never shows the prompt itself


def test_diff_names_every_changed_field_one_line_each_in_field_order():
    lines = diff(fp(), fp(model="m2", system="other", tools=[], thinking_mode="enabled", max_tokens=1,
                          max_iterations=1))
    assert len(lines) == len(FIELDS)
    for line, field in zip(lines, FIELDS):
        assert field in line
    assert lines[0] == "model: 'm1' -> 'm2'"
    assert lines[1].startswith("system prompt changed (system_hash ")
    assert lines[2].startswith("tool set changed (tools_hash ")
    assert lines[4] == "max_tokens: 1000 -> 1"


@settings(max_examples=50, deadline=None)
@given(st.text(), st.text())
def test_two_system_prompts_hash_alike_exactly_when_they_are_equal(a, b):
    assert (fp(system=a).system_hash == fp(system=b).system_hash) == (a == b)
    assert (diff(fp(system=a), fp(system=b)) == []) == (a == b)


def test_fingerprints_compare_on_the_six_fields_only():
    assert Fingerprint("m", "s", "t", "off", 1, 2, extra={"x": 1}) == Fingerprint("m", "s", "t", "off", 1, 2)
