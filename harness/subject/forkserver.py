"""The fork server: legs forked from a pre-imported interpreter (docs/subject.md "Fork servers"): a fiskj-based
subject's (``python -m fiskj``, the mutant subject), or any Python agent whose profile declares ``[fork_server]``
(its script or module run as ``__main__`` in the forked leg).  Started by :meth:`ForkServer.start` only: as
``python -m harness.subject.forkserver --fork-server`` for fiskj, and for an agent on the agent's own interpreter
(which need not have the harness installed: only this module and :mod:`harness.names` are imported there); a
campaign's per-thread servers are forked from one such server started as a template (:meth:`ForkServer.clone`)."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.names import EXIT_ERROR, EXIT_USAGE

__all__ = ["ForkServer", "ForkedProcess", "ForkRefused", "AGENT_FLAG", "TEMPLATE_FLAG"]

#: The server's flag for a Python agent: ``--python-agent SPEC`` (JSON: ``{"entry": [SCRIPT] | ["-m", MODULE],
#: "preimport": [...]}``), after the bootstrap that puts the harness on ``sys.path`` only while it imports this module.
AGENT_FLAG = "--python-agent"
#: The server's last flag for a template (:meth:`ForkServer.clone`): it forks servers, never a leg.
TEMPLATE_FLAG = "--template"
_ROOT = str(Path(__file__).resolve().parents[2])
_BOOT = ("import sys; sys.path.insert(0, sys.argv.pop(1)); import harness.subject.forkserver as f; del sys.path[0]; "
         "sys.exit(f._fork_server_main(sys.argv[1:]))")


class ForkRefused(RuntimeError):
    """A leg the fork server must not fork (:meth:`ForkServer.spawn`): its environment differs from the
    server's in a variable the pre-imports read; the leg is started as a fresh process instead."""


