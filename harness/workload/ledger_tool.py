"""The ledger tool: a command tool with a real, recorded side effect (stdlib only).

Run as ``python3 -I -S ledger_tool.py [TOOL_NAME]`` (no site, no user
environment: it starts in about 10 ms).  The agent gives it the tool input
as JSON on standard input; it prints the tool result on standard output.
``ledger_tool.c`` is its compiled fast path (about 1 ms a run), and what the
agents run when it can be built (harness/workload/ledger_build.py,
``$FISKJ_LEDGER_TOOL``): it answers the workload's inputs itself and hands
any other input to this script before any effect.  This docstring is the
contract of both, down to the bytes of the ledger line, the output, the
messages and the exit status (tests/test_ledger_tool.py runs both on the
same generated inputs).  A change here is a change to both.

Each execution, before anything else it does:

1. takes an exclusive ``flock`` on the effects ledger (path in the
   environment variable ``FISKJ_LEDGER``; opened ``O_RDWR|O_APPEND|O_CREAT|O_CLOEXEC``,
   mode 0600), counts the earlier lines for its ``tool_use_id`` (those that
   start with ``{"tool_use_id": ID,``) and appends one JSON line, in one
   write::

       {"tool_use_id": ID, "attempt": N, "pid": PID, "t": MONOTONIC_NS,
        "leg": LEG, "tool": NAME}

   ``attempt`` is 1 + the number of earlier lines for that id; ``leg`` comes
   from ``FISKJ_HARNESS_LEG`` (-1 when unset or not an integer); ``t`` is
   ``time.monotonic_ns()`` taken just before the write; ID and NAME are
   quoted as ``json.dumps`` does (ASCII only, ``\\uXXXX`` escapes);
2. fsyncs the ledger, and only then closes it, which releases the lock;
3. sleeps ``sleep_ms`` milliseconds (from the input; so that a kill can land
   inside the tool, after its effect);
4. prints a result that depends only on the input (never on the attempt,
   the pid or the time), so a re-run gives the same result: ``ok NAME ID n=N``,
   or what the input's output spec ``out`` says (:func:`render_out`).

Input keys: ``tool_use_id`` (str; the fake model server puts the tool_use
block's own id there, since a command tool need not see more than its
input; fiskj's ``FISKJ_TOOL_USE_ID`` environment variable is the fallback),
``sleep_ms`` (number, optional), ``n`` (int, optional), ``fail`` (bool,
optional: exit 1 with a message on stderr after the effect, for error results),
``out`` (object, optional: the output spec of harness/workload/payloads.py,
``{"text"}``, ``{"base64"}``, ``{"error"}`` or ``{"fill", "count", "tail"}``;
docs/scenarios.md ``[workload] outputs``).  The input is UTF-8
JSON; a lone surrogate in it (a model's JSON may hold one) arrives as its
three bytes and is read back as that character.

Exit status: 0 on success; 1 when ``fail`` is set or ``out`` is an error;
2 on a bad input (``out`` included) or when ``FISKJ_LEDGER`` is unset; 3
when the ledger cannot be written (the effect did not happen).
"""

import fcntl
import os
import sys
import time

try:  # the C scanner of the json package, without importing json (and re): 10 ms less per start
    import _json

    class _Ctx:
        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        parse_constant = float
        memo = {}

    _scan = _json.make_scanner(_Ctx())
    _quote = _json.encode_basestring_ascii

    def _loads(text):
        i = 0
        n = len(text)
        while i < n and text[i] in " \t\r\n":
            i += 1
        try:
            value, end = _scan(text, i)
        except StopIteration:
            raise ValueError("no JSON value at offset %d" % i) from None
        except Exception as exc:  # the C scanner's own error path wants json.decoder
            raise ValueError("invalid JSON (%s)" % type(exc).__name__) from None
        if text[end:].strip(" \t\r\n"):
            raise ValueError("extra data at offset %d" % end)
        return value

except ImportError:  # pragma: no cover - other interpreters
    import json

    _loads = json.loads
    _quote = json.dumps


def render_out(out):
    """What output spec ``out`` makes the tool print: ``(stdout bytes, stderr bytes, exit status)``.

    ``{"text": S}``: S as UTF-8 (a lone surrogate as its three bytes); ``{"base64": B}``: the decoded bytes; ``{"error": S}``: S on stderr, status 1;
    ``{"fill": U, "count": K, "tail": T}``: ``U * K + T`` as UTF-8 (K at most 2^26).  Raises
    ``ValueError`` for anything else (other or more keys, wrong types, bad base64).
    """
    keys = sorted(out) if isinstance(out, dict) else None
    if keys == ["text"] and isinstance(out["text"], str):
        return out["text"].encode("utf-8", "surrogatepass"), b"", 0
    if keys == ["base64"] and isinstance(out["base64"], str):
        import binascii

        try:
            return binascii.a2b_base64(out["base64"].encode("ascii"), strict_mode=True), b"", 0
        except (binascii.Error, UnicodeEncodeError):
            raise ValueError("out.base64 is not base64") from None
    if keys == ["error"] and isinstance(out["error"], str):
        return b"", out["error"].encode("utf-8", "surrogatepass"), 1
    if keys == ["count", "fill", "tail"]:
        unit, count, tail = out["fill"], out["count"], out["tail"]
        if isinstance(unit, str) and isinstance(tail, str) and type(count) is int and 0 <= count <= 1 << 26:
            return unit.encode("utf-8", "surrogatepass") * count + tail.encode("utf-8", "surrogatepass"), b"", 0
    raise ValueError("out must be an object with one of text, base64, error, or fill/count/tail")


