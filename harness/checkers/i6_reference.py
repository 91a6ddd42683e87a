"""I6 the result equals the uninterrupted reference run's.

Normative text: docs/spec.md section 15, I6.

How it is judged.  The final state is the fold of the last leg's journal
(:func:`fiskj.reader.read_state` on the bytes, ``to_json()``), or
``history.final_state`` when no leg left a journal.  Its ``messages``,
``counters``, final answer (text of the last assistant message), ``status``,
last terminal reason and ``next_iteration`` are compared with
``history.reference.state``'s.  Only a deterministic server makes this a
fair test: when ``history.options["vary_on_repeat"]`` is set
and some model call was repeated, the verdict is unknown.  No reference is
unknown too.  A final journal that cannot be read is invalid, unless the
damage is a tail fault's (then unknown); no final journal and no final state is
unknown, unless a leg completed the run (exit 0): ``run_missing``.  Evidence: a compact diff, at most
:data:`MAX_DIFFS` entries ``{"path", "got", "want"}``.

The tools' side effects are part of the result too: in the uninterrupted
run every answered tool ran.  So every tool_use id the final journal
answers with a non-error result must have at least one execution in the
effects ledger (``effect_missing`` otherwise: the journal claims a result
whose tool never ran, e.g. a result journaled before its tool started and
a crash in between).  Re-runs are I2's to judge.  Judged only when the
reference run's tools left effects (a subject that does not run the
ledger tools gives nothing to compare).

What the user reads is part of it too: when the uninterrupted run printed
its final answer on standard output (``Reference.printed_answer``), the
leg that completes the trial's run (exit 0) must print it as well
(``answer_not_printed``: e.g. a resume that settles a journaled answer
silently).

The uninterrupted run itself (``history.options["uninterrupted"]``: a
reference run that ended wrong, judged as a trial) must end as its workload
says (:func:`harness.history.ending.uninterrupted_end`):
``uninterrupted_run_ended_wrong`` otherwise.

What the workload implies holds whatever the reference did: a tool_use
block of a reply cut off by ``max_tokens`` or refused is never run, on any
leg (``cut_off_tool_run``, from the effects ledger and the model log:
:func:`harness.history.ending.cut_off_tool_runs`; docs/spec.md section 12,
rule 6), so an engine that runs it in every run is caught, not compared
with itself.

A journal fiskj does not fold (:class:`~harness.checkers.journal_view.JournalView` not ``decoded``: ``jsonl``;
docs/subject.md "Journal formats") is judged by what an outside observer
saw instead (:func:`_check_observed`): the same conversation states asked
of the model, the same final reply, the same tools run and the same exit
as the reference run (not the exit when the last leg was a refused resume).

What the subject promises (docs/spec.md section 15 "Declared promises") is no difference: the resume of a
completed run that continues with a new turn or does nothing is I9's to judge, so the result is the run's
before it (:func:`_promised`); a tool the agent promises to report when a crash interrupted it
(``interrupted_tool = "reported"``), answered with an error result, stands for its result (``reported``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from fiskj.errors import FiskjError
from fiskj.reader import read_state

from harness.history.ending import completing_leg, cut_off_tool_runs, uninterrupted_end
from harness.history.model import History, observed_result
from harness.names import EXIT_COMPLETED
from harness.checkers.verdict import INVALID, UNKNOWN, VALID, make
from harness.checkers._common import (crash_kind, is_refusal, legs_in_order, nemesis_prefix_holds, previous_snapshot,
                                      same_saved_state)
from harness.checkers.journal_view import JournalView

MAX_DIFFS = 10
_SHORT = 200


def final_answer(messages: list[dict[str, Any]]) -> str | None:
    """Text of the last assistant message (``None`` when there is none)."""
    for message in reversed(messages or []):
        if isinstance(message, dict) and message.get("role") == "assistant":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")
    return None


def _short(value: Any) -> Any:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return value if len(text) <= _SHORT else text[:_SHORT] + f"...(+{len(text) - _SHORT} chars)"


def diff(got: Any, want: Any, path: str = "", out: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Differences between two JSON values, as ``{"path", "got", "want"}`` (values shortened)."""
    out = [] if out is None else out
    if len(out) >= MAX_DIFFS:
        return out
    if isinstance(got, dict) and isinstance(want, dict):
        for key in list(want) + [k for k in got if k not in want]:
            sub = f"{path}.{key}" if path else str(key)
            if key not in got:
                out.append({"path": sub, "got": "<absent>", "want": _short(want[key])})
            elif key not in want:
                out.append({"path": sub, "got": _short(got[key]), "want": "<absent>"})
            else:
                diff(got[key], want[key], sub, out)
            if len(out) >= MAX_DIFFS:
                break
    elif isinstance(got, list) and isinstance(want, list):
        for i in range(max(len(got), len(want))):
            sub = f"{path}[{i}]"
            if i >= len(got):
                out.append({"path": sub, "got": "<absent>", "want": _short(want[i])})
            elif i >= len(want):
                out.append({"path": sub, "got": _short(got[i]), "want": "<absent>"})
            else:
                diff(got[i], want[i], sub, out)
            if len(out) >= MAX_DIFFS:
                break
    elif got != want or type(got) is not type(want):
        out.append({"path": path or "$", "got": _short(got), "want": _short(want)})
    return out


