"""Where a bench's time goes: exclusive thread time per named part of the harness, by wrapping its functions.

:class:`Meter` wraps functions and methods (module or class attributes) for the length of a ``with`` block,
each under a part name; a call's *exclusive* time (its own time less that of the wrapped calls it made, on
the same thread) is added to its part, so the parts of one thread add up to the time spent in its
outermost wrapped calls.  With several job threads the sums are thread-seconds (two busy jobs for 1 s make
2 s), not wall time.  Counts: calls of each part, and of each part by the part it was called from (a
process start under ``readings`` is a reading's process).  Bench-only: nothing of the harness is changed
outside the block, and the wrapped functions behave as before.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from typing import Any, Callable

__all__ = ["Meter"]


class Meter:
    """Exclusive thread time and call counts per part (see the module docstring); thread-safe.

    ``seconds``: part -> thread-seconds; ``calls``: part -> calls; ``under``: (part, caller's part or
    ``""``) -> calls.  :meth:`wrap` ``(owner, name, part)`` before entering; a name wrapped twice keeps the
    first part."""

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.under: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._wanted: list[tuple[Any, str, str]] = []
        self._saved: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, name: str, part: str) -> "Meter":
        """Wrap ``owner.name`` (a module's function or a class's method) as ``part`` while the block runs."""
        self._wanted.append((owner, name, part))
        return self

    def timed(self, part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` wrapped as ``part`` (for a call the bench makes itself)."""
        meter = self

        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            stack = meter._stack()
            caller = stack[-1][0] if stack else ""
            stack.append([part, 0.0])
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                took = time.perf_counter() - t
                _, inner = stack.pop()
                if stack:
                    stack[-1][1] += took
                with meter._lock:
                    meter.seconds[part] += took - inner
                    meter.calls[part] += 1
                    meter.under[(part, caller)] += 1
        return wrapped

    def _stack(self) -> list[list[Any]]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def __enter__(self) -> "Meter":
        seen: set[tuple[int, str]] = set()
        for owner, name, part in self._wanted:
            if (id(owner), name) in seen:
                continue
            seen.add((id(owner), name))
            original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
            self._saved.append((owner, name, original))
            setattr(owner, name, self.timed(part, original))
        return self

    def __exit__(self, *exc: Any) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()

    def reset(self) -> None:
        """Forget what was measured (the wrapping stays)."""
        with self._lock:
            self.seconds.clear()
            self.calls.clear()
            self.under.clear()

    def snapshot(self) -> dict[str, Any]:
        """``{"seconds": {part: s}, "calls": {part: n}, "under": {"part<caller": n}}`` (copies)."""
        with self._lock:
            return {"seconds": dict(self.seconds), "calls": dict(self.calls),
                    "under": {f"{p}<{c}": n for (p, c), n in self.under.items()}}
