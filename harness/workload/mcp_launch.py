"""The stdio command an agent runs for our MCP server (docs/subject.md "The MCP fork server").

A launcher, standard library only (``python -I -S mcp_launch.py SOCKET TICKET SERVER-ARGS...``), that hands its
stdin, stdout and stderr (``SCM_RIGHTS``) to a server the fork server at ``SOCKET`` forks for ticket ``TICKET``
(:mod:`harness.workload.mcp_fork`), puts ``/dev/null`` in their place and stays the agent's child for the
server's life: before each ledger line the server asks it (``?``) and writes the line only on its answer (``!``,
one ``write`` call); on ``x`` and the server's exit code (after ``p`` and its pid, unused) it ends the same way
(killed by the same signal).  Exit 1 with a message on stderr when no fork server answers at ``SOCKET`` (the
campaign that wrote the configuration has ended), 2 for a bad command line.
"""

import json
import os
import signal
import socket
import sys


def main(argv):
    """Hand this process's standard streams to a forked server and answer it until it ends; returns the exit code."""
    if len(argv) < 3 or not argv[1].startswith("/"):
        sys.stderr.write("usage: python -I -S mcp_launch.py SOCKET TICKET SERVER-ARGS...\n")
        return 2
    path, ticket, rest = argv[1], argv[2], argv[3:]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(path)
        socket.send_fds(sock, [json.dumps({"fork": {"args": rest}, "tag": ticket}).encode()], [0, 1, 2])
    except OSError as exc:
        sys.stderr.write("mcp_launch: no MCP fork server answers at %s (%s): the campaign that wrote this "
                         "configuration has ended\n" % (path, exc))
        return 1
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # the server holds the agent's pipes now: it sees their end, not this process
    os.dup2(null, 1)
    os.close(null)
    fd = sock.fileno()
    while True:
        try:
            msg = os.read(fd, 64)
        except OSError:
            msg = b""
        if msg == b"?":
            os.write(fd, b"!")  # the one call a line waits for (the observer holds it once a kill is due)
        elif msg[:1] == b"p":
            continue
        elif msg[:1] == b"x":
            code = int(msg[1:])
            if code < 0:  # killed by a signal: end the same way
                if -code not in (signal.SIGKILL, signal.SIGSTOP):  # their disposition cannot be set
                    signal.signal(-code, signal.SIG_DFL)
                os.kill(os.getpid(), -code)
            return code if code >= 0 else 128 - code
        else:
            sys.stderr.write("mcp_launch: the MCP server ended without an exit status\n")
            return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
