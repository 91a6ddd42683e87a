"""Names and constants shared across the harness's roles: one definition each.  This module imports nothing."""

from __future__ import annotations

__all__ = ["INVARIANTS", "JOURNAL_FORMATS", "FISK_AI_V2", "JSONL", "OPAQUE", "VOLATILE", "WORKLOAD_MAX_TOKENS", "CUT_STOPS",
           "EXIT_COMPLETED", "EXIT_ERROR", "EXIT_USAGE", "EXIT_SUSPENDED", "HARNESS_VALID", "HARNESS_VIOLATION",
           "HARNESS_USAGE", "FAULT_COUNTS", "CRASH_STATES", "CRASH_RESUMES", "NOT_INJECTED", "SEED_STEP",
           "PRELOAD_ENV", "MUTANT_ENV", "MUTANT_SUBJECT", "MUTANT_PRELOAD"]

# --- invariants ----------------------------------------------------------------------------------

#: Invariant ids of docs/spec.md section 15 (docs/architecture.md "Invariants").
INVARIANTS = ("I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8", "I9", "I10", "I11")

# --- journal formats -----------------------------------------------------------------------------

#: The fisk-ai v2 wire format (docs/spec.md): every invariant can be judged on it.
FISK_AI_V2 = "fisk-ai-v2"
#: Any other JSON-lines journal, one JSON value per line, judged without a fold (docs/subject.md "Journal formats").
JSONL = "jsonl"
#: A store the harness does not decode: a directory and every file below it (a SQLite database with its
#: ``-wal``/``-journal``, ...; docs/subject.md "Journal formats").
OPAQUE = "opaque"
#: Files of a store that hold no durable state (SQLite's WAL index, written through mmap and rebuilt from the
#: WAL by the first connection after a reboot): no crash state or snapshot of a store holds them.
VOLATILE = ("-shm",)
#: Journal formats a subject profile may name, the first the default.
JOURNAL_FORMATS = (FISK_AI_V2, JSONL, OPAQUE)

#: ``[workload] max_tokens`` when a scenario sets none: a budget no bundled run reaches.
WORKLOAD_MAX_TOKENS = 1_000_000
#: Stop reasons of a reply that ends the run with ``error`` whatever it holds; its tool_use blocks never run
#: (docs/spec.md section 12, rule 6).  A workload's ``final_stop`` is one of them.
CUT_STOPS = ("max_tokens", "refusal")

# --- exit statuses -------------------------------------------------------------------------------

#: The subject's exit status (docs/subject.md "Exit status"; fiskj's own): the run completed.
EXIT_COMPLETED = 0
#: An error, also a ``budget`` or ``max_iterations`` end, a locked or missing run.
EXIT_ERROR = 1
#: A usage error or a refused resume (fingerprint mismatch, completed run).
EXIT_USAGE = 2
#: The run suspended (SIGINT/SIGTERM honoured at a boundary, or the end of chat input).
EXIT_SUSPENDED = 3

#: ``fiskj-harness``'s exit statuses (docs/ci.md): every checked invariant held (``mutants``: every one caught);
HARNESS_VALID = 0
#: a violation, or an ``unknown`` verdict, which is not a pass (``mutants``: one not caught);
HARNESS_VIOLATION = 1
#: a usage or setup error (an interrupted command exits 130 or 143).
HARNESS_USAGE = 2

# --- faults ------------------------------------------------------------------------------------

# Family names and modes have one source, the family registry (harness.families.registry); race
# names the race family's params (harness.families.race.params.RACES).

#: The injected faults a report counts, by kind, in the order its summary prints them (a trial's
#: ``faults``: ``kill`` and ``suspend`` legs, ``tail`` mutations, ``power_loss`` states, ``race`` trials).
FAULT_COUNTS = ("kill", "suspend", "tail", "power_loss", "race")
#: The report's count of power-loss crash states judged by the cheap tier (next to :data:`FAULT_COUNTS`).
CRASH_STATES = "crash_states"
#: The report's count of power-loss crash states recovered by a full resume of the agent (docs/persistence-model.md).
CRASH_RESUMES = "crash_resumes"
#: Violations (invariant, kind) judged on a leg's own calls whatever fault the trial injected (the fsync rule of
#: docs/spec.md section 9: a write the agent went on from unsynced): a fault does not cause them, so their group is
#: not split by fault kind and a shrink does not chase them (docs/results.md "Violations grouped by cause").
FAULT_FREE = frozenset({("I4", "append_not_synced")})
#: A report ``faults`` key: legs whose scheduled fault never fired (the leg ended before its time or call).
NOT_INJECTED = "not_injected"
#: Campaign seed offset between the draws of one scenario (a gate's fresh draws, a mutant's self-test rounds).
SEED_STEP = 1000

# --- preloads and mutants ------------------------------------------------------------------------

#: The module a child imports first, calling its ``preload(environ)`` hook (:mod:`harness.subject.preload`).
PRELOAD_ENV = "FISKJ_PRELOAD"
#: The user-facing name of a mutant (``FISKJ_MUTANT=no-fsync``), as reproducers and reports carry it.
MUTANT_ENV = "FISKJ_MUTANT"
#: The mutant subject's module: ``python -m harness.selftest.subject`` is fiskj with the preload applied.
MUTANT_SUBJECT = "harness.selftest.subject"
#: The mutant subject's preload: the mutants' table, whose hook applies the mutant :data:`MUTANT_ENV` names.
MUTANT_PRELOAD = "harness.selftest.mutants"
