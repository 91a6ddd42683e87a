"""The subject contract: how the harness starts, resumes and finds an agent under test.

A subject is a command prefix (``--subject CMD``) that accepts fiskj's run
command line; the full contract is docs/subject.md.  In short::

    CMD run --checkpoint --name ID --model M --base-url URL --tools FILE \\
        --max-tokens N --max-iterations N [--chat] PROMPT
    CMD run --resume ID [--force] --model M --base-url URL --tools FILE \\
        --max-tokens N --max-iterations N

exit 0 completed, 3 suspended, 1 error, 2 usage; journal at
``$XDG_STATE_HOME/fisk-ai/runs/ID.json`` in the fisk-ai v2 format.  The
environment of every leg is built by :meth:`Subject.env`.

The default subject is the reference implementation:
``[sys.executable, "-m", "fiskj"]``.

A fresh interpreter costs about 100 ms of CPU per leg (imports), which
bounds a campaign's speed.  For the reference subject the harness can use a
:class:`ForkServer` instead: a Python process that has imported fiskj once
and forks one leg at a time (``os.fork``; the child takes the leg's argv,
environment and stdio, re-reads the IO-seam variables with
:func:`fiskj.ioseam.configure`, calls :func:`fiskj.cli.main` and exits).
The forked leg sees the same argv, environment, files and exit status as
``python -m fiskj`` would; only the interpreter start is skipped.  Other
subjects always get a fresh process.  ``FISKJ_HARNESS_FORKSERVER=0``
turns the fork server off.
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

__all__ = [
    "EXIT_COMPLETED",
    "EXIT_ERROR",
    "EXIT_USAGE",
    "EXIT_SUSPENDED",
    "Subject",
    "RunConfig",
    "default_subject",
    "parse_subject",
    "journal_path",
    "store_dir",
    "HARNESS_ENV",
    "ForkServer",
    "ForkedProcess",
    "fork_server_enabled",
]

EXIT_COMPLETED = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_SUSPENDED = 3

#: Variables the harness sets for every leg; inherited values of these are dropped.
HARNESS_ENV = (
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "XDG_STATE_HOME",
    "FISKJ_LEDGER",
    "FISKJ_HARNESS_LEG",
    "FISKJ_IOSEAM_TRACE",
    "FISKJ_IOSEAM_FAULT",
)


def store_dir(state_home: str | os.PathLike[str]) -> Path:
    """The run store under an XDG state home: ``STATE_HOME/fisk-ai/runs``."""
    return Path(state_home) / "fisk-ai" / "runs"


def journal_path(state_home: str | os.PathLike[str], run_id: str) -> Path:
    """The journal of ``run_id``: ``STATE_HOME/fisk-ai/runs/RUN_ID.json``."""
    return store_dir(state_home) / f"{run_id}.json"


@dataclass(frozen=True)
class RunConfig:
    """The configuration of one run, the same for every leg (it is the fingerprint).

    ``tools_file`` is a path to fiskj's ``--tools`` JSON; ``followups`` is
    only a flag here (``chat``): the lines go to stdin.
    """

    run_id: str
    model: str
    base_url: str
    tools_file: str
    max_tokens: int
    max_iterations: int
    prompt: str
    chat: bool = False


@dataclass(frozen=True)
class Subject:
    """A command prefix that accepts fiskj's ``run`` command line.

    ``argv``: the prefix (e.g. ``[python, "-m", "fiskj"]``).
    ``resume_config``: pass the run configuration again on resume (needed:
    the journal stores only hashes of the tools, so a resumer must be told
    the tool commands).  ``extra_env``: variables added to every leg.
    """

    argv: tuple[str, ...]
    resume_config: bool = True
    extra_env: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def is_reference(self) -> bool:
        """True for the bundled reference implementation (``python -m fiskj``)."""
        return tuple(self.argv[1:]) == ("-m", "fiskj")

    def command_line(self) -> str:
        """The prefix as one shell-quoted string (for ``--subject`` in reproducers).

        ``extra_env`` comes first as ``NAME=value`` words, as a shell would
        take them (:func:`parse_subject` reads them back).
        """
        return shlex.join([f"{k}={v}" for k, v in self.extra_env] + list(self.argv))

    def _config_args(self, cfg: RunConfig, *, resume: bool = False) -> list[str]:
        args = [
            "--model", cfg.model,
            "--base-url", cfg.base_url,
            "--tools", cfg.tools_file,
            "--max-tokens", str(cfg.max_tokens),
            "--max-iterations", str(cfg.max_iterations),
        ]
        if cfg.chat and not resume:  # a resume takes the chat flag from the journal
            args.append("--chat")
        return args

    def start_argv(self, cfg: RunConfig) -> list[str]:
        """argv that starts a checkpointed run named ``cfg.run_id`` (the prompt is one argument)."""
        return [*self.argv, "run", "--checkpoint", "--name", cfg.run_id, *self._config_args(cfg), "--", cfg.prompt]

    def resume_argv(self, cfg: RunConfig, force: bool = False) -> list[str]:
        """argv that resumes ``cfg.run_id`` (``--force`` overrides a fingerprint mismatch)."""
        argv = [*self.argv, "run", "--resume", cfg.run_id]
        if force:
            argv.append("--force")
        if self.resume_config:
            argv += self._config_args(cfg, resume=True)
        return argv

    def env(
        self,
        *,
        base: Mapping[str, str] | None = None,
        base_url: str,
        api_key: str,
        state_home: str,
        ledger: str,
        leg: int,
        trace: str | None,
        fault: str | None = None,
    ) -> dict[str, str]:
        """The environment of one leg.

        Starts from ``base`` (default ``os.environ``) minus every variable of
        :data:`HARNESS_ENV`, then sets ``ANTHROPIC_BASE_URL``,
        ``ANTHROPIC_API_KEY``, ``XDG_STATE_HOME``, ``FISKJ_LEDGER``,
        ``FISKJ_HARNESS_LEG``, ``FISKJ_IOSEAM_TRACE`` (when ``trace``) and
        ``FISKJ_IOSEAM_FAULT`` (when ``fault``, e.g. ``"kill-after@12"``).
        """
        env = {k: v for k, v in (os.environ if base is None else base).items() if k not in HARNESS_ENV}
        env.update(self.extra_env)
        env["ANTHROPIC_BASE_URL"] = base_url
        env["ANTHROPIC_API_KEY"] = api_key
        env["XDG_STATE_HOME"] = state_home
        env["FISKJ_LEDGER"] = ledger
        env["FISKJ_HARNESS_LEG"] = str(leg)
        if trace:
            env["FISKJ_IOSEAM_TRACE"] = trace
        if fault:
            env["FISKJ_IOSEAM_FAULT"] = fault
        return env


def default_subject() -> Subject:
    """The reference implementation: ``[sys.executable, "-m", "fiskj"]``."""
    return Subject(argv=(sys.executable, "-m", "fiskj"))


def parse_subject(command: str | Sequence[str] | None) -> Subject:
    """Build a :class:`Subject` from a ``--subject`` value.

    ``command``: a shell-quoted string (split with :func:`shlex.split`) or an
    argv list; ``None`` or empty gives :func:`default_subject`.  Leading
    ``NAME=value`` words are variables set for every leg (``extra_env``), as
    in a shell: ``--subject "FISKJ_MUTANT=no-fsync python -m harness.selftest.subject"``.
    Raises ``ValueError`` on unbalanced quotes or assignments with no command.
    """
    if not command:
        return default_subject()
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    env = []
    while argv and _ASSIGNMENT.match(argv[0]):
        name, _, value = argv.pop(0).partition("=")
        env.append((name, value))
    if not argv:
        if env:
            raise ValueError(f"--subject {command!r} sets variables but names no command")
        return default_subject()
    return Subject(argv=tuple(argv), extra_env=tuple(env))


_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


# --- the fork server (reference subject only) -----------------------------------------------


def fork_server_enabled(subject: Subject) -> bool:
    """True when legs of ``subject`` may be forked from a :class:`ForkServer`.

    Only for the reference subject, or the mutant subject
    (``python -m harness.selftest.subject``: the forked leg applies
    ``$FISKJ_MUTANT`` in itself, never in the server), run by this very
    interpreter, and not when ``FISKJ_HARNESS_FORKSERVER=0``.
    """
    if os.environ.get("FISKJ_HARNESS_FORKSERVER", "1") == "0":
        return False
    forkable = subject.is_reference or tuple(subject.argv[1:]) == ("-m", "harness.selftest.subject")
    return forkable and os.path.realpath(subject.argv[0]) == os.path.realpath(sys.executable)


class ForkedProcess:
    """A leg forked by a :class:`ForkServer`: the parts of :class:`subprocess.Popen` the nemesis uses.

    ``pid``; ``returncode`` (``None`` while running, ``-N`` when killed by
    signal N); :meth:`wait_for_exit` (timeout in seconds, no polling: it
    blocks on the server's pipe); :meth:`wait`; :meth:`poll`.
    """

    def __init__(self, server: "ForkServer", pid: int) -> None:
        self._server = server
        self.pid = pid
        self.returncode: int | None = None

    def wait_for_exit(self, timeout: float | None) -> bool:
        """Block until the leg exited (True) or ``timeout`` seconds passed (False)."""
        if self.returncode is None:
            msg = self._server._read(timeout)
            if msg is None:
                return False
            status = int(msg["status"])
            if os.WIFSIGNALED(status):
                self.returncode = -os.WTERMSIG(status)
            else:
                self.returncode = os.WEXITSTATUS(status)
        return True

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit; returns ``returncode``.  Raises ``subprocess.TimeoutExpired`` on timeout."""
        if not self.wait_for_exit(timeout):
            raise subprocess.TimeoutExpired(["fork-server leg", str(self.pid)], timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def poll(self) -> int | None:
        """``returncode`` if the leg has exited, else ``None`` (does not block)."""
        self.wait_for_exit(0)
        return self.returncode


class ForkServer:
    """A pre-imported interpreter that forks reference-agent legs, one at a time.

    Not thread-safe: give each worker thread its own.  :meth:`spawn` starts
    a leg and returns a :class:`ForkedProcess`; the next :meth:`spawn` must
    wait until that leg has exited.  :meth:`close` ends the server (it also
    ends by itself when the harness dies: its stdin reaches EOF).
    Raises ``OSError`` / ``RuntimeError`` when the server dies.
    """

    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable
        self._proc: subprocess.Popen | None = None
        self._buf = b""

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`close` while the server process lives."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> "ForkServer":
        """Start the server process (idempotent); returns ``self``."""
        if self._proc is None:
            env = {k: v for k, v in os.environ.items() if k not in HARNESS_ENV}
            self._proc = subprocess.Popen([self.python, "-m", "harness.subject.contract", "--fork-server"], env=env,
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
                                          close_fds=True)
            ready = self._read(60.0)
            if not ready or not ready.get("ready"):
                self.close()
                raise RuntimeError(f"the fork server did not start: {ready!r}")
        return self

    def _read(self, timeout: float | None) -> dict[str, Any] | None:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buf:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError("the fork server exited unexpectedly")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], *, stdin: str | None, stdout: str,
              stderr: str) -> ForkedProcess:
        """Fork a leg running ``fiskj`` with ``argv`` (the words after the subject prefix).

        ``env`` is its whole environment; ``stdin`` a file path or ``None``
        (``/dev/null``); ``stdout``/``stderr`` file paths (truncated).  The
        leg runs in a new session (its pid is its process group).
        """
        self.start()
        assert self._proc is not None and self._proc.stdin is not None
        req = {"argv": list(argv), "env": dict(env), "stdin": stdin, "stdout": stdout, "stderr": stderr}
        self._proc.stdin.write(json.dumps(req).encode() + b"\n")
        self._proc.stdin.flush()
        msg = self._read(60.0)
        if not msg or "pid" not in msg:
            raise RuntimeError(f"the fork server did not fork: {msg!r}")
        return ForkedProcess(self, int(msg["pid"]))

    def close(self) -> None:
        """Stop the server (EOF on its stdin, then SIGKILL after 5 s); idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _fork_server_main() -> int:  # pragma: no cover - runs in the server process (tested through the runner)
    """The server loop: read a JSON request per line on fd 0, fork the leg, report pid then exit status on fd 1."""
    import gc
    import importlib
    import pkgutil

    import fiskj
    import fiskj.cli

    # Pre-import every fiskj module (a leg imports some lazily), and warm the
    # argument parser (argparse, gettext), so a forked leg starts warm.
    for info in pkgutil.iter_modules(fiskj.__path__):
        if info.name != "__main__":
            importlib.import_module(f"fiskj.{info.name}")
    fiskj.cli.build_parser().parse_args(["run", "--checkpoint", "--name", "warm", "--max-tokens", "1", "x"])
    gc.collect()
    gc.freeze()
    out = 1

    def send(obj: dict[str, Any]) -> None:
        os.write(out, json.dumps(obj).encode() + b"\n")

    send({"ready": True, "pid": os.getpid()})
    buf = b""
    while True:
        while b"\n" not in buf:
            chunk = os.read(0, 65536)
            if not chunk:
                return 0
            buf += chunk
        line, _, buf = buf.partition(b"\n")
        req = json.loads(line)
        # A suspend may be sent the moment the pid is known: keep SIGINT/SIGTERM
        # pending in the child until its stdio and environment are the leg's.
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        pid = os.fork()
        if pid == 0:
            _fork_child(req)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        send({"pid": pid})
        _, status = os.waitpid(pid, 0)
        send({"pid": pid, "status": status})


def _fork_child(req: dict[str, Any]) -> None:  # pragma: no cover - runs in a forked leg
    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        fds = [os.open(req.get("stdin") or os.devnull, os.O_RDONLY),
               os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
               os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)]
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(0, "r", encoding="utf-8", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)
        os.environ.clear()
        os.environ.update(req["env"])
        import fiskj.cli
        import fiskj.ioseam

        fiskj.ioseam.configure(os.environ.get("FISKJ_IOSEAM_TRACE") or None,
                               os.environ.get("FISKJ_IOSEAM_FAULT") or None)
        if os.environ.get("FISKJ_MUTANT"):  # the mutant subject: patch this forked leg only
            from harness.selftest.mutants import apply_from_env

            apply_from_env()
        sys.argv = ["fiskj", *req["argv"]]
        try:
            # Deliver a signal that came early: SIGTERM kills (as before fiskj's handler in a
            # fresh interpreter), SIGINT raises KeyboardInterrupt (exit 1, as fiskj.cli.main does).
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            code = int(fiskj.cli.main(list(req["argv"])) or 0)
        except KeyboardInterrupt:
            print("fiskj: interrupted", file=sys.stderr)
            code = 1
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:] == ["--fork-server"]:
        sys.exit(_fork_server_main())
    print("usage: python -m harness.subject.contract --fork-server", file=sys.stderr)
    sys.exit(2)
