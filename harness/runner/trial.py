"""The runner role: run one trial (legs of an agent under a fault schedule) and record its history.

:class:`Runner` wires the roles and judges nothing.  A trial runs in its own temporary directory (docs/subject.md
"Trial directories", removed also on error) against a session of the runner's one
:class:`harness.workload.server.ModelServer`: leg 0 starts the run, each later leg resumes it or, when its journal
holds no complete line, starts it again (docs/subject.md "Commands"), until the run ends as its workload says, a
leg ends in error with no fault injected, the leg budget is spent or the trial times out (the hung leg killed,
``timed_out``).  What the history holds after each leg and at the end: docs/history.md.  The reference run of a
scenario is the same procedure under the no-op nemesis; :meth:`Runner.reference` caches it per (scenario
workload, subject).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from harness.errors import BrokenReference, SetupError, SubjectDidNotStart
from harness.runner.faults import NOOP, fault_for_leg, seam_fault, validate_schedule
from harness.history.ending import BUDGET_ENDS, printed_answer, uninterrupted_end
from harness.history.model import History, Leg, Reference, observed_result
from harness.history.promises import COMPLETED_PROBE
from harness.history.timeline import Timeline, leg_timeline
from harness.history.readers import fold_journal, parse_reading, read_ledger, read_probes
from harness.runner.leg import LegOutcome, LegPlan, count_user_records, open_mcp, run_leg, start_or_resume
from harness.runner.starter import LegStarter, state_of
from harness.runner.prelude import Prelude, lay_files
from harness.runner.process import enable_subreaper
from harness.scenario.model import Scenario
from harness.workload.server import ModelServer, api_key
from harness.subject.contract import (EXIT_COMPLETED, EXIT_ERROR, EXIT_SUSPENDED, EXIT_USAGE, RunConfig, Subject,
                                      default_subject, fork_server_enabled, journal_bytes, journal_file, probes_path)
from harness.workload.build import Workload, build_workload, write_tools_file

__all__ = ["ReferenceRun", "Runner", "run_id_for", "observe_by_default", "drifted_config", "BUDGET_ENDS"]


def observe_by_default(subject: Subject, environ: dict[str, str] | None = None) -> bool:
    """Whether legs of ``subject`` run under the outside observer when nobody says: always, except for
    fiskj-based subjects (the reference and the mutant subject), whose IO seam is the fast path; set
    ``FISKJ_HARNESS_OBSERVE=1`` to observe those too (black-box mode), ``0`` never to observe."""
    value = (os.environ if environ is None else environ).get("FISKJ_HARNESS_OBSERVE", "")
    if value in ("0", "1"):
        return value == "1"
    return not subject.caps.fiskj_based


def run_id_for(scenario: Scenario) -> str:
    """The run id used for every trial of ``scenario`` (its name, made a valid run id, at most 64 chars)."""
    rid = re.sub(r"[^A-Za-z0-9_-]", "-", scenario.name)[:64]
    return rid if rid[:1].isalnum() else "r" + rid[:63]


def drifted_config(cfg: RunConfig, drift: tuple[str, ...], tools_file: str, system_file: str = "") -> RunConfig:
    """``cfg`` with the fingerprint fields named in ``drift`` changed (``[workload] drift``; docs/workload.md), so
    that a fisk-ai-style agent must refuse the resume (docs/spec.md section 7).

    ``model`` gets a ``-drifted`` suffix, ``max_tokens`` and ``max_iterations``
    one more, ``tools`` the tool file ``tools_file`` (same tools, other
    descriptions), ``system`` the system prompt file ``system_file`` (the run
    started with none), ``thinking`` the mode ``adaptive`` (``enabled:2048`` when it
    started with ``adaptive``).  The fake model server ignores the model name and the
    system prompt, and the thinking mode only decides whether a request
    that continues a tool loop must send that turn's thinking block first
    (as the Messages API does), so a forced resume with drift gives the
    same conversation.
    """
    changes: dict[str, Any] = {"model": cfg.model + "-drifted", "max_tokens": cfg.max_tokens + 1,
                               "max_iterations": cfg.max_iterations + 1, "tools_file": tools_file,
                               "system_file": system_file,
                               "thinking": "enabled:2048" if cfg.thinking == "adaptive" else "adaptive"}
    named = {"tools_file": "tools", "system_file": "system"}  # (a drift names the others as the field)
    return replace(cfg, **{f: value for f, value in changes.items() if named.get(f, f) in drift})


def _default_tmp_root() -> str | None:
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return None


@dataclass
class ReferenceRun:
    """An uninterrupted run of a scenario's workload.

    ``reference``: what the checkers compare against; ``history``: its full
    history; ``events``: IO-seam calls of its one leg (the range of
    exhaustive crash points); ``duration_ms``: wall time of that leg;
    ``timeline``: that leg's own time line (:func:`harness.history.timeline.leg_timeline`:
    when the subject was ready and did its last work; the range of timed faults).
    """

    reference: Reference
    history: History
    events: int
    duration_ms: float
    timeline: Timeline | None = None


class Runner:
    """Runs trials of one subject; thread-safe (one instance serves a whole campaign).

    ``subject``: the agent under test (default: the reference ``python -m fiskj``); ``server``: a started
    :class:`ModelServer` to share (default: one owned and started lazily by this runner); ``tmp_root``: where
    trial directories go (default ``$FISKJ_HARNESS_TMP``, else ``/dev/shm`` when writable, else the system temp
    dir: docs/subject.md "Trial directories"); ``keep_dirs``: leave trial directories behind, each named in the
    history's notes (debugging; also ``FISKJ_HARNESS_KEEP_DIRS=1``, ``--keep-dirs``); ``observe``: run every leg
    under the outside observer (docs/observer.md; default :func:`observe_by_default`); ``fork_server``: fork the
    legs from one pre-imported interpreter that forks every thread's legs side by side
    (:class:`harness.subject.forkserver.ForkServer`; default :func:`harness.subject.contract.fork_server_enabled`);
    ``readings``: after every leg, ask the subject's own reading of the journal when it gives a status command
    (:meth:`Subject.status_argv`; judged by I10).  Use as a context manager or call :meth:`close`.
    """

    def __init__(self, subject: Subject | None = None, server: ModelServer | None = None, *,
                 tmp_root: str | None = None, keep_dirs: bool = False, fork_server: bool | None = None,
                 observe: bool | None = None, readings: bool = True) -> None:
        self.subject = subject or default_subject()
        self.readings = readings
        self._server = server
        self._own_server = server is None
        self._lock = threading.Lock()
        self._refs: dict[Any, ReferenceRun] = {}
        self._ref_locks: dict[Any, threading.Lock] = {}
        self._probes: dict[tuple, Leg] = {}  # a recorded trial's probe after the end, by the files it left as they were
        self._observed: Runner | None = None  # observed(): this runner's observed twin, made on first use
        self.tmp_root = tmp_root or os.environ.get("FISKJ_HARNESS_TMP") or _default_tmp_root()
        self.keep_dirs = keep_dirs or os.environ.get("FISKJ_HARNESS_KEEP_DIRS") == "1"
        self.observe = observe_by_default(self.subject) if observe is None else observe
        forkable = fork_server_enabled(self.subject) if fork_server is None else fork_server
        self.fork_server = forkable  # legs forked (an observed one with the tracer attached to it)
        self.legs = LegStarter(self.subject, forkable, observe=self.observe)
        enable_subreaper()

    # -- lifecycle ------------------------------------------------------------

    @property
    def server(self) -> ModelServer:
        """The model server (started on first use)."""
        with self._lock:
            if self._server is None:
                self._server = ModelServer().start()
            return self._server

    def observed(self) -> "Runner":
        """A runner of this subject whose legs run under the outside observer: this one when it observes, else
        its twin, made on first use with this one's model server and settings, kept (its cached references and
        fork servers serve every later caller) and closed with this one."""
        if self.observe:
            return self
        server = self.server
        with self._lock:
            if self._observed is None:
                self._observed = Runner(self.subject, server, tmp_root=self.tmp_root, keep_dirs=self.keep_dirs,
                                        observe=True, readings=self.readings)
            return self._observed

    def close(self) -> None:
        """Stop the fork servers (and those of the observed twin), and the model server if this runner started
        it; idempotent."""
        with self._lock:
            server, self._server = self._server, None
            twin, self._observed = self._observed, None
        if twin is not None:
            twin.close()
        self.legs.close()
        if server is not None and self._own_server:
            server.close()

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- reference ------------------------------------------------------------

    def reference(self, scenario: Scenario) -> ReferenceRun:
        """Return the cached uninterrupted run of ``scenario``'s workload, running it the first time.

        Raises :class:`SetupError` when it does not end (exit 0 and a
        folded ``completed`` state; for a chat run, exit 3 and ``suspended``
        at the end of its input; exit 1 and ``budget`` or ``max_iterations``
        for a workload whose budgets end it early) within the scenario's
        trial timeout.
        """
        key = (scenario.workload, run_id_for(scenario), self.subject.argv)
        with self._lock:
            lock = self._ref_locks.setdefault(key, threading.Lock())
        with lock:  # one run per key: a second thread asking waits for the first, then takes its result
            with self._lock:
                ref = self._refs.get(key)
            if ref is not None:
                return ref
            history = self._run(scenario, seed=0, schedule=NOOP, reference=None)
            last = history.legs[-1] if history.legs else None
            why = uninterrupted_end(history)
            if why is not None:
                how = ("no leg ran" if last is None else f"killed by {last.exit_signal}" if last.exit_signal
                       else f"exit {last.exit_code}")
                said = (last.stderr.strip()[-600:] if last else "") or "(nothing on stderr)"
                if last is None or (last.journal is None and not history.model_calls):
                    raise SubjectDidNotStart(  # it never got going: what it said is the cause, not the missing journal
                        f"the subject did not run scenario {scenario.name!r} ({how}, no journal, no model call); "
                        f"its stderr: {said}; command: {' '.join(last.argv)[:300] if last else ''}",
                        path=scenario.path)
                raise BrokenReference(  # it ran and ended wrong: a verdict (I6), judged as a trial
                    f"{why}; stderr: {said}", history=history, path=scenario.path)
            leg = history.legs[0]
            ref = ReferenceRun(
                reference=Reference(state=history.final_state or {}, model_calls=len(history.model_calls),
                                    effects=len(history.effects), printed_answer=printed_answer(history),
                                    **observed_result(history)),
                history=history,
                events=len(leg.trace),
                duration_ms=(leg.t_end - leg.t_start) / 1e6,
                timeline=leg_timeline(history),
            )
            with self._lock:
                self._refs[key] = ref
            return ref

    # -- trials ---------------------------------------------------------------

    def run_trial(self, scenario: Scenario, seed: int, schedule: list[dict[str, Any]], *,
                  timeout_s: float | None = None, with_reference: bool = True,
                  prelude: Prelude | None = None) -> History:
        """Run one trial of ``scenario`` under ``schedule`` and return its :class:`History`.

        ``seed`` is recorded (the schedule was drawn from it; the run itself
        is a function of the scenario and the schedule).  ``timeout_s``
        overrides the scenario's ``trials.timeout_s``; ``prelude``: leg 0 is laid from a recording, not run
        (its fault is ``schedule[0]``).  Raises ``ValueError``
        for a malformed schedule and :class:`SetupError` when the reference
        run fails; a misbehaving agent never raises, it is recorded.
        """
        schedule = validate_schedule(schedule)
        ref = self.reference(scenario).reference if with_reference else None
        return self._run(scenario, seed=seed, schedule=schedule, reference=ref, timeout_s=timeout_s, prelude=prelude)

    def _run(self, scenario: Scenario, *, seed: int, schedule: list[dict[str, Any]], reference: Reference | None,
             timeout_s: float | None = None, prelude: Prelude | None = None) -> History:
        workload = build_workload(scenario, tool_name=self.subject.tool_name)
        run_id = run_id_for(scenario)
        budget = timeout_s if timeout_s is not None else scenario.trials.timeout_s * self.subject.time_scale
        drift = tuple(scenario.workload.drift)
        # With drift every resume is first a refused probe, so a faulted leg needs two legs.
        max_legs = scenario.trials.max_legs or (2 * len(schedule) + 4 if drift else len(schedule) + 3)
        history = History(scenario=scenario.name, seed=seed, schedule=[dict(f) for f in schedule], run_id=run_id,
                          reference=reference, journal_format=self.subject.journal_format,
                          journal_template=self.subject.journal, promises=self.subject.promises)
        history.options = {
            "subject": self.subject.spec(),
            "observer": "ptrace" if self.observe else "ioseam",
            "workload": asdict(workload.spec),
            "family": scenario.faults.family,
            "chat": workload.chat,
            "vary_on_repeat": workload.spec.vary_on_repeat,
            "followups": len(workload.followups),
            "script_turns": workload.script.model_turns,
            "tool_calls": workload.tool_calls,
            "model": workload.model,
            "max_legs": max_legs,
            "timeout_s": budget,
            "scenario_path": scenario.path,
            "drift": list(drift),
        }
        tmp = tempfile.mkdtemp(prefix="fiskj-trial-", dir=self.tmp_root)
        session = self.server.open_session(workload.script)
        if prelude is not None:
            session.replay(prelude.calls)
        try:
            self._legs(history, workload, Path(tmp), session.token, run_id, schedule, max_legs, budget, drift,
                       probe_completed=scenario.check.resume_after_completed and reference is not None,
                       prelude=prelude)
        finally:
            history.model_calls = self.server.close_session(session.token)
            if self.keep_dirs:
                history.notes.append(f"trial directory kept: {tmp}")
            else:
                shutil.rmtree(tmp, ignore_errors=True)
        return history

    def _legs(self, history: History, workload: Workload, tmp: Path, token: str, run_id: str,
              schedule: list[dict[str, Any]], max_legs: int, budget: float, drift: tuple[str, ...] = (),
              probe_completed: bool = False, prelude: Prelude | None = None) -> None:
        """Run the legs of one trial into ``history``, then read back its ledger, probes and final journal.

        With ``drift`` (``[workload] drift``), every resume is first a *probe* that must be refused, the next leg
        forced (docs/subject.md "Commands"; I9 judges the probe, its fault detail says ``expect: refused``);
        probes take no fault: the schedule's entries go to the other legs, in order.  With ``probe_completed``
        (``[check] resume_after_completed``), a run that ended is resumed once more (:meth:`_resume_after_end`).
        """
        deadline = time.monotonic() + budget
        place = self._place(workload, tmp, token, run_id, drift, prelude.run_uuid if prelude else None)
        history.options.update(run_uuid=place.where["run_uuid"], trial_dir=str(tmp))
        if prelude is not None:
            place.shared = True
            self._lay_prelude(history, place, prelude)
        done = self._run_legs(history, workload, place, schedule, max_legs, budget, deadline, 1 if prelude else 0)
        ended = history.legs[-1].exit_code if history.legs else None
        if done and probe_completed and not workload.chat and deadline > time.monotonic() \
                and (ended == EXIT_COMPLETED or (ended == EXIT_ERROR and workload.spec.final_stop)):
            self._resume_after_end(history, place, ended, deadline)
        if len(history.legs) < len(schedule) and done:
            history.notes.append(f"schedule entries {len(history.legs)}..{len(schedule) - 1} unused: "
                                 "the run completed first")
        history.effects, ledger_notes = read_ledger(place.ledger)
        history.notes.extend(ledger_notes)
        history.probes = read_probes(probes_path(place.ledger))
        history.final_state, history.final_error = fold_journal(journal_file(place.journal), history.journal.format)

    def _lay_prelude(self, history: History, place: _Place, prelude: Prelude) -> None:
        """Lay ``prelude``'s files, folders and effects ledger in the trial, record its leg 0 with the subject's
        reading of what it left (as :func:`harness.runner.leg.run_leg` reads a leg's)."""
        lay_files(prelude, place.tmp, place.where["cwd_slug"], place.ledger)
        leg = replace(prelude.leg, fault=replace(prelude.leg.fault, detail=dict(prelude.leg.fault.detail)))
        leg.journal = journal_bytes(place.journal)
        if place.reading is not None and start_or_resume(leg.journal, self.subject.caps.journal.format) == "resume":
            if self.subject.files:
                self.subject.write_files(place.cfg, **place.where)
            env = self._env(place, 0, traced=False, values=self.subject.values(place.cfg, **place.where))
            raw = self.legs.read(place.reading, env, place.tmp, "0", state=(place.state(), leg.journal))
            leg.reading = parse_reading(raw, self.subject.status_fields, self.subject.reading_format)
        history.legs.append(leg)

    def _place(self, workload: Workload, tmp: Path, token: str, run_id: str, drift: tuple[str, ...],
               run_uuid: str | None = None) -> _Place:
        """Lay out a trial in ``tmp``: its state home (and home), ledger, tools files and run configurations
        (``run_uuid``: the agent's own id of the run, default a fresh one)."""
        where = self.subject.trial_where(tmp, run_uuid)
        state_home = Path(where["state_home"])
        home = Path(where["home"]) if where["home"] else None
        tools = write_tools_file(tmp / "tools.json")
        cfg = RunConfig(run_id=run_id, model=workload.model, base_url=self.server.base_url, tools_file=tools,
                        max_tokens=workload.max_tokens, max_iterations=workload.max_iterations,
                        prompt=workload.prompt, chat=workload.chat, thinking=workload.thinking)
        drifted = cfg
        if drift:
            system = tmp / "system-drifted.txt"
            if "system" in drift:
                system.write_text("You are a careful agent. (A system prompt the run did not start with.)\n")
            drifted_tools = write_tools_file(tmp / "tools-drifted.json", drifted=True) if "tools" in drift else tools
            drifted = drifted_config(cfg, drift, drifted_tools, str(system))
        return _Place(tmp=tmp, state_home=state_home, home=home, ledger=tmp / "ledger.jsonl", token=token, cfg=cfg,
                      drifted=drifted, drift=drift, where=where, journal=self.subject.journal_path(cfg, **where),
                      reading=self.subject.status_argv(cfg, **where) if self.readings else None)

    def _env(self, place: _Place, index: int, fault: str | None = None, traced: bool = True,
             values: dict[str, str] | None = None) -> dict[str, str]:
        """Leg ``index``'s environment: its model API key, the trial's directories and ledger, and (for a leg
        the observer does not see) its IO-seam trace file (``traced``) and seam fault; ``values``: the leg's
        template values (a profile's ``[env]``)."""
        trace = None if self.observe or not traced else str(place.tmp / f"trace-{index}.jsonl")
        return self.subject.env(base_url=self.server.base_url, api_key=api_key(place.token, index),
                                state_home=str(place.state_home), ledger=str(place.ledger), leg=index, trace=trace,
                                fault=None if self.observe else fault,
                                home=str(place.home) if place.home is not None else None, values=values)

    def _run_legs(self, history: History, workload: Workload, place: _Place, schedule: list[dict[str, Any]],
                  max_legs: int, budget: float, deadline: float, first: int = 0) -> bool:
        """Start or resume the run leg after leg until it ends; True when it ended as its workload says
        (``first``: the legs already recorded, a :class:`Prelude`'s)."""
        faulted = first  # schedule entries handed out (probes take none)
        probe_next = True
        index = first - 1
        while index + 1 < max_legs:
            index += 1
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                history.notes.append(f"trial budget of {budget} s spent before leg {index}")
                return False
            before = journal_bytes(place.journal)
            kind = start_or_resume(before, history.journal.format)
            if history.journal.is_store and history.legs and (history.legs[-1].reading or {}).get("given") \
                    and history.legs[-1].reading.get("status") is None:  # its reading: the store has no such run
                kind = "start"
            probe = bool(place.drift) and kind == "resume" and probe_next
            spec = {"kind": "none"} if probe else fault_for_leg(schedule, faulted)
            faulted += 0 if probe else 1
            plan = self._leg_plan(place, workload, index, kind, probe, spec, before, remaining)
            plan, rival = self._hold(history, place, plan)
            index = plan.index
            try:
                leg, outcome = run_leg(plan, self.legs, rival)
            except (OSError, RuntimeError) as exc:
                raise SetupError(f"cannot start the subject {plan.argv[0]!r}: {exc}") from None
            history.legs.append(leg)
            end = self._leg_end(history, workload, place, leg, outcome, spec, probe, budget)
            if probe:
                probe_next = end != "refused"  # refused, as it must be: the next leg forces the resume
            elif place.drift and kind == "resume":
                probe_next = True
            if end in ("done", "stop"):
                return end == "done"
        history.notes.append(f"leg budget of {max_legs} spent before the run completed")
        return False

    def _leg_plan(self, place: _Place, workload: Workload, index: int, kind: str, probe: bool,
                  spec: dict[str, Any], before: bytes | None, remaining: float) -> LegPlan:
        """Leg ``index``: a start, a resume (forced with the drifted configuration after a refused probe) or a
        drift probe, under fault ``spec``; the subject's files are written for it."""
        cfg = place.drifted if place.drift and kind == "resume" else place.cfg
        where, mcp = open_mcp(self.subject, place.where, place.ledger, index, "tools" in place.drift and cfg != place.cfg)
        try:
            if probe:
                argv = self.subject.resume_argv(place.drifted, **where)
                detail: dict[str, Any] = {"drift": list(place.drift), "expect": "refused"}
            elif kind == "resume":
                argv = self.subject.resume_argv(cfg, force=bool(place.drift), **where)
                detail = {"drift": list(place.drift), "forced": True} if place.drift else {}
            else:
                argv = self.subject.start_argv(place.cfg, **where)
                detail = {}
            if self.subject.files:
                self.subject.write_files(cfg, **where)
            place.values = self.subject.values(cfg, **where)
            env = self._env(place, index, seam_fault(spec), values=place.values)
        except BaseException:
            if mcp is not None:
                mcp.close()
            raise
        stdin = workload.stdin_for(count_user_records(before)) if workload.chat else None
        return LegPlan(index=index, kind=kind, argv=argv, env=env, fault=spec, workdir=place.tmp,
                       journal=place.journal, trace=place.tmp / f"trace-{index}.jsonl", stdin=stdin,
                       timeout_s=remaining, detail=detail, roots=place.roots, reading=place.reading,
                       cwd=where["cwd"], mcp=mcp, share=where["cwd_slug"] if place.shared else None)

    def _hold(self, history: History, place: _Place, plan: LegPlan) -> tuple[LegPlan, Callable[[], None] | None]:
        """For a ``hold`` fault, the rival that runs while ``plan``'s leg waits at its sequence point: the
        subject's reading (``"reader": true``; readers during appends), else a leg running the same command
        (recorded as leg ``plan.index``; the held leg becomes leg ``plan.index + 1``).  Else ``(plan, None)``."""
        spec = plan.fault
        if spec["kind"] != "hold":
            return plan, None
        if spec.get("reader"):
            reading = place.reading
            if reading is None:
                raise SetupError("a reader race needs the subject's own reading command (a profile's [reading])")

            def read(at: int = int(spec["at"]), leg_index: int = plan.index) -> None:
                data = journal_bytes(place.journal)
                raw = self.legs.read(reading, plan.env, place.tmp, f"{leg_index}-at-{at}")
                history.readings.append({"leg": leg_index, "at": at,
                                         "journal": data.decode("latin-1") if data is not None else None,
                                         "reading": parse_reading(raw, self.subject.status_fields,
                                                                  self.subject.reading_format)})
            return plan, read
        held = plan.index + 1
        rival_plan = replace(plan, fault={"kind": "none"}, detail={"rival_of": held}, mcp=None, rival=True)

        def rival() -> None:
            rival_leg, _ = run_leg(rival_plan, self.legs)
            history.legs.append(rival_leg)
        held_plan = replace(plan, index=held, trace=place.tmp / f"trace-{held}.jsonl",
                            env=self._env(place, held, traced=False, values=place.values),
                            detail={"held_at": spec["at"], "rival": plan.index})
        return held_plan, rival

    @staticmethod
    def _leg_end(history: History, workload: Workload, place: _Place, leg: Leg, outcome: LegOutcome,
                 spec: dict[str, Any], probe: bool, budget: float) -> str | None:
        """What leg ``leg`` means for the run: ``"done"`` (it ended as its workload says), ``"stop"`` (it
        cannot go on: hung, or ended with no fault), ``"refused"`` (a drift probe refused, as it must be),
        or ``None`` (resume it); each surprise is a note in ``history``."""
        index = leg.index
        if spec["kind"] == "hold" and not spec.get("reader") \
                and any(lg.exit_code == EXIT_COMPLETED for lg in history.legs[-2:]):
            return "done"  # the rival or the held leg completed the run
        if outcome.timed_out:
            history.notes.append(f"leg {index} hung: killed after the trial budget of {budget} s")
            return "stop"
        if spec["kind"] != "none" and not outcome.injected:
            history.notes.append(f"leg {index}: fault {spec} not injected (the leg ended first)")
        if probe:
            if leg.exit_code == EXIT_USAGE:
                return "refused"
            history.notes.append(f"leg {index}: a resume with drifted {', '.join(place.drift)} was not refused "
                                 f"(exit {leg.exit_code} / signal {leg.exit_signal})")
        if leg.exit_code == EXIT_COMPLETED:
            return "done"
        if leg.exit_code == EXIT_SUSPENDED and workload.chat and not (spec["kind"] == "suspend" and outcome.injected):
            return "done"  # a chat run suspends at the end of its input: that is its normal end
        if leg.exit_code == EXIT_ERROR and workload.spec.final_stop:
            return "done"  # the run ends with error at its cut-short last reply: as its workload says
        if not outcome.injected and leg.exit_code != EXIT_SUSPENDED:
            history.notes.append(f"leg {index} ended with exit {leg.exit_code} / signal {leg.exit_signal} "
                                 f"and no fault injected: the run stops here")
            return "stop"
        return None

    def _resume_after_end(self, history: History, place: _Place, ended: int | None, deadline: float) -> None:
        """``[check] resume_after_completed``: resume a run that ended once more.

        A completed run does what its subject promises (refused, journal unchanged, by default; I9); a run
        that ended with error at its cut-short last reply ends so again, with
        no model call and no tool run (docs/spec.md section 12, rules 2 and
        6): I2, I3 and I6 judge that leg like any other.  A recorded trial's probe that changed nothing (files,
        ledger, model calls) stands for the probe of every recorded trial that ends in the same files.
        """
        index = max(lg.index for lg in history.legs) + 1

        def state() -> tuple:  # the probe's command and files; the ledger and the calls made, which it must not change
            session = self.server.session(place.token)
            argv = tuple(a.replace(str(place.tmp), "") for a in self.subject.resume_argv(place.cfg, **place.where))
            return ((argv, ended, place.state()), place.ledger.read_bytes() if place.ledger.exists() else b"",
                    len(session.calls) if session else 0)
        before = state() if place.shared else None
        key = before[0] if before is not None else None
        with self._lock:
            done = self._probes.get(key) if key is not None else None
        if done is not None:  # the probe of this same state left it as it was: judged on that leg
            history.legs.append(replace(done, index=index, fault=replace(done.fault, detail={**done.fault.detail,
                                                                                            "shared": True})))
            return
        where, mcp = open_mcp(self.subject, place.where, place.ledger, index)
        if self.subject.files:
            self.subject.write_files(place.cfg, **where)
        plan = LegPlan(index=index, kind="resume", argv=self.subject.resume_argv(place.cfg, **where),
                       env=self._env(place, index, values=self.subject.values(place.cfg, **where)),
                       fault={"kind": "none"}, workdir=place.tmp, journal=place.journal,
                       trace=place.tmp / f"trace-{index}.jsonl", timeout_s=max(1.0, deadline - time.monotonic()),
                       detail={"expect": self.subject.promises.expect_after_completed, "probe": COMPLETED_PROBE}
                       if ended == EXIT_COMPLETED
                       else {"expect": "error", "probe": "resume after error"}, roots=place.roots, reading=None,
                       cwd=where["cwd"], mcp=mcp)
        leg, _ = run_leg(plan, self.legs)
        history.legs.append(leg)
        if before is not None and state() == before:  # it changed nothing: trials ending in these files share it
            with self._lock:
                self._probes[key] = leg


@dataclass
class _Place:
    """Where one trial's legs run: its directories, its model session, the run's configurations (``drifted``:
    the one a drifted resume uses; ``cfg`` when no drift), the subject's path templates' values (``where``),
    its journal and its reading command (``None``: none, or readings off)."""

    tmp: Path
    state_home: Path
    home: Path | None
    ledger: Path
    token: str
    cfg: RunConfig
    drifted: RunConfig
    drift: tuple[str, ...]
    where: dict[str, str]
    journal: Path
    reading: list[str] | None
    values: dict[str, str] = field(default_factory=dict)  # the last leg's template values (a held leg's rival's)
    shared: bool = False  # a recorded trial's: a reading or the probe after the end shared by trials of one state

    def state(self) -> tuple | None:
        """The files below :attr:`roots` (:func:`harness.runner.starter.state_of`) when :attr:`shared`, else ``None``."""
        return state_of(self.tmp, self.roots, self.where["cwd_slug"]) if self.shared else None

    @property
    def roots(self) -> tuple[str, ...]:
        """The directories an observed leg's operations are recorded under."""
        return (str(self.state_home),) + ((str(self.home),) if self.home is not None else ())
