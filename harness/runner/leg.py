"""The one leg runner: every agent process of a trial runs through it (:func:`run_leg`, every family's legs; the
process started by :class:`harness.runner.starter.LegStarter`): the leg's fault applied (:func:`drive`), its whole
tree waited for, killed and reaped (:mod:`harness.runner.process`), the leg recorded as a
:class:`harness.history.model.Leg` (docs/history.md).  Two decisions every family shares live here too, so they
cannot disagree: whether a leg starts or resumes the run (:func:`start_or_resume`) and how many chat follow-ups
the journal already holds (:func:`count_user_records`).
"""

from __future__ import annotations

import glob
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from fiskj.codec import decode_record

from harness.history.journal_location import store_files
from harness.history.jsonl import holds_a_line
from harness.names import EXIT_SUSPENDED, FISK_AI_V2, OPAQUE

from harness.runner.faults import event_action, history_fault
from harness.subject.contract import journal_bytes
from harness.history.model import Leg
from harness.history.readers import parse_reading, read_trace, tail_text
from harness.observer.errors import ControlError
from harness.observer.ops import KINDS, entry_order
from harness.observer.trace import ops_to_trace
from harness.runner.locks import waits_on_kept_lock
from harness.runner.starter import LegStarter, state_of
from harness.runner.process import close_pidfd, kill_tree, reap_group, signal_name, wait_for_exit
from harness.subject.contract import CONTRACT_EXITS, Subject
from harness.workload.mcp_setup import LegMcp, open_leg

__all__ = ["LegOutcome", "LegPlan", "drive", "run_leg", "start_or_resume", "count_user_records",
           "observer_faults", "journal_glob", "HOLD_KINDS", "open_mcp"]

_USER_PROTOCOL = b'"io.choria.fisk-ai.v1.session.user"'
_SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}


def landed(leg: Leg, fault_t: int) -> None:
    """Record where in the subject's own time line a timed fault of ``leg`` landed (docs/scenarios.md).

    ``fault.detail["landed_after_event"]``: the ``n`` of the last call the leg's trace shows completed
    before the fault (0: none), so a failure replays as an op-counted fault
    (:func:`harness.report.reproduce.exact_schedule`).  A suspend the subject died of (the signal came
    before it handled signals: still starting, or already exiting) is what it was, a kill:
    ``fault.kind`` becomes ``kill``, with ``detail["scheduled"] = "suspend"``.
    """
    done = [ev.get("n", 0) for ev in leg.trace if isinstance(ev.get("t"), int) and ev["t"] <= fault_t]
    leg.fault.detail["landed_after_event"] = max(done, default=0)
    suspend_outcome(leg)


def suspend_outcome(leg: Leg) -> None:
    """Say how an injected suspend of ``leg`` ended: ``detail["honoured"] = False`` when the subject ended
    otherwise than suspended; a subject that died of the signal was killed (``fault.kind`` becomes
    ``kill``, ``detail["scheduled"] = "suspend"``).  See :func:`landed`."""
    if leg.fault.kind == "suspend" and leg.exit_code not in (EXIT_SUSPENDED, None):
        leg.fault.detail["honoured"] = False  # outside the subject's suspend window: it ended otherwise
    if leg.fault.kind == "suspend" and leg.exit_signal in _SIGNALS:
        leg.fault.detail.update(scheduled="suspend", landed=f"the subject died of {leg.exit_signal}: it did not "
                                                           "handle the signal yet (or any more), so it was a kill")
        leg.fault.kind = "kill"


