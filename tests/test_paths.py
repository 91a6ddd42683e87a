import os

import pytest

from fiskj.errors import InvalidRunID, UsageError
from fiskj.paths import default_store_dir, is_valid_run_id, journal_path, lock_path, validate_run_id


def test_the_store_dir_is_under_xdg_state_home_when_it_is_set():
    assert default_store_dir({"XDG_STATE_HOME": "/x/state", "HOME": "/h"}) == "/x/state/fisk-ai/runs"


@pytest.mark.parametrize("xdg", [None, "", "relative/state"])
def test_the_store_dir_falls_back_to_home_when_xdg_state_home_is_unset_empty_or_relative(xdg):
    env = {"HOME": "/home/u"}
    if xdg is not None:
        env["XDG_STATE_HOME"] = xdg
    assert default_store_dir(env) == "/home/u/.local/state/fisk-ai/runs"


def test_the_store_dir_is_never_relative_to_the_working_directory():
    with pytest.raises(UsageError, match="XDG_STATE_HOME"):
        default_store_dir({"HOME": "relative-home"})
    with pytest.raises(UsageError):
        default_store_dir({})


def test_the_default_store_dir_reads_the_process_environment(monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", "/somewhere/state")
    assert default_store_dir() == "/somewhere/state/fisk-ai/runs"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", "/some/home")
    assert default_store_dir() == "/some/home/.local/state/fisk-ai/runs"
    assert os.path.isabs(default_store_dir())


@pytest.mark.parametrize("run_id", ["a", "Z", "7", "run-1_x", "a" * 128, "0-_-_", "demo-1"])
def test_valid_run_ids_are_accepted_unchanged(run_id):
    assert validate_run_id(run_id) == run_id
    assert is_valid_run_id(run_id)


@pytest.mark.parametrize("run_id", [
    "", "a" * 129, "../x", "..", ".", "a/b", "/abs", "a\\b", "a\x00b", "\x00", "-a", "_a", "a b",
    "a\n", "\na", "caf\u00e9", "a.json", "a:b", "~", "$HOME", "\u0661",  # Arabic-Indic digit one
])
def test_invalid_run_ids_are_refused(run_id):
    assert not is_valid_run_id(run_id)
    with pytest.raises(InvalidRunID) as info:
        validate_run_id(run_id)
    assert "run id" in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("run_id", [None, 5, b"abc", ["a"]])
def test_a_run_id_that_is_not_a_string_is_refused(run_id):
    with pytest.raises(InvalidRunID, match="not a string"):
        validate_run_id(run_id)


def test_an_id_of_129_characters_is_refused_naming_the_limit():
    with pytest.raises(InvalidRunID, match="129 characters.*128"):
        validate_run_id("a" * 129)


def test_no_path_is_built_from_an_invalid_id():
    with pytest.raises(InvalidRunID):
        journal_path("/store", "../../etc/passwd")
    with pytest.raises(InvalidRunID):
        lock_path("/store", "x/../../y")


def test_a_run_has_a_json_journal_and_a_lock_file_in_the_store():
    assert journal_path("/store", "r1") == "/store/r1.json"
    assert lock_path("/store", "r1") == "/store/r1.lock"
