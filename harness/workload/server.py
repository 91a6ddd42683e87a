"""The fake Anthropic Messages API server: the model, outside every killed process.  Routes, sessions and
API keys, the session's log, streaming and timing: docs/workload.md "The fake Messages API"."""

from __future__ import annotations

import http.server
import json
import os
import re
import selectors
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from harness.history.model import ModelCall
from harness.workload import sse
from harness.workload.requests import Request, RequestError, check_reasoning, check_thinking_loop, parse_request
from harness.workload.script import (STOP_SEQUENCE, Position, Script, ToolCall, Turn, opaque, opaque_fields,
                                     opaque_valid, request_key)

__all__ = ["ToolCall", "Turn", "Script", "Position", "Session", "ModelServer", "RequestError", "Request",
           "parse_request", "request_key", "api_key", "check_reasoning", "check_thinking_loop", "opaque", "opaque_fields", "opaque_valid",
           "STOP_SEQUENCE"]


def api_key(token: str, leg: int) -> str:
    """Return the API key an agent uses for session ``token`` during leg ``leg``."""
    return f"fiskj-{token}-leg{leg}"


_KEY = re.compile(r"fiskj-(.*?)(?:-leg(-?\d+))?")


def _parse_key(key: str) -> tuple[str, int]:
    # "fiskj-<token>-leg<L>" -> (token, L); a key without a leg gives leg -1, a foreign key no token.
    m = _KEY.fullmatch(key)
    return (m[1], int(m[2]) if m[2] else -1) if m else ("", -1)


@dataclass
class Session:
    """The calls of one trial.  Thread-safe through its lock; ``calls`` grows in arrival order.

    ``log``: what the server noticed, one line each (docs/workload.md);
    ``reasoned``: for each tool_use id given out, whether its reply started
    with a reasoning block; ``betas``, ``fields``: seen so far.
    """

    token: str
    script: Script
    calls: list[ModelCall] = field(default_factory=list)
    repeats: dict[str, int] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    reasoned: dict[str, bool] = field(default_factory=dict)
    betas: set[str] = field(default_factory=set)
    fields: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, line: str) -> None:
        """Append ``line`` to :attr:`log` (thread-safe)."""
        with self.lock:
            self.log.append(line)

    def gave_reasoning(self, message: dict[str, Any]) -> bool | None:
        """Whether the reply an assistant ``message`` holds started with a reasoning block when this session gave
        it (found by its tool_use ids); ``None`` when none of its ids was given out here."""
        content = message.get("content")
        ids = [b.get("id") for b in content if isinstance(b, dict) and b.get("type") == "tool_use"] \
            if isinstance(content, list) else []
        with self.lock:
            known = [self.reasoned[i] for i in ids if isinstance(i, str) and i in self.reasoned]
        return any(known) if known else None

    def replay(self, calls: list[ModelCall]) -> None:
        """Take ``calls`` (answered by another session of the same script, in order) as this session's first:
        a repeated request is then answered as the repeat it is (a run resumed from a recording)."""
        with self.lock:
            for call in calls:
                self.repeats[call.key] = self.repeats.get(call.key, 0) + 1
                self.calls.append(replace(call, index=len(self.calls)))
                first = call.reply[0].get("type") if call.reply else ""
                self.reasoned.update((b["id"], first in ("thinking", "redacted_thinking"))
                                     for b in call.reply if b.get("type") == "tool_use")

    def answer(self, messages: list[dict[str, Any]], leg: int, stream: bool = False,
               request: Request | None = None, betas: tuple[str, ...] = ()) -> tuple[ModelCall, dict[str, Any]]:
        """Record one request and return ``(call, response body)``: a complete Messages API message.

        ``messages``: the conversation as :func:`parse_request` returns it,
        recorded as sent; ``request``: the parsed request (default: thinking
        off, ``tool_choice`` ``auto``); its unknown fields and ``betas`` (the
        ``anthropic-beta`` names) new to this session go to :attr:`log`.
        """
        t = time.monotonic_ns()
        request = request or Request(messages=messages, stream=stream)
        pos = self.script.position(messages)
        key = pos.key
        honoured, why = _tool_choice_honoured(self.script, pos.turn, request)
        with self.lock:
            repeat = self.repeats.get(key, 0)
            self.repeats[key] = repeat + 1
            index = len(self.calls)
            blocks, stop, usage = self.script.reply(pos.turn, repeat, thinking=request.thinking,
                                                    omit_thinking=request.omit_thinking,
                                                    tools=request.tool_choice != "none")
            call = ModelCall(index=index, t=t, key=key, turn=pos.turn, messages=messages, reply=blocks, leg=leg,
                             stream=stream, stop=stop or "", usage=dict(usage))
            self.calls.append(call)
            first = blocks[0]["type"] if blocks else ""
            for b in blocks:
                if b["type"] == "tool_use":
                    self.reasoned[b["id"]] = first in ("thinking", "redacted_thinking")
            for seen, names, what in ((self.fields, request.unknown, "unknown fields"),
                                      (self.betas, betas, "anthropic-beta")):
                new = sorted(set(names) - seen)
                if new:
                    seen.update(new)
                    self.log.append(f"call {index}: {what} {', '.join(new)}")
            if not honoured:
                self.log.append(f"call {index}: {why}")
        rep = repeat if self.script.vary_on_repeat else 0
        past = f"_s{pos.segment}" if pos.turn >= len(self.script.turns) else ""
        body = {"id": f"msg_{self.script.seed}_{pos.turn}{past}" + (f"_r{rep}" if rep else ""), "type": "message",
                "role": "assistant", "model": self.script.model, "content": blocks, "stop_reason": stop,
                "stop_sequence": self.script.stop_sequence(pos.turn), "usage": usage}
        return call, body


