"""The results folder of a campaign (Jepsen's ``store/``): its reports and every kept trial's evidence.

Its layout is docs/results.md "The results folder"; ``fiskj-harness check DIR`` reads back only
``history.json`` and ``trial.json`` (:func:`load_stored`, :func:`recheck`), the other files are for people.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shlex
import types
import typing
from dataclasses import MISSING, dataclass, fields, is_dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Union

from harness.errors import ResultsError
from harness.history.model import History, history_from_json, history_to_json
from harness.scenario.generate import split_draw

__all__ = ["RESULTS_ENV", "DEFAULT_ROOT", "KEEP_CHOICES", "REPORT_FILE", "JUNIT_FILE", "MARKDOWN_FILE",
           "SUMMARY_FILE", "HTML_FILE", "TRIALS_DIR", "HISTORY_FILE", "TRIAL_FILE", "LATEST", "TRIAL_FORMAT", "default_root",
           "results_name", "results_parent", "make_results_dir", "update_latest", "write_json", "write_trial", "write_results",
           "write_html_report",
           "StoredTrial", "load_history", "load_trial", "load_stored", "recheck"]

#: The variable naming the default root of results folders (``--results`` wins over it).
RESULTS_ENV = "FISKJ_HARNESS_RESULTS"
#: The default root, relative to the working directory.
DEFAULT_ROOT = "fiskj-results"
#: ``--keep``: which trials get a folder (``none``: no results folder at all).
KEEP_CHOICES = ("failures", "all", "none")
REPORT_FILE, JUNIT_FILE, MARKDOWN_FILE, SUMMARY_FILE = "report.json", "junit.xml", "summary.md", "summary.txt"
HTML_FILE = "report.html"
TRIALS_DIR, HISTORY_FILE, TRIAL_FILE, LATEST = "trials", "history.json", "trial.json", "latest"
#: The ``format`` of a ``trial.json``.
TRIAL_FORMAT = "fiskj-harness-trial/1"

_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def default_root(environ: typing.Mapping[str, str] | None = None) -> str:
    """The root of results folders when ``--results`` is not given: ``$FISKJ_HARNESS_RESULTS``, else
    ``fiskj-results`` (relative to the working directory)."""
    env = os.environ if environ is None else environ
    return env.get(RESULTS_ENV) or DEFAULT_ROOT


def _safe(name: str) -> str:
    """``name`` as one path component: runs of other characters than letters, digits and ``._+-`` become ``_``."""
    return (_UNSAFE.sub("_", name).strip("._") or "unnamed")[:100]


def results_name(scenario_names: list[str]) -> str:
    """The folder name of a campaign: its one scenario's name (the draws ``NAME.wK`` of one generated
    scenario count as ``NAME``), else ``campaign``."""
    names = sorted({split_draw(n)[0] for n in scenario_names})
    return _safe(names[0]) if len(names) == 1 else "campaign"


def results_parent(root: str | os.PathLike[str], name: str) -> Path:
    """Create (if needed) and return ``ROOT/NAME/``, where a campaign's time folders go: called before a
    campaign runs, so that a root that cannot be written is said before the trials, not after.
    Raises :class:`ResultsError`."""
    parent = Path(root) / _safe(name)
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ResultsError(f"cannot create the results folder: {exc.strerror or exc}", path=str(parent)) from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ResultsError("cannot write the results folder", path=str(parent))
    return parent


def make_results_dir(root: str | os.PathLike[str], name: str, now: datetime | None = None) -> Path:
    """Create and return ``ROOT/NAME/<UTC time>/`` (``20260314T101502.123Z``; ``-1``, ``-2``, ... appended
    when a folder of that time exists).  Raises :class:`ResultsError` when it cannot be created."""
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%S.") + f"{now.microsecond // 1000:03d}Z"
    parent = results_parent(root, name)
    try:
        for n in range(1000):
            folder = parent / (stamp if n == 0 else f"{stamp}-{n}")
            with contextlib.suppress(FileExistsError):
                folder.mkdir()
                return folder
    except OSError as exc:
        raise ResultsError(f"cannot create the results folder: {exc.strerror or exc}", path=str(parent)) from None
    raise ResultsError("cannot create the results folder: 1000 folders of the same time exist", path=str(parent))


def update_latest(folder: Path) -> bool:
    """Point ``latest`` next to ``folder`` at it (a relative symlink, replaced atomically).  Returns False
    when the file system refuses symlinks (the folder is complete without one)."""
    link = folder.parent / LATEST
    tmp = folder.parent / f".{LATEST}.{os.getpid()}"
    try:
        if tmp.is_symlink():
            tmp.unlink()
        os.symlink(folder.name, tmp)
        os.replace(tmp, link)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False


def write_json(path: str | os.PathLike[str], data: Any, indent: int | None = 1) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file and a rename (no half-written report)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=indent, default=str)
        f.write("\n")
    os.replace(tmp, path)


def _jsonl(path: Path, rows: list[Any]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, default=str) + "\n")


def write_trial(trials_dir: Path, trial: Any, *, width: int = 4, replay: str | None = None) -> Path:
    """Write one judged trial (a :class:`harness.campaign.result.TrialResult` with its ``history``) into
    ``trials_dir/NNNN-SCENARIO/`` (docs/results.md "The results folder"); returns that folder.  ``replay``: the
    command that replays it from the report.  Raises ``ValueError`` for a trial without a history."""
    from harness.checkers.verdict import combine
    from harness.history.readers import KEEP_OUTPUT

    history: History | None = trial.history
    if history is None:
        raise ValueError(f"trial {trial.index} kept no history")
    folder = trials_dir / f"{trial.index:0{width}d}-{_safe(trial.scenario)}"
    folder.mkdir(parents=True, exist_ok=True)
    verdicts = [v.to_json() if hasattr(v, "to_json") else dict(v) for v in trial.verdicts]
    checked = [v for v in verdicts if v.get("invariant") in trial.invariants]
    info = {
        "format": TRIAL_FORMAT, "trial": trial.index, "scenario": trial.scenario, "scenario_path": trial.scenario_path,
        "seed": trial.seed, "schedule": trial.schedule, "origin": trial.origin, "shrunk_from": trial.shrunk_from,
        "shrink": trial.shrink, "family": trial.family, "invariants": list(trial.invariants),
        "faults": dict(trial.faults), "elapsed_s": round(trial.elapsed_s, 6),
        "status": combine([v["status"] for v in checked]) if checked else "unknown",
        "failed": list(trial.failed), "unknown": list(trial.unknown),
        "reproduce_run": trial.reproduce, "replay": replay, "verdicts": verdicts,
    }
    write_json(folder / TRIAL_FILE, info)
    write_json(folder / HISTORY_FILE, history_to_json(history))
    _jsonl(folder / "effects.jsonl", [vars(e) for e in history.effects])
    _jsonl(folder / "model_calls.jsonl", [vars(c) for c in history.model_calls])
    legs_dir = folder / "legs"
    for leg in history.legs:
        d = legs_dir / f"{leg.index}-{_safe(leg.kind)}"
        d.mkdir(parents=True, exist_ok=True)
        write_json(d / "leg.json", {
            **{k: getattr(leg, k) for k in ("index", "kind", "argv", "pid", "t_start", "t_end", "exit_code",
                                            "exit_signal", "timed_out", "raw_exit_code", "reading")},
            "fault": vars(leg.fault), "journal_bytes": None if leg.journal is None else len(leg.journal),
            "trace_events": len(leg.trace),
            "output": (f"stdout.txt and stderr.txt hold the last {KEEP_OUTPUT} characters of the leg's output "
                       "(the history keeps no more; --keep-dirs keeps the trial's own files)")})
        if leg.journal is not None:  # no file: the journal did not exist after this leg
            (d / "journal.jsonl").write_bytes(leg.journal)
        _jsonl(d / "trace.jsonl", leg.trace)
        (d / "stdout.txt").write_text(leg.stdout, encoding="utf-8", errors="replace")
        (d / "stderr.txt").write_text(leg.stderr, encoding="utf-8", errors="replace")
    if history.crash_state is not None:
        _write_crash_state(folder / "crash_state", history)
    return folder


def _write_crash_state(d: Path, history: History) -> None:
    state = history.crash_state
    assert state is not None
    d.mkdir(parents=True, exist_ok=True)
    write_json(d / "state.json", {"id": state.id, "prefix_n": state.prefix_n, "dirs": state.dirs,
                                  "inodes": state.inodes, "lost_entries": state.lost_entries,
                                  "persisted": state.persisted, "files": sorted(state.files),
                                  "acks": [{k: v for k, v in vars(a).items() if k != "data"} | {"bytes": len(a.data)}
                                           for a in state.acks]})
    for i, path in enumerate(sorted(state.files)):  # flat names, in the order of state.json's files
        (d / f"file-{i}-{_safe(os.path.basename(path))}").write_bytes(state.files[path])


def write_results(folder: Path, report: dict[str, Any], result: Any, *, keep: str, summary: str,
                  command: list[str] | None = None) -> dict[str, Any]:
    """Fill the results ``folder`` of campaign ``result`` (docs/results.md "The results folder") with
    ``report`` (made portable for that place), its JUnit, Markdown and HTML forms, ``summary`` and ``command``,
    and a folder per kept trial: ``keep`` ``all`` every trial with a history, ``failures`` per group of
    violations its reproducer, its example and its first :data:`PER_GROUP` trials (``trials/NOT-KEPT.txt``
    counts the rest); then points ``latest`` at it.  Returns ``{"folder", "trials": folders written,
    "latest": bool, "html": its path, "html_error": why the HTML report could not be drawn, else None,
    "not_kept"}``.  Raises ``ValueError`` for another ``keep``.
    """
    from harness.report.reproduce import replay_command
    from harness.report.portable import portable
    from harness.report.report import render_markdown, write_junit

    if keep not in KEEP_CHOICES:
        raise ValueError(f"keep must be one of {KEEP_CHOICES}, got {keep!r}")
    report_file = folder / REPORT_FILE
    write_json(report_file, portable(report, str(report_file)))
    write_junit(report, str(folder / JUNIT_FILE))
    (folder / MARKDOWN_FILE).write_text(render_markdown(report), encoding="utf-8")
    (folder / SUMMARY_FILE).write_text(summary, encoding="utf-8")
    if command is not None:
        (folder / "command.txt").write_text(f"cd {shlex.quote(os.getcwd())}\n{shlex.join(command)}\n",
                                            encoding="utf-8")
    kept = [t for t in result.trials if t.history is not None
            and (keep == "all" or t.failed or t.unknown)]
    dropped = 0
    if keep == "failures":  # one bug can fail thousands of trials: keep what each group needs, not all
        wanted = _per_group(report, PER_GROUP)
        dropped = sum(1 for t in kept if t.index not in wanted)
        kept = [t for t in kept if t.index in wanted]
    width = max(4, len(str(max((t.index for t in result.trials), default=0))))
    where = report.get("report_path") or str(report_file)
    written = [write_trial(folder / TRIALS_DIR, t, width=width, replay=replay_command(where, t.index))
               for t in kept]
    html_error = _write_html(folder, report, [(t, d) for t, d in zip(kept, written) if t.failed or t.unknown], where)
    if dropped:
        (folder / TRIALS_DIR).mkdir(exist_ok=True)
        (folder / TRIALS_DIR / "NOT-KEPT.txt").write_text(
            f"{dropped} more failing trial(s) are not kept here: each group of violations keeps its smallest "
            f"reproducer and its first {PER_GROUP} trials (report.json lists every row; --keep all keeps "
            "every trial).\n", encoding="utf-8")
    return {"folder": folder, "trials": written, "latest": update_latest(folder), "html": folder / HTML_FILE,
            "html_error": html_error, "not_kept": dropped}


#: ``--keep failures``: failing trials kept per group of violations (besides its reproducer and example).
PER_GROUP = 10


def _per_group(report: dict[str, Any], per_group: int) -> set[int]:
    """The trial numbers a results folder keeps: per group its smallest reproducer, its example and its first
    ``per_group`` trials."""
    from harness.report.groups import key_trials

    out = set(key_trials(report))
    for group in (report.get("groups") or []) + (report.get("unknown_groups") or []):
        out.update(t for t in (group.get("trials") or [])[:per_group] if isinstance(t, int))
    return out


def _write_html(folder: Path, report: dict[str, Any], failing: list[tuple[Any, Path]], where: str) -> str | None:
    """Write ``folder/report.html`` of ``report`` and the ``failing`` (trial, its folder) pairs.  A report that
    cannot be drawn must not cost the folder the rest: the page then says why, and so does the return value."""
    import html

    from harness.report.reproduce import replay_command
    from harness.report.html import trial_view, write_html

    try:
        views = [trial_view(t, folder=os.path.relpath(d, folder), replay=replay_command(where, t.index))
                 for t, d in failing]
        write_html(folder / HTML_FILE, report, views)
        return None
    except Exception as exc:  # noqa: BLE001 - the JSON report and the trial folders are already written
        why = f"{type(exc).__name__}: {exc}"
        (folder / HTML_FILE).write_text(
            "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>fiskj-harness report</title></head><body>"
            f"<p>the HTML report could not be drawn: {html.escape(why)}; see report.json and summary.md</p>"
            "</body></html>\n", encoding="utf-8")
        return why


def write_html_report(path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> Path:
    """Write the HTML report (:mod:`harness.report.html`) of the results stored at ``path`` (what
    :func:`load_stored` reads: a results folder, its scenario folder, a trial folder, a ``history.json``) to
    ``out`` (default: ``report.html`` in the folder found), with the current code; returns the file.  A
    folder without ``report.json`` gets a report built from its trials' stored verdicts.  Raises
    :class:`ResultsError` for what cannot be read."""
    from harness.report.html import trial_view, write_html
    from harness.report.report import build_report

    where, report, stored = load_stored(path)
    target = Path(out) if out is not None else (where if where.is_dir() else where.parent) / HTML_FILE
    if report is None:
        report = build_report([{"trial": t.info.get("trial", i), "scenario": t.info.get("scenario") or t.history.scenario,
                                "history": t.history, "verdicts": t.info.get("verdicts") or []}
                               for i, t in enumerate(stored)])
    views = [trial_view({"trial": i, **t.info, "history": t.history, "invariants": t.invariants,
                         "verdicts": [v for v in t.info.get("verdicts") or [] if isinstance(v, dict)]},
                        folder=os.path.relpath(t.folder, target.parent), replay=t.info.get("replay"))
             for i, t in enumerate(stored)]
    return write_html(target, report, views)


# --- reading it back -------------------------------------------------------------------------


class _Bad(Exception):
    """A stored history's field that does not fit (``field`` ``None``: the whole file)."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field