def _view(state: dict[str, Any]) -> dict[str, Any]:
    """What of a folded state must equal the reference's: the conversation, counters and final answer, and
    how the run stands at the end (its status, its last terminal record's reason, its next iteration)."""
    messages = state.get("messages") or []
    return {"messages": messages, "counters": state.get("counters"), "final_answer": final_answer(messages),
            "status": state.get("status"), "terminal": (state.get("terminal") or {}).get("reason"),
            "next_iteration": state.get("next_iteration")}


def _effects_missing(final: dict[str, Any], history: History) -> list[str]:
    """Ids answered with a non-error tool_result in ``final`` (a ``to_json()`` state) that never executed."""
    answered: list[str] = []
    blocks: list[Any] = []
    for message in final.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), list):
            blocks += message["content"]
    blocks += (final.get("pending") or {}).get("results") or []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "tool_result" and not block.get("is_error"):
            tid = block.get("tool_use_id")
            if isinstance(tid, str) and tid not in answered:
                answered.append(tid)
    ran = {e.tool_use_id for e in history.effects}
    return [tid for tid in answered if tid not in ran]


def _promised(history: History) -> History:
    """``history`` without the resumes of its completed run when the subject promises such a resume a new turn
    or nothing (:meth:`JournalView.after_end`; their model calls and tool runs left out): the run's result
    is the one before them."""
    probes = JournalView(history).after_end()
    return replace(history, legs=[lg for lg in history.legs if lg.index not in probes],
                   model_calls=[c for c in history.model_calls if c.leg not in probes],
                   effects=[e for e in history.effects if e.leg not in probes]) if probes else history


def _reported(history: History) -> set[str]:
    """The tool_use ids answered to the model with an error result after a crash, by a subject that promises
    to report an interrupted tool (``interrupted_tool = "reported"``); empty for any other subject."""
    crashes = [lg.index for lg in history.legs if crash_kind(lg, history.promises)]
    if history.promises.interrupted_tool != "reported" or not crashes:
        return set()
    return {str(b.get("tool_use_id")) for c in history.model_calls if c.leg > min(crashes) for m in c.messages
            if isinstance(m, dict) and isinstance(m.get("content"), list) for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("is_error")}


