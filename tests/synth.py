"""A tiny simulated agent engine that writes synthetic histories for the checker tests.

:class:`Engine` plays a correct fiskj (lock, fold, cut the torn tail, one
write + fsync per append, tools journaled as they return, suspend only at a
loop boundary) over a scripted run: ``turns`` lists the tool_use ids of each
model turn, the last turn answers in text.  Each :meth:`Engine.leg` is one
process; it can be killed after its k-th action (optionally mid-write, a
torn tail), suspended at its k-th loop boundary, or refused.  File faults
(:meth:`Engine.cut_tail`, :meth:`Engine.power_loss`) change the file after
a leg.  Broken engines are the same histories edited the way a defect
would edit them (the tests do that).  Pure: no files, no processes.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from typing import Any

from builders import FP
from fiskj.codec import decode_record, encode_record
from fiskj.reader import read_state
from fiskj.records import AssistantRecord, MetaRecord, TerminalRecord, ToolResultRecord
from harness.history.model import Effect, Fault, History, Leg, ModelCall, Reference, observed_result

PROMPT = "count the files"
ANSWER = "there are 3 files"
DIR = "/store/fisk-ai/runs"


class Killed(Exception):
    pass


def conversation(turns: list[list[str]], i: int, answer: str = ANSWER,
                 reported: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The request messages of model call ``i`` (turn i), as a correct agent sends them (``reported``: ids
    answered as interrupted)."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}]
    for j in range(i):
        msgs.append(assistant_message(turns, j, answer))
        msgs.append({"role": "user", "content": [result_block(t, t in reported) for t in turns[j]]})
    return msgs


def assistant_message(turns: list[list[str]], i: int, answer: str = ANSWER) -> dict[str, Any]:
    ids = turns[i]
    content: list[dict[str, Any]] = [{"type": "text", "text": f"turn {i}" if ids else answer}]
    content += [{"type": "tool_use", "id": t, "name": "ledger", "input": {"n": t}} for t in ids]
    return {"role": "assistant", "content": content}


def result_block(tid: str, interrupted: bool = False) -> dict[str, Any]:
    if interrupted:  # an agent that reports an interrupted tool instead of running it again
        return {"type": "tool_result", "tool_use_id": tid, "content": "interrupted, outcome unknown", "is_error": True}
    return {"type": "tool_result", "tool_use_id": tid, "content": f"ran {tid}", "is_error": False}


def key_of(messages: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:16]


class Engine:
    def __init__(self, turns: list[list[str]] | None = None, run_id: str = "r1", answer: str = ANSWER,
                 timed: bool = True) -> None:
        self.turns = turns if turns is not None else [["a", "b"], ["c"], []]
        self.answer = answer
        self.timed = timed
        self.h = History(scenario="synthetic", seed=7, schedule=[], run_id=run_id, options={"vary_on_repeat": False})
        self.file: bytes | None = None
        self.synced = 0
        self.clock = 1_000
        self.attempts: dict[str, int] = {}
        self.reported: set[str] = set()

    # --- plumbing -------------------------------------------------------------------
    def tick(self) -> int:
        self.clock += 10
        return self.clock

    def _ev(self, op: str, **kw: Any) -> None:
        ev = {"n": len(self.cur.trace) + 1, "pid": self.cur.pid, "op": op, **kw}
        if self.timed:
            ev["t"] = self.tick()
        self.cur.trace.append(ev)

    def _act(self) -> None:
        self.actions += 1
        if self.kill_after is not None and self.actions >= self.kill_after:
            raise Killed

    def _append(self, rec: Any) -> None:
        seq = self.next_seq = (self.next_seq or len(self.records())) + 1
        line = encode_record(dataclasses.replace(rec, seq=seq))
        data = self.file or b""
        if self.torn and self.kill_after is not None and self.actions + 1 >= self.kill_after:
            half = line[: len(line) // 2]
            self._ev("write", path=self.jpath, fd=4, offset=len(data), len=len(half), data=base64.b64encode(half).decode())
            self.file = data + half
            raise Killed
        self._ev("write", path=self.jpath, fd=4, offset=len(data), len=len(line), data=base64.b64encode(line).decode())
        self.file = data + line
        if self.fsync:
            self._ev("fsync", path=self.jpath, fd=4)
            self.synced = len(self.file)
        self._act()

    @property
    def jpath(self) -> str:
        return f"{DIR}/{self.h.run_id}.json"

    def records(self) -> list[Any]:
        out = []
        for line in (self.file or b"").split(b"\n")[:-1]:
            try:
                out.append(decode_record(line))
            except Exception:
                pass
        return out

    # --- one process ------------------------------------------------------------------
    def leg(self, kill_after: int | None = None, torn: bool = False, suspend_at: int | None = None,
            fsync: bool = True, cut_torn_tail: bool = True, rerun_answered: bool = False,
            report_interrupted: bool = False) -> Leg:
        """Run one process; ``kill_after``: SIGKILL after that many actions (calls, tool runs, appends);
        ``report_interrupted``: answer a tool that ran without a result as interrupted, never run it again."""
        leg = Leg(index=len(self.h.legs), kind="start" if self.file is None else "resume",
                  argv=["fiskj", "run"], pid=1000 + len(self.h.legs), t_start=self.tick())
        self.cur, self.kill_after, self.torn, self.actions, self.fsync = leg, kill_after, torn, 0, fsync
        self.report = report_interrupted
        self.next_seq = 0  # the writer's in-memory seq counter, set from the fold at the first append
        self.h.legs.append(leg)
        try:
            leg.exit_code = self._drive(suspend_at, cut_torn_tail, rerun_answered)
            self._ev("close", path=self.jpath, fd=4)
            self._ev("close", path=f"{DIR}/{self.h.run_id}.lock", fd=3)
        except Killed:
            leg.exit_code, leg.exit_signal = None, "SIGKILL"
            leg.fault = Fault(kind="kill", signal="SIGKILL", injected=True)
        if suspend_at is not None and leg.exit_code == 3:
            leg.fault = Fault(kind="suspend", signal="SIGINT", injected=True)
        if leg.exit_code == 1:
            leg.stderr = "fiskj: resume refused: run r1 is 'completed'"
        leg.t_end = self.tick()
        leg.journal = self.file
        return leg

    def _drive(self, suspend_at: int | None, cut_torn_tail: bool, rerun_answered: bool) -> int:
        self._ev("open", path=f"{DIR}/{self.h.run_id}.lock", fd=3, flags=["O_RDWR", "O_CREAT"])
        self._ev("flock", path=f"{DIR}/{self.h.run_id}.lock", fd=3, operation=["LOCK_EX", "LOCK_NB"])
        if self.file is None:
            self._ev("open", path=self.jpath, fd=4, flags=["O_WRONLY", "O_CREAT", "O_EXCL", "O_APPEND"])
            self._append(self.meta())
        else:
            self._ev("open", path=self.jpath, fd=4, flags=["O_RDWR", "O_APPEND"])
            good = self.file.rfind(b"\n") + 1
            last = self.file[good:]
            if not last and self.file:  # an unparsable complete final line is torn too
                prev = self.file[:-1].rfind(b"\n") + 1
                try:
                    decode_record(self.file[prev:])
                except Exception:
                    good = prev
            if good < len(self.file) and cut_torn_tail:
                self._ev("ftruncate", path=self.jpath, fd=4, length=good)
                self._ev("fsync", path=self.jpath, fd=4)
                self.file = self.file[:good]
                self.synced = len(self.file)
            recs = self.records()
            if recs and isinstance(recs[-1], TerminalRecord) and recs[-1].reason == "completed":
                return 1
            if not recs:  # killed while creating: the torn meta was cut; write it again
                self._append(self.meta())
        boundary = 0
        while True:
            recs = self.records()
            asst = [r for r in recs if isinstance(r, AssistantRecord)]
            if asst:
                last_i = len(asst) - 1
                ids = self.turns[last_i]
                answered = {r.tool_use_id for r in recs[recs.index(asst[-1]):] if isinstance(r, ToolResultRecord)}
                for tid in ids:
                    if tid in answered and not rerun_answered:
                        continue
                    if self.report and tid not in answered and tid in self.attempts:
                        self.reported.add(tid)
                        self._append(ToolResultRecord(tool_use_id=tid, result=result_block(tid, True)))
                        continue
                    self.effect(tid)
                    if tid not in answered:
                        self._append(ToolResultRecord(tool_use_id=tid, result=result_block(tid)))
                if not ids:
                    self._append(TerminalRecord(reason="completed"))
                    return 0
            if suspend_at is not None and boundary == suspend_at:
                self._append(TerminalRecord(reason="suspended"))
                return 3
            boundary += 1
            i = len(asst)
            msgs = conversation(self.turns, i, self.answer, frozenset(self.reported))
            reply = assistant_message(self.turns, i, self.answer)
            self.h.model_calls.append(ModelCall(index=len(self.h.model_calls), t=self.tick(), key=key_of(msgs),
                                                turn=i, messages=msgs, reply=reply["content"], leg=self.cur.index))
            self._act()
            self._append(AssistantRecord(iteration=i, message=reply, in_tokens=10 + i, out_tokens=5,
                                         stop_reason="tool_use" if self.turns[i] else "end_turn"))

    def meta(self) -> MetaRecord:
        return MetaRecord(version=2, run_id=self.h.run_id, created="2026-01-01T00:00:00Z", fingerprint=FP,
                          prompt=PROMPT)

    def effect(self, tid: str) -> None:
        self.attempts[tid] = self.attempts.get(tid, 0) + 1
        self.h.effects.append(Effect(tool_use_id=tid, attempt=self.attempts[tid], pid=5000 + len(self.h.effects),
                                     t=self.tick(), leg=self.cur.index, tool="ledger"))
        self._act()

    # --- faults on the files after a leg ---------------------------------------------
    def cut_tail(self, keep: int) -> None:
        """The nemesis cuts the journal to ``keep`` bytes (negative: from the end) after the last leg."""
        assert self.file is not None
        self.file = self.file[:keep]
        self.synced = min(self.synced, len(self.file))
        leg = self.h.legs[-1]
        leg.fault = Fault(kind="tail", detail={"cut": len(self.file)}, injected=True)
        leg.journal = self.file

    def power_loss(self) -> None:
        """Every byte after the last fsync is lost."""
        self.file = (self.file or b"")[: self.synced]
        leg = self.h.legs[-1]
        leg.fault = Fault(kind="power_loss", detail={"state": "nothing-unsynced"}, injected=True)
        leg.journal = self.file

    def finish(self, with_reference: bool = True) -> History:
        """Resume until the run completes (at most 10 legs), then attach the reference."""
        for _ in range(10):
            recs = self.records()
            if recs and isinstance(recs[-1], TerminalRecord) and recs[-1].reason == "completed":
                break
            self.leg()
        if with_reference:
            self.h.reference = reference(self.turns)
        return self.h


def reference(turns: list[list[str]], answer: str = ANSWER) -> Reference:
    eng = Engine(turns, answer=answer)
    eng.leg()
    return Reference(state=read_state(eng.file).to_json(), model_calls=len(eng.h.model_calls),
                     effects=len(eng.h.effects), **observed_result(eng.h))
