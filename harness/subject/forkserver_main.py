"""The fork servers' own process code (docs/subject.md "Fork servers"): :func:`serve`, the one loop of every fork
server (the legs' and the MCP fork server's, :mod:`harness.workload.mcp_fork`), and :func:`main`, the legs' server
(fiskj's, or a Python agent's).  Run as ``python -m harness.subject.forkserver_main --fork-server SOCKET`` for
fiskj, and on a Python agent's own interpreter (which need not have the harness installed: only this module and
:mod:`harness.names` are imported there).  The harness's side, which starts and talks to it, is
:mod:`harness.subject.forkserver`."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import time
from contextlib import suppress
from typing import Any, Callable, Sequence

from harness.names import EXIT_ERROR, EXIT_USAGE

__all__ = ["main", "serve", "AGENT_FLAG", "END_GRACE_S"]

#: The server's flag for a Python agent: ``--python-agent SPEC SOCKET`` (SPEC: JSON, ``{"entry": [SCRIPT] |
#: ["-m", MODULE], "preimport": [...]}``), after the bootstrap that puts the harness on ``sys.path`` only while it
#: imports this module.
AGENT_FLAG = "--python-agent"
#: How long the children of a tag may take to end once the harness ended the tag, before they are killed.
END_GRACE_S = 5.0


def serve(path: str, child: Callable[[dict[str, Any], list[int], socket.socket], Any], ready: dict[str, Any]) -> int:
    """The one fork-server loop: listen on the Unix socket ``path`` (``SOCK_SEQPACKET``), say ``{"ready": true,
    **ready}`` on fd 1 (a JSON line), then serve until fd 0 reaches EOF (the harness closed it, or died).  Each
    connection brings one message (JSON, up to three descriptors with it):

    * ``{"fork": REQ, "tag": TAG}``: fork a child (SIGINT and SIGTERM blocked in it until it unblocks them) that
      runs ``child(REQ, fds, conn)`` and exits; answer ``p<pid>``, then ``x<exit code>`` (``-N``: killed by signal
      N) once it ended and was reaped here (so its CPU time counts in this process's children's).  A fork for a
      tag that was ended is refused: the connection is closed without an answer.
    * ``{"end": TAG}``: answer ``ended`` once every child of ``TAG`` has ended (those still running
      :data:`END_GRACE_S` later are killed).

    Children still running at the end run on; returns 0."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(128)
    os.write(1, json.dumps({"ready": True, "pid": os.getpid(), **ready}).encode() + b"\n")
    children: dict[int, tuple[int, socket.socket, Any]] = {}  # pidfd -> (pid, its connection, its tag)
    ending: list[tuple[Any, socket.socket, float]] = []  # (tag, who asked, when to kill)
    killed: set[int] = set()
    ended: set[Any] = set()
    while True:
        now = time.monotonic()
        for item in list(ending):  # answer the ends whose children are gone; kill those past their grace
            tag, asker, deadline = item
            left = {pid for pid, _, t in children.values() if t == tag}
            if not left:
                ending.remove(item)
                ended.add(tag)
                with suppress(OSError):
                    asker.send(b"ended")
                asker.close()
            elif now >= deadline:
                for pid in left - killed:
                    killed.add(pid)
                    os.kill(pid, signal.SIGKILL)
        timeout = max(0.0, min(d for _, _, d in ending) - now) if ending else None
        readable, _, _ = select.select([0, listener, *children], [], [], timeout)
        if 0 in readable and not os.read(0, 4096):
            break
        for pidfd in [fd for fd in readable if fd in children]:
            pid, conn, _ = children.pop(pidfd)
            _, status = os.waitpid(pid, 0)
            killed.discard(pid)
            os.close(pidfd)
            with suppress(OSError):  # (the asker may be gone)
                conn.send(b"x%d" % os.waitstatus_to_exitcode(status))
            conn.close()
        if listener not in readable:
            continue
        conn, _ = listener.accept()
        conn.settimeout(5.0)
        try:
            msg, fds, _, _ = socket.recv_fds(conn, 1 << 18, 3)
            req = json.loads(msg)
        except (OSError, ValueError):
            req, fds = {}, []
        conn.settimeout(None)  # (blocking again: a child may read and write it as a plain descriptor)
        if "end" in req and not fds:
            ending.append((req["end"], conn, time.monotonic() + END_GRACE_S))
            continue
        pid = -1
        if "fork" in req and req.get("tag") not in ended:
            sockets = [listener, *(c for _, c, _ in children.values()), *(a for _, a, _ in ending)]
            # A signal may be sent the moment the pid is known: SIGINT/SIGTERM stay pending in the child
            # until it made itself what it serves (its stdio, its environment).
            old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            try:
                pid = os.fork()
            except OSError as exc:  # the asker sees its connection end without an answer
                sys.stderr.write(f"fork server: cannot fork: {exc}\n")
            if pid == 0:
                try:
                    for fd in [*children, *(s.detach() for s in sockets)]:
                        os.close(fd)
                    child(req["fork"], fds, conn)
                finally:
                    os._exit(EXIT_ERROR)
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        for fd in fds:
            os.close(fd)
        if pid < 0:
            conn.close()
            continue
        with suppress(OSError):
            conn.send(b"p%d" % pid)
        children[os.pidfd_open(pid)] = (pid, conn, req.get("tag"))
    listener.close()
    with suppress(OSError):
        os.unlink(path)
    return 0


def main(args: Sequence[str] = ()) -> int:
    """The legs' fork server: pre-import, then :func:`serve` legs on the socket ``args[-1]``; ``args``:
    ``[AGENT_FLAG, SPEC, SOCKET]`` for a Python agent (:data:`AGENT_FLAG`), else ``[SOCKET]`` for fiskj's legs.
    A request is a leg's (:meth:`harness.subject.forkserver.ForkServer.spawn`)."""
    import ctypes  # (a traced leg installs its filter with it: no import after that)
    import gc

    agent: dict[str, Any] | None = json.loads(args[1]) if list(args[:1]) == [AGENT_FLAG] else None
    read_at_import: dict[str, str | None] = {}
    if agent is None:
        _warm_fiskj()
    else:
        try:
            read_at_import = _preimport(agent.get("preimport") or [])
        except BaseException as exc:  # a module that cannot be imported, or threads left running
            os.write(1, json.dumps({"ready": False, "error": f"{type(exc).__name__}: {exc}"}).encode() + b"\n")
            return EXIT_ERROR
    gc.collect()
    gc.freeze()
    if agent is None:
        import fiskj.reader

        with fiskj.reader.collector_paused():  # it notes, once, that this process keeps objects frozen: a forked
            pass                               # leg then never walks the frozen set to find out (1.5 ms a read)

    def leg(req: dict[str, Any], fds: list[int], conn: socket.socket) -> None:
        conn.close()  # (the server's: it tells the harness the leg's end)
        if agent is None:
            _fork_child(req)
        _fork_agent(req, agent["entry"])

    return serve(args[-1], leg, {"read_at_import": read_at_import})


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
    if sys.argv[1:2] == ["--fork-server"] and len(sys.argv) == 3:
        sys.exit(main(sys.argv[2:]))
    print("usage: python -m harness.subject.forkserver_main --fork-server SOCKET", file=sys.stderr)
    sys.exit(EXIT_USAGE)
