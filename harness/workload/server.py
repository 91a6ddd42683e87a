"""The fake Anthropic Messages API server: the model, outside every killed process.

A :class:`ModelServer` is a :class:`http.server.ThreadingHTTPServer` on
``127.0.0.1`` at an ephemeral port, run by a daemon thread of the harness
process, so it survives every kill of an agent.  It answers
``POST /v1/messages`` from a :class:`Script` and records every request as a
:class:`harness.history.model.ModelCall`.

Sessions partition the calls of concurrent trials: :meth:`ModelServer.open_session`
registers a script and returns a token; an agent authenticates with the API
key ``fiskj-<token>-leg<L>`` (header ``x-api-key`` or
``Authorization: Bearer``), so the server knows the trial and the leg of
every call, even one that arrives after its sender was killed.  A request
with an unknown key gets HTTP 401 in the Anthropic error shape.

The reply to a request is a pure function of the request's ``messages``
(and, with ``vary_on_repeat``, of how often that exact conversation was
asked before): the turn index is the number of assistant messages in the
request, so a resumed agent that sends the same conversation gets the same
reply.  Tool ids are deterministic: ``toolu_<seed>_<turn>_<k>`` (with
``_r<n>`` appended for the n-th repeat under ``vary_on_repeat``), and every
tool input carries its own ``tool_use_id`` (a command tool sees only its
input).  Usage numbers are deterministic per turn.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from harness.history.model import ModelCall

__all__ = ["ToolCall", "Turn", "Script", "Session", "ModelServer", "request_key", "api_key"]


def request_key(messages: list[dict[str, Any]]) -> str:
    """Return the hex SHA-256 of the canonical JSON of ``messages`` (sorted keys, no spaces, UTF-8)."""
    data = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


def api_key(token: str, leg: int) -> str:
    """Return the API key an agent uses for session ``token`` during leg ``leg``."""
    return f"fiskj-{token}-leg{leg}"


def _parse_key(key: str) -> tuple[str, int]:
    # "fiskj-<token>-leg<L>" -> (token, L); tolerant of a key without a leg.
    if not key.startswith("fiskj-"):
        return "", -1
    rest = key[len("fiskj-"):]
    token, sep, leg = rest.rpartition("-leg")
    if not sep:
        return rest, -1
    try:
        return token, int(leg)
    except ValueError:
        return rest, -1


@dataclass(frozen=True)
class ToolCall:
    """One scripted tool_use block: tool ``name`` and extra input (``sleep_ms``, ``n``)."""

    name: str
    sleep_ms: float = 0.0
    n: int = 0


@dataclass(frozen=True)
class Turn:
    """One scripted model reply: ``tools`` empty means a final text answer (``end_turn``)."""

    tools: tuple[ToolCall, ...] = ()
    text: str = ""


@dataclass(frozen=True)
class Script:
    """What the fake model answers, turn by turn.

    ``turns[i]`` answers a request holding ``i`` assistant messages.  A
    request past the end gets a final answer ``"(script exhausted)"``.
    ``delay_ms`` is how long the server waits before it replies (a window
    for kills during a model call).  ``vary_on_repeat``: the n-th repeat of
    an identical request (n >= 1) gets other text and fresh ids.
    """

    seed: int
    turns: tuple[Turn, ...]
    model: str = "fiskj-fake"
    delay_ms: float = 0.0
    vary_on_repeat: bool = False

    def reply(self, turn: int, repeat: int = 0) -> tuple[list[dict[str, Any]], str, dict[str, int]]:
        """Return ``(content blocks, stop_reason, usage)`` for ``turn`` and its ``repeat`` number.

        Pure: the same arguments always give the same reply.  ``repeat`` is
        ignored unless ``vary_on_repeat``.
        """
        rep = repeat if self.vary_on_repeat else 0
        suffix = f"_r{rep}" if rep else ""
        if turn < len(self.turns):
            spec = self.turns[turn]
        else:
            spec = Turn(text="(script exhausted)")
        text = spec.text or (f"Turn {turn}: calling {len(spec.tools)} tools." if spec.tools else f"Answer {turn}: done.")
        if rep:
            text += f" (asked again: {rep})"
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
        for k, call in enumerate(spec.tools):
            tid = f"toolu_{self.seed}_{turn}_{k}{suffix}"
            inp: dict[str, Any] = {"tool_use_id": tid, "n": call.n}
            if call.sleep_ms:
                inp["sleep_ms"] = call.sleep_ms
            blocks.append({"type": "tool_use", "id": tid, "name": call.name, "input": inp})
        stop = "tool_use" if spec.tools else "end_turn"
        usage = {"input_tokens": 100 + 10 * turn, "output_tokens": 20 + 7 * len(spec.tools)}
        return blocks, stop, usage

    @property
    def model_turns(self) -> int:
        """Number of scripted replies (tool turns and final answers)."""
        return len(self.turns)


@dataclass
class Session:
    """The calls of one trial.  Thread-safe through its lock; ``calls`` grows in arrival order."""

    token: str
    script: Script
    calls: list[ModelCall] = field(default_factory=list)
    repeats: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, messages: list[dict[str, Any]], leg: int) -> tuple[ModelCall, dict[str, Any]]:
        """Record one request and return ``(call, response body)``."""
        t = time.monotonic_ns()
        key = request_key(messages)
        turn = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        with self.lock:
            repeat = self.repeats.get(key, 0)
            self.repeats[key] = repeat + 1
            index = len(self.calls)
            blocks, stop, usage = self.script.reply(turn, repeat)
            call = ModelCall(index=index, t=t, key=key, turn=turn, messages=messages, reply=blocks, leg=leg)
            self.calls.append(call)
        rep = repeat if self.script.vary_on_repeat else 0
        body = {
            "id": f"msg_{self.script.seed}_{turn}" + (f"_r{rep}" if rep else ""),
            "type": "message",
            "role": "assistant",
            "model": self.script.model,
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        return call, body


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # no 40 ms Nagle / delayed-ACK stalls on small replies
    server: "_HTTPServer"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        try:
            # Status line, headers and body in one write.
            self.send_response_only(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self._headers_buffer.append(b"\r\n")  # end of headers, sent with the body below
            self.wfile.write(b"".join(self._headers_buffer) + data)
            self._headers_buffer = []
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the agent was killed while waiting

    def _error(self, status: int, kind: str, message: str) -> None:
        self._send(status, {"type": "error", "error": {"type": kind, "message": message}})

    def do_GET(self) -> None:  # noqa: N802
        self._error(404, "not_found_error", "only POST /v1/messages is served")

    def do_POST(self) -> None:  # noqa: N802
        if self.path.split("?", 1)[0].rstrip("/") != "/v1/messages":
            self._error(404, "not_found_error", f"no route {self.path}")
            return
        try:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            req = json.loads(raw)
            messages = req["messages"]
            if not isinstance(messages, list):
                raise TypeError("messages is not a list")
        except (ValueError, KeyError, TypeError) as exc:
            self._error(400, "invalid_request_error", f"bad request body: {exc}")
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
        _call, body = session.answer(messages, leg)
        if session.script.delay_ms:
            time.sleep(session.script.delay_ms / 1000.0)
        self._send(200, body)


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    owner: "ModelServer"


class ModelServer:
    """The fake Messages API server.  Use as a context manager or call :meth:`start` / :meth:`close`.

    ``base_url`` (``http://127.0.0.1:PORT``) is valid after :meth:`start`.
    Any number of sessions may be open at once (one per trial).
    """

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._next = 0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "ModelServer":
        """Bind 127.0.0.1:0 and serve in a daemon thread; returns ``self``.  Raises ``OSError`` on bind failure."""
        if self._httpd is not None:
            return self
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fiskj-model-server", daemon=True)
        self._thread.start()
        return self

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
            session = Session(token=token, script=script)
            self._sessions[token] = session
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
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "ModelServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()
