#!/bin/sh
# The load test (issue 26, tests/README.md "Under load"): the self-tests (every own mutant, every Node.js
# variant) RUNS times, then the whole default suite RUNS times, each beside PER_CORE busy processes per core
# (pytest --under-load, tests/conftest.py).  Every catch must hold: any failure stops it (exit 1).
#   sh scripts/load-test.sh [RUNS=3] [PER_CORE=2]      (from the repository, after README command two)
set -eu
runs=${1:-3}
per_core=${2:-2}
py=${PYTHON:-.venv/bin/python}
i=1
while [ "$i" -le "$runs" ]; do
    echo "== self-tests beside $per_core busy process(es) per core: run $i of $runs"
    start=$(date +%s)
    "$py" -m pytest -n auto -q -p no:cacheprovider --under-load "$per_core" tests/test_mutants.py tests/test_foreign_selftest.py
    echo "   run $i: $(( $(date +%s) - start )) s"
    i=$((i + 1))
done
i=1
while [ "$i" -le "$runs" ]; do
    echo "== whole suite beside $per_core busy process(es) per core: run $i of $runs"
    start=$(date +%s)
    "$py" -m pytest -n auto -q -p no:cacheprovider --under-load "$per_core"
    echo "   run $i: $(( $(date +%s) - start )) s"
    i=$((i + 1))
done
