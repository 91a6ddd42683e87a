"""harness.subject.contract: the --subject command prefix, its variables, and the environment of a leg."""

from __future__ import annotations

import sys

import pytest

from harness.subject.contract import default_subject, fork_server_enabled, parse_subject


def test_leading_name_value_words_of_a_subject_are_variables_for_every_leg():
    s = parse_subject("FISKJ_MUTANT=no-fsync X_Y='a b' python3 -m agent --quiet")
    assert s.argv == ("python3", "-m", "agent", "--quiet")
    assert s.extra_env == (("FISKJ_MUTANT", "no-fsync"), ("X_Y", "a b"))
    env = s.env(base={"PATH": "/bin"}, base_url="u", api_key="k", state_home="/s", ledger="/l", leg=0, trace=None)
    assert env["FISKJ_MUTANT"] == "no-fsync" and env["X_Y"] == "a b"


def test_a_subject_command_line_reads_back_the_same_subject():
    s = parse_subject(["A=1", "/opt/agent bin/run", "--x=y"])
    assert parse_subject(s.command_line()) == s
    assert s.command_line() == "A=1 '/opt/agent bin/run' --x=y"


def test_variables_without_a_command_are_refused_and_nothing_is_the_reference():
    with pytest.raises(ValueError, match="names no command"):
        parse_subject("A=1 B=2")
    assert parse_subject(None) == parse_subject("") == default_subject()


def test_the_mutant_subject_is_forked_like_the_reference_and_other_agents_are_not(monkeypatch):
    monkeypatch.delenv("FISKJ_HARNESS_FORKSERVER", raising=False)
    assert fork_server_enabled(default_subject())
    assert fork_server_enabled(parse_subject([sys.executable, "-m", "harness.selftest.subject"]))
    assert not fork_server_enabled(parse_subject("python3 -m myagent"))
