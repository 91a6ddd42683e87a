"""The HTML report (harness/report/html.py): what it marks, how it caps and escapes, and, in a real browser
(headless Chromium, installed by scripts/setup-test-deps.sh), that its timeline is drawn."""

import base64
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from types import SimpleNamespace

import pytest
from synth import Engine

from harness.campaign.result import CampaignResult, ScenarioRun, TrialResult
from harness.checkers import check_all
from harness.checkers.verdict import Verdict
from harness.history.model import CrashAck, CrashStateFacts, History
from harness.names import INVARIANTS
from harness.history.faults import fault_counts
from harness.report.html import MAX_EXCERPT, evidence_marks, render_html, timeline, trial_view
from harness.report.report import campaign_report, render_summary
from harness.report.results_dir import load_trial, make_results_dir, write_html_report, write_results
from harness.subject.contract import default_subject

HOSTILE = ('</script><script>document.body.setAttribute("data-pwned","1")</script>'
           '<img src=x onerror="document.body.setAttribute(\'data-pwned\',\'2\')">')


def _trial(index, broken, seed=1, hostile=False):
    """A kill, then a resume that (when ``broken``) runs an answered tool again: I2 unattributed_rerun."""
    eng = Engine()
    eng.leg(kill_after=5)
    eng.leg(rerun_answered=broken)
    h = eng.finish()
    h.scenario, h.seed = "kill-batch", seed
    verdicts = check_all(h)
    if hostile:  # untrusted bytes in the places a report shows: output, a written line, a note
        h.legs[1].stderr = "fiskj: " + HOSTILE
        h.notes.append(HOSTILE)
        data = (HOSTILE + "\n").encode()
        h.legs[1].trace.append({"n": 99, "pid": h.legs[1].pid, "op": "write", "path": eng.jpath, "fd": 4,
                                "offset": 9999, "len": len(data), "data": base64.b64encode(data).decode(),
                                "t": h.legs[1].t_end - 5})
    return TrialResult(index=index, scenario="kill-batch", scenario_path=None, seed=seed,
                       schedule=[{"kind": "kill", "n": 5}], origin="hypothesis", verdicts=verdicts, history=h,
                       elapsed_s=0.2, reproduce="fiskj-harness run kill-batch --seed 1", invariants=INVARIANTS,
                       faults=fault_counts(h), family="signals")


def _crash_state_trial(index):
    """A power-loss trial judged on its crash state alone (no leg): write n=8 acknowledged by n=10, lost."""
    line = b'{"seq":1,"protocol":"io.choria.fisk-ai.v1.session.meta"}\n'
    other = b'{"seq":2,"protocol":"io.choria.fisk-ai.v1.session.user"}\n'
    state = CrashStateFacts(id="p12.3", prefix_n=12, files={"/s/runs/r1.json": b""}, persisted="none",
                            acks=[CrashAck("/s/runs/r1.json", 0, len(line), line, 1, 8, 10),
                                  CrashAck("/s/runs/r1.json", len(line), len(line) + len(other), other, 1, 11, -1)])
    h = History(scenario="kill-batch", seed=9, schedule=[{"kind": "power_loss", "state": "p12.3", "prefix_n": 12}],
                run_id="r1", crash_state=state)
    detail = ("/s/runs/r1.json: record seq 1 (meta) bytes 0..57 acknowledged (write n=8, acknowledged by n=10) "
              "but not in the file")
    verdict = Verdict("I4", "no acknowledged record lost", "invalid",
                      {"summary": "1 acknowledged write(s) missing", "violations": [{"kind": "lost", "detail": detail}]},
                      "harness.checkers.i4_acknowledged")
    return TrialResult(index=index, scenario="kill-batch", scenario_path=None, seed=9, schedule=h.schedule,
                       origin="crash-state", verdicts=[verdict], history=h, elapsed_s=0.01, invariants=("I4",),
                       faults={"power_loss": 1}, family="power_loss")


def _results(root, trials):
    run = ScenarioRun(scenario=SimpleNamespace(name="kill-batch", path=None), seed=1)
    result = CampaignResult(trials=trials, errors=[], scenarios=[run], elapsed_s=1.0, jobs=1, subject=default_subject())
    folder = make_results_dir(root, "kill-batch")
    report = campaign_report(result, str(folder / "report.json"))
    return folder, report, write_results(folder, report, result, keep="failures", summary=render_summary(report))


# --- without a browser -----------------------------------------------------------------------