def start_or_resume(journal: bytes | None, fmt: str = FISK_AI_V2) -> str:
    """``"resume"`` when the journal's first line is a complete record (of a ``jsonl`` journal, ``fmt``: one
    complete JSON value; of an opaque store: any bytes in it), else ``"start"``: a journal that does not exist,
    or holds no complete record, holds nothing acknowledged, so the next leg starts the run again
    (docs/subject.md "Commands", docs/spec.md section 9 on reclaiming a journal with no complete record).
    """
    if fmt == OPAQUE:  # a store with any bytes in it (the trial asks the agent's reading whether it holds the run)
        return "resume" if any(store_files(journal).values()) else "start"
    if fmt != FISK_AI_V2:
        return "resume" if holds_a_line(journal) else "start"
    first = (journal or b"").split(b"\n", 1)
    if len(first) < 2:
        return "start"
    try:
        decode_record(first[0])
    except Exception:  # noqa: BLE001 - not a record: nothing to resume
        return "start"
    return "resume"


def open_mcp(subject: Subject, where: dict[str, str], ledger: Path, index: int,
             drifted: bool = False) -> tuple[dict[str, str], LegMcp | None]:
    """Give leg ``index`` of ``subject`` the workload's tools over MCP when its profile says so (``[mcp]``):
    its configuration written (and the HTTP server started), :func:`harness.workload.mcp_setup.open_leg`.
    Returns the leg's template values (``where`` with ``mcp_url``) and what to close after the leg
    (``None`` without MCP).  Raises ``McpSetupError``/``OSError`` when it cannot be set up."""
    if subject.mcp is None:
        return dict(where), None
    leg = open_leg(subject.mcp, where["mcp_config"], ledger=ledger, leg=index, drifted=drifted)
    return {**where, "mcp_url": leg.http.url if leg.http else ""}, leg


def count_user_records(journal: bytes | None) -> int:
    """How many chat follow-ups (user records) the journal holds: the input a resumed chat leg skips."""
    if not journal:
        return 0
    return sum(1 for line in journal.split(b"\n") if _USER_PROTOCOL in line and line.endswith(b"}"))


#: The calls a ``hold`` fault counts: the lookups, reads, opens and locks by which an agent learns the
#: state of a run (the sequence points of a race, docs/spec.md section 10).
HOLD_KINDS = "open,read,stat,access,flock,lock"


def observer_faults(spec: dict[str, Any], journal: str = "") -> list[str]:
    """The outside observer's faults for a leg's schedule entry (docs/observer.md): an event kill
    ``{"kind": "kill", "event": K, "when": W[, "op": OP]}`` is ``kill-W@K[:OP]``, counted over every
    process and thread of the leg; an IO error ``{"kind": "io_error", "action": A, "event": K, "op": OP}``
    is ``A@K:OP=GLOB``, the K-th ``OP`` call (an ``fsync``: ``fsync`` or ``fdatasync``) on a path the glob
    ``journal`` matches (:func:`journal_glob`; every call without one); a hold ``{"kind": "hold", "at": K[,
    "ops": KINDS]}`` is ``pause@K:KINDS`` (default :data:`HOLD_KINDS`); other faults need no observer fault."""
    if spec.get("kind") == "hold":  # the leg stops at its K-th lookup, read, open or lock until released
        return [f"pause@{spec['at']}:{spec.get('ops') or HOLD_KINDS}"]
    if spec.get("kind") == "io_error":  # counted over the leg's calls of that kind on the journal
        kinds = "fsync,fdatasync" if spec["op"] == "fsync" else spec["op"]
        return [f"{spec['action']}@{spec['event']}:{kinds}" + (f"={journal}" if journal else "")]
    action = event_action(spec)  # an event kill, or an event suspend (``sigint-after@K``)
    if action is None:
        return []
    value = f"{action}@{spec['event']}"
    op = {"fsync_dir": "fsync"}.get(spec.get("op") or "", spec.get("op") or "")
    if op:
        if op not in KINDS:
            raise ValueError(f"event kill op {op!r} is not an observed op (known: {', '.join(KINDS)})")
        value += f":{op}"
    return [value]


def journal_glob(path: Path, store: bool) -> str:
    """The observer's glob of the journal's paths (its faults' ``=GLOB``): ``*/NAME`` for the journal's file
    (``NAME`` may hold the template's ``*``), ``DIR/*`` for every file below an opaque store ``DIR``."""
    return glob.escape(os.path.realpath(path)) + "/*" if store else f"*/{path.name}"


