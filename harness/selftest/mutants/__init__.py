"""Deliberately broken variants of fiskj (mutants), one module each, applied in a child process only.

A mutant is one module of this package: its docstring says the bug, its
constants say ``NAME`` (the user-facing name, ``FISKJ_MUTANT=NAME``),
``DEFECT`` (the bug class it reintroduces), ``FAMILY`` (the fault family
that must catch it, or ``unit`` for one only unit tests catch:
:data:`harness.selftest.targets.UNIT_TESTED`) and, for the race family,
``RACE`` (the race that must); its ``apply()`` monkeypatches :mod:`fiskj`, and the module calls it
when it is imported.  So a mutant module is a *preload*: a child process
applies it by importing it by name, from ``$FISKJ_PRELOAD``
(:mod:`harness.subject.preload`): the mutant subject
(``python -m harness.selftest.subject``) and a leg forked by the fork
server both do just that.  The harness never imports one (that
would patch the harness): this registry reads the constants from the
module's source, and :func:`subject_for` names the module in the
subject's environment, with the mutant's name beside it for reproducers
(``FISKJ_MUTANT=no-fsync FISKJ_PRELOAD=harness.selftest.mutants.no_fsync``).
The checkers judge the child's history without knowing which mutant ran.

Patches look functions up on their modules (``Journal._write_line``,
``FileStore.open``, ``JournalReader._scan``) so they reach every caller.
A patch that keeps the original and adds the bug around it is written
with :func:`harness.selftest.mutants._patch.wrap`; shared patches live
there too.

| name | defect | caught by |
|---|---|---|
| ``no-fsync`` | appends are written but never fsynced | power_loss (I4) |
| ``fsync-before-write`` | the fsync comes before the write, so the record is never synced | power_loss (I4) |
| ``no-dir-fsync`` | the first append of a new journal does not fsync the store directory | power_loss (I4) |
| ``store-dir-not-durable`` | new store directories are not made durable in their parents (defect 4) | power_loss (I4) |
| ``torn-tail-not-cut`` | open does not cut a torn tail before appending (defect 1) | tail (I4, I5) |
| ``reader-tolerates-corruption`` | the reader skips an unparsable interior line | tail (reader answer) |
| ``reader-drops-final-record`` | the reader drops a complete final record as if torn | tail (reader answer) |
| ``result-before-tool`` | a tool_result is journaled before its tool runs (a placeholder) | kill (I6) |
| ``assistant-after-tools`` | the assistant record is journaled after its tools ran | kill (I2) |
| ``suspend-mid-batch`` | a suspend is honoured between two tools of a batch | suspend (I1) |
| ``resume-reruns-answered`` | resume runs the answered tools of a pending batch again | kill (I2) |
| ``counters-in-memory`` | tokens spent and iteration restart at zero on resume | kill, budget end (I6) |
| ``fingerprint-ignores-model`` | the resume guard ignores the model field | suspend, drift (I9) |
| ``create-not-reclaimed`` | a journal left empty by a crashed create is never reclaimed | kill, regression (I6) |
| ``fold-before-lock`` | ``open`` folds, then locks (defect 2) | race ``two-resumers`` (I2, I5) |
| ``create-no-excl`` | ``create`` checks existence, then opens without ``O_EXCL`` (defect 3) | race ``two-creates`` (I2, I4, I5) |
| ``release-before-last-append`` | the lock is released before the terminal record is appended | race ``two-writers`` (I8) |
| ``lockf`` | the run lock is a ``lockf`` record lock: closing any descriptor of the lock file drops it | unit tests, tests/test_lock.py |
| ``no-cloexec`` | the lock descriptor is inherited by tool subprocesses | unit tests, tests/test_lock.py |
| ``fsync-error-retried`` | a failed fsync is retried into success and the append acknowledged | io_error (I4) |
| ``stale-lock-file`` | the lock is an ``O_EXCL`` marker file a SIGKILLed holder leaves behind | race ``holder-killed`` (I6, I8) |
| ``blocking-lock`` | ``flock`` without ``LOCK_NB``: a second writer waits instead of being refused | race ``two-writers`` (I8) |
| ``torn-tail-is-corrupt`` | ``load``/``list`` raise on a partial last line | tail (I5) |
| ``reader-locks`` | ``load`` takes the run lock: reading a run that is being written fails | race ``readers-during-appends`` (I10) |
| ``resume-skips-completed`` | a resumed leg that completes does not journal ``completed`` | kill (I6) |
| ``pending-turn-not-counted`` | a resume numbers iterations without the pending turn | kill (I6) |
| ``recall-after-final-answer`` | a resume asks the model again for a journaled final answer | kill (I3, I6) |
| ``complete-torn-line-kept`` | open cuts a torn final line only when it lacks its newline | tail (I5) |
| ``unlock-before-close`` | the run lock is released before the journal is closed | race ``two-writers`` (I8) |
| ``completed-never-written`` | no run journals its ``completed`` record: the uninterrupted run ends wrong | none (I6) |
| ``newline-first`` | records framed newline-first: the last record reads as torn | none (I5, I6) |
| ``write-error-swallowed`` | a failed journal write is ignored: the run completes over a hole | io_error (I4) |
| ``nul-block-ends-journal`` | the reader takes a NUL block inside the journal for its end | tail (I2, I3, I5) |
| ``fingerprint-ignores-system`` | the resume guard ignores the system prompt | suspend, ``drift-system`` (I9) |
| ``fingerprint-ignores-thinking`` | the resume guard ignores the thinking mode | suspend, ``drift-thinking`` (I9) |
| ``fingerprint-ignores-tools`` | the resume guard ignores the tool set | suspend, ``drift-tools`` (I9) |
| ``fingerprint-ignores-max-tokens`` | the resume guard ignores the token budget | suspend, ``drift-max-tokens`` (I9) |
| ``fingerprint-ignores-max-iterations`` | the resume guard ignores the iteration cap | suspend, ``drift-max-iterations`` (I9) |
| ``status-stays-suspended`` | a resumed run keeps reading ``suspended`` after later records (defect 5) | chain, the subject's reading (I10) |
| ``reader-splits-unicode-lines`` | the reader splits lines with ``str.splitlines`` (U+0085 inside a record ends a line) | kill, payloads (I2, I3, I10) |
| ``resume-writer-no-record-limit`` | a resumed leg's writer has no record-size limit: an oversized tool output is journaled whole | kill, payloads (I4, I5, I6, I8) |
| ``cache-counters-not-folded`` | the fold drops the cache token counters: a resume undercounts the budget | kill, cache tokens and a budget end (I6) |
| ``thinking-signature-dropped`` | the writer drops thinking blocks' signatures: a resume sends them back unsigned | kill, payloads (I6) |
| ``torn-tail-overcut`` | the torn-tail repair cuts back one complete, acknowledged line too many | tail, power loss (I4) |
| ``answer-not-printed-on-resume`` | a resume that settles a journaled final answer completes without printing it | kill (I6, what the user reads) |
| ``ended-leg-not-resumable`` | a run whose last leg ended with error, budget or max_iterations is refused, not resumed | kill, ``final_stop`` or a budget end (I9) |
| ``cut-off-turn-run-on-resume`` | a resume runs the tool calls of a reply cut off by ``max_tokens`` (settles it as a tool turn) | kill, ``final_stop`` (I6) |
| ``thinking-stripped-on-resume`` | a resume strips the thinking blocks of every inherited turn, the tool loop in flight included (HTTP 400 with thinking on) | kill, thinking on (I6) |

Defects 1 to 4 are fisk-ai's (docs/spec.md section 16).  Which scenario
catches which mutant is data, :mod:`harness.selftest.targets`; the
self-test ``fiskj-harness mutants`` (:mod:`harness.selftest.run`) runs
them all.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Mapping

from harness.names import MUTANT_ENV, MUTANT_SUBJECT, MUTANTS_PACKAGE, PRELOAD_ENV

if TYPE_CHECKING:
    from harness.subject.contract import Subject

__all__ = ["ENV", "MODULES", "Mutant", "mutants", "race_mutants", "RACE_MUTANTS", "get", "preload_for", "mutant_env",
           "subject_for", "with_preload", "apply", "apply_from_env"]

#: Environment variable naming a mutant, as users and reproducers write it (:data:`harness.names.MUTANT_ENV`).
ENV = MUTANT_ENV

#: The mutant modules of this package (:data:`harness.names.MUTANTS_PACKAGE`), one bug class each, each
#: named after its mutant (``no-fsync`` -> ``no_fsync``), in the self-test's order.
MODULES = ("no_fsync", "fsync_before_write", "no_dir_fsync", "store_dir_not_durable", "torn_tail_not_cut",
           "reader_tolerates_corruption", "reader_drops_final_record",
           # the agent loop's bug classes (issue 7)
           "result_before_tool", "assistant_after_tools", "suspend_mid_batch", "resume_reruns_answered",
           "counters_in_memory", "fingerprint_ignores_model", "create_not_reclaimed",
           # the run lock and the store under concurrency: the race family
           "fold_before_lock", "create_no_excl", "release_before_last_append", "lockf", "no_cloexec",
           "stale_lock_file", "blocking_lock", "torn_tail_is_corrupt", "reader_locks",
           # IO errors from outside: the io_error family
           "fsync_error_retried",
           # the engine's own reading of its journal (I10, the subject's reading as an oracle)
           "status_stays_suspended",
           # how a resumed run ends (I6) and no model call after the journaled final answer (I3)
           "resume_skips_completed", "pending_turn_not_counted", "recall_after_final_answer",
           # a torn tail kept once the engine appended past it (I5)
           "complete_torn_line_kept",
           # the lock held until the writer's last fsync and close (I8)
           "unlock_before_close",
           # the uninterrupted run itself ends wrong: judged as a trial (I5, I6)
           "completed_never_written", "newline_first",
           # the resume guard ignores one fingerprint field: a drift of that field alone (I9)
           "fingerprint_ignores_system", "fingerprint_ignores_thinking", "fingerprint_ignores_tools",
           "fingerprint_ignores_max_tokens", "fingerprint_ignores_max_iterations",
           # damage inside the journal taken for its end (tail family, interior mutations)
           "nul_block_ends_journal",
           # payloads the workload once never produced (issue 15, class 2)
           "reader_splits_unicode_lines", "resume_writer_no_record_limit", "cache_counters_not_folded",
           "thinking_signature_dropped", "thinking_stripped_on_resume",
           # what the user reads: the final answer printed by the leg that completes the run (I6)
           "answer_not_printed_on_resume",
           # a torn-tail repair that cuts an acknowledged line too (I4 truncated_acknowledged, lost_by_recovery)
           "torn_tail_overcut",
           # an IO error swallowed: a failed write taken for done (io_error family)
           "write_error_swallowed",
           # a reply cut off by max_tokens: its tool calls never run, not even on a resume (I6); and a run whose
           # leg ended with error, budget or max_iterations is resumed, not refused (I9 refused_resumable)
           "cut_off_turn_run_on_resume", "ended_leg_not_resumable")

_FIELDS = {"NAME": "name", "DEFECT": "defect", "FAMILY": "family", "RACE": "race"}


@dataclass(frozen=True)
class Mutant:
    """A broken variant: ``name``, the ``defect`` it reintroduces, the ``family`` that must catch it,
    its ``module`` (in this package) and, for the race family, the ``race`` that must."""

    name: str
    defect: str
    family: str
    module: str
    race: str | None = None

    @property
    def preload(self) -> str:
        """The module to name in ``$FISKJ_PRELOAD``: importing it applies the mutant."""
        return f"{MUTANTS_PACKAGE}.{self.module}"


def _describe(module: str) -> Mutant:
    """The mutant ``module`` describes, read from its source: importing it would patch this process."""
    spec = importlib.util.find_spec(f"{__name__}.{module}")
    if spec is None or spec.origin is None:
        raise KeyError(f"no mutant module {__name__}.{module}")
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read(), spec.origin)
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            key = _FIELDS.get(node.targets[0].id)
            if key is not None:
                found[key] = ast.literal_eval(node.value)
    missing = [k for k in ("NAME", "DEFECT", "FAMILY") if _FIELDS[k] not in found]
    if missing:
        raise ValueError(f"mutant module {spec.origin} does not set {', '.join(missing)}")
    return Mutant(module=module, **found)


@functools.cache
def _all() -> tuple[Mutant, ...]:
    return tuple(_describe(m) for m in MODULES)


def mutants(family: str | None = None) -> list[Mutant]:
    """Every mutant (of ``family``, when given), in :data:`MODULES` order."""
    return [m for m in _all() if family is None or m.family == family]


def race_mutants() -> dict[str, Mutant]:
    """The race family's mutants by name (each names its ``race``)."""
    return {m.name: m for m in mutants("race")}


