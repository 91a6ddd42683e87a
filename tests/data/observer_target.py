"""A program for tests/test_observer.py to run under the tracer (harness/observer).

    python observer_target.py MODE ROOT [ARGS...]

Every mode does a fixed, deterministic sequence of file operations under ROOT
(threads and processes are ordered by joins, waits and semaphores, never by
sleeps) and prints what the test needs on stdout.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
import threading


def basic(root: str) -> None:
    """Every kind of op, from the main thread, two threads (one after the other) and a forked child."""
    f = os.path.join(root, "f")
    fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)   # 1 open (created)
    os.write(fd, b"hello ")                                           # 2 write off 0
    os.pwrite(fd, b"HE", 0)                                           # 3 write off 0 (pwrite)
    os.writev(fd, [b"wor", b"ld\n"])                                  # 4 write off 6
    os.fsync(fd)                                                      # 5 fsync
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)                    # 6 flock
    dfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)                 # 7 open (dir)
    os.fsync(dfd)                                                     # 8 fsync (dir)
    os.close(dfd)                                                     # 9 close

    def thread(tag: bytes) -> None:
        os.write(fd, tag)
        os.fdatasync(fd)

    for tag in (b"T1\n", b"T2\n"):                                    # 10-13 write, fdatasync x2
        t = threading.Thread(target=thread, args=(tag,))
        t.start()
        t.join()
    os.mkdir(os.path.join(root, "d"), 0o700)                          # 14 mkdir
    pid = os.fork()
    if pid == 0:                                                      # the child: 15-17
        cfd = os.open(os.path.join(root, "d", "c"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(cfd, b"child\n")
        os.close(cfd)
        os._exit(0)
    os.waitpid(pid, 0)
    os.stat(os.path.join(root, "d", "c"))                             # 18 stat
    os.rename(f, os.path.join(root, "g"))                             # 19 rename
    try:
        os.open(os.path.join(root, "missing"), os.O_RDONLY)           # 20 open, ENOENT
    except FileNotFoundError:
        pass
    fcntl.flock(fd, fcntl.LOCK_UN)                                    # 21 flock LOCK_UN
    os.close(fd)                                                      # 22 close
    os.unlink(os.path.join(root, "d", "c"))                           # 23 unlink
    os.rmdir(os.path.join(root, "d"))                                 # 24 rmdir
    with open(os.path.join(os.path.dirname(root), "outside"), "wb") as out:  # not under the root
        out.write(b"x")
    print(os.getpid(), flush=True)


def alternate(root: str, n: str) -> None:
    """Two threads append records to one file in turn (A0, B1, A2, ...), handing over after each write."""
    fd = os.open(os.path.join(root, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    turns = [threading.Semaphore(1), threading.Semaphore(0)]

    def worker(me: int) -> None:
        for i in range(me, int(n), 2):
            turns[me].acquire()
            os.write(fd, f"{'AB'[me]}{i}\n".encode())
            os.fsync(fd)
            turns[1 - me].release()

    threads = [threading.Thread(target=worker, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    os.close(fd)


def concurrent(root: str, n: str) -> None:
    """Two threads append n fixed-width records each to one file at the same time, unsynchronised."""
    fd = os.open(os.path.join(root, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    start = threading.Barrier(2)

    def worker(me: str) -> None:
        start.wait()
        for i in range(int(n)):
            os.write(fd, f"{me}{i:03d}\n".encode())

    threads = [threading.Thread(target=worker, args=(tag,)) for tag in "AB"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def errors(root: str) -> None:
    """One 100-byte write, then another, then an fsync; print what each returned (count or errno)."""
    fd = os.open(os.path.join(root, "e"), os.O_WRONLY | os.O_CREAT, 0o600)
    results = []
    for call in (lambda: os.write(fd, b"a" * 100), lambda: os.writev(fd, [b"b" * 60, b"c" * 40]),
                 lambda: os.fsync(fd)):
        try:
            results.append(call())
        except OSError as exc:
            results.append(exc.strerror and exc.errno)
    print(json.dumps(results), flush=True)


def race(root: str) -> None:
    """Parent and a forked child each append one line to the same file, then fsync it."""
    fd = os.open(os.path.join(root, "shared"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    pid = os.fork()
    os.write(fd, b"child\n" if pid == 0 else b"parent\n")
    os.fsync(fd)
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def sigint(root: str) -> None:
    """Say ready, wait for SIGINT, write a marker and exit 3 (what a suspending agent does)."""
    def handler(signum: int, frame: object) -> None:
        with open(os.path.join(root, "suspended"), "wb") as f:
            f.write(b"%d\n" % signum)
        os._exit(3)

    signal.signal(signal.SIGINT, handler)
    print("ready", os.getpid(), flush=True)
    while True:
        signal.pause()


def suspendable(root: str, n: str) -> None:
    """A tool child writes one line and exits; then up to n fsynced records, checking for SIGINT/SIGTERM after
    each (and before the first): on one, print ``SIGNAL RECORDS TOOL_STATUS`` and exit 3, as an agent suspends."""
    got: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: got.append(signum))
    pid = os.fork()
    if pid == 0:  # the tool: default signal dispositions, one write
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        tfd = os.open(os.path.join(root, "tool"), os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(tfd, b"tool\n")
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    fd = os.open(os.path.join(root, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    done = 0
    while not got and done < int(n):
        os.write(fd, b"R%d\n" % done)
        os.fsync(fd)
        done += 1
    print(signal.Signals(got[0]).name if got else "none", done, status, flush=True)
    sys.exit(3 if got else 0)


def kinds(root: str) -> None:
    """The op kinds basic does not make: link, symlink, truncate, the *at calls, fallocate, reads, fcntl locks."""
    open(os.path.join(root, "a"), "wb").close()                       # open, stat (fstat), close
    os.link(os.path.join(root, "a"), os.path.join(root, "b"))         # link
    os.symlink("a", os.path.join(root, "s"))                          # symlink
    os.truncate(os.path.join(root, "a"), 5)                           # truncate -> ftruncate, no fd
    dfd = os.open(root, os.O_RDONLY)                                  # open
    os.rename("a", "c", src_dir_fd=dfd, dst_dir_fd=dfd)               # renameat
    os.unlink("b", dir_fd=dfd)                                        # unlinkat
    os.mkdir("d", 0o755, dir_fd=dfd)                                  # mkdirat
    os.rmdir("d", dir_fd=dfd)                                         # unlinkat(AT_REMOVEDIR) -> rmdir
    fd = os.open("c", os.O_RDWR, dir_fd=dfd)                          # openat relative to dfd
    os.posix_fallocate(fd, 0, 10)                                     # fallocate
    os.pread(fd, 3, 1)                                                # read (pread64)
    os.access(os.path.join(root, "c"), os.R_OK)                       # access
    fcntl.lockf(fd, fcntl.LOCK_EX)                                    # lock F_SETLKW F_WRLCK
    fcntl.fcntl(fd, fcntl.F_GETFL)                                    # not a lock command: not stopped
    fcntl.lockf(fd, fcntl.LOCK_UN)                                    # lock F_SETLKW F_UNLCK
    os.ftruncate(fd, 0)                                               # ftruncate


def orphan(root: str) -> None:
    """Fork a child that waits forever, print its pid and exit 5 (leaving it behind)."""
    pid = os.fork()
    if pid == 0:
        while True:
            signal.pause()
    print(pid, flush=True)
    sys.exit(5)


def main() -> None:
    mode, root, *rest = sys.argv[1:]
    if mode == "exit7":
        sys.exit(7)
    if mode == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    {"basic": basic, "alternate": alternate, "concurrent": concurrent, "errors": errors, "race": race, "sigint": sigint,
     "orphan": orphan, "kinds": kinds, "suspendable": suspendable}[mode](root, *rest)


if __name__ == "__main__":
    main()
