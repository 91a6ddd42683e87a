"""fiskj: the reference journal and resume engine for agent runs (fisk-ai v2 wire format).

Modules, one concept each: :mod:`fiskj.records` (typed records),
:mod:`fiskj.codec` (one line <-> one record), :mod:`fiskj.reader` (a journal
file -> records, torn tail reported), :mod:`fiskj.fold` (records -> RunState,
pure), :mod:`fiskj.fingerprint` (the resume guard), :mod:`fiskj.errors`,
and the IO side: the store, journal writer, lock, IO seam, agent loop and CLI.

The public API (docs/architecture.md "The public API") is re-exported here:
``from fiskj import FileStore, read_state, RunState``.  A public name is
never a module's name (``fiskj.fold`` is the module; its function is
``fiskj.fold.fold``).  ``import fiskj``
alone loads none of its modules; the first use of a public name loads the
API's modules (stdlib only; the model client imports its HTTP stack at its
first request, never here), so a process that only imports
:mod:`fiskj.codec` or :mod:`fiskj.fold` stays as light as before.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = [
    # errors (fiskj/errors.py): every error fiskj raises
    "FiskjError", "JournalError", "CorruptJournal", "RecordTooLarge", "UnsupportedVersion", "ConsistencyError",
    "UsageError", "InvalidRunID", "InvalidRecord", "StoreError", "RunLocked", "RunExists", "RunNotFound",
    "RunNeverCreated", "UnsafeFile", "StreamRefused", "StoreIOError", "JournalPoisoned", "ResumeRefused", "FingerprintMismatch",
    "ModelError", "ToolError",
    # records (fiskj/records.py) and their bytes (fiskj/codec.py)
    "MetaRecord", "AssistantRecord", "UserRecord", "ToolResultRecord", "TerminalRecord", "Record",
    "tool_use_ids", "text_block", "tool_result_block", "tool_result_text", "go_block",
    "encode_record", "decode_record", "MAX_RECORD_BYTES",
    # the resume guard (fiskj/fingerprint.py)
    "Fingerprint", "make_fingerprint",
    # reading and folding a journal (fiskj/reader.py, fiskj/fold.py)
    # (the fold function keeps its module's name: ``fiskj.fold.fold``; ``fiskj.fold`` is the module)
    "JournalReader", "TornTail", "read_records", "read_state", "Folder", "RunState", "Counters", "PendingTurn",
    # the store and the journal writer (fiskj/store.py, fiskj/journal.py)
    "FileStore", "RunInfo", "Journal",
    # the agent loop, its model and its tools (fiskj/loop.py, fiskj/model.py, fiskj/tools.py)
    "RunConfig", "RunResult", "SuspendFlag", "handle_signals", "start_run", "resume_run",
    "Model", "AnthropicClient", "make_model", "ToolRegistry", "make_registry",
]


def __getattr__(name: str) -> Any:
    """A public name, its modules loaded at its first use (PEP 562); ``AttributeError`` for any other name."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import codec, errors, fingerprint, fold, journal, loop, model, reader, records, store, tools

    for module in (errors, records, codec, fingerprint, reader, fold, store, journal, loop, model, tools):
        for public in set(module.__all__) & set(__all__):
            globals().setdefault(public, getattr(module, public))
    return globals()[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
