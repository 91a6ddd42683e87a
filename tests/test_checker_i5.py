"""I5 the journal is always readable, with at most one torn tail."""

from builders import A, M, R, journal
from synth import Engine

from harness.checkers import i5_readable
from harness.checkers._common import split_journal
from harness.history.model import Fault, History, Leg


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
