"""``fiskj session``: show, verify, list and remove checkpointed runs (issues 2 and 3, item 8).

* ``show PATH|ID [--json]``: the folded state; ``--json`` prints
  :meth:`fiskj.fold.RunState.to_json`.
* ``verify PATH|ID... [--json]``: does each journal fold?  ``--json`` prints a
  list of ``{"path", "ok", "records", "torn_tail", "error"}`` with ``error``
  null or ``{"kind", "line", "offset", "message"}``.  A torn tail is
  reported, not an error.
* ``ls [--json]``: the runs of the store (:meth:`fiskj.store.FileStore.list`),
  unreadable ones included.
* ``rm ID``: delete a run (under its lock).
* ``migrate --from STORE --to STORE [ID...]``: copy runs (default: every readable
  run) from one store to another, record by record, and check that each copy
  folds as its source does (docs/store.md "Migrating between stores").

A target is a PATH when it contains ``/``, ends in ``.json`` or exists;
otherwise it is a run ID looked up in the store (``--store DIR`` or
``--store nats://HOST:PORT/STREAM``, :func:`fiskj.cli_common.open_store`; default
``$XDG_STATE_HOME/fisk-ai/runs`` or ``~/.local/state/fisk-ai/runs``).
Exit status: 0 success, 1 a journal is corrupt or of an unsupported version
(or another run/IO failure), 2 usage (bad arguments, an invalid run id).
Errors are one line on stderr (``fiskj session CMD: Kind: path, line N,
byte offset M: message``), never a traceback.

Every subcommand but ``rm`` is a read: it never changes, creates or writes
anything in the store (no chmod, no lock file; docs/spec.md section 1,
rule 4).  Text a journal may hold but no output stream can (a lone
surrogate such as ``"\\ud800"``, which fiskj's writer stores as that JSON
escape) is printed as the same escape, in ``--json`` output too, where it
keeps the output valid JSON that reads back to the same string.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import stat
import sys
from typing import Any, TextIO

from .cli_common import EXIT_ERROR, EXIT_OK, EXIT_USAGE, is_store_url, open_store
from .errors import FiskjError, StoreIOError, UnsafeFile, UsageError
from .fold import RunState

__all__ = ["register", "show_command", "verify_command", "ls_command", "rm_command", "migrate_command", "is_path",
           "render_state"]


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``session`` command and its subcommands to ``subparsers``; return the ``session`` parser."""
    p = subparsers.add_parser("session", help="show, verify, list and remove checkpointed runs",
                              description="Inspect journals: by PATH (contains '/', ends in .json, or exists) "
                                          "or by run ID in the store.")
    sub = p.add_subparsers(dest="session_command", metavar="SUBCOMMAND", required=True)
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument("--store", metavar="DIR|URL",
                       help="store directory (default $XDG_STATE_HOME/fisk-ai/runs, else ~/.local/state/fisk-ai/runs), "
                            "or a JetStream store nats://HOST:PORT/STREAM")
    show = sub.add_parser("show", parents=[store], help="print the folded state of a run")
    show.add_argument("target", metavar="PATH|ID")
    show.add_argument("--json", action="store_true", help="print the state as JSON")
    show.set_defaults(func=show_command)
    verify = sub.add_parser("verify", parents=[store], help="check that journals fold (exit 1 if any does not)")
    verify.add_argument("targets", metavar="PATH|ID", nargs="+")
    verify.add_argument("--json", action="store_true", help="print one JSON object per journal, in a list")
    verify.set_defaults(func=verify_command)
    ls = sub.add_parser("ls", parents=[store], help="list the runs of the store")
    ls.add_argument("--json", action="store_true", help="print the list as JSON")
    ls.set_defaults(func=ls_command)
    rm = sub.add_parser("rm", parents=[store], help="delete a run (refused while a writer holds it)")
    rm.add_argument("run_id", metavar="ID")
    rm.set_defaults(func=rm_command)
    mig = sub.add_parser("migrate", help="copy runs from one store to another (file or JetStream)")
    mig.add_argument("--from", dest="source", metavar="DIR|URL", required=True, help="the store to copy from")
    mig.add_argument("--to", dest="target", metavar="DIR|URL", required=True, help="the store to copy to")
    mig.add_argument("run_ids", metavar="ID", nargs="*", help="the runs to copy (default: every run of --from)")
    mig.set_defaults(func=migrate_command)
    return p


