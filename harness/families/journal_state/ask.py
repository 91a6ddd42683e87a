"""The cheap question of the journal-state engine: what does the subject make of these journal bytes?

One way to ask (docs/persistence-model.md "Tiered exploration", the cheap tier), whatever generated the bytes
and whatever the subject (:func:`cheap_mode`, :data:`MODES`): ``recovery``, one child forked with the subject's
preload (:mod:`harness.families.journal_state.reader_child`) answers about every journal, each laid in a fresh
run store; ``status``, the subject's own status command reads each, laid alone (no repair); ``model``, the
subject is not asked.  The family chooses the question its labels answer (:data:`QUESTIONS`): ``read`` (the tail
family's: what the reader reads in the bytes) or ``recovery`` (the power-loss family's: what the journal holds
after the subject's own recovery); a status command answers ``read`` only.  Every distinct journal is asked
once; :func:`reader_check` records an answer next to its label (docs/spec.md section 7) as a
:class:`~harness.history.model.ReaderCheck`, which I5 judges (:mod:`harness.checkers.i5_reader_answers`).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
from io import BufferedReader, BytesIO
from pathlib import Path
from typing import Any, Iterable, Mapping

from fiskj.errors import CorruptJournal, FiskjError
from fiskj.paths import journal_path as fiskj_journal_path
from fiskj.reader import JournalReader

from harness.families.journal_state.executor import Context, lay
from harness.families.journal_state.reader_child import Answer
from harness.history.model import ReaderCheck
from harness.history.readers import parse_reading

__all__ = ["MODES", "QUESTIONS", "cheap_mode", "expected_reading", "expected", "ask", "answers",
           "reader_check"]

#: How the subject is asked (module docstring).
MODES = ("recovery", "status", "model")
#: What a label says the answer must be: the reading of the bytes, or the journal after the recovery.
QUESTIONS = ("read", "recovery")
_CHILD = "harness.families.journal_state.reader_child"


def cheap_mode(subject: Any, readings: bool = True) -> str:
    """How ``subject`` is asked (:data:`MODES`): ``recovery`` for a fiskj-based subject, ``status`` for one
    with a status command and a fisk-ai-v2 journal (unless ``readings`` is off), else ``model``."""
    caps = subject.caps
    if caps.fiskj_based:
        return "recovery"
    if readings and caps.reading and caps.decoded:
        return "status"
    return "model"


def expected_reading(data: bytes) -> dict[str, Any]:
    """What fiskj's reader (in this process: the oracle of I5) reads in journal bytes ``data``, as a
    :class:`~harness.history.model.ReaderCheck` label: ``kind`` ``clean``/``torn`` (``seqs``,
    ``good_size``, ``torn`` ``[offset, length]``), ``corrupt`` (``line``, ``offset``) or ``error``
    (another reader error: no label).  Pure (docs/spec.md section 7)."""
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


def expected(label: dict[str, Any], mode: str, question: str) -> dict[str, Any] | None:
    """What the subject asked in ``mode`` must answer about a journal labelled ``label`` for ``question``,
    or ``None`` when there is nothing to judge: an ``error`` label, or a status command on a journal with
    no complete record (it may say anything: no run).  After a recovery a torn tail behind a record is
    gone (docs/spec.md section 7: the resume cuts it before it appends)."""
    if label["kind"] == "error":
        return None
    if mode == "status" and label["kind"] != "corrupt" and not label["seqs"]:
        return None
    if mode == "recovery" and question == "recovery" and label["kind"] == "torn" and label["seqs"]:
        return {**label, "kind": "clean", "torn": None}
    return dict(label)


def _child_answers(ctx: Context, journals: list[bytes], question: str, tmp: Path) -> list[Answer]:
    """The forked reader child's answers to ``question`` on ``journals`` (one child for all).  Each journal is
    laid alone in a fresh run store (all fiskj's store needs: a folder holding the journal, one ``mkdir``)."""
    runner = ctx.runner
    folder = tmp / "stores"
    folder.mkdir(mode=0o700)
    for i, data in enumerate(journals):
        store = folder / f"{i:06d}"
        store.mkdir(mode=0o700)
        path = Path(fiskj_journal_path(str(store), ctx.run_id))  # fiskj's own store layout: a fiskj-based subject
        path.write_bytes(data)
        path.chmod(0o600)
    env = ctx.subject.env(base_url=runner.server.base_url, api_key="fiskj-journal-state", state_home=str(tmp),
                          ledger=str(tmp / "ledger.jsonl"), leg=0, trace=None)
    raw = runner.legs.run_module(_CHILD, [str(folder), ctx.run_id, question], env, tmp, "reader",
                                 timeout_s=max(60.0, len(journals) * 0.5))
    rows: dict[int, Answer] = {}
    for line in raw["stdout"].splitlines():
        try:
            row = json.loads(line)
            rows[int(row["file"])] = Answer.from_json(row["answer"])
        except (ValueError, KeyError, TypeError):
            continue
    missing = Answer("error", message=f"no answer from the reader child (exit {raw['exit_code']}): "
                                      f"{raw['stderr'][-300:]}")
    return [rows.get(i, missing) for i in range(len(journals))]


def _status_answer(ctx: Context, data: bytes, tmp: Path) -> Answer:
    """The subject's status command's reading of ``data`` laid as its journal in a fresh store in ``tmp``."""
    runner, subject = ctx.runner, ctx.subject
    where = lay(ctx, tmp, journal=data)
    argv = subject.status_argv(ctx.config, **where)
    assert argv is not None, "a status answer needs a subject with a status command (cheap_mode 'status')"
    env = subject.env(base_url=runner.server.base_url, api_key="fiskj-journal-state", state_home=where["state_home"],
                      ledger=str(tmp / "ledger.jsonl"), leg=0, trace=None, home=where["home"] or None)
    reading = parse_reading(runner.legs.read(argv, env, tmp, "state"), subject.status_fields,
                            subject.reading_format)
    if reading["error"]:
        return Answer("error", via="status",
                      message=f"{reading['error']}; stderr: {str(reading.get('stderr', ''))[-200:]}")
    return Answer("read", via="status", records=reading.get("records"))


def ask(ctx: Context, journals: list[bytes], mode: str, question: str, tmp: Path) -> list[Answer]:
    """The subject's answers to ``question`` (:data:`QUESTIONS`) on each of ``journals`` (distinct bytes),
    asked in ``mode`` (``recovery`` or ``status``, :func:`cheap_mode`; a status command answers ``read``)
    in stores laid under ``tmp`` (an empty folder); never raises for the subject's behaviour.  Raises
    ``ValueError`` for mode ``model`` (there is no one to ask) or a question not in :data:`QUESTIONS`."""
    if mode not in ("recovery", "status"):
        raise ValueError(f"journal states are asked in mode 'recovery' or 'status', not {mode!r}")
    if question not in QUESTIONS:
        raise ValueError(f"a journal state is asked one of {QUESTIONS}, not {question!r}")
    if not journals:
        return []
    if mode == "recovery":
        return _child_answers(ctx, journals, question, tmp)
    jobs = min(len(journals), os.cpu_count() or 1)
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(lambda ij: _status_answer(ctx, ij[1], tmp / f"s{ij[0]:06d}"), enumerate(journals)))