def _tool_choice_honoured(script: Script, turn: int, request: Request) -> tuple[bool, str]:
    # (honoured, why not) for a request's tool_choice answered by `turn`: `none` always is (the reply drops its
    # tool_use blocks); `any` needs a scripted tool call, `tool` one of that name, or the script is answered as is.
    choice = request.tool_choice
    tools = script.turns[turn].tools if 0 <= turn < len(script.turns) else ()
    if choice == "any" and not tools:
        return False, f"tool_choice any not honoured: turn {turn} scripts no tool call"
    if choice == "tool" and not any(c.name == request.tool_name for c in tools):
        return False, f"tool_choice tool {request.tool_name!r} not honoured: turn {turn} scripts no call of it"
    return True, ""


#: What a killed client leaves behind on the server's side of its connection.
_GONE = (ConnectionError, TimeoutError)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # no 40 ms Nagle / delayed-ACK stalls on small replies
    server: "_HTTPServer"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def _write(self, status: int, headers: dict[str, str], data: bytes) -> bool:
        # Status line, headers and the first bytes of the body in one write; False: the client is gone.
        try:
            self.send_response_only(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self._headers_buffer.append(b"\r\n")
            self.wfile.write(b"".join(self._headers_buffer) + data)
            self._headers_buffer = []
            return True
        except _GONE:
            self.close_connection = True  # the agent was killed while waiting
            return False

    def _send(self, status: int, body: dict[str, Any], request_id: str = "req_fiskj") -> None:
        data = json.dumps(body).encode()
        self._write(status, {"content-type": "application/json", "content-length": str(len(data)),
                             "request-id": request_id}, data)

    def _error(self, status: int, kind: str, message: str) -> None:
        self._send(status, {"type": "error", "error": {"type": kind, "message": message}})

    def _stream(self, body: dict[str, Any], delay_s: float, request_id: str) -> None:
        events = sse.message_events(body)
        cut = next(i for i, e in enumerate(events) if e["type"] == "ping") + 1
        head = sse.chunk(b"".join(sse.encode(e) for e in events[:cut]))
        ok = self._write(200, {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache",
                               "transfer-encoding": "chunked", "request-id": request_id}, head)
        if not ok:
            return
        time.sleep(delay_s)
        try:
            self.wfile.write(sse.chunk(b"".join(sse.encode(e) for e in events[cut:])) + sse.LAST_CHUNK)
        except _GONE:
            self.close_connection = True

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def do_GET(self) -> None:  # noqa: N802
        self._error(404, "not_found_error", "only POST /v1/messages and /v1/messages/count_tokens are served")

    def do_HEAD(self) -> None:  # noqa: N802
        # A client's reachability probe (Claude Code sends HEAD /api/hello first): 200, no body.
        self._write(200, {"content-length": "0"}, b"")

    def do_POST(self) -> None:  # noqa: N802
        try:
            raw = self._body()
        except ValueError:
            self.close_connection = True
            self._error(400, "invalid_request_error", "body: bad content-length or chunked framing")
            return
        route = self.path.split("?", 1)[0].rstrip("/")
        if route not in ("/v1/messages", "/v1/messages/count_tokens"):
            self._error(404, "not_found_error", f"no route {self.path}")
            return
        key = self.headers.get("x-api-key") or ""
        auth = self.headers.get("authorization") or ""
        if not key and auth.lower().startswith("bearer "):
            key = auth[7:].strip()
        token, leg = _parse_key(key)
        session = self.server.owner.session(token)
        if session is None:
            self._error(401, "authentication_error", "unknown API key (no open harness session)")
            return
        try:
            request = parse_request(raw)
            check_reasoning(session.script, request.messages, request.positions)
            if request.thinking and route == "/v1/messages":
                check_thinking_loop(request.messages, request.positions, session.gave_reasoning)
        except RequestError as exc:
            session.note(f"refused 400: {exc}")
            self._error(400, "invalid_request_error", str(exc))
            return
        if route == "/v1/messages/count_tokens":  # no model call: a count, in the session's log
            session.note(f"count_tokens: {request.input_tokens} input tokens")
            self._send(200, {"input_tokens": request.input_tokens}, f"req_{token}_count")
            return
        betas = tuple(b.strip() for b in (self.headers.get("anthropic-beta") or "").split(",") if b.strip())
        call, body = session.answer(request.messages, leg, request.stream, request, betas)
        request_id = f"req_{token}_{call.index}"
        delay_s = session.script.delay_ms / 1000.0
        if request.stream:
            self._stream(body, delay_s, request_id)
        else:
            time.sleep(delay_s)
            self._send(200, body, request_id)


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    timeout = 0  # handle_request() is called when the socket is ready: never wait in it (a reset connection)
    owner: "ModelServer"

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A killed agent's connection (reset, broken pipe, timeout) is routine: no traceback on stderr.
        if isinstance(sys.exc_info()[1], _GONE):
            return
        super().handle_error(request, client_address)


class ModelServer:
    """The fake Messages API server: a context manager, or :meth:`start` / :meth:`close`; ``base_url`` is valid
    after :meth:`start`.  Any number of sessions may be open at once (one per trial)."""

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._next = 0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake: tuple[int, int] | None = None

    def start(self) -> "ModelServer":
        """Bind 127.0.0.1:0 and serve in a daemon thread; returns ``self``.  Raises ``OSError`` on bind failure."""
        if self._httpd is not None:
            return self
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._stop.clear()
        self._wake = os.pipe()
        self._thread = threading.Thread(target=self._serve, args=(httpd, self._wake[0]), name="fiskj-model-server",
                                        daemon=True)
        self._thread.start()
        return self

    def _serve(self, httpd: "_HTTPServer", wake: int) -> None:
        """Accept connections until :meth:`close` (each request on a thread of its own): a loop that sleeps
        until a connection or the close's byte on the ``wake`` pipe, so a close never waits for a poll interval."""
        with selectors.DefaultSelector() as selector:
            selector.register(httpd, selectors.EVENT_READ)
            selector.register(wake, selectors.EVENT_READ)
            while not self._stop.is_set():
                for key, _ in selector.select():
                    if key.fileobj is httpd and not self._stop.is_set():
                        httpd.handle_request()

    @property
    def port(self) -> int:
        """The bound TCP port.  Raises ``RuntimeError`` before :meth:`start`."""
        if self._httpd is None:
            raise RuntimeError("ModelServer.port read before start()")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    def open_session(self, script: Script, token: str | None = None) -> Session:
        """Register ``script`` and return its :class:`Session` (``session.token`` names it)."""
        with self._lock:
            if token is None:
                self._next += 1
                token = f"s{self._next}"
            if token in self._sessions:
                raise ValueError(f"session {token!r} is already open")
            session = self._sessions[token] = Session(token=token, script=script)
            return session

    def session(self, token: str) -> Session | None:
        """Return the open session ``token`` or ``None``."""
        with self._lock:
            return self._sessions.get(token)

    def close_session(self, token: str) -> list[ModelCall]:
        """Unregister ``token`` and return its calls in arrival order (later requests get 401)."""
        with self._lock:
            session = self._sessions.pop(token, None)
        if session is None:
            return []
        with session.lock:
            return list(session.calls)

    def close(self) -> None:
        """Stop serving and close the socket; idempotent.  In-flight handler threads are daemons."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stop.set()
        wake, self._wake = self._wake, None
        assert wake is not None
        os.write(wake[1], b"x")  # the serve loop wakes at once and sees the stop
        if self._thread is not None:
            self._thread.join(timeout=5)
        httpd.server_close()
        for fd in wake:
            os.close(fd)

    def __enter__(self) -> "ModelServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()
