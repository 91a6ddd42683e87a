"""The races by name: what each judges, the schedules it draws from, and the bounds of "at once"."""

from __future__ import annotations

#: The races, in the order a campaign cycles through them.
RACES = ("two-writers", "two-resumers", "two-creates", "holder-killed", "readers-during-appends",
         "lock-survives-other-fds")

#: Invariants judged per race of the race agent (the others have nothing to judge in a race).  A race
#: scenario also lists I10, which only a race through the subject's own commands can judge (its readings).
INVARIANTS_BY_RACE: dict[str, tuple[str, ...]] = {
    "two-writers": ("I4", "I5", "I8", "I9"),
    "two-resumers": ("I2", "I4", "I5", "I8", "I9"),
    "two-creates": ("I4", "I5", "I8", "I9"),
    "holder-killed": ("I4", "I5", "I8"),
    "readers-during-appends": ("I4", "I5", "I8"),
    "lock-survives-other-fds": ("I4", "I5", "I8", "I9"),
}

#: Schedules each race draws from (a forced interleaving, or ``free``/``together``: jitter only).
SCHEDULES: dict[str, tuple[str, ...]] = {
    "two-writers": ("holder-idle", "holder-mid-append", "release-gap", "free"),
    "two-resumers": ("together", "loser-waits-at-lock", "winner-in-tool"),
    "two-creates": ("together", "both-paused-at-first-open", "winner-mid-create"),
    "holder-killed": ("kill-at-call", "kill-mid-write", "kill-after-acks"),
    "readers-during-appends": ("split-writes", "free"),
    "lock-survives-other-fds": ("fds-and-children",),
}

#: A refusal or a takeover slower than this (ms, measured inside the agent around the store call) is a violation.
AT_ONCE_MS = 100.0
#: How long the driver waits for an answer that must come at once (a blocked lock shows as this timeout).
AT_ONCE_TIMEOUT_S = 2.0
#: The most jitter (µs) spun before a command sent "together".
JITTER_US = 400