# --- loading ----------------------------------------------------------------------------------------


def is_path(target: str) -> bool:
    """True when ``target`` names a file (contains ``/``, ends in ``.json`` or exists), False for a run ID."""
    return not is_store_url(target) and "/" in target or target.endswith(".json") or os.path.exists(target)


def _read_path(path: str) -> RunState:
    """Fold the journal file at ``path`` (symlinks followed; FIFOs, devices and directories refused)."""
    from .store import fold_open_file

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise StoreIOError(f"cannot open journal: {exc.strerror}", path=path, errno=exc.errno) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafeFile("not a regular file", path=path)
        folder, reader = fold_open_file(fd, path)
    finally:
        os.close(fd)
    return folder.state(torn_tail=reader.torn_tail, good_size=reader.good_size)


def _load(target: str, store_dir: str | None) -> tuple[RunState, str]:
    """Return ``(state, journal path)`` of a PATH or a run ID."""
    if is_path(target):
        return _read_path(target), target
    from .paths import validate_run_id

    store = open_store(store_dir)
    try:
        return store.load(validate_run_id(target)), store.location(target)
    finally:
        store.close()


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _fail(command: str, exc: BaseException, err: TextIO) -> int:
    text = "out of memory" if isinstance(exc, MemoryError) else _one_line(str(exc))
    _emit(err, f"fiskj session {command}: {type(exc).__name__}: {text}\n")
    return EXIT_USAGE if isinstance(exc, UsageError) else EXIT_ERROR


def _escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as its escape ``\\udXXX`` (everything else unchanged)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _emit(out: TextIO, text: str, value: Any = None) -> None:
    """Write ``text`` to ``out`` whatever it holds: lone surrogates as their escapes, and when ``out``'s
    encoding cannot hold a character, ``value`` (the object ``text`` is the JSON of) as ASCII-only JSON,
    or the text with backslash escapes."""
    text = _escape_surrogates(text)
    try:
        out.write(text)
    except UnicodeEncodeError:
        if value is not None:
            out.write(json.dumps(value, indent=2, ensure_ascii=True) + "\n")
        else:
            encoding = getattr(out, "encoding", None) or "ascii"
            out.write(text.encode(encoding, "backslashreplace").decode(encoding))


def _dump(out: TextIO, value: Any) -> None:
    """Print ``value`` as indented JSON (non-ASCII as UTF-8; see :func:`_emit`)."""
    _emit(out, json.dumps(value, indent=2, ensure_ascii=False) + "\n", value)


# --- show -------------------------------------------------------------------------------------------


def _cut(text: str, width: int) -> str:
    text = _one_line(text)
    return text if len(text) <= width else text[: width - 3] + "..."


def _block(block: Any) -> str:
    if not isinstance(block, dict):
        return _cut(str(block), 60)
    kind = block.get("type")
    if kind == "text":
        return _cut(json.dumps(block.get("text", ""), ensure_ascii=False), 70)
    if kind in ("tool_use", "server_tool_use"):
        return f"{kind} {block.get('name')} ({block.get('id')}) {_cut(json.dumps(block.get('input'), ensure_ascii=False), 40)}"
    if kind == "tool_result":
        content = block.get("content")
        shown = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        error = " ERROR" if block.get("is_error") else ""
        return f"tool_result {block.get('tool_use_id')}{error}: {_cut(shown or '', 50)}"
    if kind == "thinking":
        return f"thinking ({len(block.get('thinking', ''))} chars)"
    return str(kind)


def _message(message: dict[str, Any]) -> str:
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else (content or [])
    return f"{message.get('role')}: " + " | ".join(_block(b) for b in blocks)


