#!/usr/bin/env python3
"""fiskj benchmarks against their physical floors (tracker issue 8).

Usage::

    python3 bench/run.py [--quick] [--json FILE] [--only SECTION,...] [--dir DIR] [--agents NAMES]

``--quick`` takes under 2 minutes, the full run under 15 (with Claude Code
installed, its recorded-kills bench adds about 10).  Every figure is
measured side by side with its floor in the same run, interleaved (the
machines are shared and noisy), and quoted as medians and ratios:

1. ``append``: ``Journal.append`` (a journal made by ``FileStore(DIR).create``)
   of ~300-byte and 4 KiB records vs a bare ``os.write`` + ``os.fsync`` of the
   same bytes to a file in the same directory, alternating one of each.  Also
   the CPU cost of an append with the IO stubbed out (where the rest goes),
   and appends to a journal reopened after many records (the cost must not
   grow with the run).  Target: within 1.15x.
2. ``load``: ``fiskj.reader.read_state`` of generated journals (1k and 100k
   records; 1M in the full run) vs ``json.loads`` of the same lines read in
   binary, each in a fresh child process (process CPU time, so that time
   spent waiting for a busy CPU is not counted; peak RSS from
   ``getrusage``).  A second floor keeps what a fold must keep (``json.loads``
   plus the retained messages, collector paused as ``read_state`` does it).
   Targets: within 1.5x of the ``json.loads`` floor; peak memory at most 3x the
   journal's size; cost linear in records.
3. ``campaign``: trials/s of a kill campaign on the small bundled scenario
   ``kill-every-event``, and the per-trial share of each cost, each measured
   on its own (interpreter or fork start per leg, tool processes, model
   server round trips, fsyncs, checking).  Power-loss crash states built and
   checked for I4 per second (pure); then, per mode (reference IO seam,
   reference observed, foreign subject), the tiered exploration of
   ``power-loss-basic``: crash states judged cheaply per second next to full
   resumes per second (the old way), and the cheap tier on a large state
   space (the no-fsync mutant's).  Targets: 20 trials/s on 2 cores; 1,000
   judged crash states/s (reference), 200/s (black-box).
   ``recorded`` (issue 27; bench/recorded.py): the crash points of
   ``kill-every-event`` judged per second, every point killed for real (the
   old way) next to the recorded way (leg 0 materialized from one run, one
   resume per distinct state), per subject, interleaved: the reference (IO
   seam, black-box), the Node.js agent, and the real agents ``--agents``
   names (default Claude Code in a full run; ``langgraph`` too; each left out
   with a line when not installed; their old way on a seeded sample of the
   points), then a table of where each way's time goes.  Targets: 5x for the
   agents and the black-box reference, 50/s through the reference's IO seam.
4. ``jetstream``: ``JetStreamStore`` appends (one nats-server, ``sync_interval:
   always``) vs a bare ``js.publish`` + ack of the same bytes on the same
   connection, alternating (bench/jetstream.py; issue 28).
5. ``catch``: for each mutant of ``harness/mutants/``, the median time from a
   cold start (reference run included) to its first detection over 5 seeds
   (quick: 1).  Target: under 10 s.

The table's rows are dicts with the keys of :data:`ROW_KEYS`; ``--json`` writes
``{"machine", "mode", "rows", "details"}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The sections live in bench/*.py (one concept per module); this module is the entry point and
# re-exports their public names, so ``bench/run.py`` keeps its interface.
from bench.append import bench_append  # noqa: E402
from bench.campaign import bench_campaign, bench_crash_states, bench_modes  # noqa: E402
from bench.catch import bench_catch  # noqa: E402
from bench.common import ROW_KEYS, format_table, fs_type, machine_info, median, row  # noqa: E402,F401
from bench.jetstream import bench_jetstream  # noqa: E402
from bench.journals import generate_records, meta_record, write_journal  # noqa: E402,F401
from bench.load import _LOAD_MODES, _child_load, bench_load  # noqa: E402,F401
from bench.observer import bench_observer  # noqa: E402
from bench.recorded import AGENT_MODES, RECORDED_MODES, bench_recorded, breakdown_table  # noqa: E402

__all__ = ["ROW_KEYS", "SECTIONS", "row", "machine_info", "generate_records", "write_journal", "bench_append",
           "bench_load", "bench_campaign", "bench_crash_states", "bench_modes", "bench_recorded", "bench_catch",
           "bench_observer", "bench_jetstream",
           "format_table", "main"]

#: Sections in run order.
SECTIONS = ("append", "load", "campaign", "recorded", "jetstream", "catch", "observer")

QUICK = {"jetstream_n": 200, "append_n": 300, "append_long": 10_000, "load_sizes": (1_000, 100_000), "load_rounds": 3,
         "campaign_trials": 24, "campaign_repeats": 1, "powerloss_states": 8, "catch_seeds": (None,)}
FULL = {"jetstream_n": 1000, "append_n": 2000, "append_long": 100_000, "load_sizes": (1_000, 100_000, 1_000_000), "load_rounds": 5,
        "campaign_trials": 100, "campaign_repeats": 3, "powerloss_states": 32,
        "catch_seeds": (1, 2, 3, 4, 5)}


# --- main ----------------------------------------------------------------------------------------------


def run(sections: tuple[str, ...], cfg: dict[str, Any], directory: str,
        log: Callable[[str], None] = lambda s: None,
        agents: tuple[str, ...] = AGENT_MODES[:1]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run ``sections`` with config ``cfg`` (:data:`QUICK` / :data:`FULL`); returns (rows, details).  ``agents``:
    the real agents' modes of the recorded-kills bench (:data:`bench.recorded.AGENT_MODES`)."""
    rows: list[dict[str, Any]] = []
    details: dict[str, Any] = {}
    steps: list[tuple[str, Callable[[], tuple[list[dict[str, Any]], dict[str, Any]]]]] = []
    if "append" in sections:
        steps.append(("append", lambda: bench_append(directory, n=cfg["append_n"], long_journal=cfg["append_long"])))
    if "load" in sections:
        steps.append(("load", lambda: bench_load(directory, sizes=cfg["load_sizes"], rounds=cfg["load_rounds"])))
    if "campaign" in sections:
        steps.append(("campaign", lambda: bench_campaign(trials=cfg["campaign_trials"],
                                                         repeats=cfg["campaign_repeats"])))
        steps.append(("crash states", lambda: bench_crash_states(explore=cfg["powerloss_states"],
                                                                 rounds=1 if cfg is QUICK else 3)))
        steps.append(("modes", lambda: bench_modes(trials=12 if cfg is QUICK else 36, rounds=1 if cfg is QUICK else 3)))
    if "recorded" in sections:
        steps.append(("recorded", lambda: bench_recorded(rounds=1 if cfg is QUICK else 3,
                                                         modes=RECORDED_MODES[:3] + agents)))
    if "jetstream" in sections:
        steps.append(("jetstream", lambda: bench_jetstream(directory, n=cfg["jetstream_n"])))
    if "catch" in sections:
        steps.append(("catch", lambda: bench_catch(seeds=cfg["catch_seeds"])))
    if "observer" in sections:
        quick = cfg is QUICK
        steps.append(("observer", lambda: bench_observer((directory, "/dev/shm"), n=100 if quick else 300,
                                                         rounds=5 if quick else 11)))
    for name, step in steps:
        t = time.perf_counter()
        log(f"bench: {name} ...")
        try:
            r, d = step()
        except Exception as exc:  # a section that cannot run is reported, the others still run
            r = [row(name.split()[0], f"{name}: not measured", None, note=f"{type(exc).__name__}: {exc}"[:300])]
            d = {"error": f"{type(exc).__name__}: {exc}"}
        rows += r
        details.update(d)
        log(f"bench: {name} done in {time.perf_counter() - t:.1f} s")
    return rows, details


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        kind, *rest = argv[1:]
        if kind == "load":
            print(json.dumps(_child_load(*rest)))
            return 0
        raise SystemExit(f"unknown child {kind!r}")
    ap = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, 1 seed: under 2 minutes")
    ap.add_argument("--json", metavar="FILE", help="also write the rows, the machine and the details as JSON")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"sections to run (default: {','.join(SECTIONS)})")
    ap.add_argument("--dir", default=tempfile.gettempdir(),
                    help="directory on the file system under test for append and load (default: the temp dir)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--agents", default=None,
                    help="real agents in the recorded-kills bench, of claude-code,langgraph (default: claude-code in "
                         "a full run, none with --quick; '' for none; each left out with a line when not installed; "
                         "each adds minutes: Claude Code about 10 on 2 shared cores, LangGraph much more)")
    args = ap.parse_args(argv)
    sections = tuple(s.strip() for s in args.only.split(",") if s.strip())
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown section(s) {sorted(unknown)}; known: {', '.join(SECTIONS)}")
    names = {"claude-code": AGENT_MODES[0], "langgraph": AGENT_MODES[1]}
    agents = ("" if args.quick else "claude-code") if args.agents is None else args.agents
    agent_names = tuple(a.strip() for a in agents.split(",") if a.strip())
    if set(agent_names) - set(names):
        ap.error(f"unknown agent(s) {sorted(set(agent_names) - set(names))}; known: {', '.join(names)}")
    cfg = QUICK if args.quick else FULL
    machine = machine_info(args.dir)
    started = time.perf_counter()
    rows, details = run(sections, cfg, args.dir, log=lambda s: print(s, file=sys.stderr, flush=True),
                        agents=tuple(names[a] for a in agent_names))
    elapsed = time.perf_counter() - started
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    print(f"fiskj bench ({'quick' if args.quick else 'full'}, {elapsed:.0f} s): {machine['nproc']} x {machine['cpu']}, "
          f"Linux {machine['kernel']}, Python {machine['python']}, {machine['fs']} ({machine['dir']}), "
          f"load {machine['loadavg']} -> {machine['loadavg_end']}")
    print(format_table(rows, markdown=args.markdown))
    if details.get("recorded_breakdown"):
        print("\nRecorded kills vs real kills: where the time goes (thread time of the trials' work, summed over "
              "the jobs, per point judged; last round)")
        print(breakdown_table(details["recorded_breakdown"], markdown=args.markdown))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": machine, "mode": "quick" if args.quick else "full", "elapsed_s": elapsed,
                       "rows": rows, "details": details}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
