#!/usr/bin/env python3
"""An agent built on the official ``anthropic`` SDK, streaming, with fiskj as its journal library.

This is what a team that imports fiskj as the reference engine writes: its
own command line, its own exit statuses, its own configuration file, the
official SDK for the model (every call streams: ``client.messages.stream``),
and fiskj's store, fold and loop for the journal.  The harness runs it
through ``subjects/sdk-agent/profile.toml``, with no wrapper, observed from
outside like any other agent.

    agent.py start NAME --config FILE -- PROMPT
    agent.py resume NAME [--yes] --config FILE
    agent.py show NAME

``--config`` is a JSON object: ``model``, ``tools`` (a fiskj ``--tools``
file), ``max_tokens``, ``max_iterations`` and optionally ``base_url`` (else
``$ANTHROPIC_BASE_URL``).  ``--yes`` resumes despite a changed
configuration.  ``show`` prints ``{"status", "pending", "records"}`` of the
run's journal as fiskj folds it, taking no lock.  The journal is fiskj's
store: ``$XDG_STATE_HOME/fisk-ai/runs/NAME.json``.

Exit status: 0 completed, 4 suspended (SIGINT/SIGTERM at a loop boundary),
5 refused (a changed configuration without ``--yes``, a completed run),
6 bad usage, 1 any other error.
"""

from __future__ import annotations

import signal

# A suspend asked for while the SDK is still importing (a second or so) is kept, not lost to Python's
# default SIGINT handling, and honoured at the run's first boundary.
_EARLY: list[int] = []
for _signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_signum, lambda signum, frame: _EARLY.append(signum))

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

EXIT = {"completed": 0, "suspended": 4}
EXIT_REFUSED, EXIT_USAGE, EXIT_ERROR = 5, 6, 1


class StreamingModel:
    """fiskj's model protocol (``complete(request) -> response``) on the official SDK, streaming every call."""

    def __init__(self, base_url: str | None) -> None:
        import anthropic

        self._errors = (anthropic.APIError,)
        self.client = anthropic.Anthropic(base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL"),
                                          api_key=os.environ.get("ANTHROPIC_API_KEY"), max_retries=2, timeout=60)

    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        from fiskj.errors import ModelError

        try:
            with self.client.messages.stream(**request) as stream:
                message = stream.get_final_message()
        except self._errors as exc:
            raise ModelError(f"the model call failed: {type(exc).__name__}: {exc}") from None
        return message.model_dump(mode="json", exclude_none=True)


def _config(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        raise SystemExit(_usage(f"--config {path}: {exc}"))
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), str):
        raise SystemExit(_usage(f"--config {path}: a JSON object with at least a string 'model'"))
    return doc


def _usage(message: str) -> int:
    print(f"sdk-agent: {message}", file=sys.stderr)
    return EXIT_USAGE


def _show(name: str) -> int:
    from fiskj.errors import FiskjError
    from fiskj.store import FileStore

    try:
        state = FileStore().load(name)
    except FiskjError as exc:
        print(f"sdk-agent: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    pending = list(state.pending.unanswered) if state.pending is not None else None
    print(json.dumps({"status": state.status, "pending": pending, "records": state.records}))
    return 0


def _run(args: argparse.Namespace) -> int:
    from fiskj.errors import FiskjError, ResumeRefused, UsageError
    from fiskj.loop import RunConfig, SuspendFlag, handle_signals, resume_run, start_run
    from fiskj.store import FileStore
    from fiskj.tools import make_registry

    cfg = _config(args.config)
    try:
        tools = make_registry(cfg.get("tools"))
        config = RunConfig(model=cfg["model"], max_tokens=int(cfg.get("max_tokens", 200000)),
                           max_iterations=int(cfg.get("max_iterations", 25)))
    except (FiskjError, ValueError) as exc:
        return _usage(f"--config {args.config}: {exc}")
    model = StreamingModel(cfg.get("base_url"))
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    with handle_signals(SuspendFlag()) as flag:
        if _EARLY:
            flag.request()
        try:
            if args.command == "start":
                result = start_run(" ".join(args.prompt), store=FileStore(), run_id=args.name, config=config,
                                   model=model, tools=tools, suspend=flag, log=log)
            else:
                result = resume_run(args.name, store=FileStore(), config=config, model=model, tools=tools,
                                    force=args.yes, suspend=flag, log=log)
        except ResumeRefused as exc:
            print(f"sdk-agent: refused: {exc}", file=sys.stderr)
            return EXIT_REFUSED
        except UsageError as exc:
            return _usage(str(exc))
        except FiskjError as exc:
            print(f"sdk-agent: {type(exc).__name__}: {exc}", file=sys.stderr)
            return EXIT_ERROR
    print(f"sdk-agent: run {result.run_id} ended: {result.reason}", file=sys.stderr)
    return EXIT.get(result.reason, EXIT_ERROR)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sdk-agent", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start")
    start.add_argument("name")
    start.add_argument("--config", required=True)
    start.add_argument("prompt", nargs="+")
    resume = sub.add_parser("resume")
    resume.add_argument("name")
    resume.add_argument("--yes", action="store_true")
    resume.add_argument("--config", required=True)
    show = sub.add_parser("show")
    show.add_argument("name")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else 0
    if args.command == "show":
        return _show(args.name)
    return _run(args)


if __name__ == "__main__":
    sys.exit(main())