def __getattr__(name: str) -> Any:
    """``RACE_MUTANTS``: :func:`race_mutants`, read on first use (a child that imports a mutant never reads it)."""
    if name == "RACE_MUTANTS":
        return race_mutants()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get(name: str) -> Mutant:
    """The mutant called ``name``; raises ``KeyError`` naming the known ones."""
    for mutant in _all():
        if mutant.name == name:
            return mutant
    raise KeyError(f"unknown mutant {name!r}; known: {', '.join(m.name for m in _all())}")


def preload_for(name: str) -> str:
    """The module that applies mutant ``name`` when imported (the value of ``$FISKJ_PRELOAD``)."""
    return get(name).preload


def mutant_env(name: str) -> tuple[tuple[str, str], ...]:
    """The variables that give mutant ``name`` to a child: ``FISKJ_MUTANT=name`` (what reports and
    reproducers show) and ``FISKJ_PRELOAD=module`` (what the child imports)."""
    return ((MUTANT_ENV, name), (PRELOAD_ENV, preload_for(name)))


def subject_for(name: str) -> Subject:
    """The mutant subject with mutant ``name``: ``python -m harness.selftest.subject`` and :func:`mutant_env`."""
    import sys

    from harness.subject.contract import Subject, with_fiskj_reading

    return with_fiskj_reading(Subject(argv=(sys.executable, "-m", MUTANT_SUBJECT), extra_env=mutant_env(name)))


