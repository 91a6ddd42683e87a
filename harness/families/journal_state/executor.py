"""The journal-state engine's IO: lay a journal state in a fresh store (:func:`lay`) and resume it to the run's
end (:func:`resume`).

The power-loss family's crash states (:mod:`harness.families.power_loss.crashstates`) and the tail family's
mutations (:mod:`harness.families.tail.mutations`) are two pure generators of journal bytes; this package is the
one executor both feed (ALICE and CrashMonkey's shape: one generator of states, one replay and check loop), the
cheap question between laying and resuming being :mod:`harness.families.journal_state.ask`.  Nothing here
builds a verdict.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.history.model import Effect, History, Leg, ModelCall
from harness.history.readers import fold_journal, parse_reading, read_ledger, read_probes, write_ledger
from harness.runner.leg import LegPlan, count_user_records, open_mcp, run_leg, start_or_resume
from harness.runner.trial import ReferenceRun, Runner, run_id_for
from harness.scenario.model import Scenario
from harness.subject.contract import RunConfig, Subject, journal_bytes, probes_path
from harness.workload.build import Workload, build_workload, write_tools_file
from harness.workload.server import api_key

__all__ = ["Context", "context", "StateExecutor", "lay", "resume"]


@dataclass
class Context:
    """What every journal state of one scenario shares (one per scenario and subject): the ``runner``,
    the ``ref`` run the states come from, its ``workload``, the ``tools_file``, the ``run_id`` and the
    legs' ``timeout_s`` (seconds)."""

    runner: Runner
    scenario: Scenario
    ref: ReferenceRun
    workload: Workload
    tools_file: str
    run_id: str
    timeout_s: float

    @property
    def subject(self) -> Subject:
        """The agent under test."""
        return self.runner.subject

    @functools.cached_property
    def config(self) -> RunConfig:
        """The run's configuration (the same for every leg: it is the fingerprint)."""
        wl = self.workload
        return RunConfig(run_id=self.run_id, model=wl.model, base_url=self.runner.server.base_url,
                         tools_file=self.tools_file, max_tokens=wl.max_tokens, max_iterations=wl.max_iterations,
                         prompt=wl.prompt, chat=wl.chat, thinking=wl.thinking)

    @functools.cached_property
    def run_uuid(self) -> str:
        """The agent's own id of the run the states come from (the reference's ``{run_uuid}``)."""
        return self.ref.history.options.get("run_uuid") or self.subject.trial_where(Path("/"), make=False)["run_uuid"]

    def where(self, tmp: Path) -> dict[str, str]:
        """The values of a state laid in ``tmp`` (:meth:`harness.subject.contract.Subject.trial_where`, its
        folders made), with the reference run's ``run_uuid``."""
        return self.subject.trial_where(tmp, self.run_uuid)

    def journal(self, tmp: Path) -> Path:
        """Where the subject keeps the run's journal in a state laid in ``tmp`` (its profile's template; a glob
        named as the file the reference run made)."""
        path = self.subject.journal_path(self.config, **self.where(tmp))
        if "*" not in path.name:
            return path
        made = next((ev["path"] for leg in self.ref.history.legs for ev in leg.trace
                     if self.ref.history.journal.is_journal(ev.get("path"), self.run_id)), None)
        return path.with_name(Path(made).name) if made else path


def context(runner: Runner, scenario: Scenario, shared: Path, ref: ReferenceRun | None = None) -> Context:
    """The :class:`Context` of ``scenario`` (``ref``: the run the states come from, default its uninterrupted
    run, IO on first use; the tools file is written to ``shared``)."""
    return Context(runner, scenario, ref or runner.reference(scenario),
                   build_workload(scenario, tool_name=runner.subject.tool_name),
                   write_tools_file(shared / "tools.json"), run_id_for(scenario),
                   scenario.trials.timeout_s * runner.subject.time_scale)


class StateExecutor:
    """The part of a journal-state family's executor (:class:`harness.families.base.Executor`) both
    families share: a folder for the run's tools file, removed by :meth:`close`, and the :class:`Context`
    (``ctx``) of ``scenario`` (``reference``: the run the states come from, default its uninterrupted run).
    A family's executor adds ``run``."""

    def __init__(self, scenario: Scenario, runner: Runner, reference: ReferenceRun | None = None,
                 prefix: str = "fiskj-states-") -> None:
        self.scenario, self.runner = scenario, runner
        self.shared = Path(tempfile.mkdtemp(prefix=prefix, dir=runner.tmp_root))
        self.ctx = context(runner, scenario, self.shared, reference)

    def close(self) -> None:
        """Remove the shared folder (idempotent)."""
        shutil.rmtree(self.shared, ignore_errors=True)


def _mkdirs(root: str, rel: str, made: set[str]) -> None:
    """Make folder ``rel`` under ``root`` and every missing one between them, each ``0700``; ``made``: the
    relative folders made so far (``""`` is ``root``), updated."""
    parts = [p for p in rel.split(os.sep) if p and p != "."]
    for i in range(1, len(parts) + 1):
        sub = os.sep.join(parts[:i])
        if sub not in made:
            with contextlib.suppress(FileExistsError):
                os.mkdir(os.path.join(root, sub), 0o700)
            made.add(sub)


