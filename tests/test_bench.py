"""bench/run.py smoke test: every section's function runs on tiny sizes and yields the table's keys.

No timing is asserted: speed is what the bench measures (``python3 bench/run.py``), not what a test checks.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from fiskj.reader import read_state

_PATH = Path(__file__).resolve().parent.parent / "bench" / "run.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("fiskj_bench_run", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def _check_rows(bench, rows, section):
    assert rows, f"no rows from {section}"
    for r in rows:
        assert tuple(r) == bench.ROW_KEYS
        assert r["section"] == section and r["metric"]
        assert "not measured" not in r["metric"], r["note"]


def test_generated_journals_are_valid_runs_of_the_asked_size(bench, tmp_path):
    for n in (1, 2, 3, 10, 257):
        path = tmp_path / f"j{n}.json"
        size = bench.write_journal(path, n)
        state = read_state(path)
        assert state.records == n and size == path.stat().st_size
        assert state.pending is None and state.torn_tail is None
    assert 200 < size / n < 450  # "~300-byte records"


def test_append_section(bench, tmp_path):
    rows, details = bench.bench_append(str(tmp_path), n=4, sizes=(300, 4096), long_journal=30)
    _check_rows(bench, rows, "append")
    metrics = [r["metric"] for r in rows]
    assert any("median latency" in m for m in metrics) and any("throughput" in m for m in metrics)
    assert any("after 30 records" in m for m in metrics) and any("IO stubbed" in m for m in metrics)
    assert {"append_300", "append_4096", "append_cpu_us", "append_long"} <= set(details)
    assert 250 <= details["append_300"]["line_bytes"] <= 350 and 4000 <= details["append_4096"]["line_bytes"] <= 4200


def test_load_section_runs_its_children(bench, tmp_path):
    rows, details = bench.bench_load(str(tmp_path), sizes=(20, 10_000), rounds=1)
    _check_rows(bench, rows, "load")
    metrics = " ".join(r["metric"] for r in rows)
    assert "records/s" in metrics and "peak RSS" in metrics and "per-record cost" in metrics
    assert details["load_20"]["records"] == 20 and set(details["load_20"]["cpu_s"]) == set(bench._LOAD_MODES)


def test_campaign_section(bench):
    rows, details = bench.bench_campaign(trials=2, probe_n=1, tool_runs=3)
    _check_rows(bench, rows, "campaign")
    assert rows[0]["metric"].startswith("kill-every-event: trials/s") and details["campaign"]["trials"] >= 2
    assert any(r["metric"].strip().startswith("share:") for r in rows)


def test_crash_states_section(bench):
    rows, details = bench.bench_crash_states(explore=1, rounds=1, modes=("reference, IO seam",))
    _check_rows(bench, rows, "campaign")
    assert details["crash_states"]["states"] > 0
    assert [r["metric"].split(": ", 1)[1].split(",")[0] for r in rows[1:]] == [
        "crash states judged/s (cheap tier)", "full resumes/s (a recovery leg each)"]
    tiers = details["crash_states"]["tiers"]["reference, IO seam"]["report"]
    assert tiers["judged"] == tiers["distinct"] > tiers["explored"] == 1


def test_modes_section(bench):
    rows, details = bench.bench_modes(trials=1, rounds=1, scenario_name="kill-random")  # 1 trial a mode
    _check_rows(bench, rows, "campaign")
    assert [r["metric"].split(", ", 1)[1] for r in rows[:2]] == ["reference, IO seam", "reference, observed (black-box)"]
    if "foreign_start_ms" in details:  # node is installed: the floor under the foreign subject's rate
        assert rows[-2]["metric"].startswith("foreign subject: one `node agent.mjs` start")
        assert "ceiling" in rows[-1]["metric"] and rows[-1]["ratio"] > 0
        assert details["foreign_start_ms"] > 0 and details["foreign_ceiling_trials_per_s"] > 0


def test_catch_section(bench):
    rows, details = bench.bench_catch(names=["fingerprint-ignores-model"], budget_s=30)
    _check_rows(bench, rows, "catch")
    assert [r["metric"] for r in rows] == ["fingerprint-ignores-model"]
    assert details["fingerprint-ignores-model"]["caught"] == [True]


def test_table_format(bench):
    rows = [bench.row("load", "read_state 1,000 rec", 2.0, 1.0, unit="rec/s", target="<= 1.5x", met=False, note="n"),
            bench.row("campaign", "  share: tools", 4.0, None, unit="ms/trial", ratio=0.25)]
    text = bench.format_table(rows)
    assert "2.00x" in text and "NO" in text and "25%" in text
    assert bench.format_table(rows, markdown=True).startswith("| section | metric |")


def test_main_prints_the_table_and_writes_the_json(bench, tmp_path, monkeypatch, capsys):
    tiny = dict(bench.QUICK, append_n=4, append_long=0, load_sizes=(20, 60), load_rounds=1)
    monkeypatch.setattr(bench, "QUICK", tiny)
    out = tmp_path / "bench.json"
    assert bench.main(["--quick", "--only", "append,load", "--json", str(out), "--dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "fiskj bench (quick" in printed and "append" in printed and "read_state" in printed
    data = json.loads(out.read_text())
    assert data["mode"] == "quick" and {"nproc", "cpu", "kernel", "python", "fs"} <= set(data["machine"])
    assert data["rows"] and all(tuple(r) == bench.ROW_KEYS for r in data["rows"])
    assert {r["section"] for r in data["rows"]} == {"append", "load"}


def test_unknown_section_is_a_usage_error(bench, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--only", "nope"])


def test_recorded_section(bench):
    rows, details = bench.bench_recorded(rounds=1, modes=("reference, IO seam",))
    _check_rows(bench, rows, "recorded")
    assert rows[0]["metric"].endswith("recorded vs real kills, reference, IO seam")
    stats = details["recorded"]["reference, IO seam"]
    assert stats["points"] > stats["resumes"][0] > 0 and stats["old"][0] > 0 and stats["recorded"][0] > 0
    # where the time went: every part measured on its own, the resumes one per distinct state, fewer legs
    old, rec = (details["recorded_breakdown"][f"reference, IO seam / {way}"] for way in ("old", "recorded"))
    assert rec["resumes"] == stats["resumes"][0] and rec["points"] == old["points"] == stats["points"]
    assert rec["parts_ms_per_point"]["materializing states"] > 0 == old["parts_ms_per_point"]["materializing states"]
    assert old["parts_ms_per_point"]["checkers"] > 0 and rec["parts_ms_per_point"]["checkers"] > 0
    assert 0 < rec["legs"] < old["legs"] and 0 < rec["process_starts"] < old["process_starts"]
    assert rec["readings_started"] <= rec["readings_asked"] and old["readings_started"] == old["readings_asked"]
    table = bench.breakdown_table(details["recorded_breakdown"])
    assert "agent legs (waiting on the agent)" in table and "ref seam recorded" in table


def test_recorded_section_names_an_agent_that_is_not_installed(bench, monkeypatch, tmp_path):
    monkeypatch.setenv("FISKJ_CLAUDE_CODE", str(tmp_path / "no-claude"))
    rows, details = bench.bench_recorded(rounds=1, modes=("Claude Code, observed",))
    assert [r["metric"] for r in rows] == ["kill-every-event: crash points judged/s, recorded vs real kills, "
                                           "Claude Code, observed: not measured"]
    assert "not installed" in rows[0]["note"] and details["skipped"]["Claude Code, observed"] == rows[0]["note"]


def test_the_old_way_of_a_real_agent_kills_a_seeded_sample_of_the_points(bench):
    from bench.recorded import _old_sample

    plan = list(range(40))
    sample = _old_sample(plan, 8, 27)
    assert len(sample) == 8 and sample == sorted(sample) and sample == _old_sample(plan, 8, 27)
    assert _old_sample(plan, None, 27) == plan and _old_sample(plan[:5], 8, 27) == plan[:5]


def test_the_meter_counts_each_parts_own_time_once(bench):
    import time as _time
    import types

    from bench.meter import Meter

    mod = types.SimpleNamespace()
    mod.inner = lambda: _time.sleep(0.02)
    mod.outer = lambda: (_time.sleep(0.01), mod.inner())
    with Meter().wrap(mod, "outer", "outer").wrap(mod, "inner", "inner") as meter:
        t = _time.perf_counter()
        mod.outer()
        total = _time.perf_counter() - t
    assert meter.calls == {"outer": 1, "inner": 1} and dict(meter.under) == {("outer", ""): 1, ("inner", "outer"): 1}
    assert meter.seconds["outer"] >= 0.01 and meter.seconds["inner"] >= 0.02
    assert meter.seconds["outer"] + meter.seconds["inner"] <= total  # the inner call's time is not the outer's
    assert not hasattr(mod.outer, "__wrapped__")  # unwrapped after the block


def test_jetstream_section_measures_appends_beside_the_servers_publish_floor(bench, tmp_path):
    rows, details = bench.bench_jetstream(str(tmp_path), n=12, sizes=(300,))
    _check_rows(bench, rows, "jetstream")
    assert rows[0]["subject"] > 0 and rows[0]["floor"] > 0 and rows[0]["ratio"] > 0
    assert details["jetstream_300"]["n"] == 12 and 250 <= details["jetstream_300"]["line_bytes"] <= 350
