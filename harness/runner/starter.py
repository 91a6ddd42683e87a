"""How a leg's process is started (:class:`LegStarter`): forked from the subject's pre-imported fork server
(with the outside observer attached to it), or a fresh process in a new session, observed or not; and the
subject's own reading command and module runs, one reading per distinct state (:func:`state_of`).  The one leg
runner (:mod:`harness.runner.leg`) starts every leg through it."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

from harness.history.readers import tail_text
from harness.observer import spawn_observed
from harness.observer.run import seccomp_filter
from harness.runner.process import kill_tree, wait_for_exit
from harness.subject.contract import HARNESS_ENV, Subject
from harness.subject.forkserver import ForkRefused, ForkServer

__all__ = ["LegStarter", "READING_LIMIT", "state_of"]

#: Bytes of a reading command's output that are parsed.  A reading may print a run's whole
#: conversation, so it must hold the largest journal a run writes: several tool outputs just under
#: the 16 MiB record limit (docs/spec.md section 6) each JSON-escaped, up to 6 bytes per byte.
READING_LIMIT = 512 << 20


def state_of(workdir: Path, roots: tuple[str, ...], slug: str = "") -> tuple[tuple[str, bytes | None], ...]:
    """The files a leg or a reading starts from, as one value to compare: every folder (``None``) and file (its
    bytes) below ``roots``, paths relative to ``workdir`` with the trial's cwd slug ``slug`` blanked."""
    found: list[tuple[str, bytes | None]] = []
    for root in roots:
        for top, dirs, files in os.walk(root):
            dirs.sort()
            rel = os.path.relpath(top, workdir)
            rel = rel.replace(slug, "") if slug else rel
            found.append((rel, None))
            for name in sorted(files):
                with open(os.path.join(top, name), "rb") as f:
                    found.append((os.path.join(rel, name), f.read()))
    return tuple(found)


