"""A trial as a :class:`~harness.history.model.History`: one leg per role, the ledger's effects, the final state,
and the race's facts (:class:`~harness.history.model.RaceFacts`) for :mod:`harness.checkers.race`."""

from __future__ import annotations

import json
from time import monotonic_ns as mono
from typing import Any

from fiskj.errors import FiskjError
from fiskj.reader import read_state

from harness.history.model import Effect, Fault, History, Leg, RaceFacts
from harness.history.readers import read_probes
from harness.subject.contract import probes_path
from harness.families.race.traces import timed_trace
from harness.families.race.trial import Trial, brief

__all__ = ["trial_history", "ledger_effects", "trial_legs", "final_state"]


def trial_history(t: Trial, scenario: Any, setup_error: str | None = None) -> History:
    """What ``t`` observed, named after ``scenario`` (or ``race-<race>`` without one).

    ``setup_error``: why the race's run could not be set up (nothing was raced).
    """
    final, final_error = final_state(t.snapshot())
    return History(scenario=getattr(scenario, "name", None) or f"race-{t.race}", seed=t.seed, schedule=t.steps,
                   run_id=t.run_id, legs=trial_legs(t), effects=ledger_effects(t), final_state=final,
                   final_error=final_error, notes=t.notes, probes=read_probes(probes_path(t.ledger)),
                   options={"race": t.race, "schedule": t.schedule, "mutant": t.driver.mutant},
                   race=RaceFacts(race=t.race, schedule=t.schedule, expectations=list(t.facts),
                                  setup_error=setup_error))


def ledger_effects(t: Trial) -> list[Effect]:
    """The ledger tool's runs in the trial, in time order, each numbered per tool use id."""
    try:
        with open(t.ledger, "rb") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []
    rows.sort(key=lambda r: r["t"])
    attempts: dict[str, int] = {}
    out = []
    for r in rows:
        attempts[r["tool_use_id"]] = attempts.get(r["tool_use_id"], 0) + 1
        out.append(Effect(tool_use_id=r["tool_use_id"], attempt=attempts[r["tool_use_id"]], pid=r["pid"], t=r["t"],
                          leg=r.get("leg", -1), tool=r.get("tool", "")))
    return out


def trial_legs(t: Trial) -> list[Leg]:
    """One :class:`Leg` per role.  Fault counting (``harness.campaign.campaign.fault_counts``): a trial injects one
    ``race`` (carried by its last racing leg) and one ``kill`` per SIGKILLed leg."""
    racing = [r for r in t.roles if r.kind != "setup"]
    carrier = next((r for r in reversed(racing) if not r.killed), racing[-1] if racing else None)
    legs = []
    for r in t.roles:
        detail = {"race": t.race, "schedule": t.schedule, "role": r.name, "outcome": r.outcome, **r.detail}
        if r.error:
            detail["error"] = f"{r.error.get('kind')}: {r.error.get('message')}"
        if r.kind == "setup":
            fault = Fault(kind="none", detail=detail)
        elif r.killed:
            fault = Fault(kind="kill", signal="SIGKILL", at={"race": t.race}, detail=detail, injected=True)
        else:
            fault = Fault(kind="race", detail=detail, injected=r is carrier)
        stderr = ""
        if r.outcome == "refused" and r.error:
            stderr = f"fiskj: refused: {r.error.get('kind')}: {r.error.get('message')}\n"
        elif r.outcome == "error" and r.error:
            stderr = f"fiskj: error: {r.error.get('kind')}: {r.error.get('message')}\n"
        legs.append(Leg(index=r.index, kind=r.kind, argv=r.agent.argv + [f"({r.name}{', forked' if r.forked else ''})"],
                        pid=r.pid, t_start=r.t_start, t_end=r.t_end or mono(), fault=fault,
                        exit_code=None if r.killed else r.exit_code, exit_signal="SIGKILL" if r.killed else None,
                        journal=r.journal, trace=timed_trace(r),
                        stdout=json.dumps([brief(m) for m in r.replies])[:4000], stderr=stderr))
    return legs


def final_state(data: bytes | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The final journal's state as JSON, or the error reading it (``missing`` when there is none)."""
    if data is None:
        return None, {"kind": "missing", "message": "no journal"}
    try:
        return read_state(data).to_json(), None
    except FiskjError as exc:
        return None, exc.to_json()
