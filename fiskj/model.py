"""Model clients: the :class:`Model` protocol and an Anthropic Messages API client.

A model takes a Messages API request body (``model``, ``system``,
``messages``, ``tools``, ``max_tokens`` per call, ``thinking``) and returns
the response body: ``content`` (a list of blocks, kept verbatim),
``stop_reason`` and ``usage`` (``input_tokens``, ``output_tokens``,
``cache_read_input_tokens``, ``cache_creation_input_tokens``).  A run
journals the response as an assistant record (docs/spec.md section 4, assistant); the
API key is never part of a request body, so it never reaches the journal.

:func:`make_model` turns a ``--model`` string into a client:
``scripted:SEED[:TURNS]`` is the deterministic scripted model
(:mod:`fiskj.scripted`); anything else is a model name for the HTTP client.

Retries (docs/spec.md section 17).  :class:`AnthropicClient` makes one HTTP
attempt per :meth:`~AnthropicClient.complete` and classifies a failure:
a connection error, a timeout, a reply cut short, HTTP 408, 409, 429 and
every 5xx (529 "overloaded" included) are *retryable*; the headers
``x-should-retry: true|false`` override the status, and ``retry-after-ms``
/ ``retry-after`` say how long the server wants us to wait.
:func:`complete_with_retries` (what the loop calls, for every model) retries
a retryable :class:`ModelError`, and a reply without a final
``stop_reason``, as the official Anthropic SDKs do: by default 2 retries,
waits of 0.5 s x 2^n (at most 8 s) less up to 25 % jitter, or the server's
``retry-after`` when it is above 0 and at most 60 s.  :class:`RetryPolicy`
holds those numbers and the (injectable) sleep and random source.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, runtime_checkable

from .errors import ModelError, UsageError


def http_stack() -> tuple[Any, Any, Any]:
    """Import and return ``(http, socket, urllib)`` with ``http.client``, ``urllib.request`` and ``urllib.error``
    loaded (and ``email.utils``, for ``retry-after`` dates).  Imported at the first request, not with this
    module: a CLI leg that is refused, or only reads its journal, never pays for them (about 25 ms).  A
    process that forks legs calls it once first (the harness's fork server)."""
    import email.utils  # noqa: F401
    import http.client
    import socket
    import urllib.error
    import urllib.request

    return http, socket, urllib

__all__ = [
    "Model",
    "AnthropicClient",
    "DEFAULT_BASE_URL",
    "ANTHROPIC_VERSION",
    "DEFAULT_MODEL",
    "check_response",
    "thinking_param",
    "make_model",
    "RetryPolicy",
    "DEFAULT_RETRY",
    "DEFAULT_MAX_RETRIES",
    "is_retryable_status",
    "retry_after_seconds",
    "complete_with_retries",
]

DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
#: The model used when ``--model`` is not given and an API key or base URL is configured.
DEFAULT_MODEL = "claude-sonnet-4-5"
_SNIPPET = 200

#: Retries of one model call after its first attempt (the Anthropic SDKs' default).
DEFAULT_MAX_RETRIES = 2
#: The first backoff wait, in seconds; it doubles per retry ...
INITIAL_RETRY_DELAY = 0.5
#: ... up to this many seconds.
MAX_RETRY_DELAY = 8.0
#: The longest ``retry-after`` honoured, in seconds; a longer (or non-positive) one falls back to the backoff.
MAX_RETRY_AFTER = 60.0
#: Error types of a ``{"type": "error"}`` body that are transient.
_RETRYABLE_ERROR_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error"})


@runtime_checkable
class Model(Protocol):
    """Anything with ``complete(request: dict) -> dict`` (Messages API bodies).

    ``complete`` raises :class:`~fiskj.errors.ModelError` when there is no
    usable answer (``retryable`` true for a transient failure); the loop
    retries a retryable one (:func:`complete_with_retries`) and otherwise
    ends the leg with reason ``error``, which a resume continues
    (docs/spec.md section 17).
    """

    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        """Return the Messages API response body for the request body ``request`` (one attempt)."""
        ...


def _snippet(data: bytes | str) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = " ".join(text.split())
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "..."


def check_response(body: Any) -> dict[str, Any]:
    """Validate a Messages API response body and return it (docs/spec.md section 17).

    Requires ``content`` (list of objects), a final ``stop_reason`` (a
    non-empty string) and ``usage`` with integer ``input_tokens`` and
    ``output_tokens`` (cache counts optional).  Raises :class:`ModelError`
    naming the field.  A body of ``{"type": "error"}`` whose error is
    ``overloaded_error``, ``api_error`` or ``rate_limit_error``, and a reply
    whose ``stop_reason`` is null or missing (a reply cut short: it is not a
    finished turn and is never journaled), are ``retryable``.
    """
    if not isinstance(body, dict):
        raise ModelError(f"model response is not a JSON object: {_snippet(json.dumps(body))}", field="body")
    if body.get("type") == "error":
        error = body.get("error")
        kind = error.get("type") if isinstance(error, dict) else None
        raise ModelError(f"model server returned an error: {_snippet(json.dumps(error))}", field="error",
                         retryable=kind in _RETRYABLE_ERROR_TYPES)
    content = body.get("content")
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise ModelError("model response has no 'content' list of blocks", field="content")
    stop = body.get("stop_reason")
    if stop is None or stop == "":
        raise ModelError("model reply has no final stop_reason (a reply cut short); it is not a finished turn "
                         "and was not journaled", field="stop_reason", retryable=True)
    if not isinstance(stop, str):
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


def is_retryable_status(status: int, headers: Mapping[str, str] | None = None) -> bool:
    """True when an HTTP error ``status`` is worth retrying (docs/spec.md section 17).

    ``x-should-retry: true`` / ``false`` in ``headers`` (any case of the
    name) decides first; else 408, 409, 429 and every status >= 500 (529
    "overloaded" included) are retryable, as in the Anthropic SDKs.
    """
    hint = _header(headers, "x-should-retry")
    if hint is not None and hint.strip().lower() in ("true", "false"):
        return hint.strip().lower() == "true"
    return status in (408, 409, 429) or status >= 500


def _header(headers: Mapping[str, str] | Any, name: str) -> str | None:
    """The value of header ``name`` (case-insensitive) in a mapping or an ``http.client.HTTPMessage``."""
    if headers is None:
        return None
    value = headers.get(name)
    if value is None and hasattr(headers, "items"):
        value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    return None if value is None else str(value)


def retry_after_seconds(headers: Mapping[str, str] | Any, now: float | None = None) -> float | None:
    """The wait the server asks for, in seconds, or ``None`` (docs/spec.md section 17).

    ``retry-after-ms`` (milliseconds, a number) wins over ``retry-after``
    (seconds as a number, or an HTTP date, counted from ``now``, default
    ``time.time()``).  Unparsable values give ``None``; whether the value
    is honoured (above 0 and at most :data:`MAX_RETRY_AFTER`) is
    :meth:`RetryPolicy.delay`'s business.
    """
    ms = _header(headers, "retry-after-ms")
    if ms is not None:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = _header(headers, "retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    import email.utils  # only here: a CLI that never calls the model starts without the email package

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return when.timestamp() - (time.time() if now is None else now)


@dataclass(frozen=True)
class RetryPolicy:
    """How a failed model call is retried (docs/spec.md section 17; the Anthropic SDKs' policy).

    ``max_retries``: retries after the first attempt (>= 0).  The wait before
    retry ``n`` (0-based) is the server's ``retry-after`` when it is above 0
    and at most ``max_retry_after`` seconds, else
    ``min(initial_delay * 2**n, max_delay) * (1 - 0.25 * random())``
    seconds.  ``sleep(seconds)`` waits and ``random()`` gives a float in
    [0, 1): both injectable, so tests never sleep for real.  Raises
    :class:`UsageError` for a negative count or delay.
    """

    max_retries: int = DEFAULT_MAX_RETRIES
    initial_delay: float = INITIAL_RETRY_DELAY
    max_delay: float = MAX_RETRY_DELAY
    max_retry_after: float = MAX_RETRY_AFTER
    sleep: Callable[[float], Any] = time.sleep
    random: Callable[[], float] = random.random

    def __post_init__(self) -> None:
        if type(self.max_retries) is not int or self.max_retries < 0:
            raise UsageError(f"max_retries must be an integer >= 0, got {self.max_retries!r}", field="max_retries")
        for name in ("initial_delay", "max_delay", "max_retry_after"):
            if not getattr(self, name) >= 0:
                raise UsageError(f"{name} must be >= 0 seconds, got {getattr(self, name)!r}", field=name)

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based), given the server's ``retry_after``."""
        if retry_after is not None and 0 < retry_after <= self.max_retry_after:
            return retry_after
        base = min(self.initial_delay * (2.0 ** min(retry, 1000)), self.max_delay)
        return max(0.0, base * (1 - 0.25 * self.random()))


#: The policy used when none is given.
DEFAULT_RETRY = RetryPolicy()
#: The longest single sleep while waiting to retry, so a suspend request is seen within it.
_WAIT_SLICE = 0.25


def _wait(policy: RetryPolicy, seconds: float, interrupted: Callable[[], bool] | None) -> bool:
    """Sleep ``seconds`` with ``policy.sleep`` in slices of at most 0.25 s (their sum is ``seconds``);
    return False as soon as ``interrupted()`` is true, else True."""
    left = seconds
    while True:
        if interrupted is not None and interrupted():
            return False
        if left <= 0:
            return True
        step = min(left, _WAIT_SLICE) if interrupted is not None else left
        policy.sleep(step)
        left -= step


def complete_with_retries(model: Model, request: dict[str, Any], policy: RetryPolicy = DEFAULT_RETRY, *,
                          interrupted: Callable[[], bool] | None = None,
                          log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Call ``model.complete(request)``; return the validated reply, retrying transient failures.

    The reply must pass :func:`check_response` (so a reply without a final
    ``stop_reason`` is a retryable failure and never reaches the journal).
    A :class:`ModelError` with ``retryable`` true is retried up to
    ``policy.max_retries`` times after ``policy.delay(n, error.retry_after)``
    seconds; ``log`` gets one line per retry.  Raises the last
    :class:`ModelError` (its message saying how many retries were made,
    ``retries`` set) when the failure is not retryable or no retry is left,
    and at once, with ``interrupted`` true on the error, when
    ``interrupted()`` becomes true while waiting (a suspend request: the
    failed call is abandoned).  Any other exception propagates unchanged.
    docs/spec.md section 17.
    """
    retry = 0
    while True:
        try:
            return check_response(model.complete(request))
        except ModelError as exc:
            if not exc.retryable or retry >= policy.max_retries:
                if retry == 0:
                    raise
                raise _gave_up(exc, retry, f"gave up after {retry} {'retry' if retry == 1 else 'retries'}") from None
            delay = policy.delay(retry, exc.retry_after)
            if log is not None:
                log(f"model call failed ({_snippet(str(exc))}); retry {retry + 1} of {policy.max_retries} "
                    f"in {delay:.2f} s")
            if not _wait(policy, delay, interrupted):
                raise _gave_up(exc, retry, "retry abandoned: a suspend was requested", interrupted=True) from None
            retry += 1


def _gave_up(exc: ModelError, retries: int, why: str, **extra: Any) -> ModelError:
    context = {**exc.context, "retries": retries, **extra}
    return ModelError(f"{exc.message} ({why})", **context)


class AnthropicClient:
    """POST ``{base_url}/v1/messages`` with urllib: one attempt per :meth:`complete`.

    ``base_url`` defaults to ``DEFAULT_BASE_URL``; ``api_key`` (``None``:
    send no key, for a local server) goes in the ``x-api-key`` header, with
    ``anthropic-version``.  ``timeout`` is in seconds, per request.
    :meth:`complete` raises :class:`ModelError` on a connection failure, a
    timeout, a reply cut short, a non-2xx status (naming it, with a snippet
    of the body) or a body that is not a valid response; ``retryable``,
    ``status`` and ``retry_after`` on the error say whether
    :func:`complete_with_retries` may try again (docs/spec.md section 17).
    Raises :class:`UsageError` for a base URL that is not http(s).
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
        """Send one Messages API request (one attempt); return the validated response body.

        A lone surrogate in the request (a tool's output may hold one) is sent as its JSON
        escape ``\\udXXX``, never as bytes that are not UTF-8.
        """
        text = json.dumps(request, ensure_ascii=False)
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # only inside a string: its JSON escape (as fiskj.encode writes it)
            data = text.encode("utf-8", "backslashreplace")
        http, socket, urllib = http_stack()
        req = urllib.request.Request(self.url, data=data, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            try:
                body = exc.read() if exc.fp is not None else b""
            except (OSError, http.client.HTTPException):
                body = b""
            headers = exc.headers
            raise ModelError(f"model server answered HTTP {exc.code} at {self.url}: {_snippet(body)}",
                             status=exc.code, retryable=is_retryable_status(exc.code, headers),
                             retry_after=retry_after_seconds(headers)) from None
        except (TimeoutError, socket.timeout):
            raise ModelError(f"model request to {self.url} timed out after {self.timeout} s", retryable=True) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise ModelError(f"model request to {self.url} timed out after {self.timeout} s",
                                 retryable=True) from None
            raise ModelError(f"cannot reach model server at {self.url}: {reason}", retryable=True) from None
        except http.client.HTTPException as exc:  # IncompleteRead, BadStatusLine: the reply was cut short
            raise ModelError(f"model reply from {self.url} was cut short: {type(exc).__name__}: "
                             f"{_snippet(str(exc))}", retryable=True) from None
        except OSError as exc:  # a reset connection, a refused one
            raise ModelError(f"model request to {self.url} failed: {exc}", retryable=True) from None
        if not 200 <= status < 300:
            raise ModelError(f"model server answered HTTP {status} at {self.url}: {_snippet(raw)}", status=status,
                             retryable=is_retryable_status(status))
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
