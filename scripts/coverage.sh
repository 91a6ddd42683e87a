#!/bin/sh
# The test suite under coverage: line and branch coverage of fiskj/ and harness/, including the code that runs
# in child processes (xdist workers, agent legs fresh or forked from the fork server, `fiskj-harness` run by a
# test, the tail reader child, race agents, the observer's Python part).  `make coverage` runs it; README.md
# "Coverage" and tests/README.md "Coverage" say what is measured and what is not.
#
#   sh scripts/coverage.sh                      the whole suite (pytest -n auto), as README command two runs it
#   sh scripts/coverage.sh tests/test_loop_*.py  any pytest arguments, added after -n auto
#   PYTHON=/path/to/python sh scripts/coverage.sh   the interpreter (default .venv/bin/python, else python3); it
#                                               needs the `test` extra (coverage >= 7.10.4 and its .pth file)
#
# The configuration is pyproject.toml's [tool.coverage.*].  Writes, in the repository root: .coverage (the
# combined data; the per-process .coverage.* files are merged into it), htmlcov/index.html and coverage.json
# (all ignored by git).  Prints the per-file report (Stmts, Miss, Branch, BrPart, Cover), then the line and
# branch coverage of fiskj/, harness/ and in total, and the wall time.  Exit status: pytest's (the reports are
# written either way); 2 when coverage itself fails.
set -eu
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
cov() { "$PYTHON" -m coverage "$@" || { echo "scripts/coverage.sh: coverage $1 failed" >&2; exit 2; }; }

# An outer measurement would swallow this one (its variables win in every child).
unset COVERAGE_PROCESS_CONFIG COVERAGE_PROCESS_START COVERAGE_FILE COVERAGE_RCFILE
cov erase
start=$(date +%s)
status=0
"$PYTHON" -m coverage run -m pytest -n auto "$@" || status=$?
elapsed=$(( $(date +%s) - start ))
cov combine -q
echo
cov report
cov html -q
cov json -q
"$PYTHON" - <<'EOF'
import json

files = json.load(open("coverage.json"))["files"]
rows = {}
for path, f in files.items():
    s = f["summary"]
    for package in (path.split("/")[0], "total"):
        row = rows.setdefault(package, [0, 0, 0, 0])
        row[0] += s["covered_lines"]
        row[1] += s["num_statements"]
        row[2] += s["covered_branches"]
        row[3] += s["num_branches"]


def pct(a, b):
    return f"{100.0 * a / b:5.1f}%" if b else "    -"


print(f"\n{'':8} {'lines':>22} {'branches':>22} {'both':>7}")
for package in sorted(p for p in rows if p != "total") + ["total"]:
    lc, ln, bc, bn = rows[package]
    print(f"{package:8} {lc:>7}/{ln:<7} {pct(lc, ln)} {bc:>7}/{bn:<7} {pct(bc, bn)} {pct(lc + bc, ln + bn)}")
EOF
echo
echo "coverage: data .coverage, report htmlcov/index.html and coverage.json (in $(pwd)); pytest exit $status, ${elapsed} s"
exit "$status"
