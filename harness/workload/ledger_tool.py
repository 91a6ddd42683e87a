"""The ledger tool: a command tool with a real, recorded side effect (stdlib only), run as
``python3 -I -S ledger_tool.py [TOOL_NAME]``.  Its contract, which ``ledger_tool.c`` keeps too, to the byte:
docs/workload.md "The ledger tool's contract"."""

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

    The forms are docs/workload.md "Payloads".  Raises ``ValueError`` for anything else (other or more keys,
    wrong types, bad base64).
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
    """Open the effects ledger at path ``ledger`` for :func:`append_entry`; raises ``OSError``."""
    return os.open(ledger, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)


def append_entry(fd, tool_use_id, tool, leg, before_write=None):
    """Append the ledger line of one execution of ``tool`` for ``tool_use_id`` in ``leg`` to the ledger open
    on ``fd``, fsync it and close ``fd`` (steps 1 and 2 of the contract); returns the line's ``attempt``.

    The one place the entry is made (this script and the MCP server call it).  ``before_write``: called
    once the line (and its time) is made, under the lock, right before its write (a forked MCP server's
    gate, :mod:`harness.workload.mcp_server`); it returns only when the line may be written.  ``fd`` is
    closed whatever happens.  Raises ``OSError`` when the ledger cannot be locked, read or written.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        quoted = _quote(tool_use_id)
        needle = ('{"tool_use_id": %s,' % quoted).encode()
        earlier = sum(1 for old in b"".join(chunks).split(b"\n") if old.startswith(needle))
        line = ('{"tool_use_id": %s, "attempt": %d, "pid": %d, "t": %d, "leg": %d, "tool": %s}\n'
                % (quoted, earlier + 1, os.getpid(), time.monotonic_ns(), leg, _quote(tool))).encode()
        if before_write is not None:
            before_write()
        # One write of the whole line (O_APPEND), then fsync, before anything else happens.
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)  # releases the flock
    return earlier + 1


def answer(tool, tool_use_id, data, rendered):
    """The tool's answer after its effect: ``(stdout, stderr, exit status)``; pure.

    ``rendered``: what :func:`render_out` made of the input's ``out`` (bytes, returned as is), ``None``
    without one: then ``str`` outputs (the ``ok`` line, or the ``fail`` message).
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
