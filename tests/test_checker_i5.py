"""I5 the journal is always readable, with at most one torn tail: snapshots, reader answers, repairs."""

import json
from io import BufferedReader, BytesIO

from builders import A, M, R, T, journal
from synth import Engine

from fiskj.errors import FiskjError
from fiskj.reader import read_state
from harness.checkers import i5_readable
from harness.checkers.journal_view import split_journal
from harness.families.journal_state.reader_child import Answer, answer_for
from harness.families.tail.mutations import mutations
from harness.history.model import Fault, History, Leg, ReaderCheck, history_from_json, history_to_json


def _one_leg(data: bytes, **kw) -> History:
    leg = Leg(index=0, kind="start", argv=[], pid=1, t_start=1, t_end=2, exit_code=0, journal=data, **kw)
    return History(scenario="s", seed=1, schedule=[], run_id="r1", legs=[leg])


def test_a_snapshot_with_a_torn_tail_is_readable_and_the_tail_is_reported():
    eng = Engine([["a", "b"], []])
    eng.leg(kill_after=5, torn=True)          # killed half-way through R(a)
    v = i5_readable.check(eng.finish())
    assert v.status == "valid", v.evidence
    (torn,) = v.evidence["torn_tails"]
    last = split_journal(eng.h.legs[0].journal).lines[-1]
    assert torn == {"leg": 0, "offset": last.offset, "length": len(last.raw), "good_size": last.offset}


def test_interior_corruption_left_by_appending_after_a_torn_tail_is_caught_with_line_and_offset():
    eng = Engine([["a", "b"], []])
    eng.leg(kill_after=5, torn=True)
    eng.leg(cut_torn_tail=False)              # defect 1: glued, then more records follow
    v = i5_readable.check(eng.h)
    assert v.status == "invalid"
    (row,) = v.evidence["violations"]
    glued = split_journal(eng.file).lines[2]
    assert row["kind"] == "corrupt" and row["leg"] == 1
    assert row["line"] == 3 and row["offset"] == glued.offset
    assert row["text"].startswith('{"seq":3,')


def test_a_duplicate_tool_result_is_a_fold_error():
    v = i5_readable.check(_one_leg(journal(M(), A("a"), R("a"), R("a"))))
    assert v.status == "invalid"
    (row,) = v.evidence["violations"]
    assert row["kind"] == "fold_error" and row["line"] == 4 and "ConsistencyError" in row["error"]


def test_a_journal_that_goes_on_after_error_budget_and_max_iterations_ends_is_readable():
    # fisk-ai resumes every run that is not completed, so each leg's terminal record may be followed
    # by the next leg's records (docs/spec.md section 8, rule 7); only `completed` ends a run for good.
    legs = journal(M(), A("a", "b"), R("a"), T("error"), R("b"), A("c", iteration=1), T("budget"),
                   T("max_iterations"), R("c"), A(text="done", iteration=2), T("completed"))
    v = i5_readable.check(_one_leg(legs))
    assert v.status == "valid", v.evidence
    after_completed = journal(M(), A(text="x"), T("completed"), A(text="y", iteration=1))
    (row,) = i5_readable.check(_one_leg(after_completed)).evidence["violations"]
    assert row["kind"] == "fold_error" and row["line"] == 4 and "'completed'" in row["error"]


def test_a_garbage_line_in_the_middle_is_corruption():
    data = journal(M(), A("a")) + b"\x00\x00garbage\n" + journal(R("a"), start=3)
    (row,) = i5_readable.check(_one_leg(data)).evidence["violations"]
    assert row["line"] == 3 and row["offset"] == len(journal(M(), A("a")))


def test_damage_the_nemesis_made_in_the_interior_is_exempt_while_untouched():
    good = journal(M(), A("a"), R("a"))
    flipped = good.replace(b'"iteration":0', b'"iteration":#', 1)
    h = _one_leg(flipped, fault=Fault(kind="tail", detail={"flip": 60}, injected=True))
    h.legs.append(Leg(index=1, kind="resume", argv=[], pid=2, t_start=3, t_end=4, exit_code=1,
                      stderr="fiskj: corrupt journal", journal=flipped))
    v = i5_readable.check(h)
    assert v.status == "valid", v.evidence
    assert [e["leg"] for e in v.evidence["exempt"]] == [0, 1]


def test_an_absent_or_empty_journal_is_noted_not_judged():
    h = _one_leg(b"")
    h.legs.append(Leg(index=1, kind="resume", argv=[], pid=2, t_start=3, t_end=4, exit_code=0, journal=None))
    v = i5_readable.check(h)
    assert v.status == "valid" and v.evidence["checked"] == 0
    assert [n["leg"] for n in v.evidence["not_judged"]] == [0, 1]


def test_a_snapshot_holding_only_a_torn_meta_line_ending_in_a_newline_is_noted_not_judged():
    # A power loss inside the create: the meta line's first sector lost (zeros), its last
    # sector with the newline kept.  Nothing was acknowledged; the next create reclaims it.
    v = i5_readable.check(_one_leg(b"\x00" * 512 + b'ol":"x"}}\n'))
    assert v.status == "valid" and v.evidence["checked"] == 0
    assert "no complete record" in v.evidence["not_judged"][0]["journal"]


def test_a_snapshot_of_two_garbage_lines_is_still_judged_and_invalid():
    v = i5_readable.check(_one_leg(b"junk\njunk\n"))
    assert v.status == "invalid"


# --- the reader's answers on mutated journals (tail family; harness.checkers.i5_reader_answers) -------------

