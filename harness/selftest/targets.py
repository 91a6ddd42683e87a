"""Which campaign must catch which bug variant of the foreign subject (``FISKJ_FOREIGN_BUG``,
subjects/node/lib/bugs.mjs), run by tests/test_foreign_selftest.py (docs/selftest.md)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Target", "FOREIGN_SUBJECT", "FOREIGN_TARGETS", "FOREIGN_NOT_CAUGHT", "JSONL_SUBJECT",
           "JSONL_TARGETS", "JSONL_NOT_CAUGHT", "JSONL_SAME_PATH", "TEXT_READING_SUBJECT", "TEXT_READING_TARGETS",
           "OPAQUE_SUBJECT", "OPAQUE_TARGETS", "OPAQUE_NOT_CAUGHT", "LANGGRAPH_SUBJECT", "LANGGRAPH_TARGETS"]


@dataclass(frozen=True)
class Target:
    """Variant ``mutant`` is caught by a campaign of bundled ``scenario`` (a name under ``scenarios/``, e.g.
    ``kill-random`` or ``regressions/NAME``; ``trials`` trials, campaign ``seed``: ``None`` is the
    scenario's own) through one of ``expect``; ``shrink`` bounds the trials a shrink may run.

    An exhaustive kill plan (``kill_points = "events"``) or an io_error plan bounded by ``trials`` is a pure
    function of the recorded run and the seed (every distinct state first, in event order; one failing call
    of each class first), and a catch campaign stops at its first violation: a row whose catch lies deep in
    the whole plan keeps the smaller bound whose points reach it sooner, one where the bounds one above and one
    below it catch too (tests/README.md "What the suite costs (issue 27)").  Never so for a plan of timed
    faults (``suspend-clean``): where those land is the agent's timing, and the later event-tied trials of the
    larger bound are the catch's fallback."""

    mutant: str
    scenario: str
    trials: int
    expect: tuple[str, ...]
    seed: int | None = None
    shrink: int = 10


#: The foreign subject (subjects/node/, no code of ours inside), run as a third party runs it (its profile,
#: every leg observed; its status command judged too, I10), and variant -> the scenario that catches it.
FOREIGN_SUBJECT = "subjects/node/profile.toml"
FOREIGN_TARGETS: dict[str, Target] = {t.mutant: t for t in (
    Target("no-fsync", "power-loss-basic", 8, ("I4",)),
    Target("no-dir-fsync", "power-loss-basic", 8, ("I4",)),
    Target("store-dir-not-durable", "power-loss-basic", 8, ("I4",)),
    Target("torn-tail-not-cut", "tails-basic", 4, ("I4", "I5")),
    Target("resume-reruns-answered", "kill-every-event", 10, ("I2",)),
    Target("fsync-error-swallowed", "io-errors", 4, ("I4",)),
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
    Target("blocking-lock", "race-two-writers", 2, ("I8",)),
    Target("completed-never-written", "noop-baseline", 1, ("I6",)),
    Target("newline-first", "noop-baseline", 1, ("I5", "I6")),
    Target("fingerprint-ignores-system", "drift-system", 6, ("I9",)),
    Target("fingerprint-ignores-thinking", "drift-thinking", 6, ("I9",)),
    Target("nul-block-ends-journal", "tails-basic", 4, ("I2", "I3", "I4", "I5")),
    Target("thinking-stripped-on-resume", "thinking-kill", 4, ("I6",)),
    Target("answer-not-printed-on-resume", "kill-after-answer", 30, ("I6",)),
    Target("torn-tail-overcut", "tails-basic", 4, ("I4",)),
    Target("cut-off-turn-run-on-resume", "max-tokens-kill", 4, ("I6",)),
    Target("cut-off-turn-run", "max-tokens-kill", 1, ("I6",)),
    Target("ended-leg-not-resumable", "max-tokens-kill", 4, ("I9",)),
    Target("drops-cache-usage", "payload-cache-budget", 1, ("I11",)),
    # behaviours of Claude Code, caught by fisk-ai's promises; each passes where its profile declares it
    # (sigterm-aborts.toml, new-turn.toml: docs/spec.md section 15 "Declared promises")
    Target("sigterm-aborts", "suspend-clean", 30, ("I1", "I2", "I3")),
    Target("completed-new-turn", "kill-every-event", 8, ("I5", "I6", "I9")),
)}
#: Variants of the foreign subject no bundled scenario catches yet, and what would.
FOREIGN_NOT_CAUGHT: dict[str, str] = {}
#: The foreign subject exiting and reading as fisk-ai does: its reading is `session show` text read by pattern
#: (``[reading] format = "text"``), so the variants its own reading shows are caught through the text.
TEXT_READING_SUBJECT = "subjects/node/fisk-ai-style.toml"
TEXT_READING_TARGETS: dict[str, Target] = {t.mutant: t for t in (
    Target("status-stays-suspended", "chain-crash-after-suspend", 12, ("I10",)),
    Target("reader-locks", "race-readers-during-appends", 4, ("I10",)),
)}


#: The foreign subject writing its own JSON-lines journal (``format = "jsonl"``, docs/subject.md "Journal
#: formats"): the same bug variants, caught without reading a single record.
JSONL_SUBJECT = "subjects/node/envelope.toml"
JSONL_TARGETS: dict[str, Target] = {t.mutant: t for t in (
    Target("no-fsync", "power-loss-basic", 4, ("I4",)),
    Target("no-dir-fsync", "power-loss-basic", 8, ("I4",)),
    Target("store-dir-not-durable", "power-loss-basic", 8, ("I4",)),
    Target("torn-tail-not-cut", "tails-basic", 2, ("I5",)),
    Target("resume-reruns-answered", "kill-every-event", 13, ("I2",)),
    Target("fsync-error-swallowed", "io-errors", 6, ("I4",)),
    Target("fold-before-lock", "race-two-resumers", 8, ("I2",)),
    Target("create-without-excl", "race-two-creates", 4, ("I2",)),
    Target("stale-lock-file", "race-holder-killed", 4, ("I6", "I8")),
    Target("resume-skips-completed", "kill-every-event", 12, ("I9",)),
    Target("pending-turn-not-counted", "iteration-cap-kill", 10, ("I6",)),
    Target("recall-after-final-answer", "kill-after-answer", 30, ("I3",)),
    Target("complete-torn-line-kept", "tails-basic", 4, ("I5",)),
    Target("unlock-before-close", "race-two-writers", 4, ("I8",)),
    Target("blocking-lock", "race-two-writers", 2, ("I8",)),
    Target("completed-never-written", "kill-every-event", 6, ("I9",)),
    Target("newline-first", "noop-baseline", 2, ("I5",)),
    Target("fingerprint-ignores-system", "drift-system", 6, ("I9",)),
    Target("fingerprint-ignores-thinking", "drift-thinking", 6, ("I9",)),
    Target("nul-block-ends-journal", "tails-basic", 4, ("I2", "I3", "I4")),
    Target("thinking-stripped-on-resume", "thinking-kill", 4, ("I6",)),
    Target("answer-not-printed-on-resume", "kill-after-answer", 30, ("I6",)),
    Target("torn-tail-overcut", "tails-basic", 4, ("I4",)),
    Target("cut-off-turn-run-on-resume", "max-tokens-kill", 4, ("I6",)),
    Target("cut-off-turn-run", "max-tokens-kill", 1, ("I6",)),
    Target("sigterm-aborts", "suspend-clean", 30, ("I2", "I3")),
    Target("completed-new-turn", "kill-every-event", 8, ("I6", "I9")),
)}
#: Variants whose catch reads nothing of the journal's format (crash states and IO errors judged on bytes and
#: calls (I4), the lock (I8), the refusal of a drifted resume (I9)): the fisk-ai v2 self-test of the same
#: variant (FOREIGN_TARGETS) runs the same checker code, so the test suite runs only the others in jsonl.
JSONL_SAME_PATH = frozenset({"blocking-lock", "no-dir-fsync", "store-dir-not-durable", "fsync-error-swallowed",
                             "unlock-before-close", "fingerprint-ignores-system", "fingerprint-ignores-thinking"})
#: Variants the jsonl subject cannot be caught for, and why (each needs what a jsonl profile cannot give).
JSONL_NOT_CAUGHT: dict[str, str] = {
    "drops-cache-usage": "the usage it journals is wrong in every run, the uninterrupted one included: I11 reads "
                         "each record's usage, which needs a fisk-ai-v2 journal",
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


#: The foreign subject with its state declared an opaque store (``format = "opaque"``, docs/subject.md "Journal
#: formats"): judged from outside and from its own reading, never from its files' bytes.
OPAQUE_SUBJECT = "subjects/node/opaque.toml"
OPAQUE_TARGETS: dict[str, Target] = {t.mutant: t for t in (
    Target("no-fsync", "power-loss-basic", 4, ("I4",)),
    Target("no-dir-fsync", "power-loss-basic", 8, ("I4",)),
    Target("store-dir-not-durable", "power-loss-basic", 8, ("I4",)),
    Target("resume-reruns-answered", "kill-every-event", 12, ("I2",)),
    Target("fold-before-lock", "race-two-resumers", 8, ("I2", "I8")),
    Target("create-without-excl", "race-two-creates", 8, ("I2", "I8")),
    Target("blocking-lock", "race-two-writers", 2, ("I5", "I8")),
    Target("stale-lock-file", "race-holder-killed", 4, ("I6",)),
    Target("resume-skips-completed", "kill-every-event", 6, ("I4", "I9")),
    Target("completed-never-written", "kill-every-event", 6, ("I4", "I9")),
    Target("newline-first", "noop-baseline", 2, ("I4",)),
    Target("answer-not-printed-on-resume", "kill-after-answer", 6, ("I6",)),
    Target("sigterm-aborts", "suspend-clean", 30, ("I2", "I3")),
    Target("pending-turn-not-counted", "iteration-cap-kill", 12, ("I6",)),
    Target("completed-new-turn", "kill-every-event", 8, ("I6", "I9")),
    Target("fingerprint-ignores-system", "drift-system", 6, ("I9",)),
)}
#: Variants tried through the opaque route and not caught there, and why.
OPAQUE_NOT_CAUGHT: dict[str, str] = {
    "recall-after-final-answer": "a kill between saving the final reply and completing the run: the reading gives "
                                 "an answer only for a completed run, so nothing shows the reply was saved (I3)",
    "unlock-before-close": "the lock released before the close: an opaque store's locks are its own, and I8 judges "
                           "from outside (two legs doing the same work), which this order alone never causes",
    "fsync-error-swallowed": "io-errors over an opaque store's files are the fault side of issue 25",
    "status-stays-suspended": "its reading's status is wrong after later records, its tool_results and answer "
                              "right: only I10 compares a status with a fold, not applicable to an opaque store",
    "ended-leg-not-resumable": "it refuses a run whose leg ended with error, with a message and the store as it "
                               "was, which I5 accepts; I9 judges such a refusal by a fisk-ai-v2 journal's fold",
}


#: The LangGraph agent (subjects/langgraph/: its SQLite checkpointer an opaque store; run with
#: $FISKJ_LANGGRAPH_PYTHON from scripts/install-langgraph.sh) and its variants (``FISKJ_LANGGRAPH_BUG``), each a
#: mistake a LangGraph user makes, caught by an event-tied or crash-state scenario (never by a timed fault).
LANGGRAPH_SUBJECT = "subjects/langgraph/profile.toml"
LANGGRAPH_TARGETS: dict[str, Target] = {t.mutant: t for t in (
    Target("sync-off", "power-loss-basic", 4, ("I4",)),               # PRAGMA synchronous=OFF: commits not fsynced
    Target("memory-saver", "power-loss-basic", 2, ("I4",)),           # InMemorySaver: nothing reaches the store
    Target("effect-outside-graph", "suspend-clean", 6, ("I1", "I2")),  # tools run eagerly in the model node
    Target("new-thread-on-resume", "suspend-clean", 3, ("I1", "I2", "I3", "I4", "I6")),
)}