#: The JSON form of each scalar type a History field has: (how an error names it, the check of a value).
_SCALARS: dict[Any, tuple[str, Any]] = {
    int: ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    float: ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
    bool: ("true or false", lambda v: isinstance(v, bool)), str: ("a string", lambda v: isinstance(v, str)),
    bytes: ("a latin-1 string", lambda v: isinstance(v, str) and all(ord(c) < 256 for c in v)),
    list: ("a list", lambda v: isinstance(v, list)), dict: ("an object", lambda v: isinstance(v, dict))}


def _check(tp: Any, value: Any, where: str) -> None:
    """Check the JSON ``value`` against the annotation ``tp`` of a History field; raise :class:`_Bad`."""
    if tp is Any:
        return
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return
        options = [a for a in args if a is not type(None)]
        errors = []
        for option in options:
            try:
                _check(option, value, where)
                return
            except _Bad as exc:
                errors.append(exc)
        raise errors[0]
    if is_dataclass(tp):
        _check_dataclass(tp, value, where)
        return
    if origin in (list, dict):
        _check(origin, value, where)
        items = enumerate(value) if origin is list else value.items()
        for k, item in items:
            _check(args[-1] if args else Any, item, f"{where}[{k}]" if origin is list else f"{where}.{k}")
        return
    if tp in _SCALARS and not _SCALARS[tp][1](value):
        raise _Bad(where, f"expected {_SCALARS[tp][0]}, found {_found(value)}")