def answers(ctx: Context, journals: Iterable[bytes], mode: str, question: str, tmp: Path,
            labels: Mapping[bytes, dict[str, Any]] | None = None) -> dict[bytes, Answer]:
    """The subject's answers to ``question`` on each distinct journal of ``journals``, asked in ``mode`` in
    stores laid under ``tmp``; ``{}`` in mode ``model``.  ``labels`` (bytes -> label), when given: only the
    journals with something to judge (:func:`expected`) are asked (worth it for a status command, a
    process a journal; a forked reader answers a whole batch at once).  Never raises for the subject's
    behaviour."""
    if mode == "model":
        return {}
    wanted = [data for data in dict.fromkeys(journals)
              if labels is None or expected(labels[data], mode, question) is not None]
    return dict(zip(wanted, ask(ctx, wanted, mode, question, tmp)))


def reader_check(name: str, kind: str, size: int, label: dict[str, Any], answer: Answer | None, mode: str,
                 question: str) -> ReaderCheck | None:
    """The fact of one asked journal (``name``, ``kind``, ``size`` bytes): the ``answer`` to ``question``
    next to what it must be (:func:`expected`), or ``None`` when there is nothing to judge (not asked, or
    no expectation)."""
    want = expected(label, mode, question)
    if want is None or answer is None:
        return None
    return ReaderCheck(name, kind, size, want, answer.to_json())
