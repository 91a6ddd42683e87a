"""I5, the reader's half: a subject's reader answers every mutated journal as docs/spec.md section 7 says.

Judged (docs/spec.md section 15, I5) on ``history.reader_checks``, one
:class:`~harness.history.model.ReaderCheck` per journal the tail family mutated: the mutation's label
(``expected``) against the answer of the subject's own reader (``answer``; ``via: status`` for its status
command).  Each wrong answer is a ``reader_answer`` violation; :mod:`harness.checkers.i5_readable` folds
them into the I5 verdict.
"""

from __future__ import annotations

from typing import Any

from harness.history.model import History

__all__ = ["answer_problem", "reader_violations"]


def _pair(value: Any) -> tuple[int, int] | None:
    return tuple(value) if value else None  # type: ignore[return-value]


def _span(seqs: tuple[int, ...]) -> str:
    """``seqs`` as ``a..b`` when consecutive, else comma-separated; ``(none)`` when empty."""
    if seqs and list(seqs) == list(range(seqs[0], seqs[0] + len(seqs))):
        return f"{seqs[0]}..{seqs[-1]}"
    return ",".join(map(str, seqs)) or "(none)"


def answer_problem(mutation: str, expected: dict[str, Any], answer: dict[str, Any]) -> str | None:
    """What is wrong with ``answer`` (the reader's) given ``expected`` (the label), or ``None`` when it is right.

    docs/spec.md section 7.  Both are JSON dicts as in
    :class:`~harness.history.model.ReaderCheck`; the reason starts with the
    ``mutation`` id.
    """
    want_kind, want_line = expected["kind"], expected.get("line")
    want_seqs, want_torn = tuple(expected.get("seqs") or ()), _pair(expected.get("torn"))
    kind, line, message = answer["kind"], answer.get("line"), answer.get("message", "")
    if answer.get("via") == "status":  # a status command: it read the journal (how many records) or refused it
        records = answer.get("records")
        if want_kind == "corrupt":
            if kind == "read":
                return (f"{mutation}: line {want_line} is corrupt (not the last line); the subject's status "
                        f"command read the journal anyway ({records if records is not None else '?'} records)")
            return None
        if kind != "read":
            return (f"{mutation}: expected {len(want_seqs)} records and torn tail {want_torn}; the subject's "
                    f"status command failed: {message}")
        if records is not None and records != len(want_seqs):
            return (f"{mutation}: expected {len(want_seqs)} records (seq {_span(want_seqs)}, torn tail "
                    f"{want_torn}); the subject's status command read {records}")
        return None
    seqs, torn, good_size = tuple(answer.get("seqs") or ()), _pair(answer.get("torn")), answer.get("good_size")
    if want_kind == "corrupt":
        if kind != "corrupt":
            got = f"{len(seqs)} records, torn tail {torn}" if kind == "read" else message
            return (f"{mutation}: line {want_line} is corrupt (not the last line) and must be an error naming line "
                    f"{want_line}; the reader answered {kind}: {got}")
        if line != want_line:
            return f"{mutation}: corruption reported at line {line}, expected line {want_line}"
        return None
    if kind != "read":
        return (f"{mutation}: expected {len(want_seqs)} records and torn tail {want_torn}; the reader raised "
                f"{kind} (line {line}): {message}")
    if seqs != want_seqs:
        return f"{mutation}: expected records seq {_span(want_seqs)}, the reader returned {_span(seqs)}"
    if torn != want_torn:
        return f"{mutation}: expected torn tail {want_torn}, the reader reported {torn}"
    if good_size is not None and good_size != expected.get("good_size"):
        return f"{mutation}: expected good_size {expected.get('good_size')}, the reader reported {good_size}"
    return None


def reader_violations(history: History) -> tuple[int, list[dict[str, Any]]]:
    """``(answers judged, violations)`` of ``history.reader_checks`` (docs/spec.md section 7), in order."""
    out = []
    for check in history.reader_checks:
        reason, exp = answer_problem(check.mutation, check.expected, check.answer), check.expected
        if reason is not None:  # the mutation's label as evidence (no bytes)
            mutation = {"id": check.mutation, "kind": check.kind, "size": check.size, "expect": exp["kind"],
                        "records": len(exp.get("seqs") or ()), "good_size": exp.get("good_size", 0),
                        "torn": list(exp["torn"]) if exp.get("torn") else None, "line": exp.get("line")}
            out.append({"kind": "reader_answer", "mutation": mutation, "reason": reason, "answer": dict(check.answer)})
    return len(history.reader_checks), out
