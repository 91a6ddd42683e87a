"""Shared bench helpers: the table row, medians, the machine, and the table rendering."""

from __future__ import annotations

import os
import platform
import statistics
import sys
from pathlib import Path
from typing import Any, Iterable



ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: Keys of every table row.
ROW_KEYS = ("section", "metric", "subject", "floor", "ratio", "unit", "target", "met", "note")


def row(section: str, metric: str, subject: float | None, floor: float | None = None, *, unit: str = "",
        target: str = "", met: bool | None = None, note: str = "", ratio: float | None = None) -> dict[str, Any]:
    """One table row; ``ratio`` defaults to subject / floor when both are known."""
    if ratio is None and subject is not None and floor:
        ratio = subject / floor
    return {"section": section, "metric": metric, "subject": subject, "floor": floor, "ratio": ratio,
            "unit": unit, "target": target, "met": met, "note": note}


def median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


# --- the machine ------------------------------------------------------------------------


def fs_type(path: str) -> str:
    """The file system type of ``path`` (longest mount point of /proc/mounts that contains it)."""
    path = os.path.realpath(path)
    best, kind = "", "unknown"
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    mnt = parts[1].replace("\\040", " ")
                    if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                        best, kind = mnt, parts[2]
    except OSError:
        pass
    return kind


def machine_info(directory: str) -> dict[str, Any]:
    """nproc, CPU model, kernel, Python, the file system of ``directory``, load average."""
    model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(),
            "python": platform.python_version(), "fs": fs_type(directory), "dir": directory,
            "loadavg": [round(x, 2) for x in load]}


# --- the table ------------------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value != value:
            return "nan"
        if abs(value) >= 10_000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def format_table(rows: list[dict[str, Any]], markdown: bool = False) -> str:
    """The rows as a text (or Markdown) table: metric, subject, floor, ratio, unit, target, met, note."""
    head = ["section", "metric", "subject", "floor", "ratio", "unit", "target", "met", "note"]
    body = []
    for r in rows:
        ratio = r["ratio"]
        ratio_s = "-" if ratio is None else (f"{ratio:.0%}" if r["metric"].lstrip().startswith("share") else f"{ratio:.2f}x")
        met = "" if r["met"] is None else ("yes" if r["met"] else "NO")
        body.append([r["section"], r["metric"], _fmt(r["subject"]), _fmt(r["floor"]), ratio_s, r["unit"],
                     r["target"], met, r["note"]])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(c.replace("|", "/") for c in b) + " |" for b in body]
        return "\n".join(lines)
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    widths[-1] = len(head[-1])
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells[:-1], widths[:-1])) + "  " + cells[-1]  # noqa: E731
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(b) for b in body])
