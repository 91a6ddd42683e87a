"""The race nemesis: writers, resumers, creators and readers of one run, racing under sequence points.

Issue 6 item 3 and field cases F14, F15, F18 (docs/field-cases.md); fisk-ai's
defects 2 and 3 (docs/spec.md section 16).
Each *race* is two or three :mod:`harness.families.race.agent` processes working on
one run of a fresh store.  The driver orders them with explicit sequence
points, never with sleeps: an agent's answer on its pipe, a breakpoint on an
IO-seam call (the agent pauses before or after the k-th ``flock``,
``open``, ``write``, ``fsync`` or ``close`` of the lock or journal file, or
in the middle of a write, and waits for a ``continue`` line), a ledger-tool
breakpoint, and ``waitpid`` of a SIGKILLed holder.  Where the order is
meant to be free, commands are sent together with random busy-wait spins
(jitter).  Each trial draws its *schedule* (a forced interleaving, or a
free one) and its parameters from ``random.Random(f"{race}/{seed}")``, so a
trial is replayed by its race, seed and mutant.

Races (:data:`RACES`) and what each expects beyond the invariants:

* ``two-writers``: while A holds the run (idle, paused mid-append, or
  having just released it), B's ``open`` gets ``RunLocked`` at once (within
  :data:`AT_ONCE_MS`) and changes no byte; free sessions never interleave.
* ``two-resumers``: two resumes of a run with a pending tool batch: exactly
  one proceeds, the other is refused (``RunLocked``, or ``ResumeRefused``
  once the winner completed it); each unanswered tool runs once, an
  answered one never (defect 2, F15).
* ``two-creates``: two creates of one named run: exactly one wins, the
  other gets ``RunExists`` and writes nothing; the journal is the winner's
  records, all of them (defect 3).
* ``holder-killed``: A is SIGKILLed holding the run (at a seam call, mid
  write, or after a random number of acks): once it is reaped, B opens the
  run at once and finds every record A acknowledged (F14).
* ``readers-during-appends``: a poller runs ``load`` and ``list`` in a
  tight loop while a writer appends, with writes split at sequence points:
  never an error, the seq never goes back, and a half-written line is a torn
  tail to them.
* ``lock-survives-other-fds``: A holds the run while it reads the journal
  through other descriptors, opens and closes the lock file, and runs a
  child that exits: B stays refused.  Then A starts a long-lived child and
  is SIGKILLed: B gets the run at once (the lock descriptor is close-on-exec,
  F18).

A trial returns a :class:`RaceResult`: a :class:`~harness.history.model.History`
(one :class:`~harness.history.model.Leg` per agent role, each with its IO-seam
trace with times ``t`` added, its journal snapshot and a
``Fault(kind="race", detail={...})``), the verdicts of the invariant
checkers of :mod:`harness.checkers` that apply (I2, I4, I5, I8, I9) and a
``race`` verdict for the race's own expectations.  Entry point for the
campaign: :func:`run_race_trial` with a shared :class:`RaceDriver` (the
pool of agent processes, reused across trials; one per mutant).

Modules: :mod:`.catalog` (the races, their invariants and schedules),
:mod:`.driver` (the agent pool and the pipe protocol), :mod:`.trial` (one
trial's roles and steps), :mod:`.expectations` (checks shared by races),
one module per race or pair of races (:mod:`.writers`, :mod:`.resumers`,
:mod:`.creates`, :mod:`.holders`, :mod:`.readers`), :mod:`.traces` and
:mod:`.to_history` (a trial as a history), :mod:`.verdicts` (judging it)
and :mod:`.run` (the entry points).
"""

from __future__ import annotations

from harness.families.race.catalog import AT_ONCE_MS, AT_ONCE_TIMEOUT_S, INVARIANTS_BY_RACE, JITTER_US, RACES, SCHEDULES
from harness.families.race.driver import AgentProc, AgentTimeout, RaceDriver
from harness.families.race.run import races_of, run_race_trial, run_races
from harness.families.race.trial import SetupFailed
from harness.families.race.verdicts import RaceResult, race_summary

__all__ = ["RACES", "INVARIANTS_BY_RACE", "SCHEDULES", "AT_ONCE_MS", "RaceResult", "RaceDriver", "AgentTimeout",
           "run_race_trial", "run_races", "races_of", "race_summary"]
