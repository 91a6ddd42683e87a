"""Tiered exploration of power-loss crash states: a cheap judgement of every state, a full resume of a sample.

A full resume (:func:`harness.families.power_loss.executor.explore_state`:
the agent run to its end, tools and model calls included) costs tens of
milliseconds a state; a state's own facts are judged in microseconds.  So
(docs/persistence-model.md "Tiered exploration"):

* **cheap tier**, every distinct crash state: the crash model's I4 on the
  state (:func:`~harness.checkers.i4_acknowledged.lost_acknowledged`,
  pure), and the subject's own recovery and reading of the state's journal,
  judged as I5 (:mod:`harness.checkers.i5_reader_answers`) against what
  fiskj's reader, the oracle of I5, reads in the same bytes
  (:func:`expected_reading`).  How the subject is asked (:func:`cheap_mode`):

  - ``recovery`` (a fiskj-based subject): :mod:`harness.families.power_loss.recovery_child`,
    forked with the subject's preload, opens each journal under the run
    lock, cuts a torn tail, closes it and reads it back; the answer must be
    the oracle's records with no torn tail left (a journal with no
    complete record, or a corrupt one, must be left as it is);
  - ``status`` (a profile with a ``[reading]`` command): the subject's
    status command reads each journal (no repair: the cut is judged only on
    the full resumes) and must read the oracle's number of records, or
    refuse a corrupt journal;
  - ``model`` (no reading command, a journal format the oracle cannot read,
    or ``--no-readings``): the crash model's I4 alone.

  Answers are asked once per distinct journal content (the recovery and the
  reading are functions of the journal's bytes).
* **full tier**, a sample (:func:`full_sample`): the first state of every
  distinct recovery outcome (:func:`outcome_key`: what a resume starts
  from), then a seeded draw of ``resumes`` more, at most ``cap``.

Nothing here builds a verdict: :func:`cheap_history` records the facts and
the checkers judge them (:func:`harness.checkers.check_all`).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import random
import tempfile
import time
from dataclasses import dataclass, field
from io import BufferedReader, BytesIO
from pathlib import Path
from typing import Any

from fiskj.paths import journal_path as fiskj_journal_path

from harness.checkers import VALID, Verdict, check_all
from harness.families.power_loss.crashstates import CrashState
from harness.history.journal_location import JournalLocation
from harness.history.model import CrashStateFacts, History, ReaderCheck
from harness.names import FISK_AI_V2

__all__ = ["CHEAP_CHECKED", "MODES", "Cheap", "journal_of", "expected_reading", "outcome_key", "full_sample",
           "cheap_mode", "cheap_limit", "cheap_answers", "cheap_history", "judge_cheap"]

#: Invariants the cheap tier judges (those of the scenario's ``[check]``).
CHEAP_CHECKED = ("I4", "I5")
#: How the cheap tier asks the subject (module docstring).
MODES = ("recovery", "status", "model")
_CHILD = "harness.families.power_loss.recovery_child"


def journal_of(state: CrashState, run_id: str, journal: JournalLocation = JournalLocation()) -> bytes | None:
    """The bytes of ``run_id``'s ``journal`` in ``state``, or ``None`` when the state has none."""
    for path, data in state.files.items():
        if journal.is_journal(path, run_id):
            return data
    return None


def expected_reading(data: bytes) -> dict[str, Any]:
    """What fiskj's reader (in this process: the oracle of I5) reads in journal bytes ``data``, as a
    :class:`~harness.history.model.ReaderCheck` label: ``kind`` ``clean``/``torn`` (``seqs``,
    ``good_size``, ``torn`` ``[offset, length]``), ``corrupt`` (``line``, ``offset``) or ``error``
    (another reader error: no label).  Pure."""
    from fiskj.errors import CorruptJournal, FiskjError
    from fiskj.reader import JournalReader

    reader = JournalReader(BufferedReader(BytesIO(data)))  # type: ignore[arg-type]
    try:
        seqs = [r.seq for r in reader]
    except CorruptJournal as exc:
        return {"kind": "corrupt", "seqs": [], "good_size": 0, "torn": None, "line": exc.line,
                "offset": getattr(exc, "offset", None)}
    except FiskjError as exc:
        return {"kind": "error", "seqs": [], "good_size": 0, "torn": None, "line": exc.line, "offset": None,
                "message": f"{type(exc).__name__}: {exc}"}
    torn = [reader.torn_tail.offset, reader.torn_tail.length] if reader.torn_tail else None
    return {"kind": "torn" if torn else "clean", "seqs": seqs, "good_size": reader.good_size, "torn": torn,
            "line": None, "offset": None}