def lock_point(ops: Any) -> int | None:
    """The sequence point K (1-based, among the ops a ``hold`` counts: :data:`HOLD_KINDS`, in entry order)
    of the first lock in the observed ``ops`` (pure), or ``None`` when they hold no lock: a hold at K for
    ``K <= lock_point`` stops the leg before it holds the lock."""
    kinds = set(HOLD_KINDS.split(","))
    points = [op for op in entry_order(ops) if not op.lifecycle and op.op in kinds]
    return next((k for k, op in enumerate(points, start=1) if op.op in ("flock", "lock")), None)


def _hold(proc: Any, timeout: float) -> bool:
    """Wait until ``proc`` stops at its sequence point; False when it ended (or hung) before reaching it.
    Any other failure to hear from the tracer is the harness's, never the subject's: it is raised
    (``RuntimeError``), so no held leg is left paused and then charged with a hang."""
    try:
        proc.wait_paused(timeout)
        return True
    except ControlError:  # the leg ended first (or hung): the sequence point does not exist in this run
        return False


@dataclass
class LegOutcome:
    """How a driven leg ended.

    ``returncode``: the exit status, or ``None`` when killed by a signal;
    ``exit_signal``: the signal name (``"SIGKILL"``) or ``None``;
    ``injected``: the scheduled fault was delivered (a timed fault whose time
    came after the exit is not, nor a kill sent as the leg was ending by itself: its exit status says it
    did not die of the kill; such a fault is no reproducer); ``timed_out``: the leg hit its deadline and
    was killed; ``t_end``: ``time.monotonic_ns()`` when the exit was seen;
    ``fault_t``: ``time.monotonic_ns()`` when a timed fault was delivered (else ``None``).
    """

    returncode: int | None
    exit_signal: str | None
    injected: bool
    timed_out: bool
    t_end: int
    fault_t: int | None = None


def drive(proc: Any, spec: dict[str, Any], *, t0: float, timeout: float) -> LegOutcome:
    """Apply fault ``spec`` (a schedule entry) to the running leg ``proc`` and wait for its end.

    ``t0``: ``time.monotonic()`` at the leg's start (``after_ms`` counts from
    it); ``timeout``: seconds from now before the leg is declared hung, its
    tree killed and ``timed_out`` set.  An event kill is delivered by the
    agent's own IO seam (its environment carries ``FISKJ_IOSEAM_FAULT``);
    ``injected`` is then true when the agent died of SIGKILL.  On return the
    agent and every descendant are dead and reaped.
    """
    deadline = time.monotonic() + timeout
    kind = spec.get("kind", "none")
    injected = False
    timed_out = False
    fault_t = None
    if kind in ("kill", "suspend") and "after_ms" in spec:
        at = t0 + spec["after_ms"] / 1000.0
        if not wait_for_exit(proc, min(at, deadline) - time.monotonic()):
            if time.monotonic() >= deadline:
                timed_out = True
            elif kind == "kill":
                fault_t = time.monotonic_ns()
                kill_tree(proc)
                injected = True
            else:
                try:
                    fault_t = time.monotonic_ns()
                    os.kill(proc.pid, _SIGNALS[spec.get("signal", "SIGINT")])
                    injected = True
                except ProcessLookupError:
                    fault_t = None
    if not timed_out and not wait_for_exit(proc, deadline - time.monotonic()):
        timed_out = True
    if timed_out:
        kill_tree(proc)
    else:
        proc.wait()
        close_pidfd(proc)
        reap_group(proc.pid)  # tools orphaned by a self-kill (IO seam), if any
    t_end = time.monotonic_ns()
    rc = proc.returncode
    if kind == "kill" and injected and rc != -signal.SIGKILL:  # it had ended by itself: the kill hit no live leg
        injected, fault_t = False, None
    killed = rc is not None and rc < 0
    if killed and kind == "kill" and "event" in spec and -rc == signal.SIGKILL:
        injected = True
    return LegOutcome(returncode=None if killed else rc, exit_signal=signal_name(-rc) if killed else None,
                      injected=injected, timed_out=timed_out, t_end=t_end, fault_t=fault_t)


