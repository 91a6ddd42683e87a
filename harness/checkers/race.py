"""race: a race trial's outcome is what its race expects (refusal, one winner, takeover, no false damage).

Normative text: docs/spec.md section 10 (locking: a busy lock is
``RunLocked`` at once and the caller changes nothing; the kernel drops a
dead holder's lock; tool subprocesses do not inherit it; ``load`` and
``list`` see a writer's partial line as a torn tail, never an error) and
section 11 (store operations: of two creates of one run exactly one wins,
the other gets ``RunExists``; of two resumes exactly one proceeds), with
the races of :mod:`harness.families.race` (field cases F14, F15, F18 in
docs/field-cases.md; fisk-ai's defects 2 and 3, docs/spec.md section 16).

How it is judged.  The race's script records, in order, one fact per
expectation it met (``history.race.expectations``, a
:class:`~harness.history.model.RaceFacts`): its ``name``, what is
``expected`` and what was ``observed`` (an agent's answer, a time, a count,
a journal digest).  Each name has a judge here (:data:`JUDGES`) that turns
the fact into zero or more violations, each with a ``kind`` and a
``detail``:

* ``answered``: a store call that must answer at once did (``blocked``);
* ``refused``: a probe of a held run got ``RunLocked`` (``not_refused``);
* ``at_once``: a refusal or takeover took at most ``max_ms`` (``not_at_once``);
* ``journal_unchanged``: a refused writer changed no byte
  (``refused_writer_changed_journal``);
* ``one_winner`` / ``no_error``: exactly one of two won, the other was
  refused (``not_exactly_one``, ``unexpected_error``);
* ``winner_records``: the journal holds every record the winning creator
  acknowledged (``winner_records``);
* ``taken_over`` / ``acked_kept``: once a holder is dead the next writer
  opens the run (``not_taken_over``) and finds every acknowledged seq
  (``acked_missing``);
* ``holder_step``: a holder's own step succeeded (``holder_step_failed``);
* ``writer_ok``: the writer of ``readers-during-appends`` appends all its
  records (a reader that takes the run lock refuses it: ``writer_blocked``);
* ``mid_write_snapshot`` / ``poll``: readers during appends never fail
  (``false_corruption``), report the half line as a torn tail
  (``torn_tail_not_reported``), never lose an acknowledged seq
  (``acked_missing``) and never see the seq go back (``seq_went_back``);
* ``tool_runs``: each unanswered tool ran once and an answered one never,
  counted from the history's effects ledger (``tool_runs``);
* ``released_open``: a writer is not refused after the holder released the
  run (``refused_after_release``); ``session_ok``: a writer's sessions
  succeeded (``session_failed``); ``sessions_contiguous``: the lines of one
  session are contiguous in the final journal (``interleaved``);
* ``no_abort``: every agent answered (``timeout``, unless a ``blocked``
  violation already explains it).

The verdict is ``invalid`` with the violations; else ``unknown`` when the
race could not be set up (``setup_error``) or the history holds no race
facts; else ``valid``.  ``checked`` is the number of the driver's steps.
"""

from __future__ import annotations

from typing import Any, Callable

from fiskj.codec import decode_record
from fiskj.errors import FiskjError
from fiskj.records import TerminalRecord, UserRecord

from harness.checkers.verdict import INVALID, UNKNOWN, VALID, make
from harness.history.model import History

__all__ = ["INVARIANT", "NAME", "JUDGES", "check", "session_interleaving"]

INVARIANT = "race"
NAME = "race outcome as expected (refusal, one winner, takeover)"

Fact = dict[str, Any]
Violations = list[dict[str, Any]]


def _v(kind: str, detail: str, **evidence: Any) -> dict[str, Any]:
    return {"kind": kind, "detail": detail, **evidence}


def _answered(f: Fact, history: History, found: Violations) -> Violations:
    obs = f["observed"]
    if obs.get("answered"):
        return []
    within, leg, holder = f["expected"]["within_s"], f["leg"], f.get("holder")
    if f.get("what"):
        detail = (f"{f['what']}: leg {leg} did not answer within {within:g} s while leg {holder} held the run "
                  f"(it waits instead of being refused)")
    elif holder is not None:
        detail = f"leg {leg}'s {f['op']} did not answer within {within:g} s while leg {holder} held the run"
    else:
        detail = f"leg {leg}'s {f['op']} did not answer within {within:g} s"
    return [_v("blocked", detail, leg=leg, error=obs.get("error"))]


def _refused(f: Fact, history: History, found: Violations) -> Violations:
    answer = f["observed"]["answer"]
    if not answer.get("ok") and (answer.get("error") or {}).get("kind") == f["expected"]["error"]:
        return []
    return [_v("not_refused", f"{f['what']}: leg {f['leg']} was not refused with {f['expected']['error']} while leg "
                              f"{f['holder']} held the run: {answer.get('error') or 'it got the lock'}",
               leg=f["leg"], answer=answer)]