class _PopenLike:
    """``wait`` and ``poll`` as :class:`subprocess.Popen` has them, over a subclass's ``wait_for_exit(timeout)``
    (True once ended, ``returncode`` set) and its ``_NAME`` (what a ``TimeoutExpired`` names)."""

    _NAME = "process"
    pid: int
    returncode: int | None

    def wait_for_exit(self, timeout: float | None) -> bool:  # pragma: no cover (each subclass has its own)
        raise NotImplementedError

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the end; returns ``returncode``.  Raises ``subprocess.TimeoutExpired`` after ``timeout`` s."""
        if not self.wait_for_exit(timeout):
            raise subprocess.TimeoutExpired([self._NAME, str(self.pid)], timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def poll(self) -> int | None:
        """``returncode`` once ended, else ``None`` (does not block)."""
        self.wait_for_exit(0)
        return self.returncode


class ForkedProcess(_PopenLike):
    """A leg forked by a :class:`ForkServer`: the parts of :class:`subprocess.Popen` the nemesis uses
    (``pid``, ``returncode``: ``-N`` when killed by signal N)."""

    _NAME = "fork-server leg"

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



class ForkServer:
    """A pre-imported interpreter that forks legs, one at a time (the next :meth:`spawn` waits until the last
    leg exited); not thread-safe: one per worker thread.  It ends at :meth:`close`, or when its stdin reaches EOF
    (the harness died).  Raises ``OSError`` / ``RuntimeError`` when the server dies.

    A ``template`` server forks no leg: it imports once and :meth:`clone` forks servers from it, each as
    warm as it is and one per worker thread, so that a campaign's threads pay the imports once, not once
    each (thread-safe; a clone is the template's child, watched through its pidfd)."""

    def __init__(self, python: str | None = None, *, agent: Sequence[str] = (), preimport: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, template: bool = False) -> None:
        """``python``: the interpreter (default this one).  ``agent``: a Python agent's entry after the
        interpreter, ``[SCRIPT]`` or ``["-m", MODULE]`` (empty: fiskj's legs); ``preimport``: the modules the
        server imports once before it forks an agent's legs; ``env``: the server's environment (default this
        process's without :data:`harness.subject.contract.HARNESS_ENV`); ``template``: a server that only
        clones (:meth:`clone`).  Raises ``ValueError`` for an entry of another form."""
        self.python = python or sys.executable
        self.agent = list(agent)
        if self.agent and not (len(self.agent) == 1 and not self.agent[0].startswith("-")
                               or len(self.agent) == 2 and self.agent[0] == "-m"):
            raise ValueError(f"a fork server runs a Python agent as SCRIPT or -m MODULE, not {self.agent!r}")
        self.preimport = list(preimport)
        self.env = dict(env) if env is not None else None
        self.template = template
        self._proc: subprocess.Popen | _Clone | None = None
        self._sock: socket.socket | None = None  # a template's requests (a clone's pipes go with them)
        self._clone_lock = threading.Lock()
        self._buf = b""
        self._last: ForkedProcess | None = None
        self._read_at_import: dict[str, str | None] = {}

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`close` while the server process lives."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> "ForkServer":
        """Start the server process (idempotent); returns ``self``."""
        if self._proc is None:
            from harness.subject.contract import HARNESS_ENV

            env = self.env if self.env is not None else {k: v for k, v in os.environ.items() if k not in HARNESS_ENV}
            argv = [self.python, "-m", __name__, "--fork-server"]
            if self.agent:
                spec = json.dumps({"entry": self.agent, "preimport": self.preimport})
                argv = [self.python, "-c", _BOOT, _ROOT, AGENT_FLAG, spec]
            stdin: Any = subprocess.PIPE
            if self.template:  # its requests come on a socket: each carries the new server's pipes
                argv.append(TEMPLATE_FLAG)
                self._sock, stdin = socket.socketpair()
            try:
                self._proc = subprocess.Popen(argv, env=env, stdin=stdin, stdout=subprocess.PIPE,
                                              start_new_session=True, close_fds=True)
            except BaseException:
                if self._sock is not None:
                    self._sock.close()
                raise
            finally:
                if self.template:
                    stdin.close()
            self._read_at_import = dict(self._ready(120.0, "fork server").get("read_at_import") or {})
        return self

    def _ready(self, timeout: float, what: str) -> dict[str, Any]:
        """The server's ready message, read within ``timeout`` seconds; closes the server and raises
        ``RuntimeError`` naming ``what`` when it says anything else or nothing."""
        try:
            ready = self._read(timeout)
        except (RuntimeError, ValueError) as exc:
            ready = {"error": str(exc)}
        if not ready or not ready.get("ready"):
            self.close()
            raise RuntimeError(f"the {what} did not start: {ready!r}")
        return ready

    def clone(self) -> "ForkServer":
        """A new server forked from this started template (``template``): as warm as it, ready to
        :meth:`spawn`, ended by its own :meth:`close`.  Thread-safe.  Raises ``RuntimeError`` / ``OSError``
        when the template is not running or does not fork."""
        if not self.template:
            raise ValueError("only a template fork server clones")
        self.start()
        requests, theirs = os.pipe()[::-1], os.pipe()  # (write, read): the harness writes; (read, write): it reads
        mine = (requests[0], theirs[0])
        try:
            with self._clone_lock:
                assert self._sock is not None
                socket.send_fds(self._sock, [b"clone\n"], [requests[1], theirs[1]])
                msg = self._read(30.0)
            if not msg or "pid" not in msg:
                raise RuntimeError(f"the template fork server did not clone: {msg!r}")
            clone = _Clone(int(msg["pid"]), *mine)
        except BaseException:
            for fd in mine:
                os.close(fd)
            raise
        finally:
            os.close(requests[1])  # the clone's ends: the template passed them on
            os.close(theirs[1])
        server = ForkServer(self.python, agent=self.agent, preimport=self.preimport, env=self.env)
        server._proc = clone
        server._ready(30.0, "cloned fork server")
        server._read_at_import = dict(self._read_at_import)
        return server

    def refusal(self, env: Mapping[str, str]) -> str | None:
        """Why a leg with environment ``env`` must not be forked from this (started) server, or ``None``: a
        variable the pre-imports read has another value (or presence) in ``env`` than it had in the server."""
        changed = sorted(name for name, value in self._read_at_import.items() if env.get(name) != value)
        if not changed:
            return None
        return (f"the agent's pre-imports read {', '.join(changed)} from the environment, and this leg's "
                f"value differs from the fork server's: started fresh")

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
        attaches to it (docs/observer.md "Use").  Waits for the last leg's exit first.  A Python agent's leg runs
        its script or module as ``__main__`` with ``argv`` instead (``main`` does not apply); raises
        :class:`ForkRefused` when the leg must be started fresh (:meth:`refusal`)."""
        if self.template:
            raise ValueError("a template fork server forks no leg: spawn from its clone()")
        self.start()
        refused = self.refusal(env)
        if refused:
            raise ForkRefused(refused)
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
            if self._sock is not None:
                self._sock.close()
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


class _Clone(_PopenLike):
    """A server cloned from a template (:meth:`ForkServer.clone`), the parts of :class:`subprocess.Popen` a
    :class:`ForkServer` uses: ``stdin``/``stdout`` (its pipes), :meth:`poll`, :meth:`wait`, :meth:`kill`.  It is
    the template's child, not this process's: its end is seen through its pidfd."""

    _NAME = "cloned fork server"

    def __init__(self, pid: int, stdin_fd: int, stdout_fd: int) -> None:
        """``stdin_fd``/``stdout_fd``: this side of its request and reply pipes (closed with the files made of
        them; not taken when the pidfd cannot be had: ``OSError``)."""
        self.pid = pid
        self.returncode: int | None = None
        self._pidfd: int | None = os.pidfd_open(pid)
        self.stdin = os.fdopen(stdin_fd, "wb")
        self.stdout = os.fdopen(stdout_fd, "rb")

    def wait_for_exit(self, timeout: float | None) -> bool:
        """Whether the server ended within ``timeout`` seconds (``None``: until it does; its ``returncode``
        is then ``-1``: its status is the template's to reap)."""
        if self.returncode is None and self._pidfd is not None:
            poller = select.poll()
            poller.register(self._pidfd, select.POLLIN)
            if not poller.poll(None if timeout is None else timeout * 1000.0):
                return False
            os.close(self._pidfd)
            self._pidfd, self.returncode = None, -1
        return True

    def kill(self) -> None:
        """SIGKILL the server (through its pidfd: never another process that got its pid)."""
        if self._pidfd is not None:
            with suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)


def _serve_clones() -> None:
    """A template's loop: per request on the socket at fd 0 (a line with the new server's request and reply
    pipes), fork; the parent reports the child's pid on fd 1, the child returns, its fds 0 and 1 its pipes, to
    serve legs.  The template ends (``os._exit``) when the socket reaches EOF.  It reaps the clones that ended
    (before each fork and at its end; the harness sees a clone's end through its pidfd), so that their CPU time,
    and their legs', counts in its own and so in the harness's children's."""
    requests = socket.socket(fileno=0)
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(requests, 1024, 2)
        except OSError:
            msg, fds = b"", []
        with suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        if not msg or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            os._exit(0)
        pid = os.fork()
        if pid == 0:
            requests.detach()
            os.dup2(fds[0], 0)
            os.dup2(fds[1], 1)
            for fd in fds:
                os.close(fd)
            return
        for fd in fds:
            os.close(fd)
        os.write(1, json.dumps({"pid": pid}).encode() + b"\n")


def _fork_server_main(args: Sequence[str] = ()) -> int:
    """The server loop: read a JSON request per line on fd 0, fork the leg, report pid then exit status on fd 1.
    ``args``: ``[AGENT_FLAG, SPEC]`` for a Python agent (:data:`AGENT_FLAG`), else fiskj's legs; a last
    :data:`TEMPLATE_FLAG`: a template, which forks the servers (:func:`_serve_clones`), each then this loop."""
    import ctypes  # (a traced leg installs its filter with it: no import after that)
    import gc

    agent: dict[str, Any] | None = json.loads(args[1]) if list(args[:1]) == [AGENT_FLAG] else None
    read_at_import: dict[str, str | None] = {}

    def send(obj: dict[str, Any]) -> None:
        os.write(1, json.dumps(obj).encode() + b"\n")

    if agent is None:
        _warm_fiskj()
    else:
        try:
            read_at_import = _preimport(agent.get("preimport") or [])
        except BaseException as exc:  # a module that cannot be imported, or threads left running
            send({"ready": False, "error": f"{type(exc).__name__}: {exc}"})
            return EXIT_ERROR
    gc.collect()
    gc.freeze()
    if agent is None:
        import fiskj.reader

        with fiskj.reader.collector_paused():  # it notes, once, that this process keeps objects frozen: a forked
            pass                               # leg then never walks the frozen set to find out (1.5 ms a read)
    send({"ready": True, "pid": os.getpid(), "read_at_import": read_at_import})
    if list(args[-1:]) == [TEMPLATE_FLAG]:
        _serve_clones()  # returns in a clone only
        send({"ready": True, "pid": os.getpid(), "read_at_import": read_at_import})
    for line in sys.stdin.buffer:  # one request a line, until the harness closes the pipe
        req = json.loads(line)
        # A suspend may be sent the moment the pid is known: keep SIGINT/SIGTERM
        # pending in the child until its stdio and environment are the leg's.
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        pid = os.fork()
        if pid == 0:
            if agent is None:
                _fork_child(req)
            _fork_agent(req, agent["entry"])
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        send({"pid": pid})
        _, status = os.waitpid(pid, 0)
        send({"pid": pid, "status": status})
    return 0


def _warm_fiskj() -> None:
    """Pre-import every fiskj module (a leg imports some lazily) and the HTTP client, and warm the argument
    parser (argparse, gettext), so a forked fiskj leg starts warm."""
    import importlib
    import pkgutil

    import fiskj
    import fiskj.cli
    import fiskj.model

    for info in pkgutil.iter_modules(fiskj.__path__):
        if info.name != "__main__":
            importlib.import_module(f"fiskj.{info.name}")
    fiskj.cli.parser().parse_args(["run", "--checkpoint", "--name", "warm", "--max-tokens", "1", "x"])
    fiskj.model.http_stack()  # the HTTP client fiskj imports at a leg's first model call


def _preimport(modules: Sequence[str]) -> dict[str, str | None]:
    """Import a Python agent's ``modules``; returns every environment variable they read through
    ``os.environ``/``os.getenv`` with its value here (``None``: unset), which a forked leg's environment
    must match.  Raises ``ImportError`` (a module that cannot be imported) or ``RuntimeError`` (an import
    left a thread running: a thread does not survive a fork)."""
    import importlib
    import threading

    read: dict[str, str | None] = {}
    before = dict(os.environ)
    environ = type(os.environ)
    names = ("__getitem__", "get", "__contains__")
    own = {name: environ.__dict__.get(name) for name in names}  # None: inherited (Mapping's)
    saved = {name: getattr(environ, name) for name in names}

    def noting(name: str) -> Any:
        def method(self: Any, key: Any, *rest: Any) -> Any:
            if isinstance(key, str) and key not in read:
                read[key] = before.get(key)
            return saved[name](self, key, *rest)
        return method

    for name in saved:
        setattr(environ, name, noting(name))
    try:
        for module in modules:
            importlib.import_module(module)
    finally:
        for name, method in own.items():
            if method is None:
                delattr(environ, name)
            else:
                setattr(environ, name, method)
    running = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if running:
        raise RuntimeError(f"the pre-imports left threads running ({', '.join(running)}): a forked leg would "
                           "not have them; leave the module that starts them out of [fork_server] preimport")
    return read


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
    # The tracer let this thread's stop go, but the process is still group-stopped as the kernel keeps it: a
    # thread made later would start stopped (a job-control stop the tracer leaves in place).  SIGCONT ends it.
    os.kill(os.getpid(), signal.SIGCONT)


def _leg_process(req: dict[str, Any], sigterm: Any) -> None:
    """Make this forked child the leg's process: a new session, SIGINT as a fresh interpreter has it and
    SIGTERM ``sigterm``, the leg's standard streams and environment (its signals still blocked)."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, sigterm)
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


def _fork_child(req: dict[str, Any]) -> None:
    """A fiskj leg: its session, stdio and environment, the IO seam, its preload, then ``fiskj.cli.main``."""
    code = EXIT_ERROR
    try:
        _leg_process(req, _sigterm_until_fiskj())
        import fiskj.cli
        import fiskj.ioseam

        from harness.subject.preload import load_preload

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


def _fork_agent(req: dict[str, Any], entry: list[str]) -> None:
    """A Python agent's leg: its session, stdio and environment, then its script (``[SCRIPT]``) or module
    (``["-m", MODULE]``) run as ``__main__`` with the leg's argv, ending as the interpreter would: non-daemon
    threads joined, ``atexit`` functions run, an uncaught exception printed (exit 1), an uncaught
    ``KeyboardInterrupt`` re-raised as SIGINT, ``SystemExit``'s code as the exit status."""
    code = EXIT_ERROR
    try:
        import runpy
        import tempfile

        _leg_process(req, signal.SIG_DFL)
        tempfile.tempdir = None  # its cached temporary directory: the leg's $TMPDIR decides, as in a fresh one
        if entry[0] == "-m":
            sys.argv = [entry[1], *req["argv"]]  # runpy sets argv[0] to the module's file
            sys.path[0] = os.getcwd()
        else:
            sys.argv = [entry[0], *req["argv"]]
            sys.path[0] = os.path.dirname(os.path.realpath(entry[0]))
        if req.get("seccomp"):
            _await_tracer(bytes.fromhex(req["seccomp"]))
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, set())  # an early SIGTERM kills, an early SIGINT raises
            if entry[0] == "-m":
                runpy.run_module(entry[1], run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(entry[0], run_name="__main__")
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except KeyboardInterrupt:
            import traceback

            traceback.print_exc()
            code = -signal.SIGINT
        except BaseException:
            sys.excepthook(*sys.exc_info())
            code = 1
        _interpreter_exit()
    finally:
        with suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        if code == -signal.SIGINT:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code & 0xFF)


def _interpreter_exit() -> None:
    """What a fresh interpreter does at its end before it exits: join the non-daemon threads, then run the
    ``atexit`` functions (errors printed, as Python prints them)."""
    import atexit
    import threading

    with suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:2] == ["--fork-server"]:
        sys.exit(_fork_server_main(sys.argv[2:]))
    print("usage: python -m harness.subject.forkserver --fork-server", file=sys.stderr)
    sys.exit(EXIT_USAGE)
