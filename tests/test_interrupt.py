"""Clean interruption: SIGINT or SIGTERM during a campaign gives a partial report, no traceback, no orphan, exit 130/143.

The end-to-end tests run ``python -m harness.cli.main run scenarios/kill-random.toml --trials 200`` in a
subprocess (its SIGINT and SIGTERM set back to the default, whatever this process inherited), wait until
its trials are running (their directories appear under ``$FISKJ_HARNESS_TMP``), send the signal and check
what a user would: the exit status, the partial report marked interrupted (JSON, JUnit, Markdown, results
folder), nothing on stderr that looks like a traceback, no trial directory left, and no process left
(this test process is made a child subreaper, so an orphan of the harness would become its child).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import jsonschema
import psutil
import pytest

from harness.campaign import interrupt
from harness.report.report import build_report, render_markdown, render_summary, write_junit
from harness.runner.process import enable_subreaper

ROOT = Path(__file__).resolve().parents[1]


def _default_signals() -> None:  # in the child: a test started in the background may ignore SIGINT
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _start(tmp_path: Path, *extra: str, close_stdout: bool = False) -> subprocess.Popen:
    env = dict(os.environ, FISKJ_HARNESS_TMP=str(tmp_path / "shm"), FISKJ_HARNESS_RESULTS=str(tmp_path / "results"),
               PYTHONPATH=os.pathsep.join([str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH")
                                                         else [])))
    (tmp_path / "shm").mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli.main", "run", "scenarios/kill-random.toml",
                             "--trials", "200", "--jobs", "2", *extra], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=_default_signals)
    if close_stdout:
        proc.stdout.close()  # a reader that went away: every write to stdout is EPIPE
    return proc


def _wait_for(what, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _trial_dirs(tmp_path: Path) -> list[Path]:
    """The trial directories under the harness's private folder(s) now (they come and go while we look)."""
    found: list[Path] = []
    try:
        roots = list((tmp_path / "shm").iterdir())
    except OSError:
        return found
    for root in roots:
        try:
            found += [p for p in root.iterdir() if p.name.startswith("fiskj-trial-")]
        except OSError:
            pass
    return found


def _finish(proc: subprocess.Popen, timeout: float = 30.0) -> tuple[int, str]:
    err = proc.stderr.read().decode(errors="replace")
    proc.wait(timeout)
    return proc.returncode, err


