"""A race agent: one scripted fiskj store client that the race nemesis drives through pipes.

Run as ``python3 -m harness.families.race.agent`` (the race driver starts it).
It first loads the preload named in ``$FISKJ_PRELOAD``, if any
(:func:`harness.subject.preload.load_preload`: the self-test's preload
applies the mutant ``$FISKJ_MUTANT`` names, in this process only);
``$FISKJ_MUTANT`` is also the name it reports.  It reads one JSON command per line on standard input and answers
each with one JSON line on standard output; it never sleeps to order
anything.  Lines it writes:

* ``{"event": "ready", "pid": P, "mutant": NAME|null}`` once, at start;
* ``{"id": I, "ok": true, "t0": NS, "t1": NS, ...}`` or
  ``{"id": I, "ok": false, "error": {"kind", "message", "errno"}, "t0", "t1"}``:
  the answer to command ``I`` (``t0``/``t1``: ``time.monotonic_ns()`` when it
  started and ended, after the optional spin; ``t_mark`` where its timed
  part began when that is later, e.g. after ``resume`` imported the loop);
* events while a command runs: ``{"event": "ack", "seq", "tag", "t"}`` after
  each acknowledged append; ``{"event": "paused", ...}`` at a breakpoint;
  ``{"event": "observed", ...}`` for a poller snapshot.

Sequence points: a command may carry ``"pause": [BP, ...]``, breakpoints
on its IO-seam calls and ledger-tool runs (:mod:`harness.families.race.points`);
``"spin_us": U`` busy-waits ``U`` microseconds before the command starts
(jitter).

Commands (``op``): ``begin`` {store, run_id, leg, trace, timing, ledger,
model}, ``end``, ``seed`` {shape: "meta"|"records"|"pending", n, tools},
``create`` / ``open`` {n, tag, terminal, close}, ``append`` {n, tag,
terminal}, ``close``, ``session`` {rounds, n, tag}, ``resume``, ``load``,
``list``, ``poll`` (until a ``stop`` line; ``snapshot`` lines answer at
once), ``other_fd`` {file: "journal"|"lock"}, ``spawn`` {argv, wait},
``exit``, ``fork`` (see :meth:`Agent.fork`).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
from typing import Any, Callable

from fiskj import ioseam, probes
from fiskj.errors import FiskjError, RunLocked
from fiskj.fingerprint import Fingerprint, make_fingerprint
from fiskj.records import VERSION, AssistantRecord, MetaRecord, TerminalRecord, ToolResultRecord, UserRecord
from fiskj.store import FileStore
from fiskj.tools import Tool, ToolOutcome, ToolRegistry

from harness.subject.contract import probes_path

from harness.families.race.points import Breakpoint, Lines, SequencePoints, emit
from harness.names import MUTANT_ENV
from harness.subject.preload import load_preload

# fiskj.loop and fiskj.scripted (which pull in the HTTP model client) are imported by ``resume`` only:
# an agent that never resumes starts in half the time.

__all__ = ["main", "LEDGER_TOOL", "race_config", "race_fingerprint", "race_registry"]

mono = time.monotonic_ns

#: Definition of the ledger tool the resumers run (part of the run's fingerprint).
LEDGER_TOOL = {"name": "ledger", "description": "Record one execution in the effects ledger.",
               "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}}


_SYSTEM, _MAX_TOKENS, _MAX_ITERATIONS = "race", 10 ** 7, 10


def race_config(model: str) -> Any:
    """The :class:`fiskj.loop.RunConfig` every race run is resumed with."""
    from fiskj.loop import RunConfig
    return RunConfig(model=model, system=_SYSTEM, max_tokens=_MAX_TOKENS, max_iterations=_MAX_ITERATIONS)


def race_fingerprint(model: str) -> Fingerprint:
    """The fingerprint race runs are created with: ``race_config(model).fingerprint(race_registry(...))``."""
    return make_fingerprint(model=model, system=_SYSTEM, tools=[LEDGER_TOOL], thinking_mode="off",
                            max_tokens=_MAX_TOKENS, max_iterations=_MAX_ITERATIONS)


def race_registry(run: Callable[[Any, Any], ToolOutcome]) -> ToolRegistry:
    """A registry holding only the ledger tool, run by ``run``."""
    return ToolRegistry([Tool(LEDGER_TOOL["name"], LEDGER_TOOL["description"], LEDGER_TOOL["input_schema"], run)])


def _error(exc: BaseException) -> dict[str, Any]:
    return {"kind": type(exc).__name__, "message": str(exc), "errno": getattr(exc, "errno", None),
            "fiskj": isinstance(exc, FiskjError)}


class Agent(SequencePoints):
    """The command loop of one agent process (its sequence points: :class:`SequencePoints`)."""

    def __init__(self, mutant: str | None) -> None:
        super().__init__(Lines(0))
        self.mutant = mutant
        self.store: FileStore | None = None
        self.leg = -1
        self.model = "scripted:1:1"
        self.ledger: str | None = None
        self.journal: Any = None
        self.children: list[int] = []
        self.mark = 0

    # -- the loop ---------------------------------------------------------------------------

    def serve(self) -> None:
        emit({"event": "ready", "pid": os.getpid(), "mutant": self.mutant})
        while True:
            cmd = self.cmds.get()
            if cmd is not None:
                self.run(cmd)

    def run(self, cmd: dict[str, Any]) -> None:
        op = cmd.get("op")
        if op == "fork":
            self.fork(cmd)
            return
        handler = getattr(self, f"op_{op}", None)
        self.bps = [Breakpoint(b, i) for i, b in enumerate(cmd.get("pause") or [])]
        spin = int(cmd.get("spin_us") or 0)
        if spin:
            until = mono() + spin * 1000
            while mono() < until:
                pass
        t0 = self.mark = mono()
        reply: dict[str, Any] = {"id": cmd.get("id")}
        try:
            if handler is None:
                raise ValueError(f"unknown op {op!r}")
            reply.update(handler(cmd) or {})
            reply["ok"] = True
        except (FiskjError, OSError, ValueError, KeyError, TypeError) as exc:
            reply.update(ok=False, error=_error(exc))
        finally:
            self.bps = []
        reply.update(t0=t0, t1=mono())
        if self.mark != t0:
            reply["t_mark"] = self.mark  # where the timed part began (after imports)
        emit(reply)

    def fork(self, cmd: dict[str, Any]) -> None:
        """Fork a child that serves the next commands on the same pipes while this process waits for it.

        The child answers the ``fork`` command (``pid`` = its own).  When it
        ends (an ``exit`` command, or a SIGKILL from the driver), this process
        reaps it, writes ``{"event": "child-exited", "pid", "status", "t"}``
        and serves again: a fresh role without a fresh interpreter, and the
        reap is the sequence point after which the child's locks are gone.
        """
        self._reset()
        pid = os.fork()
        if pid == 0:
            emit({"id": cmd.get("id"), "ok": True, "pid": os.getpid(), "t0": mono(), "t1": mono()})
            return
        _, status = os.waitpid(pid, 0)
        self.cmds.buf = b""  # whatever was read before the fork was the child's to answer
        os.write(1, b"\n")  # ends a line the killed child may have left half-written
        emit({"event": "child-exited", "pid": pid, "status": os.waitstatus_to_exitcode(status), "t": mono()})

    # -- helpers ----------------------------------------------------------------------------------

    def _reset(self) -> None:
        if self.journal is not None:
            try:
                self.journal.close()
            except FiskjError:
                pass
            self.journal = None
        for pid in self.children:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        self.children = []
        ioseam.configure()
        self.reset_points()

    def _need_store(self) -> FileStore:
        if self.store is None:
            raise ValueError("no trial: send begin first")
        return self.store

    def _need_no_journal(self) -> FileStore:
        """The store, for a command that opens the journal (none may be open)."""
        store = self._need_store()
        if self.journal is not None:
            raise ValueError("a journal is already open")
        return store

    def _close_journal(self) -> None:
        journal, self.journal = self.journal, None
        if journal is not None:
            journal.close()

    def _ledger_tool(self, tool_input: Any, call: Any) -> ToolOutcome:
        self.point("tool", "ledger", "before")
        if self.ledger:
            line = json.dumps({"tool_use_id": call.tool_use_id, "pid": os.getpid(), "t": mono(), "leg": self.leg,
                               "tool": "ledger"}) + "\n"
            fd = os.open(self.ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, line.encode())
                os.fsync(fd)
            finally:
                os.close(fd)
        self.point("tool", "ledger", "after")
        key = tool_input.get("key") if isinstance(tool_input, dict) else None
        return ToolOutcome(f"ok {key}")

    def _meta(self) -> MetaRecord:
        return MetaRecord(version=VERSION, run_id=self.run_id, created=datetime.datetime.now().astimezone().isoformat(),
                          fingerprint=race_fingerprint(self.model), prompt="race")

    def _appends(self, cmd: dict[str, Any]) -> list[int]:
        seqs = []
        tag = cmd.get("tag", f"leg{self.leg}")
        records: list[Any] = [UserRecord(message={"role": "user", "content": [{"type": "text", "text": f"{tag}:{i}"}]})
                              for i in range(int(cmd.get("n") or 0))]
        if cmd.get("terminal"):
            records.append(TerminalRecord(reason=cmd["terminal"], message=tag))
        for record in records:
            seq = self.journal.append(record)
            seqs.append(seq)
            emit({"event": "ack", "seq": seq, "tag": tag, "t": mono()})
        if cmd.get("close"):
            self._close_journal()
        return seqs

    # -- commands ---------------------------------------------------------------------------------

    def op_begin(self, cmd: dict[str, Any]) -> dict[str, Any]:
        self._reset()
        ioseam.configure(trace=cmd.get("trace") or None)
        self.install()
        if cmd.get("timing"):
            self.timing_fd = os.open(cmd["timing"], os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.store = FileStore(cmd["store"])
        self.run_id = cmd["run_id"]
        self.leg = int(cmd.get("leg", -1))
        self.ledger = cmd.get("ledger")
        self.model = cmd.get("model") or "scripted:1:1"
        if self.ledger:  # this leg's code probes (fiskj.probes) go beside its ledger
            os.environ[probes.ENV] = probes_path(self.ledger)
            os.environ["FISKJ_HARNESS_LEG"] = str(self.leg)
        return {"pid": os.getpid()}

    def op_end(self, cmd: dict[str, Any]) -> dict[str, Any]:
        self._reset()
        os.environ.pop(probes.ENV, None)
        self.store = None
        return {}

    def op_seed(self, cmd: dict[str, Any]) -> dict[str, Any]:
        store = self._need_store()
        journal = store.create(self.run_id, self._meta())
        try:
            shape = cmd.get("shape", "meta")
            if shape == "records":
                for i in range(int(cmd.get("n") or 0)):
                    journal.append(UserRecord(message={"role": "user", "content": [{"type": "text", "text": f"seed:{i}"}]}))
            elif shape == "pending":
                ids = [f"toolu_race_{i}" for i in range(int(cmd.get("tools") or 3))]
                content = [{"type": "text", "text": "Calling the ledger."}] + [
                    {"type": "tool_use", "id": i, "name": "ledger", "input": {"key": i}} for i in ids]
                journal.append(AssistantRecord(iteration=0, message={"role": "assistant", "content": content},
                                               stop_reason="tool_use", in_tokens=20, out_tokens=10))
                for i in ids[: int(cmd.get("answered") or 0)]:
                    journal.append(ToolResultRecord(tool_use_id=i, result={
                        "type": "tool_result", "tool_use_id": i, "content": f"ok {i}", "is_error": False}))
            return {"last_seq": journal.last_seq}
        finally:
            journal.close()

    def op_create(self, cmd: dict[str, Any]) -> dict[str, Any]:
        store = self._need_no_journal()
        t = mono()
        self.journal = store.create(self.run_id, self._meta())
        emit({"event": "ack", "seq": 1, "tag": "meta", "t": mono()})
        return {"opened_ns": mono() - t, "seqs": [1] + self._appends(cmd)}

    def op_open(self, cmd: dict[str, Any]) -> dict[str, Any]:
        store = self._need_no_journal()
        t = mono()
        self.journal = store.open(self.run_id)
        opened = mono() - t
        last = self.journal.last_seq
        return {"opened_ns": opened, "last_seq": last, "seqs": self._appends(cmd)}

    def op_append(self, cmd: dict[str, Any]) -> dict[str, Any]:
        if self.journal is None:
            raise ValueError("no open journal")
        return {"seqs": self._appends(cmd)}

    def op_close(self, cmd: dict[str, Any]) -> dict[str, Any]:
        self._close_journal()
        return {}

    def op_session(self, cmd: dict[str, Any]) -> dict[str, Any]:
        store = self._need_store()
        rounds = []
        for r in range(int(cmd.get("rounds") or 1)):
            t0 = mono()
            try:
                self.journal = store.open(self.run_id)
            except RunLocked as exc:
                rounds.append({"round": r, "outcome": "locked", "t0": t0, "t1": mono(), "message": str(exc)})
                continue
            seqs = self._appends({"n": cmd.get("n", 2), "tag": f"{cmd.get('tag', 'w')}.{r}",
                                  "terminal": "suspended", "close": True})
            rounds.append({"round": r, "outcome": "ok", "t0": t0, "t1": mono(), "seqs": seqs})
        return {"rounds": rounds}

    def op_resume(self, cmd: dict[str, Any]) -> dict[str, Any]:
        from fiskj.loop import resume_run
        from fiskj.scripted import ScriptedModel

        store = self._need_store()
        self.mark = mono()
        result = resume_run(self.run_id, store=store, config=race_config(self.model),
                            model=ScriptedModel.from_spec(self.model), tools=race_registry(self._ledger_tool),
                            on_open=lambda st: emit({"event": "opened", "last_seq": st.last_seq, "t": mono()}))
        return {"reason": result.reason, "last_seq": result.state.last_seq, "exit_code": result.exit_code}

    def _observe(self) -> dict[str, Any]:
        store = self._need_store()
        out: dict[str, Any] = {"t": mono()}
        try:
            state = store.load(self.run_id)
            out["load"] = {"last_seq": state.last_seq, "records": state.records, "status": state.status,
                           "torn": None if state.torn_tail is None else [state.torn_tail.offset, state.torn_tail.length]}
        except FiskjError as exc:
            out["load"] = {"error": _error(exc)}
        try:
            info = next((i for i in store.list() if i.id == self.run_id), None)
            if info is None:
                out["list"] = {"error": {"kind": "missing", "message": f"run {self.run_id} not listed"}}
            elif info.error is not None:
                out["list"] = {"error": _error(info.error), "status": info.status}
            else:
                out["list"] = {"status": info.status, "records": info.records, "torn": info.torn_tail}
        except FiskjError as exc:
            out["list"] = {"error": _error(exc)}
        return out

    def op_load(self, cmd: dict[str, Any]) -> dict[str, Any]:
        return self._observe()

    op_list = op_load

    def op_poll(self, cmd: dict[str, Any]) -> dict[str, Any]:
        loops = torn = 0
        errors: list[dict[str, Any]] = []
        regressions: list[dict[str, Any]] = []
        last = 0
        emit({"event": "polling", "t": mono()})
        while True:
            ctl = self.cmds.get(timeout=0)
            if ctl is not None:
                if ctl.get("op") == "stop":
                    break
                if ctl.get("op") == "snapshot":
                    obs = self._observe()
                    obs["event"] = "observed"
                    emit(obs)
                    continue
            obs = self._observe()
            loops += 1
            for where in ("load", "list"):
                if "error" in obs[where] and len(errors) < 20:
                    errors.append({"where": where, "t": obs["t"], **obs[where]["error"]})
            seq = obs["load"].get("last_seq")
            if seq is not None:
                if seq < last and len(regressions) < 20:
                    regressions.append({"from": last, "to": seq, "t": obs["t"]})
                last = max(last, seq)
            torn += bool(obs["load"].get("torn")) or bool(obs["list"].get("torn"))
        return {"loops": loops, "torn": torn, "errors": errors, "regressions": regressions, "max_seq": last}

    def op_other_fd(self, cmd: dict[str, Any]) -> dict[str, Any]:
        store = self._need_store()
        suffix = ".lock" if cmd.get("file") == "lock" else ".json"
        path = os.path.join(store.directory, self.run_id + suffix)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            size = len(os.read(fd, 1 << 20))
        finally:
            os.close(fd)
        return {"path": path, "read": size}

    def op_spawn(self, cmd: dict[str, Any]) -> dict[str, Any]:
        argv = list(cmd["argv"])
        null = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
        pid = os.posix_spawn(argv[0], argv, dict(os.environ), file_actions=null)  # keeps non-CLOEXEC fds
        if cmd.get("wait"):
            _, status = os.waitpid(pid, 0)
            return {"pid": pid, "status": os.waitstatus_to_exitcode(status)}
        self.children.append(pid)
        return {"pid": pid}

    def op_exit(self, cmd: dict[str, Any]) -> dict[str, Any]:
        self._reset()
        os._exit(0)


def main() -> None:
    """Load the preload ``$FISKJ_PRELOAD`` names (if set), then serve commands until standard input closes.

    The ``ready`` line names the mutant: ``$FISKJ_MUTANT``, else the preload.
    """
    preload = load_preload()
    Agent(os.environ.get(MUTANT_ENV) or preload).serve()


if __name__ == "__main__":
    sys.exit(main())
