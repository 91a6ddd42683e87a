"""The fork server process's own code (docs/subject.md "Fork servers"): the loop that forks legs (:func:`main`)
and, started as a template, forks per-thread servers (:func:`_serve_clones`).  Run as
``python -m harness.subject.forkserver_main --fork-server`` for fiskj, and on a Python agent's own interpreter
(which need not have the harness installed: only this module and :mod:`harness.names` are imported there).
The harness's side, which starts and talks to it, is :mod:`harness.subject.forkserver`."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from contextlib import suppress
from typing import Any, Sequence

from harness.names import EXIT_ERROR, EXIT_USAGE

__all__ = ["main", "AGENT_FLAG", "TEMPLATE_FLAG"]

#: The server's flag for a Python agent: ``--python-agent SPEC`` (JSON: ``{"entry": [SCRIPT] | ["-m", MODULE],
#: "preimport": [...]}``), after the bootstrap that puts the harness on ``sys.path`` only while it imports this module.
AGENT_FLAG = "--python-agent"
#: The server's last flag for a template (:meth:`ForkServer.clone`): it forks servers, never a leg.
TEMPLATE_FLAG = "--template"

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


def main(args: Sequence[str] = ()) -> int:
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
        sys.exit(main(sys.argv[2:]))
    print("usage: python -m harness.subject.forkserver_main --fork-server", file=sys.stderr)
    sys.exit(EXIT_USAGE)
