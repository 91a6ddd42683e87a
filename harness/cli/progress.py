"""The progress of a campaign on stderr: a line rewritten in place on a terminal, a status line every
``every_s`` seconds elsewhere (docs/ci.md "Progress").
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from harness.report.report import rate_words

__all__ = ["Progress", "format_duration"]


def format_duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 01 min``: a duration as a person reads it."""
    s = max(int(round(seconds)), 0)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


class Progress:
    """A ``progress(done, total, failing)`` callback that shows a campaign's progress on ``stream``.

    ``tty``: whether ``stream`` is a terminal (default: ``stream.isatty()``); ``every_s``: seconds between
    status lines off a terminal, printed by a daemon timer (``timer=False``: only as trials end); ``clock``:
    the time source; ``final``: off a terminal, a line when the trials are done too; ``ends_at``: a deadline
    by ``clock`` (a gate's budget) the ETA counts down to.  :meth:`say` prints a line without tearing the
    progress line, :meth:`close` ends it; a write that fails (a closed pipe) silences it.
    """

    def __init__(self, stream: Any, *, tty: bool | None = None, every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic, timer: bool = True, final: bool = True,
                 ends_at: float | None = None) -> None:
        self.stream = stream
        self.tty = bool(stream.isatty()) if tty is None and hasattr(stream, "isatty") else bool(tty)
        self.every_s = every_s
        self.clock = clock
        self.timer = timer
        self.final = final
        self.ends_at = ends_at
        self.total = 0
        self.done = 0
        self.failing = 0
        self.started: float | None = None
        self._last_status: float | None = None
        self._pending = False  # a terminal line not yet ended
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._broken = False

    # -- the callback ----------------------------------------------------------------------

    def __call__(self, done: int, total: int, failing: int) -> None:
        """Record the campaign's state: ``done`` of ``total`` trials ended, ``failing`` of them failed.  A call with
        ``done`` 0 starts a new count (a campaign).  ``total`` is the campaign's plan as it stands: it grows when a
        gate's trial stream draws from fresh seeds and shrinks when ``--first-violation`` drops a scenario's
        trials not started yet, so the last line says how many trials ran, never a plan that did not."""
        with self._lock:
            now = self.clock()
            if done == 0 or self.started is None:
                self.started, self.total, self._last_status = now, int(total), now
            self.total = int(total)
            self.done, self.failing = int(done), int(failing)
            if self.tty:
                end = "\n" if self.total and self.done >= self.total else ""
                self._write(f"\r  {self.line()}   {end}")
                self._pending = not end
            elif self.done >= self.total and self.total:
                if self.final:
                    self._write(f"fiskj-harness: {self.line()}\n")
                self._last_status = now
            else:
                self._status_due(now)
        if not self.tty and self.timer and self._thread is None and not (self.total and self.done >= self.total):
            self._thread = threading.Thread(target=self._tick, name="fiskj-progress", daemon=True)
            self._thread.start()

    def line(self) -> str:
        """The status: done/total, failing, rate, and the time left (ETA) or taken."""
        elapsed = (self.clock() - self.started) if self.started is not None else 0.0
        rate = self.done / elapsed if elapsed > 0 else 0.0
        text = f"{self.done}/{self.total} trials, {self.failing} failing"
        if self.total and self.done >= self.total:
            return text + f", done in {format_duration(elapsed)}" + (f" ({rate_words(rate)})" if rate else "")
        if self.ends_at is not None:
            left = max(self.ends_at - self.clock(), 0.0)
            return text + (f", {rate_words(rate)}" if rate > 0 else "") + f", budget ends in {format_duration(left)}"
        if self.done and rate > 0:
            return text + f", {rate_words(rate)}, ETA {format_duration((self.total - self.done) / rate)}"
        return text + ", ETA unknown until a trial ends"

    # -- output -------------------------------------------------------------------------------

    def _write(self, text: str) -> None:
        if self._broken:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: progress is not worth a failure
            self._broken = True

    def _status_due(self, now: float) -> None:
        """Off a terminal: the status line, when ``every_s`` passed since the last one."""
        if self._last_status is not None and now - self._last_status >= self.every_s:
            self._write(f"fiskj-harness: {self.line()}\n")
            self._last_status = now

    def _tick(self) -> None:
        while not self._stop.wait(min(self.every_s, 1.0)):
            with self._lock:
                if not (self.total and self.done >= self.total):
                    self._status_due(self.clock())

    def say(self, text: str = "") -> None:
        """Print ``text`` as a line of its own (a pending terminal progress line is ended first)."""
        with self._lock:
            if self._pending:
                self._write("\n")
                self._pending = False
            if text:
                self._write(text.rstrip("\n") + "\n")

    def close(self) -> None:
        """End a pending terminal line and stop the timer; idempotent."""
        self._stop.set()
        self.say()
