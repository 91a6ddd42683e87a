"""The progress of a campaign on stderr: a line rewritten in place on a terminal, a status line elsewhere.

``fiskj-harness run`` (and ``gate``) passes a :class:`Progress` to
the campaign as its ``progress(done, total, failing)`` callback.  The total
is the number of trials planned, known before the first trial starts and
never changed while the trials run (the shrink that may follow is not
counted), but in a gate, where it grows with each fresh draw.

* On a terminal: ``  37/200 trials  0 failing  4.1 trials/s  ETA 40 s``,
  rewritten in place at each trial's end; the last one says ``done in``.
* Elsewhere (CI logs, a file): one line ``fiskj-harness: 37/200 trials, 0
  failing, 4.1 trials/s, ETA 40 s`` every ``every_s`` seconds (10 by
  default), from a timer, so it appears even while a long trial runs; and
  one when the trials are done.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

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

    ``tty``: whether ``stream`` is a terminal (default: ``stream.isatty()``);
    ``every_s``: seconds between two status lines off a terminal;
    ``clock``: the time source (tests); ``final``: off a terminal, also a line
    when the trials are done (a gate says so per round itself: False); ``ends_at``: a deadline by
    ``clock`` (a gate's budget), which the ETA counts down to instead of the trials left.  Off a terminal a daemon timer
    prints the status every ``every_s`` seconds while trials run
    (``timer=False``: only when a trial ends, for tests).  Call
    :meth:`close` at the end (it ends a pending terminal line and stops the
    timer); :meth:`say` prints a line of its own without tearing the progress
    line.  A write that fails (a closed pipe) silences it.
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
            elif self._last_status is not None and now - self._last_status >= self.every_s:
                self._write(f"fiskj-harness: {self.line()}\n")
                self._last_status = now
        if not self.tty and self.timer and self._thread is None and not (self.total and self.done >= self.total):
            self._thread = threading.Thread(target=self._tick, name="fiskj-progress", daemon=True)
            self._thread.start()

    def line(self) -> str:
        """The status: done/total, failing, rate, and the time left (ETA) or taken."""
        elapsed = (self.clock() - self.started) if self.started is not None else 0.0
        rate = self.done / elapsed if elapsed > 0 else 0.0
        text = f"{self.done}/{self.total} trials, {self.failing} failing"
        if self.total and self.done >= self.total:
            return text + f", done in {format_duration(elapsed)}" + (f" ({rate:.1f} trials/s)" if rate else "")
        if self.ends_at is not None:
            left = max(self.ends_at - self.clock(), 0.0)
            return text + (f", {rate:.1f} trials/s" if rate > 0 else "") + f", budget ends in {format_duration(left)}"
        if self.done and rate > 0:
            return text + f", {rate:.1f} trials/s, ETA {format_duration((self.total - self.done) / rate)}"
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

    def _tick(self) -> None:
        while not self._stop.wait(min(self.every_s, 1.0)):
            with self._lock:
                if self.total and self.done >= self.total:
                    continue
                now = self.clock()
                if self._last_status is not None and now - self._last_status >= self.every_s:
                    self._write(f"fiskj-harness: {self.line()}\n")
                    self._last_status = now

    def say(self, text: str) -> None:
        """Print ``text`` as a line of its own (a pending terminal progress line is ended first)."""
        with self._lock:
            if self._pending:
                self._write("\n")
                self._pending = False
            self._write(text.rstrip("\n") + "\n")

    def close(self) -> None:
        """End a pending terminal line and stop the timer; idempotent."""
        self._stop.set()
        with self._lock:
            if self._pending:
                self._write("\n")
                self._pending = False