def _assert_clean(tmp_path: Path, err: str, seen: set[int], t0: float) -> None:
    for bad in ("Traceback", "BrokenPipe", "Exception ignored", "KeyboardInterrupt"):
        assert bad not in err, err
    assert list((tmp_path / "shm").iterdir()) == []  # the private folder, trial directories and all, is gone
    alive = [p for p in seen if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert alive == [], [psutil.Process(p).cmdline() for p in alive]
    mine = []
    for c in psutil.Process().children(recursive=True):
        try:
            if c.create_time() >= t0 - 1 and c.status() != psutil.STATUS_ZOMBIE:
                mine.append(c)
            elif c.status() == psutil.STATUS_ZOMBIE:
                c.wait(0)  # a process of the run that had ended, reparented to us (the subreaper): reap it
        except (psutil.NoSuchProcess, psutil.TimeoutExpired):
            pass
    assert mine == [], [(c.pid, c.status()) for c in mine]  # a live orphan would have been reparented to us


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_mid_campaign_writes_the_partial_report_and_exits_128_plus_it(tmp_path, sig):
    enable_subreaper()
    report, junit = tmp_path / "r.json", tmp_path / "r.xml"
    t0 = time.time()
    # SIGINT with stdout a closed pipe (`fiskj-harness run | head` after head exited); SIGTERM with a reader
    proc = _start(tmp_path, "--report-json", str(report), "--junit", str(junit), close_stdout=sig == signal.SIGINT)
    seen: set[str] = set()

    def trials_running() -> bool:  # the reference run's directory, then at least one trial's
        seen.update(p.name for p in _trial_dirs(tmp_path))
        return len(seen) >= 2 and bool(_trial_dirs(tmp_path))

    _wait_for(trials_running)
    pids = {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
    assert pids, "no agent process was running"
    proc.send_signal(sig)
    out = b"" if proc.stdout.closed else proc.stdout.read()
    code, err = _finish(proc)
    assert code == 128 + sig, err
    name = signal.Signals(sig).name
    assert f"fiskj-harness: interrupted by {name}" in err
    _assert_clean(tmp_path, err, pids, t0)

    data = json.loads(report.read_text(encoding="utf-8"))
    schema = json.loads((ROOT / "schemas" / "report.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(data)
    assert data["interrupted"] is True
    cut = data["campaign"]["interrupted"]
    assert cut["signal"] == name and cut["planned"] == 200 and cut["done"] == data["trials"] < 200
    assert len(data["runs"]) == data["trials"]
    assert 'name="campaign interrupted"' in junit.read_text(encoding="utf-8")
    (folder,) = (tmp_path / "results" / "kill-random").glob("2*Z")
    assert json.loads((folder / "report.json").read_text(encoding="utf-8"))["interrupted"] is True
    assert "INTERRUPTED by " + name in (folder / "summary.md").read_text(encoding="utf-8")
    assert "campaign interrupted" in (folder / "junit.xml").read_text(encoding="utf-8")
    if out:
        assert b"INTERRUPTED by SIGTERM" in out and b"PARTIAL" in out


def test_ctrl_c_before_any_trial_exits_130(tmp_path):
    enable_subreaper()
    t0 = time.time()
    proc = _start(tmp_path, "--keep", "none")
    _wait_for(lambda: any((tmp_path / "shm").iterdir()))  # its private folder: the signals are taken
    proc.send_signal(signal.SIGINT)
    proc.stdout.read()
    code, err = _finish(proc)
    assert code == 130, err
    assert "fiskj-harness: interrupted by SIGINT" in err
    _assert_clean(tmp_path, err, set(), t0)


# --- the pieces, in process --------------------------------------------------------------------


def test_handling_takes_both_signals_and_gives_them_back_and_leaves_an_ignored_one_ignored():
    old_int, old_term = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever an earlier test in this worker left
    try:
        with interrupt.handling():
            assert signal.getsignal(signal.SIGINT) is interrupt._handler
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN  # inherited as ignored: stays so
            with pytest.raises(interrupt.Interrupted) as info:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)  # the handler runs before this ends
            assert info.value.exit_status == 130 and interrupt.signum() == signal.SIGINT
            os.kill(os.getpid(), signal.SIGINT)  # a second one is only noted
            time.sleep(0.05)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler and not interrupt.requested()
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


def test_a_signal_while_a_campaign_waits_stops_the_wait_and_yields_what_was_done():
    done, running = Future(), Future()
    done.set_result(1)
    with interrupt.handling():
        got = []
        timer = threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGTERM))
        timer.start()
        t = time.monotonic()
        for fut in interrupt.as_done([done, running]):  # cooperative: the signal is noted, not raised
            got.append(fut)
        assert got == [done] and interrupt.signum() == signal.SIGTERM
        assert time.monotonic() - t < 5
        with pytest.raises(interrupt.Interrupted):
            interrupt.check()  # a campaign asked to start now does not
    assert not interrupt.requested()


def test_the_private_tmp_root_goes_away_with_whatever_is_in_it(tmp_path, monkeypatch):
    monkeypatch.setenv(interrupt.TMP_ENV, str(tmp_path))
    with interrupt.private_tmp_root() as root:
        assert os.environ[interrupt.TMP_ENV] == root and Path(root).parent == tmp_path
        (Path(root) / "fiskj-trial-x" / "store").mkdir(parents=True)
    assert list(tmp_path.iterdir()) == [] and os.environ[interrupt.TMP_ENV] == str(tmp_path)
    with interrupt.private_tmp_root(enabled=False) as root:  # --keep-dirs
        assert root is None and os.environ[interrupt.TMP_ENV] == str(tmp_path)


def test_a_signal_while_the_private_tmp_root_is_made_leaves_no_folder_behind(tmp_path, monkeypatch):
    # the signal lands after mkdtemp made the folder and before the code that removes it is in force
    monkeypatch.setenv(interrupt.TMP_ENV, str(tmp_path))
    real_mkdtemp = interrupt.tempfile.mkdtemp

    def mkdtemp_then_signal(*args, **kwargs):
        made = real_mkdtemp(*args, **kwargs)
        interrupt._handler(signal.SIGINT, None)
        return made

    monkeypatch.setattr(interrupt.tempfile, "mkdtemp", mkdtemp_then_signal)
    with interrupt.handling():
        with pytest.raises(interrupt.Interrupted):
            with interrupt.private_tmp_root():
                pytest.fail("the body ran after the signal")
    assert list(tmp_path.iterdir()) == [] and os.environ[interrupt.TMP_ENV] == str(tmp_path)


def test_end_processes_kills_and_reaps_every_process_below_but_the_spared_ones():
    enable_subreaper()
    keep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    # a process whose child outlives it: the orphan comes back to this subreaper
    tree = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                             "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); time.sleep(30)"])
    try:
        _wait_for(lambda: len(psutil.Process(tree.pid).children()) == 1)
        grandchild = psutil.Process(tree.pid).children()[0].pid
        killed = interrupt.end_processes(spare={keep.pid} | (interrupt.descendants() - {tree.pid, grandchild}))
        assert {tree.pid, grandchild} <= set(killed)
        assert not psutil.pid_exists(grandchild) and not psutil.pid_exists(tree.pid)  # killed and reaped
        assert keep.poll() is None
    finally:
        keep.kill()
        keep.wait()


