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

Facts a family records for the checkers (it judges none of them itself;
docs/spec.md section 15):

* ``reader_checks`` (tail family): one :class:`ReaderCheck` per mutated
  journal, what the reader must answer (docs/spec.md section 7) and what the
  subject's reader answered; judged as I5;
* ``crash_state`` (power-loss family): the :class:`CrashStateFacts` of the
  crash state leg 0 lost power into: the files it holds and the writes the
  trace model counts as acknowledged (docs/persistence-model.md); judged as I4;
* ``journal_format``: the subject's journal format (:data:`harness.names.JOURNAL_FORMATS`), which
  says how far the checkers can read its journal; ``journal_template``: the subject's journal path
  template (:data:`harness.history.journal_location.CONTRACT_JOURNAL` unless its profile says otherwise);
  together they are :attr:`History.journal`, the one answer to "is this path the run's journal";
* ``promises``: what the subject promises (:class:`harness.history.promises.Promises`, its profile's
  ``[promises]``; fisk-ai's rules by default), which the checkers judge against;
* ``readings`` (race ``readers-during-appends`` through the subject's own
  commands): the subject's reading taken while a writer leg was held at a
  sequence point, ``{"leg", "at", "journal" (latin-1 text), "reading"}``
  (:func:`harness.history.readers.parse_reading`); judged as I10.
"""

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
    """One ``POST /v1/messages`` the fake server answered.

    ``key`` identifies the conversation state (a hash of the chat segment
    and the scripted turn the request asks for, derived from the tool ids
    it answers and the follow-ups it holds: docs/subject.md "The model");
    ``turn`` is the scripted turn it answered; ``messages`` is the
    request's message list as sent, without ``role: "system"`` messages;
    ``leg`` is the leg index from the API key
    (``fiskj-<token>-leg<L>``) when known, else -1; ``reply`` the content
    blocks returned; ``stream``: the client asked for server-sent events; ``stop``: the reply's
    ``stop_reason`` (``""`` in histories written before it was recorded); ``usage``: the reply's ``usage``
    as sent (``{}`` in histories written before it was recorded; judged by I11).
    """

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
    hung agent).  ``raw_exit_code`` is the subject's own exit status when its
    profile maps it to another contract status (``exit_code`` is then the
    contract's, docs/subject.md "Subject profiles"); ``reading`` is the
    subject's own reading of the journal after the leg
    (:func:`harness.history.readers.parse_reading`), ``None`` when it gives
    none.  ``lock_point`` (observed legs): the sequence point K at which the leg
    asks for its first lock, counted like a race's ``hold`` (its lookups, reads,
    opens and locks under the store, :data:`harness.runner.leg.HOLD_KINDS`):
    a hold at ``1..lock_point`` stops the leg before it holds the run; ``None``
    when it took no lock or was not held (only a held leg's lookups and reads are observed).
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
    """The result of an uninterrupted run: the fold's JSON (``fiskj session show --json``) and what it was seen doing.

    ``state``: the fold of its journal (``{}`` for a journal format fiskj does not fold); ``model_calls``,
    ``effects``: how many of each it made.  What an outside observer saw of it, the result a ``jsonl``
    journal is judged by (I6): ``call_keys``, the distinct conversation states it asked the model about,
    in order (:attr:`ModelCall.key`); ``last_reply``, the content blocks of its last model reply (its final
    answer); ``effect_ids``, the tool_use ids its tools ran, sorted; ``exit_code`` of its last leg;
    ``printed_answer``: the end of its final answer's text (at most 200 characters) when its last leg
    printed it on standard output, else ``""`` (a subject that prints no answer: nothing to compare).
    """

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
    """One mutated journal read by the subject's own reader (tail family; docs/spec.md section 7).

    ``mutation``: its id; ``kind`` (``cut``, ``zeros``, ...) and ``size``
    (bytes) describe it.  ``expected``: what the reader must answer, the
    mutation's label: ``kind`` ``clean``, ``torn`` (the final line dropped
    and reported) or ``corrupt`` (an interior line raised), ``seqs`` of the
    records returned, ``good_size``, ``torn`` ``[offset, length]`` or
    ``None``, ``line`` and ``offset`` of the corrupt line.  ``answer``:
    what the reader said: ``kind`` ``read`` (``seqs``, ``torn``,
    ``good_size``), ``corrupt`` (``line``) or ``error`` (``message``).
    """

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
    """The crash state a power loss left (power-loss family; docs/persistence-model.md).

    ``id`` and ``prefix_n`` (trace events applied) name it; ``files`` (path
    -> bytes), ``dirs`` and ``inodes`` (path -> inode) are what it holds;
    ``acks`` the writes acknowledged before the crash point;
    ``lost_entries`` the unsynced name operations that did not survive and
    ``persisted`` the unsynced units that did.
    """

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
    """Everything one trial observed; the checkers' only input.

    ``probes``: the code probes the legs reached (``{"leg", "probe"}``,
    :func:`harness.history.readers.read_probes`); only the reference writes
    them, and no checker reads them (they measure coverage, never a verdict).
    """

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
    keys: list[str] = []
    for call in sorted(history.model_calls, key=lambda c: c.index):
        if call.key not in keys:
            keys.append(call.key)
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