def _recovered(data: bytes, fmt: str) -> tuple[Any, ...]:
    """What a correct recovery does with journal ``data``: ``("journal", bytes kept, whether it cuts a torn
    tail)``, or ``("corrupt", line)`` / ``("error", line)`` (it must refuse it)."""
    if fmt != FISK_AI_V2:  # a format the harness does not decode: complete lines are kept
        kept = data[:data.rfind(b"\n") + 1]
        return ("journal", kept, len(kept) < len(data))
    label = expected_reading(data)
    if label["kind"] in ("corrupt", "error"):
        return (label["kind"], label["line"])
    return ("journal", data[:label["good_size"]], label["torn"] is not None)


def outcome_key(state: CrashState, run_id: str, journal: JournalLocation = JournalLocation()) -> tuple:
    """The state's recovery outcome: what a resume starts from and does first (the journal a correct
    recovery leaves and whether it cuts a torn tail to get it, or the journal's absence with the
    directories that survived).  States with equal keys recover alike.  Pure."""
    data = journal_of(state, run_id, journal)
    if data is None:
        return ("absent", frozenset(state.dirs))
    return _recovered(data, journal.format)


def full_sample(states: list[CrashState], run_id: str, *, resumes: int, cap: int, seed: int,
                journal: JournalLocation = JournalLocation()) -> tuple[list[CrashState], int]:
    """The states that get a full resume, in (crash point, id) order, and how many distinct recovery
    outcomes ``states`` hold.  The first state of each outcome comes first; then ``resumes`` more, drawn
    with ``random.Random(f"power-loss-sample:{seed}")``; at most ``cap`` (0: no cap), outcomes spread
    evenly when they alone exceed it.  Pure and deterministic for the seed."""
    ordered = sorted(states, key=lambda s: (s.prefix_n, s.id))
    seen: set[tuple] = set()
    reps: list[CrashState] = []
    for s in ordered:
        k = outcome_key(s, run_id, journal)
        if k not in seen:
            seen.add(k)
            reps.append(s)
    taken = {s.id for s in reps}
    rest = [s for s in ordered if s.id not in taken]
    extra = random.Random(f"power-loss-sample:{seed}").sample(rest, min(resumes, len(rest)))
    if cap and len(reps) >= cap:
        chosen = [reps[i * len(reps) // cap] for i in range(cap)]
    else:
        chosen = (reps + extra)[:cap] if cap else reps + extra
    return sorted(chosen, key=lambda s: (s.prefix_n, s.id)), len(reps)


def cheap_mode(subject: Any, readings: bool = True) -> str:
    """How the cheap tier asks ``subject`` (:data:`MODES`): ``recovery`` for a fiskj-based subject,
    ``status`` for one with a status command (unless ``readings`` is off), else ``model``."""
    if subject.caps.fiskj_based:
        return "recovery"
    if readings and subject.caps.reading and subject.caps.decoded:
        return "status"
    return "model"


def cheap_limit(subject: Any) -> str | None:
    """The limit line of the cheap tier for ``subject`` (said before a campaign starts), or ``None``."""
    mode = cheap_mode(subject)
    if mode == "status":
        return ("power-loss crash states are judged cheaply through the subject's status command, a reading "
                "with no repair: the cut of a torn tail is judged only on the sampled full resumes")
    if mode == "model":
        return ("POWER LOSS: the subject has no reading command (a profile's [reading], docs/subject.md) the "
                "harness can ask about a fisk-ai-v2 journal: every crash state is judged cheaply for I4 by the "
                "crash model alone, and its recovery (I5) only on the sampled full resumes")
    return None


@dataclass
class Cheap:
    """The cheap judgement of a batch of states: per state its verdicts; ``asked``: distinct journals
    recovered or read by the subject; ``seconds``: wall time; ``mode``: :data:`MODES`; ``first``: the first
    violating state's history (``None`` when all hold)."""

    states: int = 0
    asked: int = 0
    seconds: float = 0.0
    mode: str = "model"
    violating: list[tuple[CrashState, list[Verdict]]] = field(default_factory=list)
    first: History | None = None
    last: History | None = None


def _expected(label: dict[str, Any], mode: str) -> dict[str, Any] | None:
    """What the subject's answer must be for a journal the oracle read as ``label``, or ``None`` (not asked)."""
    if label["kind"] == "error":
        return None
    if mode == "status" and label["kind"] != "corrupt" and not label["seqs"]:
        return None  # a journal with no record: a status command may say anything (no run)
    if mode == "recovery" and label["kind"] == "torn" and label["seqs"]:
        return {**label, "kind": "clean", "torn": None}  # the recovery cut the torn tail
    return dict(label)


def _recovery_answers(ctx: Any, journals: list[bytes], tmp: Path) -> list[dict[str, Any]]:
    """The recovery child's answers on ``journals`` (one child for all)."""
    runner, subject = ctx.runner, ctx.runner.subject
    folder = tmp / "stores"
    folder.mkdir(mode=0o700)
    for i, data in enumerate(journals):
        store = folder / f"{i:06d}"
        store.mkdir(mode=0o700)
        path = Path(fiskj_journal_path(str(store), ctx.run_id))  # fiskj's own store layout: a fiskj-based subject
        path.write_bytes(data)
        path.chmod(0o600)
    env = subject.env(base_url=runner.server.base_url, api_key="fiskj-powerloss-recovery", state_home=str(tmp),
                      ledger=str(tmp / "ledger.jsonl"), leg=0, trace=None)
    raw = runner.legs.run_module(_CHILD, [str(folder), ctx.run_id], env, tmp, "recovery",
                                 timeout_s=max(60.0, len(journals) * 0.5))
    rows: dict[int, dict[str, Any]] = {}
    for line in raw["stdout"].splitlines():
        try:
            row = json.loads(line)
            rows[int(row["file"])] = {**row["answer"], "recovery": row["recovery"]}
        except (ValueError, KeyError, TypeError):
            continue
    missing = {"kind": "error", "line": None,
               "message": f"no answer from the recovery child (exit {raw['exit_code']}): {raw['stderr'][-300:]}"}
    return [rows.get(i, missing) for i in range(len(journals))]


def _status_answer(ctx: Any, data: bytes, tmp: Path) -> dict[str, Any]:
    """The subject's status command's reading of ``data`` laid as its journal in a fresh store under ``tmp``."""
    from harness.history.readers import parse_reading
    from harness.subject.contract import RunConfig

    runner, subject = ctx.runner, ctx.runner.subject
    tmp.mkdir(mode=0o700)
    state, home = tmp / "state", tmp / "home"
    state.mkdir(mode=0o700)
    home.mkdir(mode=0o700)
    wl = ctx.workload
    cfg = RunConfig(run_id=ctx.run_id, model=wl.model, base_url=runner.server.base_url, tools_file=ctx.tools_file,
                    max_tokens=wl.max_tokens, max_iterations=wl.max_iterations, prompt=wl.prompt, chat=wl.chat)
    where = {"state_home": str(state), "home": str(home), "trial_dir": str(tmp)}
    journal = subject.journal_path(cfg, **where)
    journal.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    journal.write_bytes(data)
    journal.chmod(0o600)
    if subject.files:
        subject.write_files(cfg, **where)
    argv = subject.status_argv(cfg, **where)
    env = subject.env(base_url=runner.server.base_url, api_key="fiskj-powerloss-reading", state_home=str(state),
                      ledger=str(tmp / "ledger.jsonl"), leg=0, trace=None,
                      home=str(home) if subject.home else None)
    reading = parse_reading(runner.legs.read(argv, env, tmp, "powerloss"), subject.status_fields)
    if reading["error"]:
        return {"kind": "error", "via": "status", "line": None,
                "message": f"{reading['error']}; stderr: {str(reading.get('stderr', ''))[-200:]}"}
    return {"kind": "read", "via": "status", "records": reading.get("records")}


def cheap_answers(ctx: Any, journals: list[bytes], mode: str, tmp: Path) -> list[dict[str, Any]]:
    """The subject's answers on each of ``journals`` (distinct bytes) in ``mode`` (``recovery`` or ``status``);
    never raises for the subject's behaviour."""
    if not journals:
        return []
    if mode == "recovery":
        return _recovery_answers(ctx, journals, tmp)
    jobs = min(len(journals), os.cpu_count() or 1)
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(lambda ij: _status_answer(ctx, ij[1], tmp / f"s{ij[0]:06d}"), enumerate(journals)))


def cheap_history(scenario: str, run_id: str, state: CrashState, check: ReaderCheck | None,
                  journal: JournalLocation = JournalLocation()) -> History:
    """The facts of one state's cheap judgement: the state (I4) and, when the subject was asked, its answer
    next to the oracle's label (I5); no legs.  Its schedule replays it alone."""
    return History(scenario=scenario, seed=0,
                   schedule=[{"kind": "power_loss", "state": state.id, "prefix_n": state.prefix_n, "explore": False}],
                   run_id=run_id, crash_state=CrashStateFacts.of(state), reader_checks=[check] if check else [],
                   options={"family": "power_loss", "tier": "cheap"}, journal_format=journal.format,
                   journal_template=journal.template)


def judge_cheap(ctx: Any, states: list[CrashState], invariants: tuple[str, ...], *, mode: str,
                tmp_root: str | None = None) -> Cheap:
    """Judge ``states`` cheaply (module docstring) with the checkers; ``invariants``: those judged (of
    :data:`CHEAP_CHECKED`); ``tmp_root``: where the stores the subject is asked about are laid.  Returns a
    :class:`Cheap` with the verdicts of every state not judged valid, the first such state's history and
    the last state's (the history of a batch that holds).

    The subject is asked (a recovery child, or status commands) from this thread, which must be the one
    whose fork server legs are forked from, while a worker thread judges I4 on every state; then I5 on
    the answers."""
    t0 = time.monotonic()
    journal = ctx.runner.subject.caps.journal
    name = ctx.scenario.name
    out = Cheap(states=len(states), mode=mode)
    ask = mode != "model" and "I5" in invariants
    journals = {s.id: journal_of(s, ctx.run_id, journal) for s in states} if ask else {}
    labels: dict[bytes, dict[str, Any] | None] = {}
    if mode == "status":  # a process per journal: ask only those with an answer to judge
        for data in journals.values():
            if data is not None and data not in labels:
                labels[data] = _expected(expected_reading(data), mode)
        asked = [d for d, e in labels.items() if e is not None]
    else:
        asked = list(dict.fromkeys(d for d in journals.values() if d is not None))
    out.asked = len(asked)
    def judge_states() -> tuple[list[History], list[list[Verdict]]]:  # I4 on each state (pure)
        histories = [cheap_history(name, ctx.run_id, s, None, journal) for s in states]
        return histories, [check_all(h, [i for i in invariants if i != "I5"]) for h in histories]

    # The subject is asked from this thread (its fork server is this thread's) while a worker judges I4.
    with tempfile.TemporaryDirectory(prefix="fiskj-powerloss-cheap-", dir=tmp_root) as tmp, \
            concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(judge_states)
        answers = dict(zip(asked, cheap_answers(ctx, asked, mode, Path(tmp)))) if asked else {}
        histories, verdicts = pending.result()
    for s, history, found in zip(states, histories, verdicts):
        data = journals.get(s.id)
        if "I5" in invariants:
            if data is not None and data not in labels:
                labels[data] = _expected(expected_reading(data), mode)
            expected = labels.get(data) if data is not None else None
            if expected is not None and data in answers:
                history.reader_checks = [ReaderCheck(s.id, "power_loss", len(data), expected, answers[data])]
            found = found + check_all(history, ["I5"])
        if any(v.status != VALID for v in found):  # invalid, or undecided: never hidden in a batch
            out.violating.append((s, found))
            if out.first is None:
                out.first = history
    out.last = histories[-1] if histories else None
    out.seconds = time.monotonic() - t0
    return out