def test_evidence_marks_name_the_legs_events_seqs_tool_executions_and_model_calls_the_evidence_names():
    i4_lost = {"kind": "lost", "seq": 3, "leg": 2, "ack": {"seq": 3, "leg": 0, "write_n": 7, "fsync_n": 8},
               "detail": "record seq 3 acknowledged by leg 0 (fsync n=8) is missing"}
    assert evidence_marks(i4_lost) == {("seq", 3), ("leg", 2), ("leg", 0), ("ev", 0, 7), ("ev", 0, 8), ("n", 8)}
    i4_io = {"kind": "io_error_swallowed", "leg": 1, "failed": {"n": 12, "op": "fsync"}, "then": {"n": 14}}
    assert evidence_marks(i4_io) == {("leg", 1), ("ev", 1, 12), ("ev", 1, 14)}
    i2 = {"kind": "unattributed_rerun", "tool_use_id": "t1", "rerun": {"leg": 1, "attempt": 2},
          "previous": {"leg": 0, "attempt": 1}}
    assert evidence_marks(i2) == {("leg", 1), ("leg", 0), ("effect", "t1", 2), ("effect", "t1", 1)}
    i3 = {"kind": "unattributed_repeat", "repeat": {"leg": 1, "index": 4, "turn": 2, "t": 5}}
    assert evidence_marks(i3) == {("leg", 1), ("call", 4)}
    i8 = {"kind": "lock_overlap", "legs": [0, 1], "spans": [{"leg": 0, "first_n": 2, "last_n": None}]}
    assert evidence_marks(i8) == {("leg", 0), ("leg", 1), ("ev", 0, 2)}
    i7 = {"kind": "orphan_tool_result", "message": 3, "tool_use_id": "t9"}
    assert evidence_marks(i7) == {("tool", "t9")}
    assert evidence_marks(["not", {"a": object()}, None, 3]) == set()   # any shape, no error


def test_the_timeline_marks_the_write_and_fsync_of_a_lost_record_and_the_lane_of_the_leg_that_lost_it():
    eng = Engine()
    eng.leg(kill_after=5)
    eng.leg()
    h = eng.finish()
    leg0 = h.legs[0]
    write = next(ev for ev in leg0.trace if ev["op"] == "write" and b'{"seq":2,' in base64.b64decode(ev["data"]))
    fsync = next(ev for ev in leg0.trace if ev["op"] == "fsync" and ev["n"] > write["n"])
    evidence = {"summary": "1 acknowledged record lost", "violations": [
        {"kind": "lost", "seq": 2, "leg": 1, "ack": {"seq": 2, "leg": 0, "write_n": write["n"], "fsync_n": fsync["n"]}}]}
    tl = timeline(h, [{"invariant": "I4", "name": "no acknowledged record lost", "status": "invalid",
                       "evidence": evidence}])
    lanes = {lane["leg"]: lane for lane in tl["lanes"]}
    assert set(lanes) == {0, 1} and lanes[1]["m"] == [0] and lanes[0]["m"] == [0]
    marked = {(leg, ev["key"]) for leg, lane in lanes.items() for ev in lane["events"] if ev["m"]}
    assert marked == {(0, f"ev:{write['n']}"), (0, f"ev:{fsync['n']}")}
    assert tl["marked"] == 2 and tl["violations"][0]["kind"] == "lost"
    assert lanes[0]["exit"] == "SIGKILL" and lanes[1]["exit"] == "exit 0 (completed)"
    assert lanes[0]["locks"] and all(s[0] is not None and s[1] >= s[0] for s in lanes[0]["locks"])
    writes = sum(1 for ev in leg0.trace if ev["op"] == "write" and h.journal.is_journal(ev["path"], h.run_id))
    assert sum(1 for ev in lanes[0]["events"] if ev["k"] == "write") == writes > 0
    assert min(lane["start"] for lane in tl["lanes"]) == 0        # relative to the first leg's start


def test_a_crash_state_judged_without_a_leg_is_drawn_along_its_call_numbers_with_the_lost_write_marked():
    t = _crash_state_trial(0)
    tl = timeline(t.history, [v.to_json() for v in t.verdicts])
    (lane,) = tl["lanes"]
    assert tl["unit"] == "event" and lane["kind"] == "crash state p12.3"
    assert [(ev["t"], ev["k"]) for ev in lane["events"]] == [(8, "write"), (10, "fsync"), (11, "write"), (12, "fault")]
    assert [ev["key"] for ev in lane["events"] if ev["m"]] == ["ev:8", "ev:10"]   # seq 1 and "write n=8 ... n=10"


