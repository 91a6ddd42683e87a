"""Reading what a leg left behind into history facts: traces, the effects ledger, the journal's fold, a
reading; no reader raises for bad content (docs/history.md "Reading a leg's files")."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fiskj.errors import FiskjError, StoreIOError, StreamRefused

from harness.errors import SetupError
from fiskj.reader import read_state

from harness.history.model import Effect
from harness.names import FISK_AI_V2

__all__ = ["read_trace", "read_ledger", "read_probes", "write_ledger", "fold_journal", "tail_text", "parse_reading", "KEEP_OUTPUT"]

#: Characters of a leg's stdout/stderr kept as evidence.
KEEP_OUTPUT = 4000
#: Characters of a reading's output kept in the history (the parsed fields are kept whole).
READING_KEEP = 400


def _read(path: str | os.PathLike[str]) -> bytes:
    """The file's bytes; ``b""`` when it does not exist."""
    try:
        return Path(path).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return b""


def read_trace(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Parse an IO-seam trace (JSON lines, docs/ioseam.md); a torn or bad line ends it.  Missing file: ``[]``."""
    events = []
    for line in _read(path).split(b"\n"):
        if not line:
            continue
        try:
            events.append(json.loads(line))
        except ValueError:
            break
    return events


def read_ledger(path: str | os.PathLike[str]) -> tuple[list[Effect], list[str]]:
    """Parse the effects ledger into ``(effects, notes)``; a line that does not parse is named in notes."""
    effects, notes = [], []
    for number, line in enumerate(_read(path).split(b"\n"), start=1):
        if not line:
            continue
        try:
            raw = json.loads(line)
            effects.append(Effect(tool_use_id=str(raw["tool_use_id"]), attempt=int(raw["attempt"]),
                                  pid=int(raw["pid"]), t=int(raw["t"]), leg=int(raw.get("leg", -1)),
                                  tool=str(raw.get("tool", ""))))
        except (ValueError, KeyError, TypeError) as exc:
            notes.append(f"ledger line {number} unparsable ({exc}): {line[:80]!r}")
    return effects, notes


def read_probes(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The code probes a trial's legs reached: ``[{"leg": int, "probe": str}]`` in file order (missing
    file: none; a malformed line is skipped)."""
    hits = []
    for line in _read(path).decode("utf-8", "replace").splitlines():
        leg, _, name = line.partition(" ")
        if name and leg.lstrip("-").isdigit():
            hits.append({"leg": int(leg), "probe": name})
    return hits


def write_ledger(path: str | os.PathLike[str], effects: list[Effect]) -> None:
    """Write ``effects`` as a ledger file (one JSON line each), the form :func:`read_ledger` reads."""
    with open(path, "w", encoding="utf-8") as f:
        for e in effects:
            f.write(json.dumps(asdict(e)) + "\n")


def store_journal(path: str | os.PathLike[str]) -> bytes | None:
    """A ``[journal] path`` of ``{store_url}#{run_id}`` (a JetStream store; pathlib made ``nats://`` ``nats:/``):
    the run's records as the file journal's lines, in seq order, as the stream's leader serves them
    (:meth:`fiskj.jetstream.JetStreamStore.raw_records` ``from_leader``: a subject it lists but holds nothing of is left out;
    ``None``: no run, its meta record absent, or not such a path).
    Raises :class:`SetupError` when the store does not answer (nothing is known of the run)."""
    text = str(path)
    if not text.startswith("nats:"):
        return None
    from fiskj.cli_common import open_store

    url, _, run_id = text.replace("nats:/", "nats://", 1).replace("nats:///", "nats://", 1).rpartition("#")
    try:
        for attempt in range(4):  # a cluster electing a leader after a fault: up to 4 binds of 5 s
            try:
                store = open_store(url)
                break
            except StreamRefused as exc:  # the stream itself is gone (a power loss took its definition): no run
                if exc.context.get("field") == "stream":
                    return None
                raise
            except StoreIOError:
                if attempt == 3:
                    raise
        try:
            records = store.raw_records(run_id, from_leader=True)  # stable reads of a damaged replica's stream
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 - the store did not answer: nothing is known of the run
        raise SetupError(f"cannot read run {run_id} from {url}: {type(exc).__name__}: {exc}") from None
    if not any(seq == 1 for seq, _ in records):  # no meta record: no run (a deleted run's stray records too)
        return None
    return b"".join(body + b"\n" for _, body in records)


def fold_journal(path: str | os.PathLike[str], fmt: str = FISK_AI_V2) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Fold the journal at ``path`` with fiskj: ``(state_json, None)`` or ``(None, error_json)``.

    ``error_json`` is ``FiskjError.to_json()`` (kind ``RunNotFound`` for no
    file); a format other than ``fisk-ai-v2`` is not folded, ``(None, None)``.
    Never raises for a bad journal.
    """
    p = Path(path)
    data = store_journal(p)
    if data is None and not p.exists():
        return None, {"kind": "RunNotFound", "message": f"no journal at {p}", "path": str(p)}
    if fmt != FISK_AI_V2:
        return None, None
    try:
        return read_state(p if data is None else data).to_json(), None
    except FiskjError as exc:
        return None, exc.to_json()
    except Exception as exc:  # a fold that crashes is evidence, never a pass
        return None, {"kind": type(exc).__name__, "message": str(exc), "path": str(p), "crash": True}


def tail_text(path: Path, keep: int = KEEP_OUTPUT) -> str:
    """The last ``keep`` characters of a leg's output file (``...`` marks a cut); missing file: ``""``."""
    text = _read(path).decode("utf-8", "replace")
    return text if len(text) <= keep else "..." + text[-keep:]


def _dotted(obj: Any, path: str) -> tuple[bool, Any]:
    """``(found, value)`` of the dotted ``path`` (``"pending.unanswered"``) in JSON ``obj``; a null on the way
    is found and null (``pending: null`` means no pending batch)."""
    for part in path.split("."):
        if obj is None:
            return True, None
        if not isinstance(obj, dict) or part not in obj:
            return False, None
        obj = obj[part]
    return True, obj


def parse_reading(raw: dict[str, Any], fields: tuple[tuple[str, str], ...], fmt: str = "json") -> dict[str, Any]:
    """The subject's own reading of a journal from its status command's output (docs/history.md).

    ``raw``: what :meth:`harness.runner.starter.LegStarter.read` returned;
    ``fields``: ``status``, ``pending``, ``records`` (an opaque store's: ``status``, ``tool_results``,
    ``answer``) -> dotted paths into the JSON it printed (``fmt`` ``"json"``), or -> regular expressions
    whose group ``value`` takes the field from its text (``fmt`` ``"text"``: the first match, every match for
    ``pending`` and ``tool_results``; docs/subject.md "Subject profiles").  Returns ``raw`` (``stdout`` cut to
    :data:`READING_KEEP`) with each field (``None`` when not given; an opaque store's ``status`` null: no
    such run), ``given`` (the fields found) and ``error`` (``None``, or why the reading is unusable).  Never raises.
    """
    text = str(raw.get("stdout", "")).strip()
    out: dict[str, Any] = {**raw, "stdout": text[-READING_KEEP:], **{name: None for name, _ in fields},
                           "status": None, "pending": None, "records": None, "given": [], "error": None}
    out["error"] = _unusable(raw)
    doc, where = None, "field"
    if out["error"] is None and fmt == "text":
        doc, where = _matched(text, fields), "line matching"
    elif out["error"] is None:
        doc, out["error"] = _printed_object(text)
    ids = lambda v: isinstance(v, list) and all(isinstance(i, str) for i in v)  # noqa: E731
    for name, path in fields if doc is not None else ():
        found, value = (path in doc, doc.get(path)) if fmt == "text" else _dotted(doc, path)
        ok = {"status": isinstance(value, str) or (value is None and "tool_results" in dict(fields)),
              "pending": value is None or ids(value), "tool_results": value is None or ids(value),
              "answer": value is None or isinstance(value, str),
              "records": isinstance(value, int) and not isinstance(value, bool)}.get(name, True)
        if not found and name == "status":
            out["error"] = f"the status command's output has no {where} {path!r}"
        elif found and not ok:
            out["error"] = f"the status command's {where} {path!r} ({name}) is {value!r}"
        elif found:
            out[name] = value
            out["given"].append(name)
    return out


#: Text readings: the fields read from every match (a list), and those read as a whole number.
_TEXT_LISTS, _TEXT_NUMBERS = ("pending", "tool_results"), ("records",)


def _matched(text: str, fields: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """pattern -> the value its group ``value`` takes in ``text`` (lines matched with ``re.MULTILINE``): every
    match's for a list field, else the first match's (an integer for a number field); absent: no match."""
    doc: dict[str, Any] = {}
    for name, pattern in fields:
        if name in _TEXT_LISTS:
            doc[pattern] = [m.group("value") for m in re.finditer(pattern, text, re.MULTILINE)]
        elif m := re.search(pattern, text, re.MULTILINE):
            value = m.group("value")
            doc[pattern] = int(value) if name in _TEXT_NUMBERS and value.isdigit() else value
    return doc


def _unusable(raw: dict[str, Any]) -> str | None:
    """Why a status command's run gives no reading at all (it hung, printed too much, failed), else ``None``."""
    if raw.get("timed_out"):
        return "the status command hung (killed)"
    if raw.get("over_limit"):
        return f"the status command printed more than {raw['over_limit']} bytes, more than any reading needs"
    if raw.get("exit_code") != 0:
        return f"the status command exited {raw.get('exit_code')}"
    return None


def _printed_object(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object a status command printed (its whole output, else its last line), or why there is none."""
    for printed in (text, text.splitlines()[-1] if text else ""):
        try:
            doc = json.loads(printed)
        except ValueError:
            continue
        if isinstance(doc, dict):
            return doc, None
        return None, f"the status command printed {type(doc).__name__}, not a JSON object"
    return None, f"the status command printed no JSON object (whole or on its last line): {text[-200:]!r}"
