"""harness/history/timeline.py: a leg's own time line (ready, last work, exit), measured from outside."""

import pytest

from harness.history.model import Effect, History, Leg, ModelCall
from harness.history.timeline import first_journal_event, leg_timeline

MS = 1_000_000


def _history(trace, calls=(), effects=()):
    leg = Leg(index=0, kind="start", argv=["agent"], t_start=1000 * MS, t_end=1200 * MS, trace=list(trace))
    return History(scenario="s", seed=0, schedule=[], run_id="r", legs=[leg], model_calls=list(calls),
                   effects=list(effects))


def test_ready_is_the_first_observed_work_and_last_the_last_whatever_its_kind():
    h = _history([{"op": "write", "t0": 1050 * MS, "t": 1051 * MS}, {"op": "fsync", "t": 1150 * MS}],
                 calls=[ModelCall(index=0, t=1040 * MS, key="k", turn=0, messages=[], reply=[], leg=0)],
                 effects=[Effect(tool_use_id="t", attempt=1, pid=1, t=1170 * MS, leg=0)])
    tl = leg_timeline(h)
    assert (tl.ready_ms, tl.last_ms, tl.end_ms) == (40.0, 170.0, 200.0)
    assert tl.span_ms == 130.0


def test_work_of_another_leg_or_outside_the_leg_does_not_count():
    h = _history([{"op": "write", "t": 1100 * MS}, {"op": "write", "t": 5000 * MS}],
                 calls=[ModelCall(index=0, t=1010 * MS, key="k", turn=0, messages=[], reply=[], leg=3)])
    tl = leg_timeline(h)
    assert (tl.ready_ms, tl.last_ms) == (100.0, 100.0) and tl.span_ms == 1.0


def test_a_leg_with_nothing_observed_spans_its_whole_life_and_no_leg_is_an_error():
    tl = leg_timeline(_history([]))
    assert (tl.ready_ms, tl.last_ms, tl.end_ms) == (0.0, 200.0, 200.0)
    with pytest.raises(IndexError):
        leg_timeline(History(scenario="s", seed=0, schedule=[], run_id="r"))


def test_start_up_is_not_work_ready_is_the_first_journal_call_model_call_or_effect():
    # An agent's start-up calls (its config, its libraries) come first; ready is its first journal call.
    h = _history([{"n": 1, "op": "open", "path": "/s/fisk-ai/runs/memory", "error": "ENOENT", "t": 1005 * MS},
                  {"n": 1, "op": "open", "path": "/home/.config", "t": 1010 * MS},
                  {"n": 2, "op": "mkdir", "path": "/s/fisk-ai/runs", "t": 1070 * MS},
                  {"n": 3, "op": "open", "path": "/s/fisk-ai/runs/r.json", "t": 1080 * MS},
                  {"n": 4, "op": "write", "path": "/s/fisk-ai/runs/r.json", "t": 1090 * MS}])
    assert leg_timeline(h).ready_ms == 80.0 and first_journal_event(h) == 2     # its folder's mkdir is the run's
    assert first_journal_event(_history([{"n": 1, "op": "open", "path": "/x", "t": 1010 * MS}])) == 0
