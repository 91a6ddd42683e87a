"""I9 a refused resume appends nothing."""

import base64

from builders import T, lines
from synth import Engine

from harness.checkers import i9_refusal
from harness.history.model import ModelCall


def _completed_then_refused() -> Engine:
    eng = Engine([["a"], []])
    eng.leg()                       # completes
    eng.leg()                       # a resume of a completed run: refused, exit 1
    return eng


def test_a_resume_of_a_completed_run_is_refused_and_leaves_the_journal_byte_identical():
    eng = _completed_then_refused()
    v = i9_refusal.check(eng.h)
    assert v.status == "valid", v.evidence
    assert v.evidence["refused_legs"] == [1]


def test_no_refused_leg_is_valid_with_nothing_checked():
    v = i9_refusal.check(Engine().finish())
    assert v.status == "valid" and v.evidence["checked"] == 0


def test_a_refused_resume_that_appended_a_record_is_caught_by_trace_and_snapshot():
    eng = _completed_then_refused()
    leg = eng.h.legs[1]
    (extra,) = lines(T("error", "refused"), start=6)
    leg.trace.insert(3, {"n": 3.5, "pid": leg.pid, "op": "write", "path": eng.jpath, "fd": 4,
                         "offset": len(leg.journal), "len": len(extra), "data": base64.b64encode(extra).decode()})
    leg.journal = leg.journal + extra
    v = i9_refusal.check(eng.h)
    assert v.status == "invalid"
    by_kind = {x["kind"]: x for x in v.evidence["violations"]}
    assert set(by_kind) == {"changed_journal", "journal_changed"}
    assert by_kind["changed_journal"]["events"][0]["op"] == "write"
    changed = by_kind["journal_changed"]
    assert changed["first_difference"] == len(eng.h.legs[0].journal)
    assert changed["lines_after_difference"][0]["seq"] == 6
    assert "refused" in changed["refusal"]


def test_a_refused_resume_that_called_the_model_is_caught():
    eng = _completed_then_refused()
    h = eng.h
    h.model_calls.append(ModelCall(index=9, t=h.legs[1].t_start + 1, key="k", turn=2, messages=[], reply=[], leg=1))
    (row,) = i9_refusal.check(h).evidence["violations"]
    assert row["kind"] == "did_work" and row["work"] == [{"model_call": 9, "turn": 2, "key": "k"}]


def test_cutting_the_torn_tail_it_found_before_refusing_is_allowed():
    eng = Engine([["a"], []])
    eng.leg()
    eng.file += b'{"seq":6,"prot'           # a torn tail appears (a tail fault on leg 0)
    eng.h.legs[0].journal = eng.file
    eng.h.legs[0].fault.kind = "tail"
    eng.leg()                               # cuts the tail under the lock, then refuses: completed
    v = i9_refusal.check(eng.h)
    assert v.status == "valid", v.evidence
    assert v.evidence["tail_repairs"][0]["leg"] == 1


def test_a_lock_refusal_is_recognised_from_stderr():
    eng = Engine([["a"], []])
    eng.leg()
    eng.leg()
    leg = eng.h.legs[1]
    leg.stderr = "fiskj: run r1 is held by another writer (pid 4242)"
    leg.exit_code = 2
    assert i9_refusal.check(eng.h).evidence["refused_legs"] == [1]


def test_a_concurrent_refused_leg_with_no_trace_is_unknown():
    eng = _completed_then_refused()
    leg = eng.h.legs[1]
    leg.trace = []
    leg.t_start = eng.h.legs[0].t_start + 1
    assert i9_refusal.check(eng.h).status == "unknown"


def test_a_concurrent_refused_leg_observed_from_outside_with_an_empty_trace_did_nothing_and_is_judged():
    # race-two-creates: the outside observer logs every call of the leg; an empty log is "did nothing"
    eng = _completed_then_refused()
    leg = eng.h.legs[1]
    leg.trace = []
    leg.t_start = eng.h.legs[0].t_start + 1
    eng.h.options["observer"] = "ptrace"
    v = i9_refusal.check(eng.h)
    assert v.status == "valid" and v.evidence["refused_legs"] == [1], v.evidence