def _at_once(f: Fact, history: History, found: Violations) -> Violations:
    ms, limit = f["observed"]["ms"], f["expected"]["max_ms"]
    if ms <= limit:
        return []
    return [_v("not_at_once", f"leg {f['leg']} ({f['role']}): {f['what']} took {ms:.1f} ms, over {limit:g} ms",
               leg=f["leg"], ms=round(ms, 3))]


def _journal_unchanged(f: Fact, history: History, found: Violations) -> Violations:
    before, after = f["observed"]["before"], f["observed"]["after"]
    if before == after:
        return []
    size = lambda d: 0 if d is None else d["bytes"]  # noqa: E731
    prefix = f"{f['what']}: " if f.get("what") else ""
    return [_v("refused_writer_changed_journal", f"{prefix}the journal changed across leg {f['leg']}'s refused "
                                                 f"{f['op']} ({size(before)} -> {size(after)} bytes)", leg=f["leg"])]


def _one_winner(f: Fact, history: History, found: Violations) -> Violations:
    outcomes = f["observed"]["outcomes"]
    winners = sum(1 for r in outcomes if r["outcome"] == "ok")
    if winners == f["expected"]:
        return []
    listed = ", ".join(f"leg {r['leg']}: {r['outcome']}" for r in outcomes)
    return [_v("not_exactly_one", f"{winners} of the two {f['what']} ({listed}); {f['rule']}",
               outcomes={r["role"]: r["outcome"] for r in outcomes})]


def _no_error(f: Fact, history: History, found: Violations) -> Violations:
    obs = f["observed"]
    if obs["outcome"] in f["expected"]:
        return []
    return [_v("unexpected_error", f"leg {f['leg']} failed: {obs.get('error')}", leg=f["leg"])]


def _winner_records(f: Fact, history: History, found: Violations) -> Violations:
    obs = f["observed"]
    if obs["journal_lines"] == obs["acknowledged"]:
        return []
    return [_v("winner_records", f"the journal holds {obs['journal_lines']} line(s); the winner (leg {f['leg']}) "
                                 f"acknowledged {obs['acknowledged']}", leg=f["leg"])]


def _taken_over(f: Fact, history: History, found: Violations) -> Violations:
    answer = f["observed"]["answer"]
    if answer.get("ok", False):
        return []
    return [_v("not_taken_over", f"{f['after']}, leg {f['leg']} could not open the run: {answer.get('error')}",
               leg=f["leg"])]


def _acked_kept(f: Fact, history: History, found: Violations) -> Violations:
    last, acked = f["observed"]["last_seq"], max(f["observed"]["acked"], default=0)
    if last >= acked:
        return []
    return [_v("acked_missing", f"leg {f['leg']} opened at seq {last}, below the last seq {acked} leg "
                                f"{f['holder']} acknowledged", leg=f["leg"])]


def _answered_ok(kind: str, what: str) -> Any:
    """A judge of a fact whose observed ``answer`` must be ok: else violation ``kind``, "leg L's WHAT failed"."""
    def judge(f: Fact, history: History, found: Violations) -> Violations:
        answer = f["observed"]["answer"]
        if answer.get("ok", False):
            return []
        return [_v(kind, f"leg {f['leg']}'s {what.format(**f)} failed: {answer.get('error')}", leg=f["leg"])]
    return judge


_holder_step = _answered_ok("holder_step_failed", "{op}")
_writer_ok = _answered_ok("writer_blocked", "appends while readers read")


def _mid_write_snapshot(f: Fact, history: History, found: Violations) -> Violations:
    obs, leg, writer, at = f["observed"], f["leg"], f["writer"], f["at"]
    load, lst, acked = obs["load"], obs["list"], max(obs["acked"], default=0)
    out = []
    if "error" in load:
        out.append(_v("false_corruption", f"load raised while leg {writer} was mid-write: {load.get('error')}",
                      leg=leg, at=at))
    if "error" in lst:
        out.append(_v("false_corruption", f"list reported the run unreadable while leg {writer} was mid-write: "
                                          f"{lst.get('error')}", leg=leg, at=at))
    if "error" not in load:
        if load.get("torn") is None:
            out.append(_v("torn_tail_not_reported", f"load saw no torn tail while leg {writer} had half a line on "
                                                    f"disk ({at})", leg=leg))
        if load.get("last_seq", 0) < acked:
            out.append(_v("acked_missing", f"load returned seq {load.get('last_seq')} below the acknowledged {acked}",
                          leg=leg))
    return out


def _poll(f: Fact, history: History, found: Violations) -> Violations:
    obs, out = f["observed"], []
    if obs["error_count"]:
        out.append(_v("false_corruption", f"load/list failed {obs['error_count']} time(s) during appends: "
                                          f"{(obs['errors'] or [{}])[0]}", leg=f["leg"], errors=obs["errors"]))
    if obs.get("regressions"):
        out.append(_v("seq_went_back", f"a load saw the seq go back: {obs['regressions']}", leg=f["leg"]))
    return out