def _found(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _check_dataclass(cls: type, value: Any, where: str) -> None:
    if not isinstance(value, dict):
        raise _Bad(where or None, f"expected an object ({cls.__name__}), found {_found(value)}")
    hints = _hints(cls)
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(value) - names)
    if unknown:
        raise _Bad(f"{where}.{unknown[0]}" if where else unknown[0], f"not a field of {cls.__name__}")
    for f in fields(cls):
        sub = f"{where}.{f.name}" if where else f.name
        if f.name not in value:
            if f.default is MISSING and f.default_factory is MISSING:  # type: ignore[misc]
                raise _Bad(sub, f"missing (a {cls.__name__} needs it)")
            continue
        _check(hints[f.name], value[f.name], sub)


def _read_json(path: Path, what: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultsError(f"no {what} here", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsError(f"cannot read the {what}: {exc}", path=str(path)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsError(f"the {what} is not JSON: {exc.msg} (column {exc.colno})", path=str(path),
                           line=exc.lineno) from None


def load_history(path: str | os.PathLike[str]) -> History:
    """Read a stored history (``history.json``), every field checked against :class:`History` before it is
    built.  Raises :class:`ResultsError` naming the file and the field (``legs[1].fault.kind``) for a file that
    cannot be read, is not JSON, or does not hold a history."""
    p = Path(path)
    data = _read_json(p, "history")
    try:
        _check_dataclass(History, data, "")
    except _Bad as exc:
        raise ResultsError(str(exc), path=str(p), field=exc.field) from None
    try:
        return history_from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # the check above should have said
        raise ResultsError(f"not a history: {type(exc).__name__}: {exc}", path=str(p)) from None


@dataclass
class StoredTrial:
    """A trial folder read back: ``folder``; ``info`` (its ``trial.json``, ``{}`` when it has none);
    ``history`` (its ``history.json``)."""

    folder: Path
    info: dict[str, Any]
    history: History

    @property
    def invariants(self) -> list[str]:
        """The invariants the campaign judged in this trial (``trial.json``), else I1..I10."""
        from harness.names import INVARIANTS

        given = self.info.get("invariants")
        return list(INVARIANTS if given is None else given)


def load_trial(folder: str | os.PathLike[str]) -> StoredTrial:
    """Read the trial folder ``folder`` (its ``history.json`` and, when present, ``trial.json``).
    Raises :class:`ResultsError` naming the file and field of what cannot be used."""
    d = Path(folder)
    info: dict[str, Any] = {}
    if (d / TRIAL_FILE).exists():
        raw = _read_json(d / TRIAL_FILE, "trial file")
        if not isinstance(raw, dict):
            raise ResultsError(f"expected an object, found {_found(raw)}", path=str(d / TRIAL_FILE))
        for key, kind in (("trial", int), ("invariants", list), ("verdicts", list), ("seed", int)):
            if raw.get(key) is not None and not _SCALARS[kind][1](raw[key]):  # the checks of a History's fields
                raise ResultsError(f"expected {_SCALARS[kind][0]}, found {_found(raw[key])}",
                                   path=str(d / TRIAL_FILE), field=key)
        bad = [i for i in raw.get("invariants") or [] if not isinstance(i, str)]
        if bad:
            raise ResultsError(f"expected invariant ids, found {_found(bad[0])}", path=str(d / TRIAL_FILE),
                               field="invariants")
        info = raw
    return StoredTrial(folder=d, info=info, history=load_history(d / HISTORY_FILE))


def load_stored(path: str | os.PathLike[str]) -> tuple[Path, dict[str, Any] | None, list[StoredTrial]]:
    """Find and read the stored trials at ``path``: a results folder (its ``trials/*/``), a folder of results
    folders with a ``latest`` link (the latest one), a trial folder, or a ``history.json`` file.

    Returns ``(results folder or trial folder, its report.json or None, trials in trial order)``.  Raises
    :class:`ResultsError` when ``path`` is none of those or a file in it cannot be used.
    """
    p = Path(path)
    if p.is_file():
        if p.name in (TRIAL_FILE, REPORT_FILE):
            p = p.parent
        else:
            return p, None, [StoredTrial(folder=p.parent, info={}, history=load_history(p))]
    if not p.is_dir():
        raise ResultsError("no such file or folder", path=str(p))
    if (p / HISTORY_FILE).exists():
        return p, None, [load_trial(p)]
    if not (p / TRIALS_DIR).is_dir() and not (p / REPORT_FILE).exists() and (p / LATEST).is_dir():
        p = p.joinpath(LATEST).resolve()  # the folder it points at now: what is printed must not move with it
    if not (p / TRIALS_DIR).is_dir() and not (p / REPORT_FILE).exists():
        raise ResultsError(f"not a results folder: it has no {REPORT_FILE}, no {TRIALS_DIR}/ and no {HISTORY_FILE} "
                           "(fiskj-harness run writes them, docs/results.md)", path=str(p))
    report = None
    if (p / REPORT_FILE).exists():
        report = _read_json(p / REPORT_FILE, "report")
        if not isinstance(report, dict):
            raise ResultsError(f"expected an object, found {_found(report)}", path=str(p / REPORT_FILE))
    found = sorted((p / TRIALS_DIR).iterdir()) if (p / TRIALS_DIR).is_dir() else []
    trials = [load_trial(d) for d in found if d.is_dir()]
    trials.sort(key=lambda t: (t.info.get("trial") if isinstance(t.info.get("trial"), int) else 1 << 62,
                               t.folder.name))
    return p, report, trials


def recheck(trials: list[StoredTrial]) -> list[dict[str, Any]]:
    """Judge each stored trial again with the current checkers on the invariants it was judged on.  Returns the
    trials as :func:`harness.report.report.build_report` takes them, each with ``stored``: the stored verdicts'
    statuses by invariant.  Raises :class:`ResultsError` for an invariant the checkers do not know."""
    from harness.checkers import check_all

    out = []
    for pos, t in enumerate(trials):
        try:
            verdicts = check_all(t.history, t.invariants)
        except ValueError as exc:
            raise ResultsError(str(exc), path=str(t.folder / TRIAL_FILE), field="invariants") from None
        stored = {v.get("invariant"): v.get("status") for v in t.info.get("verdicts") or []
                  if isinstance(v, dict)}
        h = t.history
        out.append({"trial": t.info.get("trial", pos), "scenario": t.info.get("scenario") or h.scenario,
                    "seed": t.info.get("seed", h.seed), "schedule": t.info.get("schedule", h.schedule),
                    "history": h, "verdicts": verdicts, "duration_s": 0.0, "faults": t.info.get("faults") or None,
                    "family": t.info.get("family") or "", "stored": stored, "folder": str(t.folder),
                    **{k: t.info[k] for k in ("origin", "shrunk_from", "shrink", "reproduce_run")
                       if t.info.get(k) is not None}})  # what the campaign said of its shrink: check says it too
    return out
