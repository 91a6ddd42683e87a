"""``fiskj run``: run, suspend and resume an agent from the command line (issue 4, item 7).

Standard output carries only the answers; everything else (the run id,
progress, the replay on resume, how the run ended, errors) goes to standard
error, one line each.  Exit status: 0 completed, 3 suspended, 1 error
(including ``budget`` and ``max_iterations`` ends, a locked or missing run,
an IO failure), 2 usage (bad arguments or files, a refused resume).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, TextIO

from . import probes
from .cli_common import EXIT_ERROR, EXIT_USAGE, count, open_store, positive_int
from .errors import FingerprintMismatch, FiskjError, ToolError, UsageError
from .fold import RunState
from .loop import (DEFAULT_CALL_MAX_TOKENS, DEFAULT_MAX_ITERATIONS, DEFAULT_MAX_TOKENS, RunConfig, RunResult,
                   SuspendFlag, handle_signals, new_run_id, resume_run, start_run)
from .model import DEFAULT_MAX_RETRIES, DEFAULT_MODEL, RetryPolicy, make_model, thinking_param
from .paths import validate_run_id
from .records import tool_result_text
from .tools import make_registry

__all__ = ["register", "run_command", "default_model", "replay_lines"]

_EPILOG = f"""\
model:
  --model scripted:SEED[:TURNS] is a deterministic offline model (TURNS tool-calling
  turns, default 3, then an answer; its append_line calls write ./fiskj-scripted-SEED.log).
  Any other name is sent to the Anthropic Messages API at --base-url, else
  $ANTHROPIC_BASE_URL, else https://api.anthropic.com, with the key $ANTHROPIC_API_KEY
  (never journaled; optional for a local server).  Without --model: {DEFAULT_MODEL} when
  --base-url, $ANTHROPIC_BASE_URL or $ANTHROPIC_API_KEY is set, else a usage error (exit 2):
  fiskj never falls back to the scripted model silently.  A resume defaults to the journal's model.
  A failed model call is retried when the failure is transient (a connection error, a timeout,
  HTTP 408, 409, 429, 5xx or 529 overloaded, a reply without a final stop_reason): --max-retries
  times (default {DEFAULT_MAX_RETRIES}), after 0.5 s, 1 s, ... (at most 8 s, less up to 25 % jitter), or
  after the server's retry-after / retry-after-ms when that is at most 60 s.  A failed call is
  never journaled.

tools:
  Built in: echo, sleep (ms), append_line (path, line).  --tools FILE adds command
  tools: a JSON list of {{"name", "description", "input_schema", "command": [argv...],
  "timeout_seconds"?}}; the command gets the tool input as JSON on stdin and
  FISKJ_TOOL_NAME, FISKJ_TOOL_USE_ID, FISKJ_RUN_ID in its environment; its stdout is
  the result, a non-zero exit an error result with its stderr.

checkpoints:
  --checkpoint journals the run in the store ($XDG_STATE_HOME/fisk-ai/runs, else
  ~/.local/state/fisk-ai/runs, or --store DIR, or --store nats://HOST:PORT/STREAM for a
  JetStream stream) and prints "run id: ID" on stderr.
  SIGINT (Ctrl-C) or SIGTERM suspends the run at the next loop boundary (the tools
  of the current turn finish first).  --resume ID continues it: the model, thinking
  mode and budgets default to the journal's; the system prompt and command tools
  are stored only as hashes, so give the same --system and --tools again.  Any
  run but a completed one resumes, also one that ended in error, budget or
  max_iterations (as fisk-ai; it ends the same way again unless what ended it
  changed): a run that ended because the model kept failing, or because fiskj
  ran out of memory, continues where it stopped.  A changed configuration is
  refused naming each field, unless --force; a forced resume with another
  model does not send the earlier model's thinking blocks (the journal keeps
  them; docs/spec.md section 12, rule 8).

output:
  Standard output gets the answers only.  Standard error gets "run id: ID", progress
  lines (unless --quiet), the replay of the conversation on --resume, how the run
  ended, and errors (one line: "fiskj run: ErrorType: message").  Without
  --checkpoint the run lives in memory only and a suspend ends it for good.
  With --chat on a terminal, a "> " prompt is shown on stderr.

exit status:
  0 completed, 3 suspended, 1 error (also budget and max_iterations, a model that still
  fails after its retries, out of memory: a checkpointed run stays resumable), 2 usage
  error or refused resume.