def render_state(state: RunState, where: str) -> str:
    """Return the human view of a run's state (several lines, ending in ``\\n``); ``where`` is its path."""
    fp, c = state.fingerprint, state.counters
    out = [f"run {state.run_id}: {state.status} (version {state.version}"
           f"{', interactive' if state.interactive else ''}) {where}",
           f"  created     {state.meta.created}",
           f"  model       {fp.model} (thinking {fp.thinking_mode}; budgets {fp.max_tokens} tokens, "
           f"{fp.max_iterations} iterations)"]
    if state.prompt:
        out.append(f"  prompt      {_cut(state.prompt, 100)}")
    out.append(f"  records     {state.records} (last seq {state.last_seq}); next iteration {state.next_iteration}; "
               f"last stop reason {state.last_stop_reason or '-'}")
    out.append(f"  counters    {c.llm_calls} llm calls, {c.tool_calls} tool calls ({c.remote_tool_calls} remote); "
               f"tokens {c.in_tokens} in, {c.out_tokens} out, {c.cache_read_tokens} cache read, "
               f"{c.cache_create_tokens} cache create")
    if state.terminal is not None:
        message = f": {_cut(state.terminal.message, 80)}" if state.terminal.message else ""
        out.append(f"  terminal    {state.terminal.reason} (seq {state.terminal.seq}){message}")
    if state.pending is not None:
        p = state.pending
        out.append(f"  pending     iteration {p.iteration}: answered {', '.join(p.answered) or '-'}; "
                   f"unanswered {', '.join(p.unanswered)}")
    if state.torn_tail is not None:
        out.append(f"  torn tail   {state.torn_tail.length} bytes at byte offset {state.torn_tail.offset} "
                   f"(dropped; a writer cuts it before its next append)")
    out.append(f"  messages    {len(state.messages)}")
    out += [f"    [{i}] {_message(m)}" for i, m in enumerate(state.messages, 1)]
    return "\n".join(out) + "\n"


