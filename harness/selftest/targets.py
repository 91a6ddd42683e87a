"""Which campaign must catch which mutant: the data of the mutant self-test (``fiskj-harness mutants``).

One :class:`Target` per mutant of :mod:`harness.selftest.mutants` (but those of
:data:`UNIT_TESTED`, which unit tests catch): the
bundled scenario whose fault family targets the mutant's bug class, how
many trials (and with which campaign seed) the self-test runs at first,
and the invariants expected to catch it (documentation: the self-test
reports what did catch it).  The scenarios are the bundled ones, so the
self-test proves that the suite CI runs catches every bug class it claims
to.  A new mutant gets a module and a row here; a test keeps this table
and the mutant modules in step.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Target", "TARGETS", "UNIT_TESTED", "FOREIGN_SUBJECT", "FOREIGN_TARGETS", "FOREIGN_NOT_CAUGHT", "JSONL_SUBJECT",
           "JSONL_TARGETS", "JSONL_NOT_CAUGHT", "JSONL_SAME_PATH"]


@dataclass(frozen=True)
class Target:
    """``mutant`` is caught by a campaign of bundled ``scenario`` (a name under ``scenarios/``, e.g.
    ``kill-random`` or ``regressions/NAME``; ``trials`` trials, campaign ``seed``: ``None`` is the
    scenario's own) through one of ``expect``; ``shrink`` bounds the trials a shrink may run."""

    mutant: str
    scenario: str
    trials: int
    expect: tuple[str, ...]
    seed: int | None = None
    shrink: int = 10


TARGETS: dict[str, Target] = {t.mutant: t for t in (
    # durability of appends and directories: crash states of the power-loss family (I4)
    Target("no-fsync", "power-loss-basic", 16, ("I4",)),
    Target("fsync-before-write", "power-loss-basic", 16, ("I4",)),
    Target("no-dir-fsync", "power-loss-basic", 16, ("I4",)),
    Target("store-dir-not-durable", "power-loss-basic", 16, ("I4",)),
    # torn tails and the reader: the tail family (reader answers as I5, repairs as I4)
    Target("torn-tail-not-cut", "tails-basic", 4, ("I4", "I5")),
    Target("reader-tolerates-corruption", "tails-basic", 4, ("I5",)),
    Target("reader-drops-final-record", "tails-basic", 4, ("I4", "I5")),
    # the agent loop: kills, suspends, budgets and drift
    Target("result-before-tool", "kill-every-event", 40, ("I6",)),
    Target("assistant-after-tools", "chain-crash-in-pending-batch", 30, ("I2",)),
    Target("suspend-mid-batch", "suspend-clean", 16, ("I1",)),
    Target("resume-reruns-answered", "kill-every-event", 40, ("I2",)),
    Target("counters-in-memory", "budget-end-kill", 12, ("I6",)),
    Target("fingerprint-ignores-model", "drift-refused", 6, ("I9",)),
    # the bug the suite found, caught by its regression scenario (scenarios/regressions/)
    Target("create-not-reclaimed", "regressions/regression-kill-every-event-i6-2f917387", 1, ("I6",), shrink=0),
    # the run lock and the store under concurrency: the race family, legs held at sequence points
    Target("fold-before-lock", "race-two-resumers", 9, ("I2", "I5")),
    Target("create-no-excl", "race-two-creates", 9, ("I2", "I4", "I5")),
    Target("release-before-last-append", "race-two-writers", 12, ("I8",)),
    Target("stale-lock-file", "race-holder-killed", 6, ("I6", "I8")),
    Target("blocking-lock", "race-two-writers", 12, ("I8",)),
    Target("reader-locks", "race-readers-during-appends", 6, ("I10",)),
    # a reader that calls a torn tail corruption: the tail family gives the reader torn journals (I5)
    Target("torn-tail-is-corrupt", "tails-basic", 4, ("I5", "I6")),
    # IO errors injected from outside: the io_error family (I4: nothing that failed is acknowledged)
    Target("fsync-error-retried", "io-errors", 6, ("I4",)),
    # the engine's own reading of its journal: the subject's status command as an oracle (I10)
    Target("status-stays-suspended", "chain-crash-after-suspend", 12, ("I10",)),
    # how a resumed run ends: status, terminal record and iteration count against the reference (I6),
    # and no model call once the journal holds the final answer (I3)
    Target("resume-skips-completed", "kill-every-event", 12, ("I6", "I9")),
    Target("pending-turn-not-counted", "iteration-cap-kill", 20, ("I6",)),
    Target("recall-after-final-answer", "kill-after-answer", 30, ("I3", "I6")),
    # a tail fault's damage is excused only until the engine appends past it (I5)
    Target("complete-torn-line-kept", "tails-basic", 4, ("I5",)),
    # the lock is held until the writer's last fsync and close (I8)
    Target("unlock-before-close", "race-two-writers", 4, ("I8",)),
    # the uninterrupted run itself ends wrong: judged as a trial, not a setup error (I5, I6)
    Target("completed-never-written", "noop-baseline", 1, ("I6",), shrink=0),
    Target("newline-first", "noop-baseline", 1, ("I5", "I6"), shrink=0),
    # the resume guard ignores one fingerprint field: only a drift of that field alone shows it (I9)
    Target("fingerprint-ignores-system", "drift-system", 4, ("I9",)),
    Target("fingerprint-ignores-thinking", "drift-thinking", 4, ("I9",)),
    Target("fingerprint-ignores-tools", "drift-tools", 4, ("I9",)),
    Target("fingerprint-ignores-max-tokens", "drift-max-tokens", 4, ("I9",)),
    Target("fingerprint-ignores-max-iterations", "drift-max-iterations", 4, ("I9",)),
    # damage inside the journal taken for its end: the resume re-does and cuts acknowledged work
    Target("nul-block-ends-journal", "tails-basic", 4, ("I2", "I3", "I4", "I5")),
    # a failed write taken for done: the run completes over a hole (I4)
    Target("write-error-swallowed", "io-errors", 4, ("I4",)),
    # --- issue 15, class 2: payloads the workload once never produced (appended block) -------------------
    # Records holding U+0085, an output over the record limit, signed thinking (scenarios/payload-variety.toml)
    # and cache tokens in a run that ends on its budget (payload-cache-budget.toml), each killed at seam
    # events: 3 trials are the kill before event 1, one sampled event and the kill after the last one; seed 3
    # samples event 23 of payload-variety (mid-run: a resume re-reads U+0085, reruns the over-limit tool and
    # sends thinking back); the last event of payload-cache-budget resumes a run ended on its budget.
    Target("reader-splits-unicode-lines", "payload-variety", 3, ("I2", "I3", "I10"), seed=3, shrink=0),
    Target("resume-writer-no-record-limit", "payload-variety", 3, ("I4", "I5", "I6", "I8"), seed=3, shrink=0),
    Target("thinking-signature-dropped", "payload-variety", 3, ("I6",), seed=3, shrink=0),
    Target("cache-counters-not-folded", "payload-cache-budget", 3, ("I6",), shrink=0),
    # a run with thinking on (scenarios/thinking-kill.toml), killed inside a tool loop: the resume must send
    # the turn in flight with its thinking block first, or the Messages API refuses it (HTTP 400)
    Target("thinking-stripped-on-resume", "thinking-kill", 4, ("I6",), shrink=0),
    # a crash after the final answer was journaled, before its terminal record: the resume must print it
    Target("answer-not-printed-on-resume", "kill-after-answer", 30, ("I6",), shrink=0),
    # a torn-tail repair that cuts an acknowledged line too: I4 names the loss (power loss: lost_by_recovery)
    Target("torn-tail-overcut", "tails-basic", 4, ("I4",), shrink=0),
    # a reply cut off by max_tokens ends the run with error; a resume (after a crash, or after the end) must not
    # run its tool call: the resume after the end shows it in every trial
    Target("cut-off-turn-run-on-resume", "max-tokens-kill", 4, ("I6",), shrink=0),
    # fisk-ai resumes every run that is not completed: refusing one that ended with error is I9 refused_resumable
    Target("ended-leg-not-resumable", "max-tokens-kill", 4, ("I9",), shrink=0),
    # --- end of the issue 15 block ------------------------------------------------------------------------
)}

#: Mutants no campaign can catch, each caught instead by the unit tests named (mutant -> test module): the
#: run lock's semantics inside its holder (a ``lockf`` lock that the close of another descriptor drops, a
#: lock descriptor a tool child inherits) show only to a test that controls the holder process.  The mutant
#: self-test runs no campaign for them; the test module applies each and asserts it is caught.
UNIT_TESTED: dict[str, str] = {"lockf": "tests/test_lock.py", "no-cloexec": "tests/test_lock.py"}


#: The foreign subject (subjects/node/, no code of ours inside) and its bug variants
#: (``FISKJ_FOREIGN_BUG``), run the way a third party runs an agent: ``--subject "CMD"``, every leg under
#: the outside observer.  Variant -> the bundled scenario that catches it (``Target.mutant`` is the
#: variant).  The subject is named by its profile (subjects/node/profile.toml), which gives its
#: status command, so its own reading is judged too (I10).
FOREIGN_SUBJECT = "subjects/node/profile.toml"
FOREIGN_TARGETS: dict[str, Target] = {t.mutant: t for t in (
    Target("no-fsync", "power-loss-basic", 8, ("I4",)),
    Target("no-dir-fsync", "power-loss-basic", 8, ("I4",)),
    Target("store-dir-not-durable", "power-loss-basic", 8, ("I4",)),
    Target("torn-tail-not-cut", "tails-basic", 4, ("I4", "I5")),
    Target("resume-reruns-answered", "kill-every-event", 40, ("I2",)),
    Target("fsync-error-swallowed", "io-errors", 6, ("I4",)),
    Target("fold-before-lock", "race-two-resumers", 8, ("I2", "I5")),
    Target("create-without-excl", "race-two-creates", 8, ("I4", "I5")),
    Target("stale-lock-file", "race-holder-killed", 4, ("I6", "I8")),
    Target("status-stays-suspended", "chain-crash-after-suspend", 12, ("I10",)),
    Target("reader-locks", "race-readers-during-appends", 4, ("I10",)),
    Target("reader-tolerates-corruption", "tails-basic", 4, ("I5",)),
    Target("resume-skips-completed", "kill-every-event", 12, ("I6", "I9")),
    Target("pending-turn-not-counted", "iteration-cap-kill", 20, ("I6",)),
    Target("recall-after-final-answer", "kill-after-answer", 30, ("I3", "I6")),
    Target("complete-torn-line-kept", "tails-basic", 4, ("I5",)),
    Target("unlock-before-close", "race-two-writers", 4, ("I8",)),
    Target("completed-never-written", "noop-baseline", 1, ("I6",)),
    Target("newline-first", "noop-baseline", 1, ("I5", "I6")),
    Target("fingerprint-ignores-system", "drift-system", 6, ("I9",)),
    Target("fingerprint-ignores-thinking", "drift-thinking", 6, ("I9",)),
    Target("nul-block-ends-journal", "tails-basic", 4, ("I2", "I3", "I4", "I5")),
    Target("thinking-stripped-on-resume", "thinking-kill", 4, ("I6",)),
    Target("answer-not-printed-on-resume", "kill-after-answer", 30, ("I6",)),
    Target("torn-tail-overcut", "tails-basic", 4, ("I4",)),
    Target("cut-off-turn-run-on-resume", "max-tokens-kill", 4, ("I6",)),
    Target("ended-leg-not-resumable", "max-tokens-kill", 4, ("I9",)),
)}
#: Variants of the foreign subject no bundled scenario catches yet, and what would.
FOREIGN_NOT_CAUGHT: dict[str, str] = {}


#: The foreign subject writing its own JSON-lines journal (``AGENT_JOURNAL_FORMAT=envelope``), which the
#: harness does not decode: its profile says ``format = "jsonl"``, so I4 and I5 are judged line by line,
#: I2 and I3 by the bytes each leg acknowledged, I6 from outside (docs/subject.md "Journal formats").
#: The same bug variants, caught without reading a single record.
JSONL_SUBJECT = "subjects/node/envelope.toml"
JSONL_TARGETS: dict[str, Target] = {t.mutant: t for t in (
    Target("no-fsync", "power-loss-basic", 4, ("I4",)),
    Target("no-dir-fsync", "power-loss-basic", 8, ("I4",)),
    Target("store-dir-not-durable", "power-loss-basic", 8, ("I4",)),
    Target("torn-tail-not-cut", "tails-basic", 2, ("I5",)),
    Target("resume-reruns-answered", "kill-every-event", 40, ("I2",)),
    Target("fsync-error-swallowed", "io-errors", 6, ("I4",)),
    Target("fold-before-lock", "race-two-resumers", 8, ("I2",)),
    Target("create-without-excl", "race-two-creates", 4, ("I2",)),
    Target("stale-lock-file", "race-holder-killed", 4, ("I6", "I8")),
    Target("resume-skips-completed", "kill-every-event", 12, ("I9",)),
    Target("pending-turn-not-counted", "iteration-cap-kill", 20, ("I6",)),
    Target("recall-after-final-answer", "kill-after-answer", 30, ("I3",)),
    Target("complete-torn-line-kept", "tails-basic", 4, ("I5",)),
    Target("unlock-before-close", "race-two-writers", 4, ("I8",)),
    Target("completed-never-written", "kill-every-event", 6, ("I9",)),
    Target("newline-first", "noop-baseline", 2, ("I5",)),
    Target("fingerprint-ignores-system", "drift-system", 6, ("I9",)),
    Target("fingerprint-ignores-thinking", "drift-thinking", 6, ("I9",)),
    Target("nul-block-ends-journal", "tails-basic", 4, ("I2", "I3", "I4")),
    Target("thinking-stripped-on-resume", "thinking-kill", 4, ("I6",)),
    Target("answer-not-printed-on-resume", "kill-after-answer", 30, ("I6",)),
    Target("torn-tail-overcut", "tails-basic", 4, ("I4",)),
    Target("cut-off-turn-run-on-resume", "max-tokens-kill", 4, ("I6",)),
)}
#: Variants whose catch reads nothing of the journal's format (crash states and IO errors judged on bytes and
#: calls (I4), the lock (I8), the refusal of a drifted resume (I9)): the fisk-ai v2 self-test of the same
#: variant (FOREIGN_TARGETS) runs the same checker code, so the test suite runs only the others in jsonl.
JSONL_SAME_PATH = frozenset({"no-dir-fsync", "store-dir-not-durable", "fsync-error-swallowed", "unlock-before-close",
                             "fingerprint-ignores-system", "fingerprint-ignores-thinking"})
#: Variants the jsonl subject cannot be caught for, and why (each needs what a jsonl profile cannot give).
JSONL_NOT_CAUGHT: dict[str, str] = {
    "status-stays-suspended": "its own status reading is wrong: I10 compares a reading with fiskj's fold, which "
                              "needs a fisk-ai-v2 journal",
    "reader-locks": "its status command locks: races with readers need a reading command, which needs a "
                    "fisk-ai-v2 journal",
    "ended-leg-not-resumable": "it refuses to resume a run whose leg ended with error: I9 judges a refusal by "
                               "the status the journal folds to (refused_resumable), which needs a fisk-ai-v2 "
                               "journal; the final result is the uninterrupted run's, so I6 cannot see it",
    "reader-tolerates-corruption": "its reader skips interior damage: the tail family asks the reader through "
                                   "the status command (fisk-ai-v2 only); resumes after interior damage would "
                                   "catch it (issue 15)",
}