def _tool_runs(f: Fact, history: History, found: Violations) -> Violations:
    runs: dict[str, int] = {}
    for e in history.effects:
        runs[e.tool_use_id] = runs.get(e.tool_use_id, 0) + 1
    out = []
    for tid, want in f["expected"].items():
        if runs.get(tid, 0) != want:
            out.append(_v("tool_runs", f"tool {tid} ran {runs.get(tid, 0)} time(s), expected {want} "
                                       f"({'answered before the race' if want == 0 else 'unanswered'})",
                          tool_use_id=tid))
    return out


def _released_open(f: Fact, history: History, found: Violations) -> Violations:
    obs = f["observed"]
    if obs["outcome"] == f["expected"]["outcome"]:
        return []
    return [_v("refused_after_release", f"leg {f['leg']} was refused after leg {f['holder']} released the run: "
                                        f"{obs.get('error')}", leg=f["leg"])]


_session_ok = _answered_ok("session_failed", "sessions")


def session_interleaving(data: bytes) -> tuple[str, int] | None:
    """The first session tag whose lines are not contiguous in journal ``data``, and the record where it resumes.

    A writer's session is its user records ``<tag>:<i>`` and its terminal
    record (message ``<tag>``); seed records (tag ``seed...``) are ignored.
    Pure: ``data`` is decoded in memory.
    """
    tags: list[tuple[str, int]] = []
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            continue
        try:
            rec = decode_record(line)
        except FiskjError:
            continue
        if isinstance(rec, UserRecord):
            text = rec.message["content"][0].get("text", "")
            tag, _, i = text.rpartition(":")
            tags.append((tag, int(i) if i.isdigit() else -1))
        elif isinstance(rec, TerminalRecord):
            tags.append((rec.message or "", 1 << 30))
    seen: dict[str, int] = {}
    for pos, (tag, _) in enumerate(tags):
        if tag.startswith("seed"):
            continue
        if tag in seen and seen[tag] != pos - 1:
            return tag, pos + 1
        seen[tag] = pos
    return None


def _sessions_contiguous(f: Fact, history: History, found: Violations) -> Violations:
    bad = session_interleaving(f["observed"]["journal"].encode("latin-1"))
    if bad is None:
        return []
    tag, record = bad
    return [_v("interleaved", f"session {tag!r} is interleaved with another writer's lines (record {record})",
               tag=tag)]


def _no_abort(f: Fact, history: History, found: Violations) -> Violations:
    if any(v["kind"] == "blocked" for v in found):
        return []  # the blocked call is why the trial was aborted
    obs = f["observed"]
    return [_v("timeout", f"an agent did not answer: {obs['error']}", stderr=obs.get("stderr", {}))]


#: fact name -> judge(fact, history, violations so far) -> new violations.
JUDGES: dict[str, Callable[[Fact, History, Violations], Violations]] = {
    "answered": _answered, "refused": _refused, "at_once": _at_once, "journal_unchanged": _journal_unchanged,
    "one_winner": _one_winner, "no_error": _no_error, "winner_records": _winner_records,
    "taken_over": _taken_over, "acked_kept": _acked_kept, "holder_step": _holder_step,
    "mid_write_snapshot": _mid_write_snapshot, "poll": _poll, "tool_runs": _tool_runs,
    "released_open": _released_open, "writer_ok": _writer_ok, "session_ok": _session_ok, "sessions_contiguous": _sessions_contiguous,
    "no_abort": _no_abort,
}


def check(history: History) -> Any:
    """Judge the race trial's facts (``history.race``; docs/spec.md sections 10 and 11) as the ``race`` verdict.

    A fact with a name :data:`JUDGES` does not know raises ``ValueError``
    (so :func:`harness.checkers.check_all` answers unknown, never valid).
    """
    facts = history.race
    if facts is None:
        return make(__name__, UNKNOWN, {"summary": "the history holds no race facts", "reason": "no race facts"})
    violations: Violations = []
    for fact in facts.expectations:
        judge = JUDGES.get(fact.get("name"))
        if judge is None:
            raise ValueError(f"race fact {fact.get('name')!r} has no judge; known: {', '.join(JUDGES)}")
        violations += judge(fact, history, violations)
    checked = len(history.schedule)
    if violations:
        kinds = sorted({v["kind"] for v in violations})
        return make(__name__, INVALID, {
            "summary": f"{len(violations)} violation(s) ({', '.join(kinds)}): {violations[0]['detail']}",
            "violations": violations, "checked": checked})
    if facts.setup_error is not None:
        return make(__name__, UNKNOWN, {"summary": f"not run: {facts.setup_error}", "reason": facts.setup_error})
    return make(__name__, VALID, {"summary": f"{facts.schedule}: as expected", "checked": checked})