def with_preload(subject: Subject, environ: Mapping[str, str] | None = None) -> Subject:
    """``subject`` with the preload of the mutant its legs are given by name, where none is named.

    A ``FISKJ_MUTANT=name`` in the subject's variables or in ``environ``
    (default ``os.environ``, which the legs inherit) without a
    ``FISKJ_PRELOAD`` becomes both variables of the subject (:func:`mutant_env`),
    so a reproducer written as ``--subject 'FISKJ_MUTANT=no-fsync python -m
    harness.selftest.subject'`` runs the mutant in every child, forked or
    not.  Only the mutant subject is changed (another agent's variables are
    its own).  Raises ``KeyError`` for an unknown name.
    """
    if not subject.is_mutant_subject:
        return subject
    env = {**(os.environ if environ is None else environ), **dict(subject.extra_env)}
    name = (env.get(MUTANT_ENV) or "").strip()
    if not name or env.get(PRELOAD_ENV):
        return subject
    kept = tuple((k, v) for k, v in subject.extra_env if k not in (MUTANT_ENV, PRELOAD_ENV))
    return replace(subject, extra_env=mutant_env(name) + kept)


def apply(name: str) -> Mutant:
    """Apply mutant ``name`` to fiskj in THIS process by importing its module; return it (a child only)."""
    mutant = get(name)
    importlib.import_module(mutant.preload)
    return mutant


def apply_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """Apply what the environment names: the module in ``$FISKJ_PRELOAD``, else the mutant ``$FISKJ_MUTANT``.

    Returns the module imported (``None`` when neither is set).  Raises
    ``KeyError`` for an unknown mutant name, ``ImportError`` for a missing
    module.  For the mutant subject, run as a fresh process, where a
    reproducer may name the mutant alone.
    """
    from harness.subject.preload import load_preload

    env = os.environ if environ is None else environ
    loaded = load_preload(env)
    if loaded is not None:
        return loaded
    name = env.get(MUTANT_ENV, "").strip()
    return apply(name).preload if name else None