def test_an_interrupted_report_says_so_in_every_rendering(tmp_path):
    report = build_report([])
    assert report["interrupted"] is False
    report["interrupted"] = True
    report["campaign"] = {"interrupted": {"signal": "SIGTERM", "planned": 200, "done": 7}}
    line = "INTERRUPTED by SIGTERM after 7 of 200 planned trial(s): this report is partial"
    assert line in render_summary(report) and "(PARTIAL: interrupted)" in render_summary(report)
    assert line in render_markdown(report) and "(partial: interrupted)" in render_markdown(report)
    write_junit(report, str(tmp_path / "j.xml"))
    text = (tmp_path / "j.xml").read_text(encoding="utf-8")
    assert 'name="campaign interrupted"' in text and 'errors="1"' in text and line in text


def test_end_trials_cancels_what_has_not_started_and_ends_what_runs_by_killing_its_processes():
    from concurrent.futures import ThreadPoolExecutor

    started = threading.Event()

    def trial() -> int:  # a trial waiting on its agent, as a leg does
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        started.set()
        return proc.wait()

    spare = interrupt.descendants()
    pool = ThreadPoolExecutor(max_workers=1)
    running, waiting = pool.submit(trial), pool.submit(trial)
    assert started.wait(20)
    t = time.monotonic()
    interrupt.end_trials(pool, [running, waiting], spare)
    assert time.monotonic() - t < 10
    assert running.result() == -signal.SIGKILL and waiting.cancelled()
    pool.shutdown(wait=True)


def test_a_gate_interrupted_before_a_round_starts_none_and_its_report_says_so():
    from harness.campaign.gate import gate_report, run_gate
    from harness.scenario.parse import load_scenario

    scenario = load_scenario(ROOT / "scenarios" / "noop-baseline.toml")
    with interrupt.handling():
        interrupt.note(signal.SIGTERM)  # as the handler does when the signal comes between two rounds
        gate = run_gate([scenario], budget_s=5)
    assert gate.rounds == 0 and gate.result.trials == []
    assert gate.result.interrupted == {"signal": "SIGTERM", "planned": 0, "done": 0, "round": 0}
    report = gate_report(gate, None)
    assert report["interrupted"] is True and report["campaign"]["interrupted"]["signal"] == "SIGTERM"
    schema = json.loads((ROOT / "schemas" / "report.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(json.loads(json.dumps(report, default=str)))