def test_a_lane_is_capped_keeping_the_marked_events_and_the_page_says_so():
    eng = Engine()
    eng.leg()
    h = eng.finish()
    leg = h.legs[0]
    n0 = max(ev["n"] for ev in leg.trace)
    for k in range(1, 1001):  # a thousand more journal writes
        leg.trace.append({"n": n0 + k, "pid": leg.pid, "op": "write", "path": eng.jpath, "fd": 4, "offset": 0,
                          "len": 1, "data": "eA==", "t": leg.t_end})
    verdict = {"invariant": "I8", "name": "one writer at a time", "status": "invalid",
               "evidence": {"violations": [{"kind": "write_without_lock", "leg": 0, "n": n0 + 777, "op": "write"}]}}
    tl = timeline(h, [verdict], max_events=50)
    (lane,) = tl["lanes"]
    assert lane["capped"] and len(lane["events"]) == 50 and lane["total"] > 1000
    assert [ev["key"] for ev in lane["events"] if ev["m"]] == [f"ev:{n0 + 777}"]
    assert {"model", "effect"} <= {ev["k"] for ev in lane["events"]}          # kept before plain writes
    view = trial_view({"trial": 3, "history": h, "verdicts": [verdict], "scenario": "s"})
    page = render_html({"verdict": "invalid", "trials": 1, "scenarios": {}, "groups": []}, [view])
    assert f"300 of {lane['total']} events drawn (capped at 300" in page


def test_histories_cannot_inject_markup_into_the_page(tmp_path):
    folder, _, written = _results(tmp_path, [_trial(0, True, hostile=True)])
    page = (folder / "report.html").read_text()
    assert written["html_error"] is None
    assert HOSTILE not in page and "<img" not in page
    assert page.count("<script") == 2 and page.count("</script>") == 2   # the data block and the drawing code
    data = page.split('<script id="fiskj-data" type="application/json">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and ">" not in data
    lanes = json.loads(data)["timelines"][0]["lanes"]
    (shown,) = [ev["d"]["bytes"] for ev in lanes[1]["events"] if ev["key"] == "ev:99"]
    assert shown.startswith(HOSTILE[:MAX_EXCERPT])                         # still there, as data
    # self-contained: nothing fetched from anywhere, and a policy that forbids it
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//|<link|@import|url\(""", page)
    assert "default-src 'none'" in page


# --- in the browser ------------------------------------------------------------------------------


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("chromium is not installed: run scripts/setup-test-deps.sh as root (the README's test command "
                    "and .ci/run do) to install the Debian packages the tests need", pytrace=False)
    return path


def _dump_dom(page, profile):
    """Load ``page`` in headless Chromium (no network, a fresh profile) and return the DOM after its scripts ran."""
    argv = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-extensions", "--mute-audio", f"--user-data-dir={profile}", "--window-size=1400,1000",
            "--dump-dom", page.as_uri()]
    env = {**os.environ, "HOME": str(profile)}  # nothing written to the real home
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0 and "</html>" in proc.stdout, f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}"
    return proc.stdout


class _Drawn(HTMLParser):
    """The drawn timelines of a dumped DOM: per timeline box its attributes, and per lane its events."""

    def __init__(self):
        super().__init__()
        self.boxes, self.body, self.stack, self.lane, self.box = {}, {}, [], None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "body":
            self.body = a
        if tag == "div" and "tl" in cls:
            self.box = a["id"]
            self.boxes[self.box] = {"attrs": a, "lanes": {}}
        if tag == "g" and "lane" in cls and self.box:
            self.lane = a["data-leg"]
            self.boxes[self.box]["lanes"][self.lane] = {"marked": "marked" in cls, "events": []}
        if "ev" in cls and self.lane is not None and self.box:
            self.boxes[self.box]["lanes"][self.lane]["events"].append((cls[1], a.get("data-key"), "marked" in cls))
        self.stack.append((tag, self.lane))

    def handle_endtag(self, tag):
        while self.stack:
            t, _ = self.stack.pop()
            if t == tag:
                break
        if tag == "g" and self.stack and self.stack[-1][1] != self.lane:
            self.lane = self.stack[-1][1]
        if tag == "svg":
            self.lane = None


