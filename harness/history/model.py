"""What one trial observed, recorded outside the processes it killed.

A :class:`History` is plain data (JSON-serialisable through
:func:`history_to_json`), built by the runner and judged by the checkers,
which do no IO.  Times are ``time.monotonic_ns()`` values (CLOCK_MONOTONIC is
system-wide on Linux, so times from the harness, the agents and the tools
are comparable).

Sources of each field (all outside the killed process):

* ``model_calls``: the fake model server, in the harness process;
* ``effects``: the effects ledger, appended (O_APPEND + fsync) by the ledger
  tool before it returns;
* ``legs``: one per agent process the runner started: argv, pid, the fault
  the nemesis applied, how it exited, the IO-seam trace it left, and a copy
  of the journal bytes after it ended;
* ``reference``: the fold of an uninterrupted run of the same scenario.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["ModelCall", "Effect", "Fault", "Leg", "Reference", "History", "history_to_json", "history_from_json"]


@dataclass
class ModelCall:
    """One ``POST /v1/messages`` the fake server answered.

    ``key`` identifies the conversation state (hash of the request's
    messages); ``turn`` is the scripted turn it answered; ``messages`` is
    the request's message list as sent; ``leg`` is the leg index from the
    ``x-fiskj-leg`` header / environment when known, else -1; ``reply`` the
    content blocks returned.
    """

    index: int
    t: int
    key: str
    turn: int
    messages: list[dict[str, Any]]
    reply: list[dict[str, Any]]
    leg: int = -1


@dataclass
class Effect:
    """One tool execution, as written to the effects ledger by the ledger tool."""

    tool_use_id: str
    attempt: int
    pid: int
    t: int
    leg: int = -1
    tool: str = ""


@dataclass
class Fault:
    """The fault a nemesis applied to one leg.

    ``kind``: ``none``, ``kill`` (SIGKILL), ``suspend`` (SIGINT or SIGTERM:
    ``signal`` names it), ``tail`` (journal cut/garbage after the leg),
    ``power_loss`` (a crash state replaces the files), ``race``.  ``at`` is
    when: ``{"after_ms": 12.5}`` for a timed fault, ``{"event": k}`` for the
    k-th IO-seam call, ``{"op": "fsync", "event": k}`` when counted per op.
    ``detail`` holds family-specific parameters (cut offset, crash state id).
    """

    kind: str = "none"
    signal: str | None = None
    at: dict[str, Any] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)
    injected: bool = False


@dataclass
class Leg:
    """One agent process: a start or a resume.

    ``exit_code`` is the process's exit status, ``exit_signal`` the signal
    name that killed it (``"SIGKILL"``), both ``None`` while unknown.
    ``journal`` is the journal's bytes after the leg ended (``None`` when
    the file did not exist).  ``trace`` is the list of IO-seam events the
    leg wrote (docs/ioseam.md), possibly cut short by a kill.  ``stdout`` and
    ``stderr`` are kept (truncated) as evidence.  ``timed_out`` is true when
    the runner killed the leg because the trial's time budget ran out (a
    hung agent).
    """

    index: int
    kind: str
    argv: list[str]
    pid: int = 0
    t_start: int = 0
    t_end: int = 0
    fault: Fault = field(default_factory=Fault)
    exit_code: int | None = None
    exit_signal: str | None = None
    journal: bytes | None = None
    trace: list[dict[str, Any]] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False

    @property
    def crashed(self) -> bool:
        """True when the leg was killed (SIGKILL) or died without a clean exit status."""
        return self.exit_signal is not None or self.exit_code is None

    @property
    def suspended(self) -> bool:
        """True when the leg exited with the suspended status (3)."""
        return self.exit_code == 3


@dataclass
class Reference:
    """The result of an uninterrupted run: the fold's JSON (``fiskj session show --json``)."""

    state: dict[str, Any]
    model_calls: int
    effects: int


@dataclass
class History:
    """Everything one trial observed; the checkers' only input."""

    scenario: str
    seed: int
    schedule: list[dict[str, Any]]
    run_id: str
    legs: list[Leg] = field(default_factory=list)
    model_calls: list[ModelCall] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)
    reference: Reference | None = None
    final_state: dict[str, Any] | None = None
    final_error: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)


def history_to_json(history: History) -> dict[str, Any]:
    """Return a JSON-ready dict of ``history`` (journal bytes as latin-1 text)."""
    out = asdict(history)
    for leg in out["legs"]:
        if leg["journal"] is not None:
            leg["journal"] = leg["journal"].decode("latin-1")
    return out


def history_from_json(data: dict[str, Any]) -> History:
    """Inverse of :func:`history_to_json`."""
    legs = []
    for raw in data.get("legs", []):
        raw = dict(raw)
        raw["fault"] = Fault(**raw.get("fault", {}))
        if raw.get("journal") is not None:
            raw["journal"] = raw["journal"].encode("latin-1")
        legs.append(Leg(**raw))
    ref = data.get("reference")
    return History(
        scenario=data["scenario"], seed=data["seed"], schedule=data.get("schedule", []),
        run_id=data["run_id"], legs=legs,
        model_calls=[ModelCall(**c) for c in data.get("model_calls", [])],
        effects=[Effect(**e) for e in data.get("effects", [])],
        reference=Reference(**ref) if ref else None,
        final_state=data.get("final_state"), final_error=data.get("final_error"),
        notes=list(data.get("notes", [])), options=dict(data.get("options", {})),
    )