def show_command(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``fiskj session show``: print the state of one run; returns the exit status."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        state, where = _load(args.target, args.store)
    except (FiskjError, OSError, MemoryError) as exc:
        return _fail("show", exc, err)
    if args.json:
        _dump(out, state.to_json())
    else:
        _emit(out, render_state(state, where))
    return EXIT_OK


# --- verify -----------------------------------------------------------------------------------------


def _verify_one(target: str, store_dir: str | None) -> tuple[dict[str, Any], BaseException | None]:
    entry: dict[str, Any] = {"path": target, "ok": False, "records": None, "torn_tail": None, "error": None}
    try:
        state, entry["path"] = _load(target, store_dir)
    except (FiskjError, OSError, MemoryError) as exc:
        message = exc.message if isinstance(exc, FiskjError) else (str(exc) or type(exc).__name__)
        entry["error"] = {"kind": type(exc).__name__, "line": getattr(exc, "line", None),
                          "offset": getattr(exc, "offset", None), "message": message}
        if isinstance(exc, FiskjError) and exc.path and not isinstance(exc, UsageError):
            entry["path"] = str(exc.path)
        return entry, exc
    entry.update(ok=True, records=state.records,
                 torn_tail=None if state.torn_tail is None else state.torn_tail.to_json())
    return entry, None


def verify_command(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``fiskj session verify``: check each journal; 0 all fold, 1 any does not, 2 a usage error."""
    out, err = out or sys.stdout, err or sys.stderr
    entries, status = [], EXIT_OK
    for target in args.targets:
        entry, exc = _verify_one(target, args.store)
        entries.append(entry)
        if exc is not None:
            status = max(status, EXIT_USAGE if isinstance(exc, UsageError) else EXIT_ERROR)
    if args.json:
        _dump(out, entries)
        return status
    buf = io.StringIO()
    for e in entries:
        if e["ok"]:
            torn = e["torn_tail"]
            note = "" if torn is None else (f"; torn tail of {torn['length']} bytes at byte offset "
                                            f"{torn['offset']} dropped")
            buf.write(f"ok    {e['path']}: {e['records']} records{note}\n")
        else:
            error = e["error"]
            where = "".join(f", {name} {error[key]}" for name, key in (("line", "line"), ("byte offset", "offset"))
                            if error[key] is not None)
            buf.write(f"FAIL  {e['path']}: {error['kind']}{where}: {_one_line(error['message'])}\n")
    _emit(out, buf.getvalue())
    return status


# --- ls and rm --------------------------------------------------------------------------------------


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return datetime.datetime.fromtimestamp(seconds).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def ls_command(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``fiskj session ls``: list the store's runs (unreadable ones with their error); returns the exit status."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        store = open_store(args.store)
        try:
            infos = store.list()
        finally:
            store.close()
    except (FiskjError, OSError, MemoryError) as exc:
        return _fail("ls", exc, err)
    if args.json:
        _dump(out, [i.to_json() for i in infos])
        return EXIT_OK
    if not infos:
        _emit(out, f"no runs in {store.location()}\n")
        return EXIT_OK
    width = max(len("ID"), *(len(i.id) for i in infos))
    buf = io.StringIO()
    buf.write(f"{'ID':<{width}}  {'STATUS':<16}  {'UPDATED':<19}  {'RECORDS':>7}  {'MODEL':<20}  PROMPT\n")
    for i in infos:
        if i.error is not None:
            e = i.error
            where = "".join(f", {name} {value}" for name, value in (("line", e.line), ("byte offset", e.offset))
                            if value is not None)
            detail = f"{type(e).__name__}{where}: {_cut(e.message, 80)}"
            buf.write(f"{i.id:<{width}}  {i.status:<16}  {_when(i.updated):<19}  {'-':>7}  {'-':<20}  {detail}\n")
            continue
        status = i.status + (" (torn)" if i.torn_tail else "")
        buf.write(f"{i.id:<{width}}  {status:<16}  {_when(i.updated):<19}  {i.records:>7}  "
                  f"{_cut(i.model or '-', 20):<20}  {_cut(i.prompt or '', 50)}\n")
    _emit(out, buf.getvalue())
    return EXIT_OK


def rm_command(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``fiskj session rm``: delete a run under its lock; refused while a writer holds it."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        store = open_store(args.store)
        try:
            store.delete(args.run_id)
        finally:
            store.close()
    except (FiskjError, OSError) as exc:
        return _fail("rm", exc, err)
    _emit(out, f"removed run {args.run_id} from {store.location()}\n")
    return EXIT_OK


# --- migrate ----------------------------------------------------------------------------------------


def _comparable(state: RunState) -> dict[str, Any]:
    """A state's ``show --json`` object without what only says where its bytes lie."""
    return {k: v for k, v in state.to_json().items() if k not in ("torn_tail", "good_size")}


def migrate_run(source: Any, target: Any, run_id: str) -> int:
    """Copy run ``run_id`` from store ``source`` to store ``target`` (each a FileStore or JetStreamStore): create
    it with its meta record, append every other record in seq order, then check that the copy folds as the
    source does.  Returns the records copied.  Raises the stores' errors (``RunExists`` when ``target`` has
    the run) and :class:`fiskj.errors.ConsistencyError` when the folds differ."""
    from .errors import ConsistencyError

    records = source.records(run_id)
    with contextlib.closing(target.create(run_id, records[0])) as journal:
        for record in records[1:]:
            journal.append(record)
    if _comparable(target.load(run_id)) != _comparable(source.load(run_id)):
        raise ConsistencyError(f"run {run_id} copied to {target.location()} does not fold as its source",
                               run_id=run_id, path=target.location(run_id))
    return len(records)


def migrate_command(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``fiskj session migrate``: copy runs between stores; 0 all copied, 1 any failed (named on stderr)."""
    out, err = out or sys.stdout, err or sys.stderr
    status, stores = EXIT_OK, []
    try:
        stores.append(source := open_store(args.source, reading=True))  # a memory stream's runs can be rescued
        stores.append(target := open_store(args.target))
        run_ids = args.run_ids or [i.id for i in source.list()]
        for run_id in run_ids:
            try:
                n = migrate_run(source, target, run_id)
            except (FiskjError, OSError) as exc:
                status = max(status, _fail("migrate", exc, err))
                continue
            _emit(out, f"migrated run {run_id}: {n} records from {source.location()} to {target.location()}\n")
    except (FiskjError, OSError, MemoryError) as exc:
        return _fail("migrate", exc, err)
    finally:
        for store in stores:
            store.close()
    return status