class LegStarter:
    """Starts a subject's agent processes: under the outside observer, forked from a fork server, or fresh.

    ``subject``: the agent; ``observe``: every leg runs under the outside observer (docs/observer.md), which
    records its durability operations and injects event faults from outside; ``fork_server``: legs, readings and
    helper modules (those never observed, no fault) are forked from the subject's one pre-imported fork server, an
    observed leg with the tracer attached to it (:class:`harness.subject.forkserver.ForkServer`, docs/subject.md
    "Fork servers"; :func:`harness.subject.contract.fork_server_enabled`), each the same code a fresh process
    would run.  Thread-safe; :meth:`close` stops the fork server it started.
    """

    def __init__(self, subject: Subject, fork_server: bool, observe: bool = False) -> None:
        self.subject = subject
        self.observe = observe
        self.forked_reads = fork_server  # legs (observed: the tracer attached), readings and helper modules
        self._lock = threading.Lock()
        self._fork: ForkServer | None = None
        self._fork_lock = threading.Lock()
        self._readings: dict[Any, dict[str, Any]] = {}
        self._reading_now: dict[Any, threading.Event] = {}  # a reading's key -> set when its run has ended
        self._filters: dict[tuple, bytes] = {}  # the observer's seccomp filter by faults and lookups

    def prepare(self) -> None:
        """Start the fork server now (before a leg's clock starts), when legs are forked."""
        self._server()

    def _server(self) -> ForkServer | None:
        """The fork server, started the first time (and again when it died); ``None`` when legs are not forked."""
        if not self.forked_reads:
            return None
        with self._fork_lock:  # (not self._lock: its imports take seconds)
            if self._fork is None or not self._fork.running:
                if self._fork is not None:
                    self._fork.close()
                self._fork = self._new_server().start()
            return self._fork

    def _new_server(self) -> ForkServer:
        """This subject's fork server: fiskj's (in the harness's environment), or a Python agent's
        (``[fork_server]``: its interpreter and entry from the command, its pre-imports, in the harness's
        environment with the profile's fixed variables, so that a leg's differs only in what each leg sets)."""
        subject = self.subject
        if subject.fork_server is None:
            return ForkServer(subject.argv[0], env={k: v for k, v in os.environ.items() if k not in HARNESS_ENV})
        words = [subject.fill(w, {}) for w in subject.argv]
        drop = set(HARNESS_ENV) | set(subject.env_unset)
        env = {k: v for k, v in os.environ.items() if k not in drop}
        fixed = ((k, subject.fill(v, {})) for k, v in subject.profile_env + subject.extra_env)
        env.update((k, v) for k, v in fixed if "{" not in v)
        return ForkServer(words[0], agent=words[1:], preimport=subject.fork_server, env=env)

    def start(self, argv: list[str], env: dict[str, str], stdin: Path | None, out: Path, err: Path, *,
              log: Path | None = None, roots: tuple[str, ...] = (), faults: list[str] | None = None,
              control: bool = False, cwd: str = "", announce_waits: bool = False) -> Any:
        """Start one leg in a new session; returns a Popen-like object (``pid``, ``wait``, ``poll``, ``returncode``).

        ``stdin``: a file to read (else ``/dev/null``); ``out``/``err``:
        files that receive its output (truncated).  When observed: ``log``
        receives the operations under ``roots``, and ``faults`` are the
        observer's (:func:`observer_faults`); ``announce_waits``: the observer
        announces each lock call of it that may wait (``proc.wait_waits``; not
        with ``control``); ``cwd``: its working directory
        (``""``: this process's).  Raises ``OSError`` or
        ``RuntimeError`` when the process cannot start.
        """
        if self.observe:
            assert log is not None, "an observed leg needs a log path"
            attached = self._start_attached(argv, env, stdin, out, err, log, roots, faults, control, cwd,
                                            announce_waits)
            if attached is not None:
                return attached
            with open(out, "wb") as fo, open(err, "wb") as fe:
                stdin_file = open(stdin, "rb") if stdin is not None else subprocess.DEVNULL
                try:
                    return spawn_observed(argv, env=env, cwd=cwd or None, stdin=stdin_file, stdout=fo, stderr=fe, log=str(log),
                                          roots=list(roots), faults=list(faults or ()),
                                          control=control or announce_waits, announce_waits=announce_waits,
                                          start_new_session=True, lookups=control)
                finally:
                    if stdin is not None:
                        stdin_file.close()  # type: ignore[union-attr]
        return self._start_plain(argv, env, stdin, out, err, cwd)

    def _start_attached(self, argv: list[str], env: dict[str, str], stdin: Path | None, out: Path, err: Path,
                        log: Path, roots: tuple[str, ...], faults: list[str] | None, control: bool, cwd: str,
                        announce_waits: bool = False) -> Any:
        """An observed leg forked from the fork server, the tracer attached to it (docs/subject.md "Fork
        servers"); ``None`` when legs are not forked or the fork server fails.  A leg to be held (``control``)
        has its lookups traced too, and its rival is forked while it waits."""
        server = None if cwd or not self.forked_reads else self._server()
        if server is None:
            return None
        key = (tuple(faults or ()), control)
        try:
            if key not in self._filters:
                self._filters[key] = seccomp_filter(key[0], lookups=control)
            child = server.spawn(argv[len(self.subject.argv):], env, stdin=str(stdin) if stdin else None,
                                 stdout=str(out), stderr=str(err), seccomp=self._filters[key])
        except (OSError, RuntimeError, ValueError, subprocess.SubprocessError):  # ForkRefused too
            return None  # (a fork server that died is started again for the next leg)
        try:
            with open(err, "ab") as fe:  # the tracer's own complaints, after the leg's
                return spawn_observed((), log=str(log), roots=list(roots), faults=list(faults or ()), lookups=control,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fe,
                                      start_new_session=True, attach=child.pid, control=control or announce_waits,
                                      announce_waits=announce_waits)
        except BaseException:
            os.kill(child.pid, signal.SIGKILL)
            raise

    def _start_plain(self, argv: list[str], env: dict[str, str], stdin: Path | None, out: Path, err: Path,
                     cwd: str = "") -> Any:
        server = None if cwd else self._server()
        if server is not None:
            words = argv[len(self.subject.argv):]
            for attempt in (1, 2):
                try:
                    return server.spawn(words, env, stdin=str(stdin) if stdin else None, stdout=str(out),
                                        stderr=str(err))
                except ForkRefused:
                    break  # this leg's environment differs where the pre-imports read it: a fresh process
                except (OSError, RuntimeError, ValueError):
                    if attempt == 2:
                        raise
                    server = self._server()  # once more (a new server when this one died)
                    assert server is not None
        with open(out, "wb") as fo, open(err, "wb") as fe:
            stdin_file = open(stdin, "rb") if stdin is not None else None
            try:
                return subprocess.Popen(argv, env=env, stdin=stdin_file or subprocess.DEVNULL, stdout=fo, stderr=fe,
                                        start_new_session=True, close_fds=True, cwd=cwd or None)
            finally:
                if stdin_file is not None:
                    stdin_file.close()

    def read(self, argv: list[str], env: dict[str, str], workdir: Path, tag: str,
             timeout_s: float = 30.0, state: Any = None) -> dict[str, Any]:
        """Run the subject's own reading command (``argv``, not observed, no fault) to its end; its output
        goes to ``workdir/reading-TAG.out`` and ``.err``.

        ``state``: what it reads (:func:`state_of`'s files and the journal's bytes: a store on a server holds the
        run outside the files); a reading of the same state with the same command
        (the trial folder left out) is run once (one reading per distinct state): a thread asking while
        another's reading of it runs waits for that one and takes its result.
        Returns ``{"argv", "exit_code", "stdout", "stderr", "timed_out"}``
        (``stdout``: its first :data:`READING_LIMIT` bytes, to parse, and
        ``over_limit`` when it printed more;
        ``stderr`` kept as :func:`tail_text` keeps it; ``exit_code`` ``None``
        when it was killed after ``timeout_s`` seconds).  Raises ``OSError``
        or ``RuntimeError`` when it cannot start.
        """
        key = None if state is None else (tuple(a.replace(str(workdir), "") for a in argv), state)
        if key is None:
            return self._run_reading(argv, env, workdir, tag, timeout_s, None)
        with self._lock:  # one run per key at a time: a second thread asking waits for it, then takes its result
            known, ahead = self._readings.get(key), self._reading_now.get(key)
            if known is None and ahead is None:
                ahead = self._reading_now[key] = threading.Event()
                mine = True
            else:
                mine = False
        if known is None and not mine:
            ahead.wait(timeout_s + 5.0)  # type: ignore[union-attr]
            with self._lock:
                known = self._readings.get(key)
        if known is not None:
            return {**known, "argv": list(argv)}
        try:
            return self._run_reading(argv, env, workdir, tag, timeout_s, key)
        finally:
            if mine:
                with self._lock:
                    self._reading_now.pop(key, None)
                ahead.set()  # type: ignore[union-attr]

    def _run_reading(self, argv: list[str], env: dict[str, str], workdir: Path, tag: str, timeout_s: float,
                     key: Any) -> dict[str, Any]:
        """Run one reading (:meth:`read`) and keep it under ``key`` when it may stand for its state's."""
        out, err = workdir / f"reading-{tag}.out", workdir / f"reading-{tag}.err"
        proc = self._start_plain(argv, env, None, out, err)
        timed_out = not wait_for_exit(proc, timeout_s)
        if timed_out:
            kill_tree(proc)
        code = proc.returncode if not timed_out and proc.returncode is not None and proc.returncode >= 0 else None
        over = False
        try:
            with open(out, "rb") as f:
                data = f.read(READING_LIMIT + 1)
            over = len(data) > READING_LIMIT
            stdout = data[:READING_LIMIT].decode("utf-8", errors="replace")
        except OSError:
            stdout = ""
        reading = {"argv": list(argv), "exit_code": code, "stdout": stdout, "stderr": tail_text(err),
                   "timed_out": timed_out}
        if over:
            reading["over_limit"] = READING_LIMIT
        if key is not None and not timed_out and str(workdir) not in stdout + reading["stderr"]:
            with self._lock:
                self._readings[key] = reading
        return reading

    def run_module(self, module: str, args: list[str], env: dict[str, str], workdir: Path, tag: str,
                   timeout_s: float = 120.0) -> dict[str, Any]:
        """Run ``python -m MODULE ARGS`` as this fiskj-based subject would run it (forked from the
        fork server when legs are forked, else a fresh interpreter of the subject's), so the subject's
        preload applies in it; the same result as :meth:`read` (output in ``workdir/module-TAG.out``)."""
        out, err = workdir / f"module-{tag}.out", workdir / f"module-{tag}.err"
        server = self._server()
        if server is not None:
            proc: Any = server.spawn(args, env, stdin=None, stdout=str(out), stderr=str(err), main=module)
        else:  # a fresh interpreter of the subject's, started as a fresh leg is
            proc = self._start_plain([self.subject.argv[0], "-m", module, *args], env, None, out, err)
        timed_out = not wait_for_exit(proc, timeout_s)
        if timed_out:
            kill_tree(proc)
        code = proc.returncode if not timed_out and proc.returncode is not None and proc.returncode >= 0 else None
        try:
            stdout = out.read_text(encoding="utf-8", errors="replace")
        except OSError:
            stdout = ""
        return {"argv": [module, *args], "exit_code": code, "stdout": stdout, "stderr": tail_text(err),
                "timed_out": timed_out}

    def close(self) -> None:
        """Stop the fork server this starter started; idempotent."""
        with self._fork_lock:
            server, self._fork = self._fork, None
        if server is not None:
            server.close()