def lay(ctx: Context, tmp: Path, *, journal: bytes | None = None, files: Mapping[str, bytes] | None = None,
        dirs: Iterable[str] = ()) -> dict[str, str]:
    """Lay a journal state in ``tmp`` (an empty or new folder): the trial's folders (:meth:`Context.where`) and
    what the state holds (folders ``0700``, files ``0600``).

    ``dirs`` and ``files`` are paths relative to ``tmp`` (a crash state's,
    relative to its trial's folder); a file whose folder is not among them (nor
    the trial's, nor made for the journal) did not survive and is not written.  ``journal``: bytes put
    where the subject keeps the run's journal (:meth:`Context.journal`),
    its folders made.  Returns the trial directories (:meth:`Context.where`),
    the subject's ``files`` templates written in them.
    """
    tmp.mkdir(mode=0o700, exist_ok=True)
    where = ctx.where(tmp)
    root = str(tmp)
    made = {""} | {os.path.relpath(where[k], root) for k in ("state_home", "home", "tmp_dir", "cwd")
                   if where[k].startswith(root + os.sep)}
    for d in sorted(dirs, key=len):
        _mkdirs(root, d, made)
    laid = dict(files or {})
    if journal is not None:
        rel = os.path.relpath(ctx.journal(tmp), root)
        _mkdirs(root, os.path.dirname(rel), made)
        laid[rel] = journal
    for rel, data in laid.items():
        if os.path.dirname(os.path.normpath(rel)) in made:  # its folder survived
            target = os.path.join(root, rel)
            with open(target, "wb") as f:
                f.write(data)
            os.chmod(target, 0o600)
    if ctx.subject.files:
        ctx.subject.write_files(ctx.config, **where)
    return where


def resume(ctx: Context, tmp: Path, before: list[Leg], pre_calls: list[ModelCall], pre_effects: list[Effect],
           fault: dict[str, Any], read_only: bool = False) -> History:
    """Run one leg of the subject on the state laid in ``tmp`` (:func:`lay`) and return the history.

    ``before``: the legs before it, the last one faulted (``fault``: the
    schedule entry that names the state); ``pre_calls``/``pre_effects``: the
    model calls and tool effects the run had made by then (the ledger
    starts with ``pre_effects``: a tool in flight counts as run).  The leg
    resumes the run, or starts it when the journal holds no complete
    record; it is started through the one leg runner
    (:func:`harness.runner.leg.run_leg`) and never raises for a bad agent.
    An opaque store is read first (the agent's reading, on the last leg of
    ``before``: what the state held); ``read_only``: only that, no leg.
    """
    runner, subject = ctx.runner, ctx.subject
    ledger = tmp / "ledger.jsonl"
    write_ledger(ledger, list(pre_effects))
    cfg, where = ctx.config, ctx.where(tmp)
    journal = ctx.journal(tmp)
    index = len(before)
    data = journal_bytes(journal)
    kind = start_or_resume(data, subject.caps.journal.format)
    reading = subject.status_argv(cfg, **where) if runner.readings else None

    def env(token: str = "", trace: Path | None = None) -> dict[str, str]:
        return subject.env(base_url=runner.server.base_url, api_key=api_key(token, index) if token else "",
                           state_home=where["state_home"], ledger=str(ledger), leg=index,
                           trace=None if runner.observe or trace is None else str(trace), home=where["home"] or None,
                           values=subject.values(cfg, **where))
    if subject.caps.journal.is_store and reading is not None:  # what the state held (or that it holds no run): the
        seen = parse_reading(runner.legs.read(reading, env(), tmp, f"{index}-before"), subject.status_fields,
                             subject.reading_format)
        data = journal_bytes(journal)  # (as the resume finds it: a reading may change its files)
        before = [*before[:-1], replace(before[-1], reading=seen, journal=data)]  # evidence of I2, I3, I4, I5
        kind = "start" if seen["given"] and seen["status"] is None else kind
    legs, calls, effects, notes = list(before), [], list(pre_effects), []
    if not read_only:
        where, mcp = open_mcp(subject, where, ledger, index)
        session = runner.server.open_session(ctx.workload.script)
        trace = tmp / f"trace-{index}.jsonl"
        argv = subject.resume_argv(cfg, **where) if kind == "resume" else subject.start_argv(cfg, **where)
        plan = LegPlan(index=index, kind=kind, argv=argv, env=env(session.token, trace), fault={"kind": "none"},
                       workdir=tmp, journal=journal, trace=trace,
                       stdin=ctx.workload.stdin_for(count_user_records(data)) if ctx.workload.chat else None,
                       timeout_s=ctx.timeout_s, roots=tuple(where[k] for k in ("state_home", "home") if where[k]),
                       reading=reading, cwd=where["cwd"], mcp=mcp)
        try:
            legs.append(run_leg(plan, runner.legs)[0])
        finally:
            calls = runner.server.close_session(session.token)
        effects, notes = read_ledger(ledger)
    history = History(scenario=ctx.scenario.name, seed=0, schedule=[fault], run_id=ctx.run_id, legs=legs,
                      effects=effects, reference=ctx.ref.reference, notes=notes,
                      model_calls=pre_calls + [replace(c, index=len(pre_calls) + i) for i, c in enumerate(calls)],
                      options={**ctx.ref.history.options, "family": fault["kind"]},
                      journal_format=subject.journal_format, journal_template=subject.journal,
                      probes=read_probes(probes_path(ledger)), promises=subject.promises)
    history.final_state, history.final_error = fold_journal(journal, history.journal.format)
    return history