@dataclass
class LegPlan:
    """What one leg is, decided before it starts.

    ``index``: leg number; ``kind``: ``start`` or ``resume``; ``argv`` and
    ``env``: the whole command and environment; ``fault``: the leg's
    schedule entry (``{"kind": "none"}`` for none); ``workdir``: where the
    leg's ``leg-N.in/.out/.err`` files go; ``journal``: the journal path
    snapshotted after the leg; ``trace``: its IO-seam trace file (or
    ``None``); ``stdin``: bytes for its standard input (``None``:
    ``/dev/null``); ``timeout_s``: seconds before it is declared hung;
    ``detail``: extra facts for the leg's fault record; ``roots``: the
    directories an observed leg's operations are recorded under (the trial's
    state home); ``reading``: the subject's own reading command, run after
    the leg (:meth:`Subject.status_argv`; ``None``: the subject gives none);
    ``cwd``: its working directory (``""``: the harness's); ``mcp``: its MCP
    server set-up (:func:`open_mcp`), closed by :func:`run_leg` after it; ``share``: the trial's cwd slug
    when its reading may be shared with any reading of the same state (:meth:`LegStarter.read`), else ``None``;
    ``rival``: the leg is a race's rival, run while another leg is held (observed: a lock call of it that waits
    on a lock another process keeps ends it at once as hung, :func:`waits_on_kept_lock`).
    """

    index: int
    kind: str
    argv: list[str]
    env: dict[str, str]
    fault: dict[str, Any]
    workdir: Path
    journal: Path
    trace: Path | None
    stdin: bytes | None = None
    timeout_s: float = 60.0
    detail: dict[str, Any] = field(default_factory=dict)
    roots: tuple[str, ...] = ()
    reading: list[str] | None = None
    cwd: str = ""
    mcp: LegMcp | None = None
    share: str | None = None
    rival: bool = False


def run_leg(plan: LegPlan, starter: LegStarter,
            rival: Callable[[], Any] | None = None) -> tuple[Leg, LegOutcome]:
    """Run one leg to its end under its fault and record it; returns ``(leg, outcome)``.

    An observed leg's ``trace`` is built from what the observer saw
    (:func:`harness.observer.trace.ops_to_trace`), never from the subject;
    an unobserved one's is the subject's IO-seam trace.  Raises
    ``OSError``/``RuntimeError``/``ValueError`` only when the process
    cannot be started (a setup error); a misbehaving agent is recorded,
    never raised.  The leg's MCP set-up (``plan.mcp``) is closed when it ends.
    """
    try:
        return _run_leg(plan, starter, rival)
    finally:
        if plan.mcp is not None:
            plan.mcp.close()


