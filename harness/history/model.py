"""What one trial observed, recorded outside the processes it killed: plain data the checkers judge.  Where
each field comes from, and the facts each family records: docs/history.md."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from harness.history.journal_location import CONTRACT_JOURNAL, JournalLocation
from harness.history.promises import FISK_AI, Promises
from harness.names import FISK_AI_V2

__all__ = ["ModelCall", "Effect", "Fault", "Leg", "Reference", "ReaderCheck", "CrashAck", "CrashStateFacts",
           "History", "observed_result", "history_to_json", "history_from_json"]


@dataclass
class ModelCall:
    """One ``POST /v1/messages`` the fake server answered (docs/history.md): ``key`` the conversation
    state, ``turn`` the scripted turn, ``messages`` as sent, ``leg`` (-1: unknown), ``reply`` blocks, ``stop``,
    ``usage`` as sent (judged by I11)."""

    index: int
    t: int
    key: str
    turn: int
    messages: list[dict[str, Any]]
    reply: list[dict[str, Any]]
    leg: int = -1
    stream: bool = False
    stop: str = ""
    usage: dict[str, Any] = field(default_factory=dict)

    @property
    def sent_results(self) -> list[str]:
        """The tool_use ids whose results the request carried (``tool_result`` blocks): work the agent acted on."""
        return [b["tool_use_id"] for m in self.messages if isinstance(m, dict) and isinstance(m.get("content"), list)
                for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"
                and isinstance(b.get("tool_use_id"), str)]


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
    """The fault a nemesis applied to one leg: ``kind``, ``signal``, ``at``, ``detail``, ``injected``
    (docs/history.md)."""

    kind: str = "none"
    signal: str | None = None
    at: dict[str, Any] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)
    injected: bool = False


@dataclass
class Leg:
    """One agent process, a start or a resume (docs/history.md): ``exit_code``/``exit_signal`` ``None`` while
    unknown, ``journal`` its bytes after the leg (``None``: no file), ``reading`` ``None`` when none is given,
    ``lock_point`` only for a held observed leg."""

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
    raw_exit_code: int | None = None
    reading: dict[str, Any] | None = None
    lock_point: int | None = None

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
    """The uninterrupted run: its fold (``{}`` when not folded), counts, and what an outside observer saw it
    end with (``call_keys``, ``last_reply``, ``effect_ids``, ``exit_code``, ``printed_answer``); docs/history.md."""

    state: dict[str, Any]
    model_calls: int
    effects: int
    call_keys: list[str] = field(default_factory=list)
    last_reply: list[dict[str, Any]] = field(default_factory=list)
    effect_ids: list[str] = field(default_factory=list)
    exit_code: int | None = None
    printed_answer: str = ""


@dataclass
class ReaderCheck:
    """One mutated journal read by the subject's reader: ``mutation`` id, ``kind``, ``size`` (bytes),
    ``expected`` (its label: ``clean``, ``torn`` or ``corrupt``) and ``answer`` (docs/spec.md section 7)."""

    mutation: str
    kind: str
    size: int
    expected: dict[str, Any]
    answer: dict[str, Any]


@dataclass
class CrashAck:
    """A write the crash model counts as acknowledged (docs/persistence-model.md): trace event ``n`` put
    ``data`` at bytes ``offset``..``end`` of inode ``ino`` (then named ``path``); event ``claimed`` showed
    it returned (-1: the end of a complete trace)."""

    path: str
    offset: int
    end: int
    data: bytes
    ino: int
    n: int
    claimed: int = 0


@dataclass
class CrashStateFacts:
    """The crash state a power loss left (docs/persistence-model.md): ``id``, ``prefix_n`` (trace events
    applied), ``files``, ``dirs``, ``inodes``, ``acks`` (acknowledged writes), ``lost_entries``, ``persisted``."""

    id: str
    prefix_n: int
    files: dict[str, bytes] = field(default_factory=dict)
    dirs: list[str] = field(default_factory=list)
    inodes: dict[str, int] = field(default_factory=dict)
    acks: list[CrashAck] = field(default_factory=list)
    lost_entries: list[str] = field(default_factory=list)
    persisted: str = ""

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary (file sizes instead of bytes; ``acknowledged``: ``[path, end]`` of each ack)."""
        return {"id": self.id, "prefix_n": self.prefix_n, "persisted": self.persisted,
                "files": {p: len(b) for p, b in sorted(self.files.items())}, "dirs": sorted(self.dirs),
                "lost_entries": list(self.lost_entries), "acknowledged": [[a.path, a.end] for a in self.acks]}

    @classmethod
    def of(cls, state: Any) -> "CrashStateFacts":
        """The facts of a crash model's state (a :class:`harness.families.power_loss.crashstates.CrashState`)."""
        return cls(id=state.id, prefix_n=state.prefix_n, files=dict(state.files), dirs=sorted(state.dirs),
                   inodes=dict(state.inodes), lost_entries=list(state.lost_entries), persisted=state.persisted,
                   acks=[CrashAck(a.path, a.offset, a.end, bytes(a.data), a.ino, a.n, a.claimed) for a in state.acks])


