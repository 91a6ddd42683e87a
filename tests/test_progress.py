"""The progress display: a stable total and an ETA on a terminal, a status line every ~10 s elsewhere."""

from __future__ import annotations

import io
import time

from harness.cli.progress import Progress, format_duration


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_durations_read_as_a_person_reads_them():
    assert [format_duration(s) for s in (0, 42.4, 65, 3600 + 61)] == ["0 s", "42 s", "1 min 05 s", "1 h 01 min"]


def test_on_a_terminal_one_line_is_rewritten_with_the_total_the_rate_and_the_time_left():
    out, clock = Tty(), Clock()
    show = Progress(out, clock=clock)
    show(0, 40, 0)
    clock.now += 10
    show(10, 40, 1)
    last = out.getvalue().split("\r")[-1]
    assert "10/40 trials, 1 failing, 1.0 trials/s, ETA 30 s" in last and "\n" not in last
    clock.now += 30
    show(40, 40, 1)
    assert out.getvalue().split("\r")[-1].startswith("  40/40 trials, 1 failing, done in 40 s")
    assert out.getvalue().endswith("\n")
    assert {chunk.split("/")[1].split()[0] for chunk in out.getvalue().split("\r")[1:]} == {"40"}  # one total
    show.close()
    assert out.getvalue().count("\n") == 1  # close() adds nothing to an ended line


def test_a_line_said_during_the_progress_starts_on_a_line_of_its_own():
    out = Tty()
    show = Progress(out, clock=Clock())
    show(0, 3, 0)
    show.say("fiskj-harness gate: round 0 done")
    assert out.getvalue().endswith("ETA unknown until a trial ends   \nfiskj-harness gate: round 0 done\n")
    show.close()


def test_off_a_terminal_a_status_line_every_ten_seconds_and_one_at_the_end():
    out, clock = io.StringIO(), Clock()
    show = Progress(out, clock=clock, timer=False)
    for at, done in ((0, 0), (5, 1), (11, 2), (15, 3), (21.5, 4)):
        clock.now = 100 + at
        show(done, 8, 0)
    lines = out.getvalue().splitlines()
    assert lines == ["fiskj-harness: 2/8 trials, 0 failing, 5.5 s/trial, ETA 33 s",
                     "fiskj-harness: 4/8 trials, 0 failing, 5.4 s/trial, ETA 22 s"]
    clock.now = 130
    show(8, 8, 0)
    assert out.getvalue().splitlines()[-1] == "fiskj-harness: 8/8 trials, 0 failing, done in 30 s (3.8 s/trial)"
    assert "\r" not in out.getvalue()


def test_off_a_terminal_the_timer_says_it_while_a_long_trial_runs():
    out = io.StringIO()
    show = Progress(out, every_s=0.05)
    show(0, 5, 0)
    time.sleep(0.3)  # no trial ends: the timer writes the status every every_s seconds
    show.close()
    lines = out.getvalue().splitlines()
    assert lines and all(line == "fiskj-harness: 0/5 trials, 0 failing, ETA unknown until a trial ends"
                         for line in lines)


def test_a_closed_stream_silences_it_without_an_error():
    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    show = Progress(Closed(), tty=True, clock=Clock())
    show(0, 2, 0)
    show(1, 2, 0)
    show.close()


def test_a_gate_counts_down_to_its_budget_and_its_total_grows_with_its_fresh_draws():
    out, clock = Tty(), Clock()
    show = Progress(out, clock=clock, ends_at=clock.now + 60)
    show(0, 40, 0)
    clock.now += 20
    show(40, 40, 0)                                  # draw 0 spent, not the gate: no "done", no newline
    clock.now += 10
    show(50, 80, 0)                                  # the next draws planned more
    last = out.getvalue().split("\r")[-1]
    assert "50/80 trials, 0 failing, 1.7 trials/s, budget ends in 30 s" in last and "done in" not in last


def test_when_first_violation_drops_the_trials_not_started_the_last_line_counts_those_that_ran():
    out, clock = Tty(), Clock()
    show = Progress(out, clock=clock)
    show(0, 16, 0)
    clock.now += 2
    show(1, 16, 1)                      # a violation: the scenario's other 14 trials are dropped
    clock.now += 1
    show(2, 2, 1)                       # the one still running ends
    last = out.getvalue().split("\r")[-1]
    assert last.startswith("  2/2 trials, 1 failing, done in 3 s") and out.getvalue().endswith("\n"), last