"""


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``run`` subcommand to ``subparsers`` (from ``add_subparsers``) and return its parser."""
    p = subparsers.add_parser(
        "run", help="run an agent, or resume a checkpointed run",
        usage="fiskj run [options] PROMPT...\n       fiskj run --resume ID [--force] [options]",
        description="Run an agent loop against a model with tools; with --checkpoint, journal it so "
                    "that it can be suspended (Ctrl-C) and resumed.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("prompt", nargs="*", metavar="PROMPT", help="the task, as words (joined by spaces)")
    g = p.add_argument_group("run and resume")
    g.add_argument("--checkpoint", action="store_true", help="journal the run so that it can be resumed")
    g.add_argument("--name", metavar="NAME", help="run id for --checkpoint (1-128 of [A-Za-z0-9_-]); "
                                                  "default: date, time and random hex")
    g.add_argument("--resume", metavar="ID", help="resume the checkpointed run ID (takes no PROMPT)")
    g.add_argument("--force", action="store_true", help="with --resume: resume despite a changed configuration")
    g.add_argument("--chat", action="store_true", help="after each answer read a follow-up line from stdin; "
                                                       "end of input suspends the run")
    g.add_argument("--store", metavar="DIR|URL", help="store directory, or a JetStream store "
                   "nats://HOST:PORT/STREAM (default: see checkpoints below)")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    m = p.add_argument_group("configuration (part of the resume fingerprint)")
    m.add_argument("--model", metavar="M", help="model name or scripted:SEED[:TURNS] (default: see below)")
    m.add_argument("--system", metavar="FILE", help="file holding the system prompt (default: none)")
    m.add_argument("--tools", metavar="FILE", help="JSON file of command tools (added to the built-ins)")
    m.add_argument("--max-tokens", metavar="N", type=positive_int,
                   help=f"token budget of the run, all kinds summed (default {DEFAULT_MAX_TOKENS})")
    m.add_argument("--max-iterations", metavar="N", type=positive_int,
                   help=f"iteration cap (default {DEFAULT_MAX_ITERATIONS})")
    m.add_argument("--thinking", metavar="MODE", help="off (default), adaptive or enabled:N (N >= 1024)")
    c = p.add_argument_group("model client (not part of the fingerprint)")
    c.add_argument("--base-url", metavar="URL", help="Messages API base URL (default $ANTHROPIC_BASE_URL, else https://api.anthropic.com)")
    c.add_argument("--call-max-tokens", metavar="N", type=positive_int, default=DEFAULT_CALL_MAX_TOKENS,
                   help=f"max_tokens of one model call (default {DEFAULT_CALL_MAX_TOKENS})")
    c.add_argument("--timeout", metavar="SECONDS", type=_seconds, default=120.0,
                   help="timeout of one model request (default 120)")
    c.add_argument("--max-retries", metavar="N", type=count, default=DEFAULT_MAX_RETRIES,
                   help=f"retries of a model call that failed transiently (default {DEFAULT_MAX_RETRIES}; "
                        "see model below)")
    p.set_defaults(func=run_command)
    return p


def default_model(base_url: str | None, env: Any = None) -> str:
    """Return the model used without ``--model``: :data:`fiskj.model.DEFAULT_MODEL` when ``base_url``,
    ``$ANTHROPIC_BASE_URL`` or ``$ANTHROPIC_API_KEY`` is set (``env`` defaults to ``os.environ``).

    Otherwise raises :class:`UsageError` (exit 2) saying what to pass: fiskj never falls back to the
    scripted model on its own (issue 15, item 2).
    """
    env = os.environ if env is None else env
    if base_url or env.get("ANTHROPIC_BASE_URL") or env.get("ANTHROPIC_API_KEY"):
        return DEFAULT_MODEL
    raise UsageError("no --model given and neither ANTHROPIC_API_KEY nor a base URL is set: pass --model NAME "
                     "with ANTHROPIC_API_KEY set (or --base-url URL for a local server), or --model scripted:0 "
                     "for the offline demo model", field="model")


def _clip(text: str, width: int = 100) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _describe(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [f"  {message.get('role')}: {_clip(content)}"]
    lines = []
    for b in content or []:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            lines.append(f"  {message.get('role')}: {_clip(b.get('text', ''))}")
        elif kind == "tool_use":
            lines.append(f"  tool call {b.get('name')} ({b.get('id')}): {_clip(b.get('input'), 70)}")
        elif kind == "tool_result":
            err = " [error]" if b.get("is_error") else ""
            lines.append(f"  tool result ({b.get('tool_use_id')}){err}: {_clip(tool_result_text(b), 70)}")
        else:
            lines.append(f"  {message.get('role')}: [{kind}]")
    return lines


def replay_lines(state: RunState, limit: int = 12) -> list[str]:
    """Return a short human replay of a folded run: a header, the last ``limit`` lines, the pending batch."""
    body = [line for message in state.messages for line in _describe(message)]
    out = [f"resuming run {state.run_id}: {state.status}, {state.records} records, "
           f"next iteration {state.next_iteration}, {state.counters.total_tokens} tokens used"]
    if len(body) > limit:
        out.append(f"  ... {len(body) - limit} earlier lines")
    out += body[-limit:]
    if state.pending is not None:
        out += _describe(state.pending.assistant)
        out.append(f"  pending batch: {len(state.pending.answered)} answered, "
                   f"to run now: {', '.join(state.pending.unanswered)}")
    return out


class _Prompting:
    """Standard input that shows a ``> `` prompt on stderr before each read (terminals only)."""

    def __init__(self, stream: TextIO, err: TextIO) -> None:
        self.stream, self.err = stream, err

    def readline(self) -> str:
        self.err.write("> ")
        self.err.flush()
        return self.stream.readline()


def _read_system(path: str | None) -> str:
    if path is None:
        return ""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read --system file: {getattr(exc, 'strerror', None) or exc}", path=path) from None


def _check_args(args: argparse.Namespace) -> None:
    if args.resume is not None:
        extra = [flag for flag, on in (("PROMPT", args.prompt), ("--checkpoint", args.checkpoint),
                                       ("--name", args.name), ("--chat", args.chat)) if on]
        if extra:
            raise UsageError(f"--resume takes no {', '.join(extra)}: the journal holds them "
                             f"(use: fiskj run --resume {args.resume} [--force])")
        return
    if args.force:
        raise UsageError("--force only applies to a resume (use: fiskj run --resume ID --force)")
    if args.name is not None and not args.checkpoint:
        raise UsageError("--name needs --checkpoint (use: fiskj run --checkpoint --name NAME PROMPT...)")
    if args.name is not None:
        validate_run_id(args.name)
    if not args.prompt or not " ".join(args.prompt).strip():
        raise UsageError("a PROMPT is required (use: fiskj run [options] PROMPT..., or fiskj run --resume ID)")


class _BestEffort:
    """A text stream whose writes never raise: after the first failure (EPIPE, closed) output is dropped."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream
        self.broken = stream is None

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                try:
                    self._stream.write(text)  # type: ignore[union-attr]
                except UnicodeEncodeError:  # a lone surrogate (or a narrow encoding): write escapes instead
                    encoding = getattr(self._stream, "encoding", None) or "utf-8"
                    escaped = text.encode(encoding, "backslashreplace").decode(encoding)
                    self._stream.write(escaped)  # type: ignore[union-attr]
            except (OSError, ValueError):
                self.broken = True
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()  # type: ignore[union-attr]
            except (OSError, ValueError):
                self.broken = True

    def isatty(self) -> bool:
        try:
            return not self.broken and bool(self._stream.isatty())  # type: ignore[union-attr]
        except (OSError, ValueError):
            return False


def _execute(args: argparse.Namespace, out: TextIO, err: TextIO, stdin: TextIO, flag: SuspendFlag) -> RunResult:
    _check_args(args)
    store = open_store(args.store) if (args.checkpoint or args.resume is not None) else None
    try:
        return _execute_on(store, args, out, err, stdin, flag)
    finally:
        if store is not None:
            store.close()


def _execute_on(store: Any, args: argparse.Namespace, out: TextIO, err: TextIO, stdin: TextIO,
                flag: SuspendFlag) -> RunResult:
    from .store import refusal_probe

    tools = make_registry(args.tools)
    system = _read_system(args.system)
    log = None if args.quiet else (lambda line: print(line, file=err, flush=True))
    if args.resume is not None:
        try:
            stored = store.load(args.resume).fingerprint  # defaults only; checked again under the lock
        except FiskjError as exc:  # the resume is refused here, before the lock (nothing is changed)
            refusal = refusal_probe(exc)
            if refusal is not None:
                probes.hit(refusal)
            raise
        model_name, thinking = args.model or stored.model, args.thinking or stored.thinking_mode
        budget, cap = args.max_tokens or stored.max_tokens, args.max_iterations or stored.max_iterations
    else:
        thinking = args.thinking or "off"
        thinking_param(thinking)  # a bad mode is named before a missing model
        model_name = args.model or default_model(args.base_url)
        budget, cap = args.max_tokens or DEFAULT_MAX_TOKENS, args.max_iterations or DEFAULT_MAX_ITERATIONS
    config = RunConfig(model=model_name, system=system, max_tokens=budget, max_iterations=cap, thinking=thinking,
                       call_max_tokens=args.call_max_tokens)
    model = make_model(model_name, base_url=args.base_url, timeout=args.timeout)
    reader = _Prompting(stdin, err) if hasattr(stdin, "isatty") and stdin.isatty() else stdin
    common = dict(config=config, model=model, tools=tools, input_stream=reader, output=out, log=log,
                  retry=RetryPolicy(max_retries=args.max_retries))
    if args.resume is not None:
        def replay(state: RunState) -> None:
            for line in replay_lines(state):
                print(line, file=err, flush=True)
        return resume_run(args.resume, store=store, force=args.force, suspend=flag, on_open=replay, **common)
    run_id = (args.name if args.name is not None else new_run_id()) if store is not None else new_run_id()
    opened = (lambda state: print(f"run id: {state.run_id}", file=err, flush=True)) if store else None
    return start_run(" ".join(args.prompt), store=store, run_id=run_id, interactive=args.chat, suspend=flag,
                     on_open=opened, **common)


def run_command(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None,
                stdin: TextIO | None = None) -> int:
    """Run ``fiskj run`` for parsed ``args``; return the exit status (0, 1, 2 or 3).

    Never raises for an expected failure: errors are printed as one line,
    ``fiskj run: <ErrorType>: <message>``, on ``err`` (default stderr).
    """
    # A reader that goes away (`| head`, a dead tee) must not end a durable run with an error:
    # output is best effort, the journal is the record.
    out, err, stdin = _BestEffort(out or sys.stdout), _BestEffort(err or sys.stderr), stdin or sys.stdin
    # SIGINT/SIGTERM ask for a suspend from the moment the command starts until it has reported:
    # one that comes while the run is set up suspends it at its first boundary, and one that
    # comes after the run ended has nothing left to suspend (it never turns an outcome into exit 1).
    with handle_signals(SuspendFlag()) as flag:
        return _report(args, out, err, stdin, flag)


def _report(args: argparse.Namespace, out: TextIO, err: TextIO, stdin: TextIO, flag: SuspendFlag) -> int:
    try:
        result = _execute(args, out, err, stdin, flag)
    except (UsageError, ToolError) as exc:
        hint = " (the system prompt and tools are not stored: pass the same --system and --tools as the " \
               "original run)" if isinstance(exc, FingerprintMismatch) else ""
        print(f"fiskj run: {type(exc).__name__}: {exc}{hint}", file=err)
        return EXIT_USAGE
    except FiskjError as exc:
        print(f"fiskj run: {type(exc).__name__}: {exc}", file=err)
        return EXIT_ERROR
    except OSError as exc:
        print(f"fiskj run: {type(exc).__name__}: {exc}", file=err)
        return EXIT_ERROR
    except MemoryError:  # a resource limit, not a bug: nothing acknowledged is lost (docs/spec.md section 17)
        what = (f"; the journal keeps every acknowledged record: resume with: fiskj run --resume "
                f"{args.resume or args.name or 'ID'}{_store_arg(args)}") if (args.checkpoint or args.resume) else ""
        print(f"fiskj run: MemoryError: out of memory{what}", file=err)
        return EXIT_ERROR
    except Exception as exc:  # never a traceback
        print(f"fiskj run: internal error: {type(exc).__name__}: {exc}", file=err)
        return EXIT_ERROR
    checkpointed = bool(args.checkpoint or args.resume)
    if result.reason == "suspended":
        if checkpointed:
            print(f"run {result.run_id} suspended; resume with: fiskj run --resume {result.run_id}{_store_arg(args)}",
                  file=err)
        else:
            print("run suspended; it was not checkpointed (--checkpoint), so it cannot be resumed", file=err)
    elif result.reason != "completed" and args.quiet:
        print(f"fiskj run: run {result.run_id} ended: {result.reason}: {result.message}", file=err)
    if result.reason == "error" and checkpointed:
        print(f"run {result.run_id} ended with an error; once its cause is gone, resume with: "
              f"fiskj run --resume {result.run_id}{_store_arg(args)}", file=err)
    return result.exit_code


def _store_arg(args: argparse.Namespace) -> str:
    """`` --store URL`` for a resume hint, shell-quoted, a password in the URL shown as ``***`` (the hint goes to
    stderr and into logs); empty without ``--store``."""
    if not args.store:
        return ""
    import shlex
    from urllib.parse import urlsplit, urlunsplit

    url = urlsplit(args.store)
    if url.password is not None:
        user, _, hosts = url.netloc.rpartition("@")
        url = url._replace(netloc=f"{user.split(':', 1)[0]}:***@{hosts}")
    return f" --store {shlex.quote(urlunsplit(url))}"
