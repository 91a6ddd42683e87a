"""Model clients: the :class:`Model` protocol and an Anthropic Messages API client.

A model takes a Messages API request body (``model``, ``system``,
``messages``, ``tools``, ``max_tokens`` per call, ``thinking``) and returns
the response body: ``content`` (a list of blocks, kept verbatim),
``stop_reason`` and ``usage`` (``input_tokens``, ``output_tokens``,
``cache_read_input_tokens``, ``cache_creation_input_tokens``).  A run
journals the response as an assistant record (FORMAT.md "assistant"); the
API key is never part of a request body, so it never reaches the journal.

:func:`make_model` turns a ``--model`` string into a client:
``scripted:SEED[:TURNS]`` is the deterministic scripted model
(:mod:`fiskj.scripted`); anything else is a model name for the HTTP client.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request
from typing import Any, Mapping, Protocol, runtime_checkable

from .errors import ModelError, UsageError

__all__ = [
    "Model",
    "AnthropicClient",
    "DEFAULT_BASE_URL",
    "ANTHROPIC_VERSION",
    "DEFAULT_MODEL",
    "check_response",
    "thinking_param",
    "make_model",
]

DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
#: The model used when ``--model`` is not given and an API key or base URL is configured.
DEFAULT_MODEL = "claude-sonnet-4-5"
_SNIPPET = 200


@runtime_checkable
class Model(Protocol):
    """Anything with ``complete(request: dict) -> dict`` (Messages API bodies).

    ``complete`` raises :class:`~fiskj.errors.ModelError` when there is no
    usable answer; the loop then ends the run with reason ``error``.
    """

    def complete(self, request: dict[str, Any]) -> dict[str, Any]: ...


def _snippet(data: bytes | str) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = " ".join(text.split())
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "..."


def check_response(body: Any) -> dict[str, Any]:
    """Validate a Messages API response body and return it.

    Requires ``content`` (list of objects), ``stop_reason`` (string or
    null) and ``usage`` with integer ``input_tokens`` and ``output_tokens``
    (cache counts optional).  Raises :class:`ModelError` naming the field.
    """
    if not isinstance(body, dict):
        raise ModelError(f"model response is not a JSON object: {_snippet(json.dumps(body))}", field="body")
    if body.get("type") == "error":
        raise ModelError(f"model server returned an error: {_snippet(json.dumps(body.get('error')))}", field="error")
    content = body.get("content")
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise ModelError("model response has no 'content' list of blocks", field="content")
    stop = body.get("stop_reason")
    if stop is not None and not isinstance(stop, str):
        raise ModelError("model response 'stop_reason' is not a string", field="stop_reason")
    usage = body.get("usage")
    if not isinstance(usage, dict):
        raise ModelError("model response has no 'usage' object", field="usage")
    for key in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        value = usage.get(key)
        required = key in ("input_tokens", "output_tokens")
        if (value is None and required) or (value is not None and (type(value) is not int or value < 0)):
            raise ModelError(f"model response usage.{key} is not a non-negative integer", field=f"usage.{key}")
    return body


class AnthropicClient:
    """POST ``{base_url}/v1/messages`` with urllib.

    ``base_url`` defaults to ``DEFAULT_BASE_URL``; ``api_key`` (``None``:
    send no key, for a local server) goes in the ``x-api-key`` header, with
    ``anthropic-version``.  ``timeout`` is in seconds, per request.
    :meth:`complete` raises :class:`ModelError` on a connection failure, a
    timeout, a non-2xx status (naming it, with a snippet of the body) or a
    body that is not a valid response.
    """

    def __init__(self, base_url: str = DEFAULT_BASE_URL, api_key: str | None = None, *, timeout: float = 120.0,
                 version: str = ANTHROPIC_VERSION) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise UsageError(f"base URL must start with http:// or https://, got {base_url!r}", field="base_url")
        self.url = base_url.rstrip("/") + "/v1/messages"
        self.timeout = timeout
        self._headers = {"content-type": "application/json", "anthropic-version": version}
        if api_key:
            self._headers["x-api-key"] = api_key

    def __repr__(self) -> str:  # never show the key
        return f"AnthropicClient({self.url!r}, timeout={self.timeout})"

    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one Messages API request; return the validated response body."""
        data = json.dumps(request, ensure_ascii=False).encode("utf-8", "surrogatepass")
        req = urllib.request.Request(self.url, data=data, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            body = exc.read() if exc.fp is not None else b""
            raise ModelError(f"model server answered HTTP {exc.code} at {self.url}: {_snippet(body)}",
                             status=exc.code) from None
        except (TimeoutError, socket.timeout):
            raise ModelError(f"model request to {self.url} timed out after {self.timeout} s") from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise ModelError(f"model request to {self.url} timed out after {self.timeout} s") from None
            raise ModelError(f"cannot reach model server at {self.url}: {reason}") from None
        except OSError as exc:
            raise ModelError(f"model request to {self.url} failed: {exc}") from None
        if not 200 <= status < 300:
            raise ModelError(f"model server answered HTTP {status} at {self.url}: {_snippet(raw)}", status=status)
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise ModelError(f"model server sent a body that is not JSON (HTTP {status}): {_snippet(raw)}",
                             status=status) from None
        return check_response(body)


def thinking_param(mode: str) -> dict[str, Any] | None:
    """Return the request's ``thinking`` object for a thinking mode, or ``None``.

    Modes: ``off`` (no thinking), ``adaptive``, ``enabled:N`` (a budget of
    N >= 1024 tokens).  Raises :class:`UsageError` for anything else.  The
    mode string is stored verbatim in the fingerprint (``thinking_mode``).
    """
    if mode == "off":
        return None
    if mode == "adaptive":
        return {"type": "adaptive"}
    if mode.startswith("enabled:") and mode[8:].isdigit() and int(mode[8:]) >= 1024:
        return {"type": "enabled", "budget_tokens": int(mode[8:])}
    raise UsageError(f"thinking mode must be off, adaptive or enabled:N (N >= 1024), got {mode!r}",
                     field="thinking")


def make_model(name: str, *, base_url: str | None = None, env: Mapping[str, str] | None = None,
               timeout: float = 120.0) -> Model:
    """Return the client for a ``--model`` value.

    ``scripted:SEED[:TURNS]`` gives a :class:`fiskj.scripted.ScriptedModel`.
    Any other name gives an :class:`AnthropicClient` whose base URL is
    ``base_url``, else ``$ANTHROPIC_BASE_URL``, else the public API, and
    whose key is ``$ANTHROPIC_API_KEY``.  The public API without a key is a
    :class:`UsageError` (a local server needs no key).
    """
    if name.startswith("scripted:"):
        from .scripted import ScriptedModel

        return ScriptedModel.from_spec(name)
    env = os.environ if env is None else env
    base = base_url or env.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
    key = env.get("ANTHROPIC_API_KEY") or None
    if key is None and base.rstrip("/") == DEFAULT_BASE_URL:
        raise UsageError(f"model {name!r} needs ANTHROPIC_API_KEY (or --base-url for a local server); "
                         "for a demo use --model scripted:0", field="model")
    return AnthropicClient(base, key, timeout=timeout)
