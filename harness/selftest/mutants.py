"""The mutants: deliberately broken variants of fiskj, one row each, applied in a child process only.

:data:`MUTANTS` is the one table; a child's preload calls :func:`preload` to apply the row ``$FISKJ_MUTANT``
names.  Importing this module, or a patch module, changes nothing (docs/selftest.md)."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from harness.names import MUTANT_ENV, MUTANT_PRELOAD, MUTANT_SUBJECT, PRELOAD_ENV
from harness.selftest.patches import fingerprint, lock, loop, reader, store, tails
from harness.suggest import did_you_mean

if TYPE_CHECKING:
    from harness.subject.contract import Subject

__all__ = ["UNIT", "Mutant", "MUTANTS", "mutants", "race_mutants", "get", "mutant_env", "subject_for",
           "with_preload", "preload"]

@dataclass(frozen=True)
class Mutant:
    """A broken variant of fiskj: a row of :data:`MUTANTS` (docs/selftest.md "The table").

    ``family``: the fault family that must catch it (:data:`UNIT`: the unit
    tests of the file ``scenario`` names); ``scenario``: the bundled scenario
    that must (``kill-random``, ``regressions/NAME``); ``trials`` and ``seed``
    (``None``: the scenario's own): its first draw; ``expect``: the invariants
    expected; ``patch``: breaks fiskj in the calling process; ``shrink``: the
    trials a shrink may run.
    """

    name: str
    defect: str
    family: str
    scenario: str
    trials: int
    expect: tuple[str, ...]
    patch: Callable[[], None]
    seed: int | None = None
    shrink: int = 10

    @property
    def race(self) -> str | None:
        """For the race family, the race that must catch it (its scenario is ``race-<race>``); else ``None``."""
        return self.scenario.removeprefix("race-") if self.family == "race" else None


M = Mutant
#: The family of a mutant no campaign can show, caught by the unit tests its row names.
UNIT = "unit"
#: Every mutant, in the self-test's order:
#: ``M(name, defect, family, scenario, trials, expect, patch[, seed][, shrink])``.
MUTANTS: tuple[Mutant, ...] = (
    # durability of appends and directories: crash states of the power-loss family (I4)
    M("no-fsync", "appends are written but never fsynced: an acknowledged record can be lost to a power loss",
      "power_loss", "power-loss-basic", 16, ("I4",), store.unsynced_appends),
    M("fsync-before-write", "the fsync comes before the write: each append returns with its record unsynced",
      "power_loss", "power-loss-basic", 16, ("I4",), partial(store.unsynced_appends, fsync_first=True)),
    M("no-dir-fsync", "no directory fsync on the first append: a power loss can drop the new journal's name",
      "power_loss", "power-loss-basic", 16, ("I4",), store.no_dir_fsync),
    M("store-dir-not-durable", "the store directory is created (mkdir -p) but its entry is never fsynced in its "
      "parent (defect 4)", "power_loss", "power-loss-basic", 16, ("I4",), store.store_dir_not_durable),
    # torn tails and the reader: the tail family (reader answers as I5, repairs as I4)
    M("torn-tail-not-cut", "open does not cut a torn tail before appending: the next record is glued to the torn "
      "bytes (defect 1)", "tail", "tails-basic", 4, ("I4", "I5"), tails.keep_torn_tail),
    M("reader-tolerates-corruption", "the reader silently skips an unparsable line in the middle of the journal",
      "tail", "tails-basic", 4, ("I5",), reader.skip_interior_damage),
    M("reader-drops-final-record", "the reader drops a complete, valid final record (reports it as a torn tail)",
      "tail", "tails-basic", 4, ("I4", "I5"), reader.drop_final_record),
    # the agent loop: kills, suspends, budgets and drift
    M("result-before-tool", "a tool_result record is journaled before its tool runs (the journal claims an effect "
      "that has not happened)", "kill", "kill-every-event", 40, ("I6",), loop.result_before_tool),
    M("assistant-after-tools", "the assistant record is journaled after its tools ran, so a crash mid-batch re-runs "
      "finished tools", "kill", "chain-crash-in-pending-batch", 30, ("I2",), loop.assistant_after_tools),
    M("suspend-mid-batch", "suspend is honoured in the middle of a tool batch, not only at a loop boundary",
      "suspend", "suspend-clean", 16, ("I1",), loop.suspend_mid_batch),
    M("resume-reruns-answered", "resume re-runs the answered tools of a pending batch instead of only the "
      "unanswered ones", "kill", "kill-every-event", 40, ("I2",), loop.rerun_answered_tools),
    M("counters-in-memory", "counters (tokens spent, iteration) are kept in memory and start from zero on resume "
      "instead of the fold", "kill", "budget-end-kill", 12, ("I6",), loop.counters_from_zero),
    M("fingerprint-ignores-model", "one fingerprint field (the model) is ignored by the resume guard: model drift "
      "is not refused", "suspend", "drift-refused", 6, ("I9",), partial(fingerprint.ignore_field, "model")),
    # the bug the suite found (a SIGKILL right after the journal's O_EXCL create), caught by its regression scenario
    M("create-not-reclaimed", "a journal left empty by a crashed create is refused as an existing run instead of "
      "reclaimed", "kill", "regressions/regression-kill-every-event-i6-2f917387", 1, ("I6",),
      store.create_not_reclaimed, shrink=0),
    # the run lock and the store under concurrency: the race family, legs held at sequence points
    M("fold-before-lock", "resume folds the journal before taking the lock (docs/spec.md section 16, defect 2)",
      "race", "race-two-resumers", 9, ("I2", "I5"), lock.fold_before_lock),
    M("create-no-excl", "create checks existence, then opens without O_EXCL (docs/spec.md section 16, defect 3)",
      "race", "race-two-creates", 9, ("I2", "I4", "I5"), store.create_without_excl),
    M("release-before-last-append", "the run lock is released before the last (terminal) append",
      "race", "race-two-writers", 12, ("I8",), lock.release_before_last_append),
    M("stale-lock-file", "the lock is an O_EXCL marker file that a SIGKILLed holder leaves behind",
      "race", "race-holder-killed", 6, ("I6", "I8"), lock.marker_file_lock),
    M("blocking-lock", "flock without LOCK_NB: the second writer waits instead of failing at once",
      "race", "race-two-writers", 12, ("I8",), lock.blocking_flock),
    M("reader-locks", "load takes the run lock: reading a run that is being written fails (RunLocked)",
      "race", "race-readers-during-appends", 6, ("I10",), lock.reader_locks),
    # a reader that calls a torn tail corruption: the tail family gives the reader torn journals (I5)
    M("torn-tail-is-corrupt", "load and list raise on a partial last line instead of reporting a torn tail",
      "tail", "tails-basic", 4, ("I5", "I6"), tails.torn_tail_is_corrupt),
    # the run lock's semantics inside its holder: fiskj's commands never close another descriptor of the lock
    # file while they hold it, and run their tools with close_fds, so no campaign can show these two; the unit
    # tests of tests/test_lock.py apply each and assert it is caught (field case F18)
    M("lockf", "the run lock is fcntl.lockf, dropped when any descriptor of the lock file closes",
      UNIT, "tests/test_lock.py", 0, (), lock.lockf),
    M("no-cloexec", "the lock descriptor is not close-on-exec: a tool child keeps the run locked",
      UNIT, "tests/test_lock.py", 0, (), lock.inheritable_lock),
    # the lock is held until the writer's last fsync and close (I8)
    M("unlock-before-close", "the run lock is released before the journal's descriptor is closed",
      "race", "race-two-writers", 4, ("I8",), lock.unlock_before_close),
    # the JetStream store (issue 28): the server's faults, a run's writers on two nodes (the jetstream family)
    M("jetstream-ignores-lost-ack", "after a lost ack (the server killed between persisting a record and acking "
      "it) the journal appends the record again instead of adopting its own", "jetstream", "jetstream/jetstream-server-kill",
      7, ("I5", "I6"), store.jetstream_ignores_lost_ack),
    M("jetstream-no-fence", "the journal publishes without the fence (the expected last sequence over the run's "
      "subjects): a writer whose run was deleted under it appends its next records into the deleted run",
      "jetstream", "jetstream/jetstream-stale-writer", 1, ("I4", "I6"), store.jetstream_no_fence),
    # IO errors injected from outside: the io_error family (I4: nothing that failed is acknowledged)
    M("fsync-error-retried", "a failed fsync is retried until it succeeds and the append is acknowledged",
      "io_error", "io-errors", 6, ("I4",), store.retry_failed_fsync),
    M("write-error-swallowed", "a failed journal write is ignored: the run goes on and completes over a hole",
      "io_error", "io-errors", 4, ("I4",), store.swallow_write_errors),
    # the engine's own reading of its journal: the subject's status command as an oracle (I10)
    M("status-stays-suspended", "a resumed run keeps reading 'suspended' after later records (defect 5)",
      "kill", "chain-crash-after-suspend", 12, ("I10",), reader.status_stays_suspended),
    # how a resumed run ends: status, terminal record and iteration count against the reference (I6),
    # and no model call once the journal holds the final answer (I3)
    M("resume-skips-completed", "a resumed leg that completes the run does not journal the completed terminal "
      "record", "kill", "kill-every-event", 12, ("I6", "I9"), loop.resume_skips_completed),
    M("pending-turn-not-counted", "resume ignores the pending assistant turn when numbering iterations (a capped "
      "run overruns its cap)", "kill", "iteration-cap-kill", 20, ("I6",), loop.pending_turn_not_counted),
    M("recall-after-final-answer", "resume calls the model again when the journal already holds the final answer "
      "(no terminal yet)", "kill", "kill-after-answer", 30, ("I3", "I6"), loop.recall_final_answer),
    # a tail fault's damage is excused only until the engine appends past it (I5)
    M("complete-torn-line-kept", "open cuts a torn final line only when it lacks its newline: appends follow a "
      "complete unparsable line", "tail", "tails-basic", 4, ("I5",), tails.keep_complete_torn_line),
    # the uninterrupted run itself ends wrong: judged as a trial, not a setup error (I5, I6)
    M("completed-never-written", "the run never journals its completed terminal record (the uninterrupted run "
      "itself ends wrong)", "kill", "noop-baseline", 1, ("I6",), loop.completed_never_written, shrink=0),
    M("newline-first", "records are framed newline-first: the final record never ends in its newline and reads "
      "as torn", "kill", "noop-baseline", 1, ("I5", "I6"), store.newline_first, shrink=0),
    # the resume guard ignores one fingerprint field: only a drift of that field alone shows it (I9)
    M("fingerprint-ignores-system", "one fingerprint field (the system prompt) is ignored by the resume guard: its "
      "drift alone is not refused", "suspend", "drift-system", 4, ("I9",),
      partial(fingerprint.ignore_field, "system_hash")),
    M("fingerprint-ignores-thinking", "one fingerprint field (the thinking mode) is ignored by the resume guard: its "
      "drift alone is not refused", "suspend", "drift-thinking", 4, ("I9",),
      partial(fingerprint.ignore_field, "thinking_mode")),
    M("fingerprint-ignores-tools", "one fingerprint field (the tool set) is ignored by the resume guard: its drift "
      "alone is not refused", "suspend", "drift-tools", 4, ("I9",), partial(fingerprint.ignore_field, "tools_hash")),
    M("fingerprint-ignores-max-tokens", "one fingerprint field (the token budget) is ignored by the resume guard: "
      "its drift alone is not refused", "suspend", "drift-max-tokens", 4, ("I9",),
      partial(fingerprint.ignore_field, "max_tokens")),
    M("fingerprint-ignores-max-iterations", "one fingerprint field (the iteration cap) is ignored by the resume "
      "guard: its drift alone is not refused", "suspend", "drift-max-iterations", 4, ("I9",),
      partial(fingerprint.ignore_field, "max_iterations")),
    # damage inside the journal taken for its end: the resume re-does and cuts acknowledged work
    M("nul-block-ends-journal", "the reader takes a NUL block inside the journal for its end and the resume cuts "
      "what follows", "tail", "tails-basic", 4, ("I2", "I3", "I4", "I5"), reader.nul_block_ends_journal),
    # a torn-tail repair that cuts an acknowledged line too: I4 names the loss (power loss: lost_by_recovery)
    M("torn-tail-overcut", "the torn-tail repair cuts back one complete, acknowledged line too many",
      "tail", "tails-basic", 4, ("I4",), tails.overcut_torn_tail, shrink=0),
    # --- issue 15, class 2: payloads the workload once never produced -----------------------------------------
    # Records holding U+0085, an output over the record limit, signed thinking (scenarios/payload-variety.toml)
    # and cache tokens in a run that ends on its budget (payload-cache-budget.toml), each killed at seam
    # events: 3 trials are the kill before event 1, one sampled event and the kill after the last one; seed 3
    # samples event 23 of payload-variety (mid-run: a resume re-reads U+0085, reruns the over-limit tool and
    # sends thinking back); the last event of payload-cache-budget resumes a run ended on its budget.
    M("reader-splits-unicode-lines", "the reader splits lines with str.splitlines, so U+0085 (and U+2028, U+2029, "
      "...) inside a record ends a line", "kill", "payload-variety", 3, ("I2", "I3", "I10"),
      reader.split_unicode_lines, seed=3, shrink=0),
    M("resume-writer-no-record-limit", "the writer of a resumed leg has no record-size limit: an oversized tool "
      "output is journaled whole", "kill", "payload-variety", 3, ("I4", "I5", "I6", "I8"),
      store.resume_writer_no_record_limit, seed=3, shrink=0),
    M("thinking-signature-dropped", "the writer drops the signature of thinking blocks, so a resume sends them back "
      "unsigned", "kill", "payload-variety", 3, ("I6",), store.drop_thinking_signatures, seed=3, shrink=0),
    M("cache-counters-not-folded", "the fold drops the cache token counters, so a resumed run restores its token "
      "count without them", "kill", "payload-cache-budget", 3, ("I6",), loop.cache_counters_not_folded, shrink=0),
    # a run with thinking on (scenarios/thinking-kill.toml), killed inside a tool loop: the resume must send the
    # turn in flight with its thinking block first, or the Messages API refuses it (HTTP 400)
    M("thinking-stripped-on-resume", "a resume strips the thinking blocks of every inherited turn, the tool loop in "
      "flight included", "kill", "thinking-kill", 4, ("I6",), loop.strip_inherited_thinking, shrink=0),
    # a crash after the final answer was journaled, before its terminal record: the resume must print it
    M("answer-not-printed-on-resume", "a resume that settles a journaled final answer completes the run without "
      "printing the answer", "kill", "kill-after-answer", 30, ("I6",), loop.settled_answer_not_printed, shrink=0),
    # a reply cut off by max_tokens ends the run with error; a resume (after a crash, or after the end) must not
    # run its tool call: the resume after the end shows it in every trial
    M("cut-off-turn-run-on-resume", "a resume settles a turn cut off by max_tokens (or refused) as a tool turn: its "
      "tools run", "kill", "max-tokens-kill", 4, ("I6",), loop.run_cut_off_turn, shrink=0),
    # fisk-ai runs the tool call of a reply cut off by max_tokens and completes the run: every run shows it, the
    # uninterrupted one included, so the workload's own rule catches it, not a comparison with that run (I6)
    M("cut-off-turn-run", "the tool calls of a reply cut off by max_tokens run, and the run goes on to complete",
      "kill", "max-tokens-kill", 1, ("I6",), partial(loop.run_cut_off_turn, fresh_too=True), shrink=0),
    # a defect in every run, the uninterrupted one included, so I6's comparison cannot see it: the workload's
    # own oracle (I11: the usage the model sent, the budget's turn) catches it in every trial
    M("drops-cache-usage", "the loop ignores the cache token counts the model reports: journaled without them and "
      "not counted toward the budget", "kill", "payload-cache-budget", 1, ("I11",), loop.cache_usage_ignored, shrink=0),
    M("budget-one-turn-late", "the budget check does not count the reply it settles: a run ends on its budget one "
      "reply late", "kill", "budget-end-kill", 1, ("I11",), loop.budget_one_turn_late, shrink=0),
    # fisk-ai resumes every run that is not completed: refusing one that ended with error is I9 refused_resumable
    M("ended-leg-not-resumable", "a run whose last leg ended with error, budget or max_iterations is refused "
      "instead of resumed", "kill", "max-tokens-kill", 4, ("I9",), fingerprint.refuse_ended_legs, shrink=0),
)
del M


def _check(table: tuple[Mutant, ...]) -> None:
    """Refuse a table with a name written twice (a lookup would find only the first row)."""
    twice = [name for name, rows in Counter(m.name for m in table).items() if rows > 1]
    if twice:
        raise ValueError(f"mutant {twice[0]!r} has two rows in harness.selftest.mutants.MUTANTS")


_check(MUTANTS)


def mutants(family: str | None = None) -> list[Mutant]:
    """Every mutant (of ``family``, when given), in :data:`MUTANTS` order."""
    return [m for m in MUTANTS if family is None or m.family == family]


def race_mutants() -> dict[str, Mutant]:
    """The race family's mutants by name (each names its ``race``)."""
    return {m.name: m for m in mutants("race")}


def get(name: str) -> Mutant:
    """The mutant called ``name``; raises ``KeyError`` naming the known ones."""
    found = [m for m in MUTANTS if m.name == name]
    if found:
        return found[0]
    names = [m.name for m in MUTANTS]
    raise KeyError(f"unknown mutant {name!r}{did_you_mean(name, names)}; known: {', '.join(names)}")


#: The JetStream profile (``subjects/jetstream/NAME.toml``) a jetstream mutant runs on, when not ``r1-always``:
#: two writers on two nodes need a cluster.
JETSTREAM_PROFILES = {"jetstream-no-fence": "r3-always"}


def mutant_env(name: str) -> tuple[tuple[str, str], ...]:
    """The variables that give mutant ``name`` to a child: ``FISKJ_MUTANT=name`` (what the preload applies, and
    what reports and reproducers show) and ``FISKJ_PRELOAD=harness.selftest.mutants`` (the preload); raises
    ``KeyError`` for an unknown name."""
    return ((MUTANT_ENV, get(name).name), (PRELOAD_ENV, MUTANT_PRELOAD))


def subject_for(name: str) -> Subject:
    """The mutant subject with mutant ``name``: ``python -m harness.selftest.subject`` and :func:`mutant_env`."""
    import sys

    from harness.subject.contract import Subject, with_fiskj_reading

    if get(name).family == "jetstream":  # the reference on a JetStream server (cluster) the family starts
        from harness.subject.profile import load_profile

        profile = JETSTREAM_PROFILES.get(name, "r1-always")
        js = load_profile(Path(__file__).resolve().parents[2] / "subjects" / "jetstream" / f"{profile}.toml")
        return replace(js, argv=(sys.executable, "-m", MUTANT_SUBJECT), extra_env=mutant_env(name), profile=None)
    return with_fiskj_reading(Subject(argv=(sys.executable, "-m", MUTANT_SUBJECT), extra_env=mutant_env(name)))


def with_preload(subject: Subject, environ: Mapping[str, str] | None = None) -> Subject:
    """``subject`` with the preload of the mutant its legs are given by name, where none is named.

    A ``FISKJ_MUTANT=name`` in the mutant subject's variables or in ``environ``
    (default ``os.environ``) without a ``FISKJ_PRELOAD`` becomes both
    variables of the subject (:func:`mutant_env`); another subject is returned
    as is.  Raises ``KeyError`` for an unknown name.
    """
    if not subject.is_mutant_subject:
        return subject
    env = {**(os.environ if environ is None else environ), **dict(subject.extra_env)}
    name = (env.get(MUTANT_ENV) or "").strip()
    if not name or env.get(PRELOAD_ENV):
        return subject
    kept = tuple((k, v) for k, v in subject.extra_env if k not in (MUTANT_ENV, PRELOAD_ENV))
    return replace(subject, extra_env=mutant_env(name) + kept)


def preload(environ: Mapping[str, str]) -> None:
    """The preload hook (:func:`harness.subject.preload.load_preload` calls it in a child): apply the mutant
    ``environ`` names in ``$FISKJ_MUTANT``, in THIS process.  Raises ``KeyError`` for none or an unknown one."""
    name = (environ.get(MUTANT_ENV) or "").strip()
    if not name:
        raise KeyError(f"{PRELOAD_ENV}={MUTANT_PRELOAD} names no mutant: set {MUTANT_ENV}=NAME")
    get(name).patch()
