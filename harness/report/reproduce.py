"""The reproducer of a trial: the one command line that re-runs it, ``fiskj-harness run SCENARIO --seed S
[--schedule JSON] [--subject CMD]``, written in one place (a report's ``reproduce_run``, a regression
scenario's comment, the pytest plugin's message, the self-test's table).  The schedule names that one trial
in every family; ``--subject`` is written for any subject but the plain reference, with its variables.
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from harness.scenario.parse import Scenario
    from harness.subject.contract import Subject

__all__ = ["reproduce_command", "reproducer", "replay_command", "scenario_argument", "exact_schedule", "schedule_key"]


def schedule_key(schedule: list[dict[str, Any]]) -> str:
    """``schedule`` as compact JSON with sorted keys: one string per schedule (a shrink's cache key, a regression
    scenario's name digest)."""
    return json.dumps(schedule, sort_keys=True, separators=(",", ":"))


def exact_schedule(schedule: list[dict[str, Any]], legs: list[Any]) -> list[dict[str, Any]]:
    """``schedule`` with each timed kill that landed (``Leg.fault.detail["landed_after_event"]`` = N, set by
    :func:`harness.runner.leg.landed`) replaced by the op-counted kill ``{"kind": "kill", "event": N + 1,
    "when": "before"}``: the leg stops with the same calls done, so the replay reproduces every time.  A
    timed suspend that stayed a suspend keeps its time (a suspend lands at a loop boundary anyway).
    ``legs``: the trial's legs; the schedule's entry ``i`` is leg ``i``'s fault (rivals and probes take
    none, so entries are matched to the legs whose fault came from the schedule, in order)."""
    out = [dict(f) for f in schedule]
    scheduled = [leg for leg in sorted(legs, key=lambda lg: lg.index)
                 if "rival_of" not in leg.fault.detail and "probe" not in leg.fault.detail
                 and leg.fault.detail.get("expect") != "refused"]
    for i, leg in enumerate(scheduled[:len(out)]):
        n = leg.fault.detail.get("landed_after_event")
        if isinstance(n, int) and "after_ms" in out[i] and leg.fault.kind == "kill":
            out[i] = {"kind": "kill", "event": n + 1, "when": "before"}
    return out


def reproduce_command(scenario: Scenario, seed: int, schedule: list[dict[str, Any]] | None,
                      subject: Subject | None) -> str:
    """The shell command that re-runs a trial: ``fiskj-harness run SCENARIO --seed S [--schedule JSON]
    [--subject CMD]`` (``SCENARIO``: :func:`scenario_argument`, a bundled one by name, another by its
    file; ``schedule`` ``None``: the whole scenario)."""
    return reproducer(scenario, subject)(seed, schedule)


def reproducer(scenario: Scenario, subject: Subject | None) -> Callable[[int, list[dict[str, Any]] | None], str]:
    """:func:`reproduce_command` for ``scenario`` and ``subject`` as a function of the seed and schedule, the
    scenario's name and the subject's ``--subject`` value found once (a campaign's trials share them: finding
    a bundled scenario's name resolves its path, a dozen file lookups)."""
    head = ["fiskj-harness", "run", scenario_argument(scenario)]
    tail: list[str] = []
    if subject is not None and (not subject.is_reference or subject.extra_env or subject.profile):  # a profile
        # running the reference (a JetStream one) is named too: the default subject is not it
        tail = ["--subject", subject.command_line()]

    def command(seed: int, schedule: list[dict[str, Any]] | None) -> str:
        argv = [*head, "--seed", str(seed)]
        if schedule is not None:
            argv += ["--schedule", json.dumps(schedule, separators=(",", ":"))]
        return shlex.join(argv + tail)
    return command


def scenario_argument(scenario: Scenario) -> str:
    """How a command line names ``scenario``: a bundled scenario by its name (``kill-random``,
    ``regressions/NAME``: found wherever the harness is installed), another by its file, one with no
    file by its name; one draw of a generated scenario with ``@wK`` after it."""
    from harness.report.portable import scenario_ref

    ref = scenario_ref(scenario.path, None)
    k = getattr(scenario, "draw", None)
    draw = f"@w{k}" if k is not None else ""  # one drawn workload of a generated scenario
    if ref is not None and "bundled" in ref:
        return ref["bundled"] + draw
    return (scenario.path or scenario.name) + draw


def replay_command(report_path: str, trial: int) -> str:
    """The command that replays trial ``trial`` of the JSON report at ``report_path``."""
    return f"fiskj-harness replay {report_path} --trial {trial}"
