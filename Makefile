# make test: the README's test command (what .ci/run runs).
# make fuzz: the long fuzz of the reader and fold (tests/test_fuzz.py, issue 9): a million
#            mutated journals with random generation; hours.  FUZZ_EXAMPLES=N to change the budget.
PYTHON ?= python3
FUZZ_EXAMPLES ?= 1000000

.PHONY: test fuzz

test:
	sh scripts/setup-test-deps.sh && $(PYTHON) -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest -n auto

fuzz:
	FISKJ_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PYTHON) -m pytest tests/test_fuzz.py -p no:cacheprovider -q --hypothesis-show-statistics
