"""How an uninterrupted run must end, read from its history (pure: no IO; docs/spec.md section 15, I6).

The reference run of a scenario (the same workload, no fault) is what every
trial is compared with, so it must end the way its workload says: exit 0
with a ``completed`` run; for a chat workload, exit 3 with ``suspended`` at
the end of its input; exit 1 with ``budget`` or ``max_iterations`` for a
workload whose token budget or iteration cap ends it; exit 1 with ``error`` for a
``final_stop`` workload, whose last reply is cut off by ``max_tokens`` or
refused, and never ``completed`` (docs/spec.md section 12, rule 6: the
cut-off reply's tools never run, :func:`cut_off_tool_runs`).  The run's status is
its journal's fold (``history.final_state``); a journal the harness does not
decode (``jsonl``: docs/subject.md "Journal formats") is judged by the exit
alone.  Used by the runner, to know whether a reference can be compared
with, and by I6, which judges the uninterrupted run as a trial.
"""

from __future__ import annotations

from typing import Any

from harness.history.model import History
from harness.names import CUT_STOPS, EXIT_COMPLETED, EXIT_ERROR, EXIT_SUSPENDED, WORKLOAD_MAX_TOKENS

__all__ = ["BUDGET_ENDS", "ANSWER_TAIL", "uninterrupted_end", "answer_text", "printed_answer", "completing_leg",
           "cut_off_tool_runs"]

#: Terminal reasons that end a run on a budget: an uninterrupted run may end so (exit 1).
BUDGET_ENDS = ("budget", "max_iterations")


#: Characters of the end of a final answer looked for in a leg's output (a leg's output is kept as its tail).
ANSWER_TAIL = 200


def answer_text(blocks: list[dict[str, Any]]) -> str:
    """The text of a model reply's ``text`` blocks, joined (its final answer when it asked for no tool)."""
    return "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"
                   and isinstance(b.get("text"), str))


def completing_leg(history: History) -> Any:
    """The last leg that exited as a completed run (exit 0), or ``None``."""
    done = [leg for leg in sorted(history.legs, key=lambda leg: leg.index) if leg.exit_code == EXIT_COMPLETED]
    return done[-1] if done else None


def printed_answer(history: History) -> str:
    """The end (at most :data:`ANSWER_TAIL` characters) of an uninterrupted run's final answer when the leg
    that completed it printed the answer on standard output, else ``""`` (a subject that does not print its
    answer, or a chat run, which prints one per segment)."""
    if not history.model_calls or (history.options.get("workload") or {}).get("chat_followups"):
        return ""
    last = max(history.model_calls, key=lambda c: c.index)
    text = answer_text(last.reply).strip()[-ANSWER_TAIL:]
    leg = completing_leg(history)
    return text if text and leg is not None and text in (leg.stdout or "") else ""


def cut_off_tool_runs(history: History) -> list[dict[str, Any]]:
    """The tool runs of ``history`` that must never have happened: each effect whose tool_use id a reply with a
    :data:`harness.names.CUT_STOPS` stop reason asked for (docs/spec.md section 12, rule 6: a reply cut off by
    ``max_tokens`` or refused ends the run with error, and its tool_use blocks are never run, on the first
    leg or on any resume).  A row per run: ``tool_use_id``, ``leg``, ``attempt``, the asking call's ``call``
    index and ``stop``; ``[]`` when none (or when the history predates ``ModelCall.stop``, or the subject
    promises ``cut_off_turn = "continues"``)."""
    if history.promises.cut_off_turn == "continues":
        return []
    cut = {b.get("id"): call for call in history.model_calls if call.stop in CUT_STOPS
           for b in call.reply if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("id")}
    return [{"tool_use_id": e.tool_use_id, "leg": e.leg, "attempt": e.attempt, "call": cut[e.tool_use_id].index,
             "stop": cut[e.tool_use_id].stop}
            for e in sorted(history.effects, key=lambda e: (e.t, e.attempt)) if e.tool_use_id in cut]


def uninterrupted_end(history: History) -> str | None:
    """``None`` when ``history`` (an uninterrupted run: no fault) ended as its workload says, else why not.

    Reads ``history.options["workload"]`` (the workload spec as a dict: ``chat_followups``,
    ``max_iterations``, ``max_tokens``), the last leg's exit and the folded ``final_state``.
    """
    legs = sorted(history.legs, key=lambda leg: leg.index)
    last = legs[-1] if legs else None
    if last is None:
        return "no leg ran"
    spec: dict[str, Any] = history.options.get("workload") or {}
    status = (history.final_state or {}).get("status")
    if not history.journal.decoded:  # not folded: its exit says how it ended
        capped = bool(spec.get("max_iterations")) or spec.get("max_tokens", WORKLOAD_MAX_TOKENS) != WORKLOAD_MAX_TOKENS
        status = {EXIT_COMPLETED: "completed", EXIT_SUSPENDED: "suspended",
                  EXIT_ERROR: BUDGET_ENDS[0] if capped else None}.get(last.exit_code)  # type: ignore[arg-type]
    chat_end = bool(spec.get("chat_followups")) and status == "suspended"  # the end of its input
    goes_on = not spec.get("final_stop") or history.promises.cut_off_turn == "continues"  # docs/spec.md promises
    if (last.exit_code == EXIT_COMPLETED and status == "completed" and goes_on) \
            or (last.exit_code == EXIT_SUSPENDED and chat_end) \
            or (last.exit_code == EXIT_ERROR and status in BUDGET_ENDS) \
            or (last.exit_code == EXIT_ERROR and spec.get("final_stop")
                and (status == "error" or not history.journal.decoded)):
        return None
    how = f"exit {last.exit_code}" if last.exit_signal is None else f"signal {last.exit_signal}"
    folded = (f"folded status {status!r}" if history.journal.decoded and history.final_state
              else f"journal unreadable ({(history.final_error or {}).get('message', 'no journal')})"
              if history.journal.decoded else f"journal format {history.journal.format}")
    return f"the uninterrupted run did not end as its workload says ({how}; {folded})"
