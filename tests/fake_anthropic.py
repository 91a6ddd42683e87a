"""A tiny fake Anthropic Messages API server for the tests (not the harness's).

``FakeAnthropic(handler)`` serves ``POST /v1/messages`` on 127.0.0.1 at an
ephemeral port in a thread.  ``handler(request_body: dict)`` returns a
response body (dict), or ``(status, bytes)`` / ``(status, bytes, headers)``
for a raw answer (``headers`` may override ``content-length``, e.g. to cut a
reply short).  Every request is kept in ``requests`` (body) and ``headers``
(lower-case names); a body that is not UTF-8 JSON is kept as its bytes.

``turns(*contents)`` builds a handler whose reply depends only on the number
of assistant messages in the conversation (simpler than the harness's server): reply
``k`` is ``contents[k]`` (a list of blocks) with stop reason ``tool_use``
when it holds a tool_use block, else ``end_turn``; past the end it answers
``"done"``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


def reply(content: list[dict[str, Any]], stop: str | None = None, in_tokens: int = 10,
          out_tokens: int = 5) -> dict[str, Any]:
    """Return a Messages API response body with ``content``."""
    if stop is None:
        stop = "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake", "content": content,
            "stop_reason": stop, "usage": {"input_tokens": in_tokens, "output_tokens": out_tokens}}


def tool_use(tid: str, name: str, tool_input: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return a tool_use block."""
    return {"type": "tool_use", "id": tid, "name": name, "input": tool_input or {}}


def text(value: str) -> dict[str, Any]:
    """Return a text block."""
    return {"type": "text", "text": value}


def assistant_turns(request: dict[str, Any]) -> int:
    """Number of assistant messages in a request's conversation."""
    return sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")


def turns(*contents: list[dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Handler answering ``contents[k]`` at conversation state k (k assistant turns so far)."""
    def handler(request: dict[str, Any]) -> dict[str, Any]:
        k = assistant_turns(request)
        return reply(contents[k]) if k < len(contents) else reply([text(f"done after {k} turns")])
    return handler


class FakeAnthropic:
    """Context manager: a threaded HTTP server; ``url`` is its base URL."""

    def __init__(self, handler: Callable[[dict[str, Any]], Any]) -> None:
        self.handler = handler
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length", 0))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw.decode("utf-8"))
                except ValueError:
                    body = raw
                fake.requests.append(body)
                fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                fake.paths.append(self.path)
                answer = fake.handler(body)
                if not isinstance(answer, tuple):
                    answer = (200, json.dumps(answer).encode())
                status, data, extra = answer if len(answer) == 3 else (*answer, {})
                headers = {"content-type": "application/json", "content-length": str(len(data)), **extra}
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (timeout tests)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> "FakeAnthropic":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
