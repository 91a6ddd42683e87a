"""I3 at most one model call repeated per crash."""

from synth import Engine

from harness.checkers import i3_model_repeats
from harness.history.model import ModelCall


def _again(h, call, leg, dt=1):
    h.model_calls.append(ModelCall(index=len(h.model_calls), t=h.legs[leg].t_start + dt, key=call.key,
                                   turn=call.turn, messages=call.messages, reply=call.reply, leg=leg))


def test_a_kill_between_the_model_call_and_its_record_allows_one_repeat():
    eng = Engine()
    eng.leg(kill_after=2)           # M, call -> killed before A(0) was journaled
    v = i3_model_repeats.check(eng.finish())
    assert v.status == "valid", v.evidence
    (row,) = v.evidence["attributed"]
    assert row["repeat_leg"] == 1 and row["crash_leg"] == 0 and row["turn"] == 0


def test_every_call_once_when_nothing_crashed():
    v = i3_model_repeats.check(Engine().finish())
    assert v.status == "valid" and v.evidence["checked"] == 0 and v.evidence["calls"] == 3


def test_a_repeat_of_a_call_whose_record_was_acknowledged_is_caught():
    eng = Engine()
    eng.leg(kill_after=3)           # M, call, A(0) journaled -> killed
    h = eng.finish()
    _again(h, h.model_calls[0], 1)  # broken resume asks turn 0 again
    v = i3_model_repeats.check(h)
    assert v.status == "invalid"
    (row,) = v.evidence["violations"]
    assert row["kind"] == "unattributed_repeat" and row["turn"] == 0 and row["assistant_record"] == 1
    assert "holds assistant record #1" in row["refused_candidates"][0]["why"]


def test_two_repeats_charged_to_one_crash_are_caught():
    eng = Engine()
    eng.leg(kill_after=2)
    h = eng.finish()
    _again(h, h.model_calls[0], 1, dt=2)    # a third call of turn 0, after the allowed repeat
    v = i3_model_repeats.check(h)
    assert v.status == "invalid"
    (row,) = v.evidence["violations"]
    assert row["calls"] == 3 and row["repeat"]["leg"] == 1 and row["previous"]["leg"] == 1
    assert row["kind"] == "repeat_within_leg"


def test_a_repeat_after_a_clean_exit_is_caught():
    eng = Engine()
    eng.leg(suspend_at=1)
    h = eng.finish()
    _again(h, h.model_calls[0], 1)
    (row,) = i3_model_repeats.check(h).evidence["violations"]
    assert row["kind"] == "unattributed_repeat" and "not killed" in row["refused_candidates"][0]["why"]


def test_a_power_loss_that_drops_the_unsynced_assistant_record_allows_one_repeat():
    eng = Engine()
    eng.leg(kill_after=3, fsync=False)   # broken fsync only for this leg: A(0) written, never synced
    eng.synced = len(eng.file.split(b"\n")[0]) + 1
    eng.power_loss()                     # the crash state keeps only meta
    v = i3_model_repeats.check(eng.finish())
    assert v.status == "valid", v.evidence
    assert v.evidence["attributed"][0]["fault"] == "power_loss"


def test_a_repeat_of_a_reply_the_crashed_leg_had_acted_on_is_a_lost_delivered_reply():
    from harness.history.model import Effect
    eng = Engine()
    eng.leg(kill_after=2)           # M, call -> killed before A(0) was journaled: one repeat allowed ...
    h = eng.finish()
    first = h.model_calls[0]
    tool = next(b["id"] for b in first.reply if b.get("type") == "tool_use")
    h.effects.append(Effect(tool_use_id=tool, attempt=1, pid=1, t=first.t + 1, leg=0))  # ... unless it ran its tool
    v = i3_model_repeats.check(h)
    assert v.status == "invalid"
    (row,) = v.evidence["violations"]
    assert row["kind"] == "lost_delivered_reply" and row["acted_on"] == f"ran {tool}" and row["turn"] == 0


def test_a_leg_that_ended_in_error_after_its_jetstream_server_was_killed_counts_as_one_crash():
    from harness.history.model import Fault

    def history(injected):
        eng = Engine()
        eng.leg(kill_after=2)           # M, call -> its record's publish never acknowledged: exit 1
        h = eng.finish()
        h.legs[0].exit_signal, h.legs[0].exit_code = None, 1
        h.legs[0].fault = Fault(kind="server_kill", injected=injected)
        return h

    assert i3_model_repeats.check(history(True)).status == "valid"
    assert i3_model_repeats.check(history(False)).status == "invalid"   # an error exit alone excuses no repeat