def open_ledger(ledger):
    """Open the effects ledger at path ``ledger`` for :func:`append_entry`: ``O_RDWR|O_APPEND|O_CREAT|O_CLOEXEC``,
    mode 0600.  Returns the descriptor; raises ``OSError`` (nothing happened)."""
    return os.open(ledger, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)


def append_entry(fd, tool_use_id, tool, leg):
    """Append the ledger line of one execution of ``tool`` for ``tool_use_id`` in ``leg`` to the ledger open
    on ``fd`` (from :func:`open_ledger`), fsync it and close ``fd``; returns the line's ``attempt``.

    Steps 1 and 2 of the module docstring, and the one place the entry is made (this script and the MCP
    server, harness/workload/mcp_server.py, both call it): exclusive ``flock``, count the earlier lines
    of ``tool_use_id``, one ``write`` of the whole line, ``fsync``, then ``close`` (which releases the
    lock), always in that order.  ``leg`` is an int (-1: unknown); ``pid`` is the calling process's.
    ``fd`` is closed whatever happens.  Raises ``OSError`` when the ledger cannot be locked, read or
    written (the line may then be there without its fsync).
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        earlier = 0
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        quoted = _quote(tool_use_id)
        needle = ('{"tool_use_id": %s,' % quoted).encode()
        for old in b"".join(chunks).split(b"\n"):
            if old.startswith(needle):
                earlier += 1
        line = (
            '{"tool_use_id": %s, "attempt": %d, "pid": %d, "t": %d, "leg": %d, "tool": %s}\n'
            % (quoted, earlier + 1, os.getpid(), time.monotonic_ns(), leg, _quote(tool))
        ).encode()
        # One write of the whole line (O_APPEND), then fsync, before anything else happens.
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)  # releases the flock
    return earlier + 1


def answer(tool, tool_use_id, data, rendered):
    """The tool's answer after its effect (step 4): ``(stdout, stderr, exit status)``.

    ``data`` is the input object; ``rendered`` what :func:`render_out` made of its ``out`` (``None``
    when it has none), returned as it is (bytes).  Without it the outputs are ``str`` (the ``ok``
    line, or the ``fail`` message), for the caller to encode as its stream does.  Pure: the same
    input gives the same answer, on every attempt.
    """
    if data.get("fail"):
        return "", "ledger_tool: %s %s failed as asked\n" % (tool, tool_use_id), 1
    if rendered is None:
        return "ok %s %s n=%s\n" % (tool, tool_use_id, data.get("n", 0)), "", 0
    return rendered


def main(argv):
    """Run one tool execution; ``argv`` is ``sys.argv``.  Returns the exit status."""
    tool = argv[1] if len(argv) > 1 else "ledger"
    try:
        data = _loads(sys.stdin.buffer.read().decode("utf-8", "surrogatepass") or "{}")
    except (ValueError, UnicodeDecodeError) as exc:
        sys.stderr.write("ledger_tool: input is not JSON: %s\n" % exc)
        return 2
    if not isinstance(data, dict):
        sys.stderr.write("ledger_tool: input must be a JSON object\n")
        return 2
    rendered = None
    if "out" in data:
        try:
            rendered = render_out(data["out"])
        except (ValueError, TypeError) as exc:
            sys.stderr.write("ledger_tool: bad out: %s\n" % exc)
            return 2
    ledger = os.environ.get("FISKJ_LEDGER")
    if not ledger:
        sys.stderr.write("ledger_tool: FISKJ_LEDGER is not set\n")
        return 2
    tool_use_id = str(data.get("tool_use_id") or os.environ.get("FISKJ_TOOL_USE_ID", ""))
    try:
        leg = int(os.environ.get("FISKJ_HARNESS_LEG", "-1"))
    except ValueError:
        leg = -1
    try:
        fd = open_ledger(ledger)
    except OSError as exc:
        sys.stderr.write("ledger_tool: cannot open ledger %s: %s\n" % (ledger, exc))
        return 3
    try:
        append_entry(fd, tool_use_id, tool, leg)
    except OSError as exc:
        sys.stderr.write("ledger_tool: cannot write ledger %s: %s\n" % (ledger, exc))
        return 3
    sleep_ms = data.get("sleep_ms") or 0
    if isinstance(sleep_ms, (int, float)) and sleep_ms > 0:
        time.sleep(sleep_ms / 1000.0)
    stdout, stderr, status = answer(tool, tool_use_id, data, rendered)
    for stream, text in ((sys.stdout, stdout), (sys.stderr, stderr)):
        if text:
            (stream if isinstance(text, str) else stream.buffer).write(text)
        stream.flush()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