def _unreport(messages: list[dict[str, Any]], ref: list[dict[str, Any]], ids: set[str]) -> list[dict[str, Any]]:
    """``messages`` with each error result of a reported id replaced by the reference's result for it."""
    want = {b.get("tool_use_id"): b for m in ref if isinstance(m, dict) and isinstance(m.get("content"), list)
            for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"}
    return [{**m, "content": [want.get(b.get("tool_use_id"), b) if isinstance(b, dict) and b.get("is_error")
                              and b.get("tool_use_id") in ids else b for b in m["content"]]}
            if isinstance(m, dict) and isinstance(m.get("content"), list) else m for m in messages]


def _check_observed(view: JournalView, trimmed: bool = False) -> Any:
    """I6 for a journal fiskj does not fold (``jsonl``): the run's result as seen from outside.

    Against the reference run's :func:`~harness.history.model.observed_result`: the same conversation
    states asked of the model (``states``: a missing one is work the run skipped, an extra one a
    conversation the uninterrupted run never had), the same final reply (``final_answer``), the same
    tools run (``tools``) and the same exit (``exit``) of its last leg, unless that leg's resume was
    refused (the resume of a completed run: whether the refusal was right only the fold could say) or, with
    ``trimmed`` (:func:`_promised` left out resumes of the completed run), killed after the run's end.
    """
    history = view.history
    ref = history.reference
    assert ref is not None
    if ref.model_calls and not ref.call_keys:
        return make(__name__, UNKNOWN, {"summary": "the reference run's observed result was not recorded",
                                        "reason": "no observed reference"})
    got = observed_result(history)
    legs = legs_in_order(history)
    refused_end = bool(legs) and (is_refusal(legs[-1]) or _store_refused(history, legs[-1]))
    killed_after_end = trimmed and bool(legs) and (  # killed (or aborted by a signal) once its journal held the end
        legs[-1].crashed or history.promises.aborts(legs[-1]))
    diffs: list[dict[str, Any]] = []
    missing = [k for k in ref.call_keys if k not in got["call_keys"]]
    extra = [k for k in got["call_keys"] if k not in ref.call_keys]
    if missing or extra:
        diffs.append({"path": "states", "missing": missing[:MAX_DIFFS], "extra": extra[:MAX_DIFFS],
                      "detail": f"{len(missing)} conversation state(s) of the reference never asked, "
                                f"{len(extra)} the reference never had"})
    if got["last_reply"] != ref.last_reply:
        diffs.append({"path": "final_answer", "got": _short(final_answer([{"role": "assistant", "content": got["last_reply"]}])),
                      "want": _short(final_answer([{"role": "assistant", "content": ref.last_reply}]))})
    ran, want, reported = set(got["effect_ids"]), set(ref.effect_ids), _reported(history)
    if (ran | reported) != (want | reported):
        diffs.append({"path": "tools", "never_ran": sorted(want - ran - reported)[:MAX_DIFFS],
                      "not_in_reference": sorted(ran - want - reported)[:MAX_DIFFS]})
    if not refused_end and not killed_after_end and got["exit_code"] != ref.exit_code:
        diffs.append({"path": "exit", "got": got["exit_code"], "want": ref.exit_code})
    evidence: dict[str, Any] = {"checked": 1, "source": "observed (model calls, effects ledger, exit)",
                                **({"reported": sorted(reported)} if reported else {}),
                                "journal_format": view.format,
                                "not_judged": f"journal format {view.format}: the journal's fold "
                                              "(messages, counters) is not compared" + (
                                                  "; the run ended on a refused resume, whose reason (a completed "
                                                  "run?) only the fold could tell" if refused_end else "")}
    unprinted = _answer_not_printed(history, "completed" if ref.exit_code == EXIT_COMPLETED else None)
    if diffs or unprinted:
        said = [f"the run's observed result differs from the uninterrupted run's in "
                f"{', '.join(d['path'] for d in diffs)}"] if diffs else []
        evidence.update(summary="; ".join(said + [v["detail"] for v in unprinted]),
                        violations=([{"kind": "differs", "diff": diffs}] if diffs else []) + unprinted)
        return make(__name__, INVALID, evidence)
    evidence["summary"] = (f"{len(ref.call_keys)} conversation state(s), the final answer, {len(want)} tool(s) "
                           f"and the exit equal the reference's (observed from outside)")
    return make(__name__, VALID, evidence)


def _store_refused(history: History, leg: Any) -> bool:
    """An opaque store's clean refusal (docs/spec.md section 15 "Opaque stores", I5): ``leg`` exited 1 or 2 with
    a message and left the store's bytes as they were, after a fault damaged or crashed it."""
    return (history.journal.is_store and leg.exit_signal is None and leg.exit_code in (1, 2)
            and bool((leg.stderr or "").strip())
            and (previous_snapshot(history, leg) == leg.journal or same_saved_state(history, leg))
            and any(lg.fault.kind in ("tail", "power_loss") for lg in history.legs if lg.index < leg.index))


def _answer_not_printed(history: History, status: Any) -> list[dict[str, Any]]:
    """``answer_not_printed`` when the uninterrupted run printed its final answer and the leg that completed
    this run (exit 0, status ``completed``) did not print it: what a user reads of the run differs."""
    want = history.reference.printed_answer if history.reference is not None else ""
    leg = completing_leg(history)
    if not want or status != "completed" or leg is None or want in (leg.stdout or ""):
        return []
    return [{"kind": "answer_not_printed", "leg": leg.index,
             "detail": f"leg {leg.index} completed the run (exit 0) without printing its final answer, which the "
                       f"uninterrupted run printed: ...{_short(want[-80:])!s}",
             "want_tail": want[-80:], "stdout_tail": (leg.stdout or "")[-200:]}]


def check(history: History) -> Any:
    """Judge I6 (docs/spec.md section 15) on ``history``; see the module docstring."""
    ran = cut_off_tool_runs(history)
    if ran:
        ids = ", ".join(sorted({r["tool_use_id"] for r in ran}))
        return make(__name__, INVALID, {
            "summary": f"{len(ran)} run(s) of a tool asked for by a reply cut off by max_tokens or refused: {ids}",
            "checked": 1, "violations": [{"kind": "cut_off_tool_run", **r,
                                          "detail": f"leg {r['leg']} ran {r['tool_use_id']}, which model call "
                                                    f"{r['call']} asked for in a reply that stopped with "
                                                    f"{r['stop']}: it must never run"} for r in ran]})
    if history.options.get("uninterrupted"):  # the reference run itself, judged as a trial
        why = uninterrupted_end(history)
        if why is None:
            return make(__name__, VALID, {"summary": "the uninterrupted run ended as its workload says",
                                          "checked": 1})
        last = max(history.legs, key=lambda leg: leg.index) if history.legs else None
        return make(__name__, INVALID, {"summary": why, "checked": 1, "violations": [{
            "kind": "uninterrupted_run_ended_wrong", "detail": why,
            "exit_code": last.exit_code if last else None, "final_state_status": (history.final_state or {}).get(
                "status"), "final_error": history.final_error, "stderr": (last.stderr or "")[-300:] if last else ""}]})
    if history.reference is None:
        return make(__name__, UNKNOWN, {"summary": "no reference run in the history", "reason": "no reference"})
    repeated = len({c.key for c in history.model_calls}) < len(history.model_calls)
    if history.options.get("vary_on_repeat") and repeated:
        return make(__name__, UNKNOWN, {
            "summary": "the server varied its reply on a repeated call; the result may legitimately differ",
            "reason": "vary_on_repeat with a repeated model call"})
    whole, history = history, _promised(history)
    view = JournalView(history)
    if not view.decoded:
        return _check_observed(view, trimmed=len(history.legs) < len(whole.legs))
    with_journal = [lg for lg in legs_in_order(history) if lg.journal is not None]
    source: str
    if with_journal:
        last = with_journal[-1]
        source = f"journal after leg {last.index}"
        try:
            final = read_state(last.journal).to_json()
        except FiskjError as exc:
            row = {"leg": last.index, "error": f"{type(exc).__name__}: {exc}", "line": exc.line, "offset": exc.offset,
                   "journal_bytes": len(last.journal), "exit_code": last.exit_code, "exit_signal": last.exit_signal,
                   "stderr": (last.stderr or "")[-300:]}
            if nemesis_prefix_holds(history, last, len(last.journal)):  # nothing appended past the damage
                return make(__name__, UNKNOWN, {"summary": "the final journal is unreadable through a tail fault's damage",
                                                "reason": "nemesis-made damage", **row})
            return make(__name__, INVALID, {"summary": f"the final journal cannot be read: {exc}", "checked": 1,
                                            "violations": [{"kind": "final_unreadable", **row}]})
    elif history.final_state is not None:
        final, source = history.final_state, "history.final_state"
    else:
        done = [lg for lg in legs_in_order(history) if lg.exit_code == EXIT_COMPLETED]
        if done:  # a leg said it completed the run, and no run is left (a writer of a deleted JetStream run)
            leg = done[-1]
            return make(__name__, INVALID, {"summary": f"leg {leg.index} completed the run (exit 0), and no run is "
                                                       "left: no journal, no final state", "checked": 1,
                                            "violations": [{"kind": "run_missing", "leg": leg.index,
                                                            "final_error": history.final_error,
                                                            "stderr": (leg.stderr or "")[-300:]}]})
        return make(__name__, UNKNOWN, {"summary": "no final journal and no final state", "reason": "no final state"})
    reported = _reported(history)
    if reported:
        final = {**final, "messages": _unreport(final.get("messages") or [], history.reference.state.get("messages")
                                                or [], reported)}
    got, want = _view(final), _view(history.reference.state)
    diffs = diff(got, want)
    missing = _effects_missing(final, history) if history.reference.effects > 0 else []
    unprinted = _answer_not_printed(history, final.get("status"))
    evidence: dict[str, Any] = {"checked": 1, "source": source, "status": final.get("status"),
                                **({"reported": sorted(reported)} if reported else {}),
                                "reference_status": history.reference.state.get("status")}
    if diffs or missing or unprinted:
        evidence["violations"] = list(unprinted)
        summaries = [v["detail"] for v in unprinted]
        if diffs:
            fields = sorted({d["path"].split(".")[0].split("[")[0] for d in diffs})
            summaries.append(f"final result differs from the reference in {', '.join(fields)} "
                             f"(first: {diffs[0]['path']})")
            evidence["violations"].append({"kind": "differs", "diff": diffs})
            evidence["got_answer"], evidence["want_answer"] = _short(got["final_answer"]), _short(want["final_answer"])
        if missing:
            summaries.append(f"{len(missing)} tool result(s) in the final journal whose tool never ran: "
                             f"{', '.join(missing[:5])}")
            evidence["violations"].append({"kind": "effect_missing", "tool_use_ids": missing[:20],
                                           "executions": len(history.effects)})
        evidence["summary"] = "; ".join(summaries)
        return make(__name__, INVALID, evidence)
    evidence["summary"] = (f"messages ({len(got['messages'])}), counters and final answer equal the reference "
                           f"({source})")
    return make(__name__, VALID, evidence)