def test_field_case_f17_a_drifted_resume_that_was_not_refused_is_caught():
    eng = Engine([["a"], []])
    eng.leg(kill_after=4)                       # killed in the batch
    eng.leg()                                   # the drift probe: resumed with another model, and it ran on
    h = eng.finish()
    h.legs[1].fault.detail.update({"drift": ["model"], "expect": "refused"})
    v = i9_refusal.check(h)
    assert v.status == "invalid"
    (row,) = v.evidence["violations"]
    assert row["kind"] == "not_refused" and row["leg"] == 1 and row["drift"] == ["model"]
    assert row["exit_code"] == 0 and row["bytes_after"] > row["bytes_before"]


def test_field_case_f17_a_drifted_resume_that_was_refused_is_valid():
    eng = _completed_then_refused()
    eng.h.legs[1].fault.detail.update({"drift": ["model"], "expect": "refused"})
    v = i9_refusal.check(eng.h)
    assert v.status == "valid" and v.evidence["checked"] == 1


def test_a_leg_interrupted_by_the_nemesis_is_not_taken_for_a_refused_resume():
    # Found in a full campaign: a SIGINT that landed as the start leg ended made it exit 1; the
    # leg had journaled its work, and its stderr happened to match a refusal word.
    from harness.checkers._common import is_refusal
    from harness.history.model import Fault, Leg

    leg = Leg(index=0, kind="start", argv=[], exit_code=1, stderr="fiskj: interrupted (run is locked?)",
              fault=Fault(kind="suspend", signal="SIGINT", injected=True))
    assert not is_refusal(leg)
    leg.fault = Fault()
    assert is_refusal(leg)


def _refused_after(eng: Engine, stderr: str):
    from harness.history.model import Leg

    prev = eng.h.legs[-1]
    leg = Leg(index=len(eng.h.legs), kind="resume", argv=["fiskj", "run", "--resume"], pid=2000,
              t_start=prev.t_end + 10, t_end=prev.t_end + 20, exit_code=1, stderr=stderr, journal=prev.journal)
    eng.h.legs.append(leg)
    return leg


def test_a_refused_resume_of_a_run_that_is_not_completed_is_refused_resumable_unless_it_names_the_lock():
    # fisk-ai v2 resumes every run but a completed one (section 12, rule 2): an ended leg (here: suspended)
    # refused for its status strands the run; a refusal that names the lock, or the fingerprint, is allowed
    eng = Engine([["a"], []])
    eng.leg(suspend_at=1)
    _refused_after(eng, "agent: ResumeRefused: run r1 is 'suspended'; only an open run can be resumed")
    v = i9_refusal.check(eng.h)
    assert v.status == "invalid", v.evidence
    (row,) = v.evidence["violations"]
    assert row["kind"] == "refused_resumable" and row["status_before"] == "suspended" and row["leg"] == 1
    for legit in ("fiskj: RunLocked: run r1 is locked by another process",
                  "fiskj: FingerprintMismatch: run r1 was started with another configuration: model: 'a' -> 'b'"):
        eng.h.legs[-1].stderr = legit
        assert i9_refusal.check(eng.h).status == "valid", legit


def test_the_model_refusing_is_not_a_refused_resume():
    from harness.checkers._common import is_refusal
    from harness.history.model import Leg

    said = ("iteration 2: refusal, 0 tool call(s), 418 tokens\n"
            "run r1 ended: error (the model refused (stop_reason refusal))\n")
    assert not is_refusal(Leg(index=1, kind="resume", argv=[], exit_code=1, stderr=said))
    assert is_refusal(Leg(index=1, kind="resume", argv=[], exit_code=1,
                          stderr=said + "fiskj: ResumeRefused: run r1 is 'completed'"))
