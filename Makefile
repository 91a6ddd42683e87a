# make test: the README's test command (what .ci/run runs).
# make coverage: the same suite under coverage, agent legs included (scripts/coverage.sh): prints the line and
#            branch report of fiskj/ and harness/, writes .coverage, htmlcov/ and coverage.json; slower than make test.
# make test-long: the same suite with the tests marked long too (--long: a real agent's variant campaigns).
# make fuzz: the long fuzz of the reader and fold (tests/test_fuzz.py, issue 9): a million
#            mutated journals with random generation; hours.  FUZZ_EXAMPLES=N to change the budget.
PYTHON ?= python3
FUZZ_EXAMPLES ?= 1000000

.PHONY: test test-long coverage fuzz

test:
	sh scripts/setup-test-deps.sh && $(PYTHON) -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest -n auto

test-long:
	sh scripts/setup-test-deps.sh && $(PYTHON) -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest -n auto --long

coverage:
	sh scripts/setup-test-deps.sh && $(PYTHON) -m venv .venv && .venv/bin/pip install -q -e '.[test]' && PYTHON=.venv/bin/python sh scripts/coverage.sh

fuzz:
	FISKJ_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PYTHON) -m pytest tests/test_fuzz.py -p no:cacheprovider -q --hypothesis-show-statistics
