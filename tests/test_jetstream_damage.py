"""Damage to one replica's stream block files (harness/families/jetstream/damage.py; docs/jetstream.md): the pure
part (parsing nats-server's block records, choosing the damaged byte, damaging it) and two trials end to end on
a 3-node cluster, asserting what nats-server 2.15.1 was measured to do."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from harness.campaign.campaign import unsupported
from harness.checkers import check_all
from harness.families.jetstream import damage as D
from harness.families.jetstream.family import JETSTREAM
from harness.runner.trial import Runner
from harness.scenario.parse import load_scenario
from harness.subject.profile import load_profile

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "jetstream" / "jetstream-replica-damage.toml"


def _record(seq: int, subject: bytes, body: bytes, headers: bytes = b"") -> bytes:
    """One block record laid out as nats-server's file store writes it (seen in a real 1.blk: rl with bit 31 for
    headers, seq, ts, subject length, subject, header length + headers, body, 8-byte checksum)."""
    hdr = struct.pack("<I", len(headers)) + headers if headers else b""
    length = D.HEADER + len(subject) + len(hdr) + len(body) + D.CHECKSUM
    rl = length | (1 << 31 if headers else 0)
    return (struct.pack("<IQqH", rl, seq, 1_764_000_000_000_000_000, len(subject)) + subject + hdr + body
            + bytes(range(seq, seq + D.CHECKSUM)))


HDRS = b"NATS/1.0\r\nNats-Msg-Id: id0\r\n\r\n"
BLOCK = _record(1, b"fiskj.run.0", b"payload-0" * 3, HDRS) + _record(2, b"fiskj.run.1", b'{"seq":2}') + \
    _record(3, b"fiskj.run.2", b"x" * 40, HDRS)


def test_records_are_parsed_from_the_blocks_bytes_with_their_spans():
    recs = D.records(BLOCK)
    assert [(r.seq, r.subject) for r in recs] == [(1, "fiskj.run.0"), (2, "fiskj.run.1"), (3, "fiskj.run.2")]
    first, second = recs[0], recs[1]
    assert first.length == 102 and first.start == 0 and second.start == 102  # the real record's 0x66 bytes
    assert BLOCK[slice(*first.payload)] == b"payload-0" * 3 and BLOCK[slice(*second.payload)] == b'{"seq":2}'
    assert first.checksum == (94, 102) and first.header == (0, D.HEADER)
    assert recs[-1].start + recs[-1].length == len(BLOCK)


def test_a_torn_or_damaged_tail_ends_the_parse():
    last = D.records(BLOCK)[-1]
    assert [r.seq for r in D.records(BLOCK[:last.start + 5])] == [1, 2]
    assert [r.seq for r in D.records(D.damage(BLOCK, "bitflip", last.start + 3, 6))] == [1, 2]  # rl + 2^30 bytes
    assert D.records(b"") == []


def test_damage_cuts_or_flips_exactly_what_it_is_told():
    assert D.damage(BLOCK, "truncate", 150) == BLOCK[:150]
    flipped = D.damage(BLOCK, "bitflip", 120, 3)
    assert len(flipped) == len(BLOCK) and flipped[120] == BLOCK[120] ^ 0b1000
    assert [i for i in range(len(BLOCK)) if flipped[i] != BLOCK[i]] == [120]
    for bad in (("truncate", len(BLOCK) + 1, 0), ("bitflip", len(BLOCK), 0), ("bitflip", 0, 8), ("shred", 0, 0)):
        with pytest.raises(ValueError):
            D.damage(BLOCK, *bad)


def test_the_damaged_byte_is_chosen_from_the_blocks_records_and_the_seed():
    recs = D.records(BLOCK)
    for mode, record, part in D.POINTS:
        offset, bit, rec = D.point(BLOCK, mode, record, part, 1)
        lo, hi = rec.span(part)
        assert rec == recs[record] and lo <= offset < hi and (bit == 0 if mode == "truncate" else 0 <= bit < 8)
        assert (offset, bit) == D.point(BLOCK, mode, record, part, 1)[:2]  # same bytes, same seed: same byte
        assert offset > rec.start if part == "inside" else True  # a cut inside the record leaves it torn
    assert len({D.point(BLOCK, "bitflip", 2, "payload", s)[0] for s in range(20)}) > 1  # the seed chooses
    with pytest.raises(ValueError):
        D.point(BLOCK, "bitflip", 3, "payload", 1)
    with pytest.raises(ValueError):
        D.point(BLOCK, "bitflip", 0, "tail", 1)


def test_the_plan_enumerates_every_point_then_every_point_after_a_clean_stop():
    specs = [D.spec_for(i) for i in range(2 * len(D.POINTS))]
    assert [(s["mode"], s["record"], s["part"]) for s in specs] == list(D.POINTS) * 2
    assert [s["clean_stop"] for s in specs] == [False] * len(D.POINTS) + [True] * len(D.POINTS)
    plan = JETSTREAM.plan(load_scenario(SCENARIO), None, 12, 1, None)
    assert [p.schedule for p in plan] == [[s] for s in specs]


def test_damage_is_not_run_against_a_single_server():
    scenario = load_scenario(SCENARIO)
    assert "3 replicas" in unsupported(load_profile(ROOT / "subjects" / "jetstream" / "r1-default.toml"), scenario)
    assert unsupported(load_profile(ROOT / "subjects" / "jetstream" / "r3-default.toml"), scenario) is None


def _trial(tmp_path, fault, profile="r3-default.toml"):
    scenario = load_scenario(SCENARIO)
    with Runner(load_profile(ROOT / "subjects" / "jetstream" / profile), tmp_root=str(tmp_path)) as runner:
        ran = JETSTREAM.open(scenario, runner, None).run(JETSTREAM.plan(scenario, None, 1, 1, [[fault]])[0])
    return ran, ran.history.legs[0].fault.detail, {v.invariant: v for v in check_all(ran.history, ["I4", "I6"])}


def test_a_killed_follower_cut_inside_its_first_record_recovers_and_leads_with_every_record(tmp_path):
    ran, detail, verdicts = _trial(tmp_path, {"kind": "damage", "mode": "truncate", "record": 0, "part": "inside"})
    assert ran.faults == {"damage": 1} and detail["mode"] == "truncate" and detail["file"].endswith("msgs/1.blk")
    assert 0 < detail["offset"] == detail["size_after"] < detail["record"]["length"] < detail["size"]
    assert detail["stream_after"]["leader"] == detail["server"] != detail["leader_before"]  # the damaged node leads
    assert detail["meta_leader_before"] in ("n1", "n2", "n3") and detail["server"] != detail["meta_leader_before"]
    assert detail["stream_after"]["missing"] == [] and detail["stream_after"]["messages"] == 7
    assert verdicts["I4"].status == "valid" and verdicts["I6"].status == "valid"


def test_a_follower_stopped_cleanly_then_bitflipped_leads_without_the_record_and_loses_it(tmp_path):
    """nats-server 2.15.1: the clean stop wrote the stream's state file and compacted its raft log; after the flip
    it restores 7 messages without checking the block, leads, lists seq 7 and answers it has no message 7."""
    ran, detail, verdicts = _trial(tmp_path, {"kind": "damage", "mode": "bitflip", "record": -1, "part": "payload",
                                              "clean_stop": True})
    seq = detail["record"]["seq"]
    assert detail["clean_stop"] and "index.db" in detail["stream_files"] and detail["size_after"] == detail["size"]
    assert detail["stream_after"]["leader"] == detail["server"]
    assert detail["stream_after"]["messages"] == 7 and detail["stream_after"]["missing"] == [seq]
    assert verdicts["I4"].status == "invalid"
    assert [v["seq"] for v in verdicts["I4"].evidence["violations"] if v["kind"] == "lost"] == [seq]
    assert verdicts["I6"].status == "invalid"  # the run's terminal record is gone: it folds open


def test_with_sync_always_a_follower_stopped_cleanly_then_cut_leads_with_fewer_records_and_they_are_lost(tmp_path):
    """nats-server 2.15.1, ``sync_interval: always``: after the clean stop and the cut inside the last record, the
    follower rebuilds its state (6 messages), does not catch up from its peers, and leads: seq 7 is lost."""
    ran, detail, verdicts = _trial(tmp_path, {"kind": "damage", "mode": "truncate", "record": -1, "part": "inside",
                                              "clean_stop": True}, "r3-always.toml")
    seq = detail["record"]["seq"]
    assert detail["size_after"] == detail["offset"] < detail["size"]
    assert detail["stream_after"]["leader"] == detail["server"]
    assert detail["stream_after"]["messages"] == seq - 1 and detail["stream_after"]["missing"] == [seq]
    assert any("will rebuild" in line for line in detail["server_log"])
    assert not any("Catchup" in line for line in detail["server_log"])
    assert [v["seq"] for v in verdicts["I4"].evidence["violations"] if v["kind"] == "lost"] == [seq]