def test_the_report_of_a_failing_campaign_draws_each_legs_lane_with_its_events_and_marks_the_evidence_in_chromium(
        tmp_path):
    folder, report, written = _results(tmp_path, [_trial(0, False), _trial(1, True, seed=4, hostile=True),
                                                  _trial(2, False), _crash_state_trial(3)])
    page = folder / "report.html"
    assert written["html"] == page and written["html_error"] is None
    dom = _dump_dom(page, tmp_path / "profile")
    drawn = _Drawn()
    drawn.feed(dom)
    assert "data-js-error" not in drawn.body, drawn.body.get("data-js-error")
    assert drawn.body.get("data-timelines-drawn") == "2" and "data-pwned" not in drawn.body
    assert set(drawn.boxes) == {"tl-1", "tl-3"}          # only the failing trials get a timeline
    box = drawn.boxes["tl-1"]
    history = load_trial(written["trials"][0]).history
    expected = timeline(history, [v for v in json.loads((written["trials"][0] / "trial.json").read_text())["verdicts"]])
    # what the page's script drew, against the history itself
    assert box["attrs"]["data-lanes"] == "2" == str(len(history.legs))
    assert box["attrs"]["data-events"] == str(expected["events"])
    for leg in history.legs:
        events = box["lanes"][str(leg.index)]["events"]
        kinds = [k for k, _, _ in events]
        journal_writes = sum(1 for ev in leg.trace if ev["op"] == "write" and history.journal.is_journal(ev["path"], history.run_id))
        assert kinds.count("k-write") == journal_writes > 0
        assert kinds.count("k-fsync") == sum(1 for ev in leg.trace if ev["op"] == "fsync")
        assert kinds.count("k-model") == sum(1 for c in history.model_calls if c.leg == leg.index) > 0
        assert kinds.count("k-effect") == sum(1 for e in history.effects if e.leg == leg.index) > 0
        assert kinds.count("k-fault") == (1 if leg.fault.kind == "kill" else 0)
    # the violation (tool a ran again in leg 1, unattributed) is marked: both executions and both lanes
    marked = {(leg, key) for leg, lane in box["lanes"].items() for _, key, on in lane["events"] if on}
    assert marked == {("0", "effect:a#1"), ("1", "effect:a#2")}
    assert box["attrs"]["data-marked"] == "2" and box["attrs"]["data-lanes-marked"] == "2"
    assert all(lane["marked"] for lane in box["lanes"].values())
    # the crash state judged without a leg: one lane along the call numbers, the lost write marked
    crash = drawn.boxes["tl-3"]
    assert (crash["attrs"]["data-lanes"], crash["attrs"]["data-events"], crash["attrs"]["data-marked"]) == ("1", "4", "2")
    assert [(k, key, on) for k, key, on in crash["lanes"]["none"]["events"]] == [
        ("k-write", "ev:8", True), ("k-fsync", "ev:10", True), ("k-write", "ev:11", False),
        ("k-fault", "fault:power_loss", False)]
    assert "traced call number (n)" in dom and ">n=10<" in dom
    # the evidence JSON beside it, the campaign table and the group
    assert re.search(r'<pre class="evidence" data-v="0">\{\s*"kind": "unattributed_rerun"', dom)
    row = re.search(r'<tr data-scenario="kill-batch">(.*?)</tr>', dom, re.S).group(1)
    assert row.count("1 invalid") == 2 and ">4<" in row                  # 4 trials; I2 and I4: one invalid each
    assert "I2 unattributed_rerun [kill]: 1 trial(s) in kill-batch" in dom
    assert "I4 lost [power_loss] record meta: 1 trial(s) in kill-batch" in dom
    assert 'href="#trial-1"' in dom and 'href="trials/0001-kill-batch/"' in dom
    # untrusted text is shown as text, never run
    assert "&lt;/script&gt;&lt;script&gt;document.body.setAttribute" in dom and "data-pwned" not in dom.split("<body")[1].split(">")[0]


def test_the_report_of_a_stored_folder_can_be_written_again(tmp_path):
    folder, _, written = _results(tmp_path, [_trial(0, True)])
    (folder / "report.html").unlink()
    out = write_html_report(folder)
    page = out.read_text()
    assert out == folder / "report.html" and 'id="tl-0"' in page and "I2 unattributed_rerun [kill]" in page
    one = write_html_report(written["trials"][0], tmp_path / "one.html")   # a trial folder: no report.json
    page = one.read_text()
    assert 'id="tl-0"' in page and "I2 unattributed_rerun [kill]" in page and 'href="kill-batch/' in page