def _run_leg(plan: LegPlan, starter: LegStarter, rival: Callable[[], Any] | None) -> tuple[Leg, LegOutcome]:
    out, err = plan.workdir / f"leg-{plan.index}.out", plan.workdir / f"leg-{plan.index}.err"
    stdin_path = None
    if plan.stdin is not None:
        stdin_path = plan.workdir / f"leg-{plan.index}.in"
        stdin_path.write_bytes(plan.stdin)
    leg = Leg(index=plan.index, kind=plan.kind, argv=plan.argv)
    before = journal_bytes(plan.journal)  # (a glob: the file the agent made, read again after the leg)
    starter.prepare()  # the fork server starts before the leg's clock
    t0 = time.monotonic()
    leg.t_start = time.monotonic_ns()
    log = plan.workdir / f"ops-{plan.index}.jsonl"
    hold = plan.fault.get("kind") == "hold"
    if hold and not starter.observe:
        raise ValueError("a hold fault (a race's sequence point) needs the outside observer")
    proc = starter.start(plan.argv, plan.env, stdin_path, out, err, log=log, roots=plan.roots,
                         faults=observer_faults(plan.fault, journal_glob(plan.journal, starter.subject.caps.journal.is_store))
                         if starter.observe else None,
                         control=hold, cwd=plan.cwd, announce_waits=plan.rival and starter.observe)
    leg.pid = proc.pid
    held = False
    waited = waits_on_kept_lock(proc, plan.timeout_s) if plan.rival and starter.observe else None
    if waited is not None:  # it can never end: the lock's keeper is held until it does
        kill_tree(proc)
    if hold:  # a race: this leg waits at its sequence point while the rival leg runs to its end
        held = _hold(proc, plan.timeout_s)
        if held and rival is not None:
            rival()
        if held:
            proc.release(int(plan.fault["at"]))
    outcome = drive(proc, plan.fault, t0=t0, timeout=plan.timeout_s)
    outcome.injected = outcome.injected or held
    outcome.timed_out = outcome.timed_out or waited is not None
    leg.t_end = outcome.t_end
    leg.exit_code = outcome.returncode
    leg.exit_signal = outcome.exit_signal
    leg.timed_out = outcome.timed_out
    leg.fault = history_fault(plan.fault, injected=outcome.injected)
    leg.fault.detail.update(plan.detail)
    if waited is not None:
        leg.fault.detail["waited_on_kept_lock"] = waited
    leg.journal = journal_bytes(plan.journal)
    if starter.observe:
        ops = proc.ops() if log.exists() else []
        leg.trace = ops_to_trace(ops)
        leg.lock_point = lock_point(ops) if hold else None  # lookups and reads are logged for a held leg only
    else:
        leg.trace = read_trace(plan.trace) if plan.trace is not None else []
    if plan.fault.get("kind") == "io_error":  # injected when a call of the leg failed with it
        leg.fault.injected = outcome.injected = any(ev.get("fault") for ev in leg.trace)
    leg.stdout = tail_text(out)
    leg.stderr = tail_text(err)
    if leg.exit_code is not None and (starter.subject.exits is not CONTRACT_EXITS or starter.subject.error_stdout):
        mapped = starter.subject.outcome(leg.exit_code, before, leg.journal, leg.stdout)
        if mapped != leg.exit_code:
            leg.raw_exit_code, leg.exit_code = leg.exit_code, mapped
    if plan.fault.get("kind") == "suspend" and "event" in plan.fault:  # sent when the trace shows its event
        action = event_action(plan.fault)
        hit = [ev.get("n", 0) for ev in leg.trace if action in str(ev.get("fault") or "").split(",")]
        leg.fault.injected = outcome.injected = bool(hit)
        if hit:
            leg.fault.detail["landed_after_event"] = min(hit)
            suspend_outcome(leg)
    if outcome.fault_t is not None and leg.fault.injected:
        landed(leg, outcome.fault_t)
    if plan.reading is not None and not outcome.timed_out \
            and start_or_resume(leg.journal, starter.subject.caps.journal.format) == "resume":
        # (a journal with no complete record holds nothing to read: I10 would not judge it)
        env = {k: v for k, v in plan.env.items() if k not in ("FISKJ_IOSEAM_TRACE", "FISKJ_IOSEAM_FAULT")}
        # (the journal too: a store on a server holds the run outside the trial's files)
        raw = starter.read(plan.reading, env, plan.workdir, str(plan.index),
                           state=None if plan.share is None
                           else (state_of(plan.workdir, plan.roots, plan.share), leg.journal))
        leg.reading = parse_reading(raw, starter.subject.status_fields, starter.subject.reading_format)
        if starter.subject.caps.journal.is_store:  # its reading may change its files (SQLite checkpoints on close)
            leg.journal = journal_bytes(plan.journal)  # the store as the next leg finds it
        elif journal_bytes(plan.journal) not in (None, leg.journal):
            leg.reading["error"] = "the journal changed while the subject was reading it (a process outlived its leg)"
    return leg, outcome
