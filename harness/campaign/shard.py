"""Sharding a campaign: shard ``i`` of ``n`` runs plan positions ``i, i + n, ...`` of every scenario, any family;
``merge`` takes only one complete set of shards of one campaign, none interrupted (docs/scenarios.md
"Shards and merge").
"""

from __future__ import annotations

from typing import Any

from harness.errors import ResultsError

__all__ = ["ShardSetError", "shard_positions", "parse_shard", "report_shard", "campaign_identity",
           "check_shard_set"]


class ShardSetError(ResultsError):
    """Reports that ``merge`` refuses: not one complete set of shards of one campaign.  ``path`` and ``field``
    name the report and its field when one report is the cause (``None`` when it is the set: a shard
    missing, one given twice); ``str(error)`` reads ``FILE: field 'F': message``, or the message alone."""

    def __str__(self) -> str:
        return super().__str__() if self.path is not None else self.message


def shard_positions(total: int, shard: tuple[int, int] | None) -> range:
    """Positions ``0..total-1`` of a plan that shard ``(i, n)`` runs: ``i, i + n, i + 2n, ...`` (all without a shard)."""
    if shard is None:
        return range(total)
    i, n = shard
    return range(i, total, n)


def parse_shard(text: str) -> tuple[int, int]:
    """Parse ``--shard I/N`` (``I`` 0-based, ``0 <= I < N``) into ``(I, N)``; raises ``ValueError``."""
    left, sep, right = str(text).partition("/")
    try:
        i, n = int(left), int(right)
    except ValueError:
        raise ValueError(f"a shard is I/N with integers 0 <= I < N (e.g. 0/4), got {text!r}") from None
    if not sep or n < 1 or not 0 <= i < n:
        raise ValueError(f"a shard is I/N with integers 0 <= I < N (e.g. 0/4), got {text!r}")
    return i, n


def _block(report: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    value = report.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ShardSetError(f"cannot merge: expected an object, found {type(value).__name__}", path=path, field=key)
    return value


def report_shard(report: Any, path: str) -> tuple[int, int] | None:
    """The shard ``(i, n)`` a JSON report was run as (``campaign.shard``, or ``gate.shard`` for a gate), ``None``
    for a report of a whole campaign.  Raises :class:`harness.errors.ResultsError` naming the file and the
    field when the report is not an object or its shard is not ``I/N`` (a :class:`ShardSetError`)."""
    if not isinstance(report, dict):
        raise ShardSetError(f"cannot merge: not a fiskj-harness report (a JSON {type(report).__name__}, "
                           "not an object)", path=path)
    for key in ("campaign", "gate"):
        text = _block(report, key, path).get("shard")
        if text is None:
            continue
        try:
            return parse_shard(text)
        except ValueError as exc:
            raise ShardSetError(f"cannot merge: {exc}", path=path, field=f"{key}.shard") from None
    return None


def campaign_identity(report: dict[str, Any], path: str) -> dict[str, Any]:
    """What the shards of one campaign share, from a report's ``campaign`` (and ``gate``) block: ``kind``
    (``run`` or ``gate``), ``scenarios`` (the names), ``seeds`` (``None`` for a gate, whose seeds are per
    draw), ``subject`` (a bundled profile by its reference, else as recorded) and ``subject_env``."""
    campaign = _block(report, "campaign", path)
    ref = campaign.get("subject_ref")
    subject = ref if isinstance(ref, dict) and "bundled" in ref else campaign.get("subject")
    gate = "gate" in report
    return {"kind": "gate" if gate else "run",
            "scenarios": sorted(campaign.get("scenarios") or {}),
            # a gate's seeds are its draws' (base + j * SEED_STEP), and how many draws a shard reached
            # depends on its timing: its scenarios and subject name the campaign
            "seeds": None if gate else dict(sorted((campaign.get("seeds") or {}).items())),
            "subject": subject, "subject_env": dict(sorted((campaign.get("subject_env") or {}).items()))}


_WHAT = {"kind": "kinds of report (run, gate)", "scenarios": "scenarios", "seeds": "seeds",
         "subject": "subjects", "subject_env": "subject variables"}


def check_shard_set(paths: list[str], reports: list[Any]) -> list[tuple[int, int] | None]:
    """Refuse to merge anything but one complete set of shards: raises :class:`ShardSetError` that
    names the missing or duplicated shard (and the files), a report that is not a shard among shards, an
    interrupted shard, or the field in which two shards' campaigns differ.  One report of a whole campaign
    (no shard) is a complete set by itself.  Returns each report's shard."""
    shards = [report_shard(rep, path) for path, rep in zip(paths, reports)]
    for path, rep in zip(paths, reports):
        if rep.get("interrupted"):
            raise ShardSetError("cannot merge: this report was interrupted (\"interrupted\": true): its trials were "
                               "not all run; run its shard again", path=path, field="interrupted")
    if len(reports) == 1 and shards[0] is None:
        return shards
    for path, shard in zip(paths, shards):
        if shard is None:
            raise ShardSetError("cannot merge: not a shard report (run it with --shard I/N); shards merge only with "
                               "the other shards of their campaign", path=path, field="campaign.shard")
    counts = sorted({n for _, n in shards})  # type: ignore[misc]
    if len(counts) != 1:
        listed = ", ".join(f"{p} ({i}/{n})" for p, (i, n) in zip(paths, shards))  # type: ignore[misc]
        raise ShardSetError(f"cannot merge: the reports come from different shard counts {counts}: {listed}")
    (n,) = counts
    seen: dict[int, str] = {}
    for path, (i, _) in zip(paths, shards):  # type: ignore[misc]
        if i in seen:
            raise ShardSetError(f"cannot merge: shard {i}/{n} is given twice ({seen[i]} and {path}); "
                               "each shard goes in once")
        seen[i] = path
    missing = [f"{i}/{n}" for i in range(n) if i not in seen]
    if missing:
        given = ", ".join(f"{seen[i]} ({i}/{n})" for i in sorted(seen))
        raise ShardSetError(f"cannot merge: shard(s) {', '.join(missing)} missing; a verdict needs every shard of "
                           f"the campaign, and only {given} were given")
    first = campaign_identity(reports[0], paths[0])
    for path, rep in zip(paths[1:], reports[1:]):
        other = campaign_identity(rep, path)
        for key in first:
            if other[key] != first[key]:
                raise ShardSetError(f"cannot merge: the shards are not of one campaign: different {_WHAT[key]} "
                                   f"({paths[0]}: {first[key]!r}; {path}: {other[key]!r})", path=path,
                                   field="gate" if key == "kind" else f"campaign.{key}")
    return shards
