# `make compare` runs the default comparison; `make test` runs the whole suite; `make bench` runs
# the benchmark of the toolkit's loop against a plain model.fit script (experiments.bench.peer).
# Each creates .venv and installs the project into it first (re-done when setup.py changes).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv compare test test-unit test-integration bench clean

venv: $(STAMP)

$(STAMP): setup.py
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

compare: $(STAMP)
	$(BIN)/python -m experiments.compare --results_dir=runs/compare

bench: $(STAMP)
	$(BIN)/python -m experiments.bench.peer

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

test-unit: $(STAMP)
	$(BIN)/python -m pytest -q tests -m "not integration"

test-integration: $(STAMP)
	$(BIN)/python -m pytest -q tests -m integration

clean:
	rm -rf $(VENV) runs *.egg-info
