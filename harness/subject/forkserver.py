"""The fork server: legs of a fiskj-based subject forked from a pre-imported interpreter (docs/subject.md
"The reference subject's fork server").  Run as ``python -m harness.subject.forkserver --fork-server``, by
:meth:`ForkServer.start` only."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from contextlib import suppress
from typing import Any, Mapping, Sequence

from harness.names import EXIT_ERROR, EXIT_USAGE
from harness.subject.contract import HARNESS_ENV
from harness.subject.preload import load_preload

__all__ = ["ForkServer", "ForkedProcess"]


class ForkedProcess:
    """A leg forked by a :class:`ForkServer`: the parts of :class:`subprocess.Popen` the nemesis uses
    (``pid``, ``returncode``: ``-N`` when killed by signal N)."""

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
            self.returncode = os.waitstatus_to_exitcode(int(msg["status"]))
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
    """A pre-imported interpreter that forks legs, one at a time (the next :meth:`spawn` waits until the last
    leg exited); not thread-safe: one per worker thread.  It ends at :meth:`close`, or when its stdin reaches EOF
    (the harness died).  Raises ``OSError`` / ``RuntimeError`` when the server dies."""

    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable
        self._proc: subprocess.Popen | None = None
        self._buf = b""
        self._last: ForkedProcess | None = None

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`close` while the server process lives."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> "ForkServer":
        """Start the server process (idempotent); returns ``self``."""
        if self._proc is None:
            env = {k: v for k, v in os.environ.items() if k not in HARNESS_ENV}
            self._proc = subprocess.Popen([self.python, "-m", __name__, "--fork-server"], env=env,
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
        poller = select.poll()  # not select(): a campaign's descriptors may number over FD_SETSIZE (1024)
        poller.register(fd, select.POLLIN)
        while b"\n" not in self._buf:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            ready = poller.poll(None if remaining is None else remaining * 1000.0)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError("the fork server exited unexpectedly")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], *, stdin: str | None, stdout: str,
              stderr: str, main: str | None = None, seccomp: bytes | None = None) -> ForkedProcess:
        """Fork a leg running ``fiskj`` with ``argv`` (the words after the subject prefix) in a new session:
        ``env`` its whole environment, ``stdin`` a file path or ``None`` (``/dev/null``), ``stdout``/``stderr`` file
        paths (truncated); ``main``: a module whose ``main(argv)`` runs instead of :func:`fiskj.cli.main`, after the
        preload (the journal-state engine's reader child); ``seccomp``: the outside observer's filter
        (:func:`harness.observer.run.seccomp_filter`), which the leg installs, then stops until the tracer
        attaches to it (docs/observer.md "Use").  Waits for the last leg's exit first."""
        self.start()
        if self._last is not None and not self._last.wait_for_exit(60.0):
            raise RuntimeError(f"the fork server's last leg (pid {self._last.pid}) did not end")
        assert self._proc is not None and self._proc.stdin is not None
        req = {"argv": list(argv), "env": dict(env), "stdin": stdin, "stdout": stdout, "stderr": stderr,
               "main": main, "seccomp": seccomp.hex() if seccomp else None}
        self._proc.stdin.write(json.dumps(req).encode() + b"\n")
        self._proc.stdin.flush()
        msg = self._read(60.0)
        if not msg or "pid" not in msg:
            raise RuntimeError(f"the fork server did not fork: {msg!r}")
        self._last = ForkedProcess(self, int(msg["pid"]))
        return self._last

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


def _fork_server_main() -> int:
    """The server loop: read a JSON request per line on fd 0, fork the leg, report pid then exit status on fd 1."""
    import ctypes  # (a traced leg installs its filter with it: no import after that)
    import gc
    import importlib
    import pkgutil

    import fiskj
    import fiskj.cli
    import fiskj.model
    import fiskj.reader

    # Pre-import every fiskj module (a leg imports some lazily) and the HTTP client, and warm the
    # argument parser (argparse, gettext), so a forked leg starts warm.
    for info in pkgutil.iter_modules(fiskj.__path__):
        if info.name != "__main__":
            importlib.import_module(f"fiskj.{info.name}")
    fiskj.cli.parser().parse_args(["run", "--checkpoint", "--name", "warm", "--max-tokens", "1", "x"])
    fiskj.model.http_stack()  # the HTTP client fiskj imports at a leg's first model call
    gc.collect()
    gc.freeze()
    with fiskj.reader.collector_paused():  # it notes, once, that this process keeps objects frozen: a forked
        pass                               # leg then never walks the frozen set to find out (1.5 ms a read)

    def send(obj: dict[str, Any]) -> None:
        os.write(1, json.dumps(obj).encode() + b"\n")

    send({"ready": True, "pid": os.getpid()})
    for line in sys.stdin.buffer:  # one request a line, until the harness closes the pipe
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
    return 0


def _sigterm_until_fiskj() -> Any:
    """SIGTERM's disposition in a forked leg until fiskj installs its handler: the default, or while
    coverage.py measures the leg with ``sigterm = true``, a handler that saves its data first and dies all the same."""
    coverage = sys.modules.get("coverage")
    cov = coverage.Coverage.current() if coverage is not None else None
    if cov is None or not cov.get_option("run:sigterm"):
        return signal.SIG_DFL

    def save_then_die(signum: int, frame: Any) -> None:
        cov.stop()
        cov.save()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    return save_then_die


def _await_tracer(program: bytes) -> None:
    """Install the observer's seccomp filter ``program``, then stop until the tracer attaches and lets the
    leg go on (``fiskj-observe --attach``): from here on every filtered call is the tracer's to see."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    code = ctypes.create_string_buffer(program, len(program))

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Fprog(len(program) // 8, ctypes.addressof(code))
    libc.prctl(0x59616D61, ctypes.c_ulong(-1), 0, 0, 0)  # PR_SET_PTRACER_ANY: under Yama the tracer is no ancestor
    if libc.prctl(38, 1, 0, 0, 0) or libc.syscall(317, 1, 0, ctypes.byref(prog)):  # NO_NEW_PRIVS; seccomp(FILTER)
        raise OSError(ctypes.get_errno(), "cannot install the observer's seccomp filter")
    os.kill(os.getpid(), signal.SIGSTOP)


def _fork_child(req: dict[str, Any]) -> None:
    """The leg: its session, stdio and environment, the IO seam, its preload, then ``fiskj.cli.main``."""
    code = EXIT_ERROR
    try:
        os.setsid()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _sigterm_until_fiskj())
        fds = [os.open(req.get("stdin") or os.devnull, os.O_RDONLY),
               os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
               os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)]
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(0, "r", encoding="utf-8", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)
        env = req["env"]  # the leg's environment: only what differs is set (a putenv each costs)
        for name in [name for name in os.environ if name not in env]:
            del os.environ[name]
        for name, value in env.items():
            if os.environ.get(name) != value:
                os.environ[name] = value
        import fiskj.cli
        import fiskj.ioseam

        fiskj.ioseam.configure(os.environ.get("FISKJ_IOSEAM_TRACE") or None,
                               os.environ.get("FISKJ_IOSEAM_FAULT") or None)
        sys.argv = ["fiskj", *req["argv"]]
        if req.get("seccomp"):
            _await_tracer(bytes.fromhex(req["seccomp"]))
        try:
            # Deliver a signal that came early: SIGTERM kills (as before fiskj's handler in a
            # fresh interpreter), SIGINT raises KeyboardInterrupt (exit 1, as fiskj.cli.main does).
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            load_preload()  # the mutant subject's patch, in this forked leg only
            entry = fiskj.cli.main
            if req.get("main"):
                import importlib

                entry = importlib.import_module(req["main"]).main
            code = int(entry(list(req["argv"])) or 0)
        except KeyboardInterrupt:
            print("fiskj: interrupted", file=sys.stderr)
            code = EXIT_ERROR
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_ERROR)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = EXIT_ERROR
    finally:
        with suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:] == ["--fork-server"]:
        sys.exit(_fork_server_main())
    print("usage: python -m harness.subject.forkserver --fork-server", file=sys.stderr)
    sys.exit(EXIT_USAGE)
