"""I11 the run is faithful to its workload: docs/spec.md section 15, I11 (the rules, how it is judged, the violation
kinds), judged on the last leg's journal against ``history.model_calls`` and the workload's limits in
``history.options``.  What is not judged is valid with ``checked: 0`` and ``not_judged``.
"""

from __future__ import annotations

from typing import Any

from fiskj.records import AssistantRecord, TerminalRecord, ToolResultRecord

from harness.checkers._common import legs_in_order
from harness.checkers.journal_view import JournalView
from harness.checkers.verdict import INVALID, VALID, make
from harness.history.ending import answer_text
from harness.history.model import History
from harness.names import CUT_STOPS, WORKLOAD_MAX_TOKENS

#: (record field, usage key) pairs: what an assistant record journals of a reply's usage (docs/spec.md section 4).
USAGE = (("in_tokens", "input_tokens"), ("out_tokens", "output_tokens"),
         ("cache_read_tokens", "cache_read_input_tokens"), ("cache_create_tokens", "cache_creation_input_tokens"))
#: The terminal reasons whose turn the workload decides.
DECIDED = ("completed", "budget", "max_iterations")


def _key(blocks: Any) -> tuple[tuple[str, ...], str]:
    """What identifies a reply in the journal: its tool_use ids and its text."""
    blocks = [b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else \
        [{"type": "text", "text": blocks}] if isinstance(blocks, str) else []
    return tuple(str(b.get("id")) for b in blocks if b.get("type") == "tool_use"), answer_text(blocks)


def _tools(rec: AssistantRecord) -> list[str]:
    return list(_key(rec.message.get("content"))[0])


def end_turn(turns: list[tuple[int, str | None, bool]], max_tokens: int, cap: float, chat: bool,
             cut_ends: bool = True) -> tuple[str | None, int, int]:
    """Where a run whose replies are ``turns`` (``(tokens, stop_reason, asks_for_tools)`` in journal order) must
    end: ``(reason, index of its last reply, tokens spent by then)``; reason ``None`` when the replies end
    before the workload's end.  The rules of docs/spec.md section 15, I11; ``cut_ends`` false: a reply cut off by
    ``max_tokens`` or refused ends nothing (the subject promises ``cut_off_turn = "continues"``)."""
    spent = 0
    for i in range(len(turns) + 1):
        if i >= cap:
            return "max_iterations", i - 1, spent
        if i == len(turns):
            return None, i - 1, spent
        tokens, stop, tools = turns[i]
        spent += tokens
        if stop in CUT_STOPS and cut_ends:
            return "error", i, spent
        if not tools and stop != "pause_turn":
            if not chat:
                return "completed", i, spent
        elif spent > max_tokens:
            return "budget", i, spent
    raise AssertionError("unreachable")


def _limits(history: History) -> list[tuple[int, float]]:
    """The (budget, cap) pairs the run may have had: the workload's, and with drift the forced legs' (+ 1)."""
    spec = history.options.get("workload") or {}
    turns = history.options.get("script_turns")
    budget = int(spec.get("max_tokens") or WORKLOAD_MAX_TOKENS)
    cap: float = int(spec.get("max_iterations") or 0) or (turns + 5 if isinstance(turns, int) else float("inf"))
    drift = history.options.get("drift") or spec.get("drift") or []
    out = [(budget, cap)]
    if "max_tokens" in drift or "max_iterations" in drift:
        out.append((budget + ("max_tokens" in drift), cap + ("max_iterations" in drift)))
    return out


def _ending(history: History, recs: list[Any], turns: list[tuple[int, str | None, bool]], status: str,
            calls: list[Any]) -> list[dict[str, Any]]:
    """The ending violations under the first (budget, cap) pair that explains the journal (else the first's)."""
    chat = bool(history.options.get("chat") or (history.options.get("workload") or {}).get("chat_followups"))
    assistants = [r for r in recs if isinstance(r, AssistantRecord)]
    found: list[list[dict[str, Any]]] = []
    for budget, cap in _limits(history):
        why, k, spent = end_turn(turns, budget, cap, chat, history.promises.cut_off_turn != "continues")
        said = {"budget": f"{spent} tokens spent, over the budget of {budget}", "max_iterations": f"the cap of "
                f"{cap} iterations", "completed": "its final answer", "error": "a reply cut off"}.get(why or "", "")
        out: list[dict[str, Any]] = []
        if why is not None and k < len(turns) - 1:
            out.append({"kind": "ran_past_end", "end": why, "reply": k, "replies": len(turns), "detail":
                        f"the run must end after reply {k} ({said}), but the journal holds {len(turns) - 1 - k} "
                        f"more"})
        if why == "budget":
            ids = set(_tools(assistants[k]))
            ran = sorted({e.tool_use_id for e in history.effects if e.tool_use_id in ids}
                         | {r.tool_use_id for r in recs if isinstance(r, ToolResultRecord) and r.tool_use_id in ids})
            if ran:
                out.append({"kind": "tool_run_past_budget", "reply": k, "tool_use_ids": ran, "detail":
                            f"reply {k} ended the run on its budget ({said}), yet its tool(s) {', '.join(ran)} ran"})
        if status in DECIDED and why is None:
            out.append({"kind": "ended_early", "status": status, "replies": len(turns), "detail":
                        f"the run ended {status} after reply {k}, where its workload goes on ({spent} tokens of "
                        f"{budget}, {len(turns)} of {cap} iterations)"})
        elif status in DECIDED and why != status and k == len(turns) - 1:
            out.append({"kind": "ended_wrong", "status": status, "want": why, "detail":
                        f"the run ended {status} after reply {k}, where its workload ends it {why} ({said})"})
        final = history.options.get("script_turns", 0) - 1  # a run's answer is its script's last turn
        if status == "completed" and why == "completed" and calls[k] is not None and final >= 0 \
                and calls[k].turn != final:
            out.append({"kind": "final_answer_not_scripted", "call": calls[k].index, "detail":
                        f"the run's final answer is model call {calls[k].index}'s reply to turn {calls[k].turn}, "
                        f"not the script's answer (turn {final})"})
        if not out:
            return []
        found.append(out)
    return found[0]


def check(history: History) -> Any:
    """Judge I11 (docs/spec.md section 15) on ``history``; see the module docstring."""
    view = JournalView(history)
    after = view.after_end()  # the resumes of a completed run its subject promises a new turn or nothing
    last = ([lg for lg in legs_in_order(history) if lg.journal is not None and lg.index not in after] or [None])[-1]
    if not view.decoded or last is None or not history.model_calls:
        why = (f"journal format {view.format}: its records are not decoded" if not view.decoded else
               "no leg left a journal" if last is None else "no model call recorded")
        return make(__name__, VALID, {"summary": f"not judged: {why}", "checked": 0, "not_judged": why})
    recs = view.at(last).records()
    sent: dict[tuple[tuple[str, ...], str], list[Any]] = {}
    for call in history.model_calls:
        sent.setdefault(_key(call.reply), []).append(call)
    violations: list[dict[str, Any]] = []
    turns: list[tuple[int, str | None, bool]] = []
    calls: list[Any] = []
    for rec in (r for r in recs if isinstance(r, AssistantRecord)):
        got = {f: getattr(rec, f) or 0 for f, _ in USAGE}
        match = sent.get(_key(rec.message.get("content")), [])
        usages = [{f: c.usage.get(u) or 0 for f, u in USAGE} for c in match if c.usage]
        if not match:
            violations.append({"kind": "reply_not_sent", "seq": rec.seq, "detail": f"the assistant record at seq "
                               f"{rec.seq} journals a reply no model call sent"})
        elif usages and got not in usages:
            violations.append({"kind": "usage_differs", "seq": rec.seq, "got": got, "want": usages[0], "detail":
                               f"the assistant record at seq {rec.seq} journals usage {got}, the model sent "
                               f"{usages[0]}"})
        turns.append((sum((usages or [got])[0].values()), rec.stop_reason, bool(_tools(rec))))
        calls.append(match[-1] if match else None)
    status = recs[-1].reason if recs and isinstance(recs[-1], TerminalRecord) else "open"
    violations += _ending(history, recs, turns, status, calls)
    evidence: dict[str, Any] = {"checked": len(turns), "status": status, "source": f"journal after leg {last.index}"}
    if violations:
        evidence.update(violations=violations[:20], summary="; ".join(dict.fromkeys(v["kind"] for v in violations))
                        + ": " + violations[0]["detail"])
        return make(__name__, INVALID, evidence)
    evidence["summary"] = (f"{len(turns)} repl(ies) journaled as the model sent them (usage included); the run "
                           f"stands {status} where its workload says")
    return make(__name__, VALID, evidence)
