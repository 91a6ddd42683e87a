"""A leg's IO-seam trace with times: the seam's events, timed from the agent's timing file."""

from __future__ import annotations

import base64
import json
from typing import Any, Protocol

__all__ = ["TracedLeg", "timed_trace"]


class TracedLeg(Protocol):
    """What :func:`timed_trace` reads of a leg (a :class:`harness.families.race.trial.Role`)."""

    trace: str       # the IO-seam trace file
    timing: str      # the agent's timing file: "N T0 T1 [split-head|split-tail]" per seam event
    killed: bool
    t_end: int       # when the SIGKILL was sent (``time.monotonic_ns()``), for a killed leg


def timed_trace(role: TracedLeg) -> list[dict[str, Any]]:
    """The leg's IO-seam trace, each event given ``t0``/``t1`` from the agent's timing file and a ``t``.

    ``t`` is the conservative time for the one-writer checks: for ``close``
    and ``write`` the time before the call (a lock released, a write begun),
    for every other op the time after it returned (a lock acquired, an fsync
    acknowledged).  The seam's own ``t`` (written after every call, so late
    for a release) is kept as ``t_seam``.  An event of a killed leg with no timing line (the kill
    landed inside that call) gets the time the SIGKILL was sent, an upper
    bound (``t_from: "kill"``).  The two halves of a split write (a sequence
    point inside one write of the engine) are merged back into the one write
    event they stand for.
    """
    events: list[dict[str, Any]] = []
    try:
        with open(role.trace, "rb") as f:
            for line in f:
                if line.endswith(b"\n"):
                    events.append(json.loads(line))
    except FileNotFoundError:
        return []
    times: dict[int, tuple[int, int, str]] = {}
    try:
        with open(role.timing, "rb") as f:
            for line in f:
                parts = line.decode().split()
                if len(parts) >= 3 and line.endswith(b"\n"):
                    times[int(parts[0])] = (int(parts[1]), int(parts[2]), parts[3] if len(parts) > 3 else "")
    except FileNotFoundError:
        pass
    out: list[dict[str, Any]] = []
    for ev in events:
        tt = times.get(ev.get("n", -1))
        if tt is None:
            if role.killed and role.t_end:
                ev["t"] = ev["t1"] = role.t_end
                ev["t_from"] = "kill"
            out.append(ev)
            continue
        ev["t0"], ev["t1"] = tt[0], tt[1]
        if "t" in ev:
            ev["t_seam"] = ev["t"]  # the seam's own time: when its line was written, after the call
        ev["t"] = tt[0] if ev.get("op") in ("close", "write") else tt[1]
        head = out[-1] if out else None
        if tt[2] == "split-tail" and head is not None and head.get("split") == "head" and ev.get("op") == "write":
            data = base64.b64decode(head.get("data") or "") + base64.b64decode(ev.get("data") or "")
            head.update(data=base64.b64encode(data).decode("ascii"), len=len(data), t1=ev["t1"], split="merged")
            if ev.get("error"):
                head["error"] = ev["error"]
            continue
        if tt[2] == "split-head":
            ev["split"] = "head"
        out.append(ev)
    return out
