import argparse
import json
import os
import subprocess
import sys

import pytest

from fiskj import cli_session
from fiskj.store import FileStore

from builders import A, M, R, T, journal, lines

SHOW_KEYS = {"run_id", "version", "status", "terminal", "fingerprint", "prompt", "interactive", "messages",
             "counters", "next_iteration", "last_stop_reason", "pending", "torn_tail"}
COUNTER_KEYS = {"llm_calls", "tool_calls", "remote_tool_calls", "in_tokens", "out_tokens", "cache_read_tokens",
                "cache_create_tokens"}


pytestmark = pytest.mark.usefixtures("plain_seam")


def cli(capsys, *argv):
    """Run ``fiskj session ...`` in-process; return (status, stdout, stderr)."""
    parser = argparse.ArgumentParser(prog="fiskj")
    cli_session.register(parser.add_subparsers(dest="command", required=True))
    try:
        args = parser.parse_args(["session", *argv])
        status = args.func(args)
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def store(tmp_path):
    store = FileStore(tmp_path / "runs")
    with store.create("r1", M()) as j:
        j.append(A("a", "b"))
        j.append(R("a"))
    return store


def put(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_show_json_by_path_has_the_documented_keys(store, capsys):
    status, out, err = cli(capsys, "show", os.path.join(store.directory, "r1.json"), "--json")
    assert status == 0 and err == ""
    shown = json.loads(out)
    assert SHOW_KEYS <= set(shown)
    assert set(shown["counters"]) == COUNTER_KEYS
    assert shown["pending"]["unanswered"] == ["b"] and shown["status"] == "open"
    assert set(shown["pending"]) >= {"iteration", "assistant", "results", "answered", "unanswered"}


def test_show_by_id_looks_in_the_store_given_with_store(store, capsys):
    status, out, _ = cli(capsys, "show", "r1", "--store", store.directory, "--json")
    assert status == 0 and json.loads(out)["run_id"] == "r1"


def test_show_by_id_honours_xdg_state_home(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    FileStore().create("r9", M(run_id="r9")).close()
    monkeypatch.chdir(tmp_path)
    status, out, _ = cli(capsys, "show", "r9", "--json")
    assert status == 0 and json.loads(out)["run_id"] == "r9"


def test_the_human_view_is_readable(store, capsys):
    status, out, _ = cli(capsys, "show", "r1", "--store", store.directory)
    assert status == 0
    assert out.startswith("run r1: open (version 2)")
    assert "pending     iteration 0: answered a; unanswered b" in out
    assert "model       m1" in out and "[1] user:" in out


def test_show_reports_a_torn_tail_and_exits_0(tmp_path, capsys):
    good = journal(M(), A("a"))
    path = put(tmp_path, "t.json", good + lines(M(), A("a"), R("a"))[-1][:20])
    status, out, _ = cli(capsys, "show", path, "--json")
    assert status == 0 and json.loads(out)["torn_tail"] == {"offset": len(good), "length": 20}


@pytest.mark.parametrize("data, kind", [
    (journal(M()) + b"{oops\n" + journal(A("a"), start=2), "CorruptJournal"),
    (journal(M(version=3)), "UnsupportedVersion"),
    (journal(M(), A("a"), R("z")), "ConsistencyError"),
])
def test_show_of_a_bad_journal_prints_one_typed_line_and_exits_1(tmp_path, capsys, data, kind):
    path = put(tmp_path, "bad.json", data)
    status, out, err = cli(capsys, "show", path)
    assert status == 1 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"fiskj session show: {kind}: {path}, line ")


def test_show_of_an_invalid_id_is_a_usage_error(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, _, err = cli(capsys, "show", "bad id", "--store", str(tmp_path))
    assert status == 2 and "InvalidRunID" in err and err.count("\n") == 1


def test_show_of_a_fifo_is_refused_without_blocking(tmp_path, capsys):
    os.mkfifo(tmp_path / "f.json")
    status, _, err = cli(capsys, "show", str(tmp_path / "f.json"))
    assert status == 1 and "not a regular file" in err


def test_verify_json_reports_each_file_and_exits_1_when_any_is_bad(store, tmp_path, capsys):
    good = os.path.join(store.directory, "r1.json")
    torn = put(tmp_path, "torn.json", journal(M()) + b'{"seq":2')
    bad = put(tmp_path, "bad.json", b"junk\n" + journal(M()))
    newer = put(tmp_path, "v3.json", journal(M(version=3)))
    status, out, _ = cli(capsys, "verify", "--json", good, torn, bad, newer)
    assert status == 1
    entries = json.loads(out)
    assert [set(e) for e in entries] == [{"path", "ok", "records", "torn_tail", "error"}] * 4
    assert [e["ok"] for e in entries] == [True, True, False, False]
    assert entries[0] == {"path": good, "ok": True, "records": 3, "torn_tail": None, "error": None}
    assert entries[1]["torn_tail"] == {"offset": len(journal(M())), "length": 8}
    assert entries[2]["error"] == {"kind": "CorruptJournal", "line": 1, "offset": 0,
                                   "message": entries[2]["error"]["message"]}
    assert entries[3]["error"]["kind"] == "UnsupportedVersion" and "3" in entries[3]["error"]["message"]


def test_verify_exits_0_when_every_file_folds_even_with_a_torn_tail(store, tmp_path, capsys):
    torn = put(tmp_path, "torn.json", journal(M()) + b"\0\0\0")
    status, out, _ = cli(capsys, "verify", "r1", torn, "--store", store.directory)
    assert status == 0
    assert out.splitlines()[0] == f"ok    {store.directory}/r1.json: 3 records"
    assert "torn tail of 3 bytes at byte offset" in out.splitlines()[1]


def test_verify_names_line_and_offset_of_a_corrupt_file_in_human_output(tmp_path, capsys):
    first = journal(M())
    bad = put(tmp_path, "bad.json", first + b"nope\n" + journal(A("a"), start=2))
    status, out, _ = cli(capsys, "verify", bad)
    assert status == 1 and out.startswith(f"FAIL  {bad}: CorruptJournal, line 2, byte offset {len(first)}: ")


def test_verify_with_no_target_is_a_usage_error(capsys):
    status, _, err = cli(capsys, "verify")
    assert status == 2 and "usage" in err


def test_a_session_command_is_required(capsys):
    assert cli(capsys)[0] == 2


def test_ls_lists_runs_and_reports_unreadable_ones(store, capsys):
    with open(os.path.join(store.directory, "broken.json"), "wb") as f:
        f.write(b"junk\njunk\n")
    status, out, _ = cli(capsys, "ls", "--store", store.directory, "--json")
    assert status == 0
    listed = {i["id"]: i for i in json.loads(out)}
    assert listed["r1"]["status"] == "open" and listed["r1"]["model"] == "m1" and listed["r1"]["error"] is None
    assert listed["broken"]["status"] == "unreadable" and listed["broken"]["error"]["kind"] == "CorruptJournal"
    assert {"id", "created", "updated", "model", "prompt", "status", "error"} <= set(listed["r1"])
    status, out, _ = cli(capsys, "ls", "--store", store.directory)
    assert status == 0
    assert out.splitlines()[0].split() == ["ID", "STATUS", "UPDATED", "RECORDS", "MODEL", "PROMPT"]
    assert any(l.startswith("broken") and "CorruptJournal, line 1" in l for l in out.splitlines())


def test_ls_of_an_empty_store_says_so(tmp_path, capsys):
    status, out, _ = cli(capsys, "ls", "--store", str(tmp_path / "none"))
    assert status == 0 and out.startswith("no runs in")
    assert json.loads(cli(capsys, "ls", "--json", "--store", str(tmp_path / "none"))[1]) == []


def test_rm_removes_a_run_and_is_refused_while_a_writer_holds_it(store, capsys):
    with store.open("r1"):
        status, _, err = cli(capsys, "rm", "r1", "--store", store.directory)
        assert status == 1 and "RunLocked" in err and "held by another writer" in err
    assert cli(capsys, "rm", "r1", "--store", store.directory)[0] == 0
    assert os.listdir(store.directory) == []
    status, _, err = cli(capsys, "rm", "r1", "--store", store.directory)
    assert status == 1 and "RunNotFound" in err


def test_the_fiskj_command_runs_session_verify_without_a_traceback(tmp_path):
    bad = put(tmp_path, "bad.json", b"\xff\n" + journal(M()))
    proc = subprocess.run([sys.executable, "-m", "fiskj", "session", "verify", bad],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr + proc.stdout
    assert proc.stdout.startswith(f"FAIL  {bad}: CorruptJournal, line 1, byte offset 0")


# --- issue 15 -------------------------------------------------------------------------------------


def snapshot(directory):
    """Mode and mtime of ``directory`` and of each entry in it, and each entry's bytes."""
    st = os.stat(directory)
    entries = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        est = os.lstat(path)
        with open(path, "rb") as fh:
            entries[name] = (est.st_mode, est.st_mtime_ns, fh.read())
    return st.st_mode, st.st_mtime_ns, entries


def test_a_read_changes_nothing_not_even_the_mode_of_a_group_readable_store_directory(store, capsys):
    # Issue 15 item 4: session show, verify and ls used to tighten a 0750 store directory to 0700.
    os.chmod(store.directory, 0o750)
    os.chmod(os.path.join(store.directory, "r1.json"), 0o640)
    before = snapshot(store.directory)
    path = os.path.join(store.directory, "r1.json")
    for argv in (["show", "r1"], ["show", "r1", "--json"], ["show", path], ["verify", "r1"], ["verify", "--json", "r1"],
                 ["ls"], ["ls", "--json"]):
        status, out, err = cli(capsys, *argv, "--store", store.directory)
        assert status == 0 and err == "", (argv, err)
        assert snapshot(store.directory) == before, argv
    assert oct(before[0] & 0o777) == "0o750"


def surrogate_store(store):
    with store.create("s1", M(run_id="s1")) as j:
        j.append(A("a"))
        j.append(R("a", content=[{"type": "text", "text": "half \ud800 a pair"}]))
        j.append(T("suspended"))
    path = os.path.join(store.directory, "s1.json")
    with open(path, "rb") as fh:
        assert b'"half \\ud800 a pair"' in fh.read()  # fiskj's writer stores the JSON escape
    return path


def test_show_prints_a_lone_surrogate_from_the_journal_as_its_escape_with_and_without_json(store, capsys):
    # Issue 15 item 3: writing it to a UTF-8 stdout raised UnicodeEncodeError (a traceback).
    path = surrogate_store(store)
    status, out, err = cli(capsys, "show", path, "--json")
    assert (status, err) == (0, "") and '"half \\ud800 a pair"' in out
    shown = json.loads(out)  # still JSON, and it reads back to the journal's string
    assert shown["messages"][-1]["content"][0]["content"] == [{"type": "text", "text": "half \ud800 a pair"}]
    status, out, err = cli(capsys, "show", "s1", "--store", store.directory)
    assert (status, err) == (0, "") and "half \\ud800 a pair" in out
    status, out, err = cli(capsys, "ls", "--json", "--store", store.directory)
    assert (status, err) == (0, "") and json.loads(out)[1]["status"] == "suspended"


def test_the_fiskj_command_shows_a_lone_surrogate_without_a_traceback(store):
    path = surrogate_store(store)
    proc = subprocess.run([sys.executable, "-m", "fiskj", "session", "show", path, "--json"],
                          capture_output=True, timeout=30)
    assert proc.returncode == 0 and proc.stderr == b""
    assert json.loads(proc.stdout)["status"] == "suspended" and b"half \\ud800 a pair" in proc.stdout