@dataclass
class History:
    """Everything one trial observed; the checkers' only input (docs/history.md)."""

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
    reader_checks: list[ReaderCheck] = field(default_factory=list)
    crash_state: CrashStateFacts | None = None
    readings: list[dict[str, Any]] = field(default_factory=list)
    journal_format: str = FISK_AI_V2
    probes: list[dict[str, Any]] = field(default_factory=list)
    journal_template: str = CONTRACT_JOURNAL
    promises: Promises = FISK_AI

    @property
    def journal(self) -> JournalLocation:
        """Where the subject kept the run's journal and in what format (:class:`JournalLocation`)."""
        return JournalLocation(self.journal_template, self.journal_format)


def observed_result(history: History) -> dict[str, Any]:
    """What an outside observer saw ``history``'s run end with: :class:`Reference`'s ``call_keys``,
    ``last_reply``, ``effect_ids`` and ``exit_code`` (of the last leg; ``None`` with no leg)."""
    keys = list(dict.fromkeys(call.key for call in sorted(history.model_calls, key=lambda c: c.index)))
    last = max(history.model_calls, key=lambda c: c.index) if history.model_calls else None
    legs = sorted(history.legs, key=lambda leg: leg.index)
    return {"call_keys": keys, "last_reply": list(last.reply) if last else [],
            "effect_ids": sorted({e.tool_use_id for e in history.effects}),
            "exit_code": legs[-1].exit_code if legs else None}


def history_to_json(history: History) -> dict[str, Any]:
    """Return a JSON-ready dict of ``history`` (journal bytes as latin-1 text)."""
    out = asdict(history)
    for leg in out["legs"]:
        if leg["journal"] is not None:
            leg["journal"] = leg["journal"].decode("latin-1")
    state = out.get("crash_state")
    if state is not None:
        state["files"] = {p: b.decode("latin-1") for p, b in state["files"].items()}
        for ack in state["acks"]:
            ack["data"] = ack["data"].decode("latin-1")
    return out


def history_from_json(data: dict[str, Any]) -> History:
    """Inverse of :func:`history_to_json`."""
    legs = [Leg(**{**raw, "fault": Fault(**raw.get("fault", {})),
                   "journal": None if raw.get("journal") is None else raw["journal"].encode("latin-1")})
            for raw in data.get("legs", [])]
    ref = data.get("reference")
    return History(
        scenario=data["scenario"], seed=data["seed"], schedule=data.get("schedule", []), run_id=data["run_id"],
        legs=legs, model_calls=[ModelCall(**c) for c in data.get("model_calls", [])],
        effects=[Effect(**e) for e in data.get("effects", [])], reference=Reference(**ref) if ref else None,
        final_state=data.get("final_state"), final_error=data.get("final_error"),
        notes=list(data.get("notes", [])), options=dict(data.get("options", {})),
        reader_checks=[ReaderCheck(**c) for c in data.get("reader_checks", [])],
        crash_state=_crash_state_from_json(data.get("crash_state")),
        readings=[dict(r) for r in data.get("readings", [])],
        journal_format=str(data.get("journal_format", FISK_AI_V2)),
        probes=[dict(p) for p in data.get("probes", [])],
        journal_template=str(data.get("journal_template", CONTRACT_JOURNAL)),
        promises=Promises.from_json(data.get("promises")),
    )


def _crash_state_from_json(raw: dict[str, Any] | None) -> CrashStateFacts | None:
    if not raw:
        return None
    raw = dict(raw)
    raw["files"] = {p: b.encode("latin-1") for p, b in raw.get("files", {}).items()}
    raw["acks"] = [CrashAck(**{**a, "data": a["data"].encode("latin-1")}) for a in raw.get("acks", [])]
    return CrashStateFacts(**raw)
