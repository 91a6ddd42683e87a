"""The JSON Schemas in schemas/ (draft 2020-12) hold for what the project writes, and refuse what it refuses.

* ``schemas/journal-record.schema.json``: one fisk-ai v2 journal line.  Every line of a journal fiskj
  writes (a real ``fiskj run``) and of the golden journals validates; a line the codec refuses
  (:func:`fiskj.codec.decode_record`), made by breaking one rule of a valid line, is refused by the
  schema too, and a line it accepts with an unknown payload field is accepted.
* ``schemas/report.schema.json``: the JSON report.  The reports of ``run`` (with violations and groups),
  its results folder, ``gate``, ``merge`` and ``check`` validate; one with a wrong field does not.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from fiskj.codec import decode_record
from fiskj.errors import FiskjError
from harness.cli.main import main
from drift_text import BROKEN, drift_scenario

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "schemas"
GOLDEN = sorted((ROOT / "tests" / "data").glob("*.json")) + sorted((ROOT / "tests" / "data" / "fisk-ai").glob("*.json"))

DRIFT = drift_scenario("schema-drift")


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


RECORD = _validator("journal-record.schema.json")
REPORT = _validator("report.schema.json")


def _errors(validator: jsonschema.Draft202012Validator, doc: object) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in validator.iter_errors(doc)]


def _lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().splitlines(keepends=True) if line.strip()]


# --- journal records ---------------------------------------------------------------------------------


def test_every_line_of_a_journal_fiskj_writes_validates(tmp_path):
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "fiskj", "run", "--checkpoint", "--model", "scripted:7",
                           "count the files"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (journal,) = (tmp_path / "fisk-ai" / "runs").glob("*.json")
    lines = _lines(journal)
    kinds = {json.loads(line)["protocol"].rsplit(".", 1)[1] for line in lines}
    assert {"meta", "assistant", "tool_result", "terminal"} <= kinds
    for n, line in enumerate(lines, 1):
        assert _errors(RECORD, json.loads(line)) == [], f"{journal}:{n}"


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_every_line_of_the_golden_journals_validates(path):
    for n, line in enumerate(_lines(path), 1):
        decode_record(line)  # a valid line, as the reader says
        assert _errors(RECORD, json.loads(line)) == [], f"{path}:{n}"


def _breakages(record: dict) -> list[tuple[str, dict]]:
    """Lines that break one rule of docs/spec.md sections 3-5 each (what the codec refuses)."""
    key = next(k for k in record if k not in ("seq", "protocol"))
    payload = record[key]
    out = []

    def broken(what: str, change) -> None:
        r = copy.deepcopy(record)
        change(r)
        out.append((what, r))

    broken("seq 0", lambda r: r.update(seq=0))
    broken("seq a string", lambda r: r.update(seq="1"))
    broken("no seq", lambda r: r.pop("seq"))
    broken("a fourth member", lambda r: r.update(extra=1))
    broken("unknown protocol", lambda r: r.update(protocol="io.choria.fisk-ai.v1.session.other"))
    broken("payload not an object", lambda r: r.update({key: []}))
    other = "terminal" if key != "terminal" else "meta"
    broken("payload under another key", lambda r: r.update({other: r.pop(key)}))
    required = {"meta": ("version", "run_id", "created", "fingerprint"),
                "assistant": ("iteration", "message", "in_tokens", "out_tokens"),
                "user": ("message",), "tool_result": ("tool_use_id", "result"), "terminal": ("reason",)}[key]
    for field in required:
        broken(f"no {key}.{field}", lambda r, f=field: r[key].pop(f))
    for field in payload:
        if field in ("prompt", "interactive", "stop_reason", "cache_read_tokens", "cache_create_tokens", "remote",
                     "message", "reason", *required):
            broken(f"{key}.{field} null", lambda r, f=field: r[key].update({f: None}))
    if key == "meta":
        broken("version 3", lambda r: r[key].update(version=3))
        broken("version 0", lambda r: r[key].update(version=0))
        broken("fingerprint without model", lambda r: r[key]["fingerprint"].pop("model"))
        broken("max_tokens a string", lambda r: r[key]["fingerprint"].update(max_tokens="9"))
        broken("interactive a string", lambda r: r[key].update(interactive="yes"))
    if key == "assistant":
        broken("role user", lambda r: r[key]["message"].update(role="user"))
        broken("content a number", lambda r: r[key]["message"].update(content=3))
        broken("in_tokens negative", lambda r: r[key].update(in_tokens=-1))
        broken("iteration a float", lambda r: r[key].update(iteration=0.5))
    if key == "user":
        broken("role assistant", lambda r: r[key]["message"].update(role="assistant"))
    if key == "tool_result":
        broken("result of another type", lambda r: r[key]["result"].update(type="text"))
        broken("tool_use_id a number", lambda r: r[key].update(tool_use_id=7))
        broken("remote a string", lambda r: r[key].update(remote="no"))
    if key == "terminal":
        broken("empty reason", lambda r: r[key].update(reason=""))
        broken("message a number", lambda r: r[key].update(message=1))
    return out


def test_a_line_that_breaks_a_rule_the_reader_refuses_is_refused_by_the_schema_too():
    records = [json.loads(line) for path in GOLDEN for line in _lines(path)]
    assert {next(k for k in r if k not in ("seq", "protocol")) for r in records} == \
        {"meta", "assistant", "user", "tool_result", "terminal"}
    checked = 0
    for record in records:
        for what, bad in _breakages(record):
            line = (json.dumps(bad) + "\n").encode()
            with pytest.raises(FiskjError):
                decode_record(line)
            assert _errors(RECORD, bad), f"the schema accepts a line with {what}: {line[:200]!r}"
            checked += 1
        # a payload field fiskj does not know is kept by a reader: valid
        key = next(k for k in record if k not in ("seq", "protocol"))
        extended = copy.deepcopy(record)
        extended[key]["from_a_newer_writer"] = {"x": 1}
        decode_record((json.dumps(extended) + "\n").encode())
        assert _errors(RECORD, extended) == []
    assert checked > 200


# --- reports -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """The reports of a run with a violation, its results folder, check, merge and gate (one trial each)."""
    d = tmp_path_factory.mktemp("schema-reports")
    scenario = d / "schema-drift.toml"
    scenario.write_text(DRIFT, encoding="utf-8")
    out: dict[str, dict] = {}
    assert main(["run", str(scenario), "--subject", BROKEN, "--report-json", str(d / "run.json"),
                 "--results", str(d / "res"), "-q"]) == 1
    out["run"] = json.loads((d / "run.json").read_text(encoding="utf-8"))
    folder = Path(out["run"]["campaign"]["results"])
    out["results folder"] = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    assert main(["check", str(folder), "--report-json", str(d / "check.json"), "-q"]) == 1
    out["check"] = json.loads((d / "check.json").read_text(encoding="utf-8"))
    for i in range(2):  # the same report as shard i of 2: merge reads only the JSON
        shard = copy.deepcopy(out["run"])
        shard["campaign"]["shard"] = f"{i}/2"
        (d / f"s{i}.json").write_text(json.dumps(shard), encoding="utf-8")
    assert main(["merge", str(d / "s0.json"), str(d / "s1.json"), "--report-json", str(d / "merged.json"), "-q"]) == 1
    out["merge"] = json.loads((d / "merged.json").read_text(encoding="utf-8"))
    assert main(["gate", str(scenario), "--budget", "5", "--report-json", str(d / "gate.json"), "-q"]) == 0
    out["gate"] = json.loads((d / "gate.json").read_text(encoding="utf-8"))
    return out


@pytest.mark.parametrize("kind", ["run", "results folder", "check", "merge", "gate"])
def test_every_report_the_harness_writes_validates(reports, kind):
    report = reports[kind]
    assert _errors(REPORT, report) == []
    if kind != "gate":
        assert report["groups"] and report["violations"]  # the parts with the most structure are exercised


def test_the_report_schema_refuses_what_is_not_a_report(reports):
    good = reports["run"]
    for what, change in (("a verdict that is not one", lambda r: r.update(verdict="ok")),
                         ("no interrupted flag", lambda r: r.pop("interrupted")),
                         ("a trial count that is negative", lambda r: r.update(trials=-1)),
                         ("a row without its reproducer", lambda r: r["violations"][0].pop("reproduce")),
                         ("a run of unknown status", lambda r: r["runs"][0].update(status="passed")),
                         ("another format", lambda r: r.update(format="fiskj-harness-report/2")),
                         ("a shard that is not I/N", lambda r: r["campaign"].update(shard="half"))):
        bad = copy.deepcopy(good)
        change(bad)
        assert _errors(REPORT, bad), what