def _reader_history(answer) -> History:
    """The facts the tail family records: each mutation of a journal, labelled, with ``answer(m)``."""
    data = journal(M(), A("a"), R("a"), A(text="done"))
    checks = [ReaderCheck(m.id, m.kind, len(m.data), m.expected(), answer(m).to_json())
              for m in mutations(data, seed=4, random_cuts=4, garbage_tails=1, flips=6)]
    return History(scenario="s", seed=4, schedule=[{"kind": "tail", "check": "reader"}], run_id="r1",
                   reader_checks=checks)


def _reference_answer(m):
    """What fiskj's own reader says about ``m.data`` (in memory): the tail family's own question."""
    return answer_for(BufferedReader(BytesIO(m.data)))


def test_a_reader_that_answers_every_mutation_as_labelled_is_valid():
    h = _reader_history(_reference_answer)
    v = i5_readable.check(h)
    assert v.status == "valid", v.evidence
    assert v.evidence["reader_checked"] == v.evidence["checked"] == len(h.reader_checks) > 10
    assert "reader answer(s) as labelled" in v.summary


def test_a_reader_that_tolerates_interior_corruption_is_invalid_naming_the_mutation_and_the_line():
    def tolerant(m):  # reader_tolerates_corruption: skips bad lines instead of raising
        if m.expect == "corrupt":
            return Answer("read", tuple(m.seqs) or (1, 2), None, len(m.data))
        return _reference_answer(m)

    v = i5_readable.check(_reader_history(tolerant))
    assert v.status == "invalid"
    rows = v.evidence["violations"]
    assert rows and {r["kind"] for r in rows} == {"reader_answer"}
    first = rows[0]
    assert first["mutation"]["expect"] == "corrupt"
    assert f"line {first['mutation']['line']} is corrupt" in first["reason"]
    assert first["answer"]["kind"] == "read" and "wrong reader answer(s)" in v.summary


def test_a_reader_that_drops_a_complete_final_record_is_invalid():
    def drops(m):
        a = _reference_answer(m)
        return Answer("read", a.seqs[:-1], a.torn, a.good_size) if a.kind == "read" and a.seqs else a

    v = i5_readable.check(_reader_history(drops))
    assert v.status == "invalid"
    assert any("expected records seq" in r["reason"] for r in v.evidence["violations"])


def test_reader_facts_round_trip_through_json_to_the_same_verdict():
    h = _reader_history(_reference_answer)
    h.reader_checks[0].answer["kind"] = "error"
    again = history_from_json(json.loads(json.dumps(history_to_json(h))))
    assert again.reader_checks == h.reader_checks
    assert i5_readable.check(again).to_json() == i5_readable.check(h).to_json()


# --- the repair of a tail mutation (docs/spec.md section 9 rule 4) -----------------------------------------

def _repair_history(resumed: bytes, mutated: bytes, good_size: int) -> History:
    leg0 = Leg(index=0, kind="start", argv=[], pid=1, t_start=1, t_end=2, exit_code=0, journal=mutated,
               fault=Fault(kind="tail", injected=True, detail={"mutation": "cut@90", "good_size": good_size}))
    leg1 = Leg(index=1, kind="resume", argv=[], pid=2, t_start=3, t_end=4, exit_code=0, journal=resumed)
    try:
        final = read_state(resumed).to_json()
    except FiskjError:
        final = None
    return History(scenario="s", seed=1, schedule=[], run_id="r1", legs=[leg0, leg1], final_state=final)


def test_a_torn_tail_cut_before_the_resume_appends_is_a_valid_repair():
    kept = journal(M(), A("a"))
    mutated = kept + journal(R("a"), start=3)[:20]
    v = i5_readable.check(_repair_history(kept + journal(R("a"), A(text="done"), start=3), mutated, len(kept)))
    assert v.status == "valid", v.evidence
    assert v.evidence["repairs_checked"] == 1


def test_a_resume_that_glues_its_records_to_the_torn_tail_leaves_a_torn_tail_and_is_invalid():
    kept = journal(M(), A("a"))
    mutated = kept + journal(R("a"), start=3)[:20]
    glued = mutated + journal(R("a"), start=3)          # defect 1: no cut; the glued line is the last: torn
    v = i5_readable.check(_repair_history(glued, mutated, len(kept)))
    assert v.status == "invalid"
    (row,) = v.evidence["violations"]
    assert row["kind"] == "torn_tail_left" and row["leg"] == 1 and row["fault_leg"] == 0
    assert "still ends in a torn tail" in v.summary


def test_a_resume_that_changes_the_kept_bytes_is_invalid():
    kept = journal(M(), A("a"))
    mutated = kept + b"\x00" * 30
    rewritten = journal(M(run_id="r2"), A("a"), R("a"))
    v = i5_readable.check(_repair_history(rewritten, mutated, len(kept)))
    assert v.status == "invalid"
    assert [r["kind"] for r in v.evidence["violations"]] == ["repair_changed_kept_bytes"]
    assert v.evidence["violations"][0]["detail"] == f"repair: the kept bytes [0, {len(kept)}) changed"


def test_a_leg_that_exits_by_itself_and_leaves_its_own_last_line_torn_is_caught():
    from synth import Engine
    eng = Engine([["a"], []])
    eng.leg()
    leg = eng.h.legs[0]
    leg.journal = leg.journal[:-1]              # its last record without its newline: reads as torn
    v = i5_readable.check(eng.h)
    assert v.status == "invalid"
    (row,) = [x for x in v.evidence["violations"] if x["kind"] == "torn_tail_after_clean_exit"]
    assert row["leg"] == 0 and row["exit_code"] == 0
    leg.exit_code, leg.exit_signal = None, "SIGKILL"                # a crash may leave one
    assert i5_readable.check(eng.h).status == "valid"
