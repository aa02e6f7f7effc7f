# `make compare` runs the default comparison; `make test` runs the whole suite; `make bench` runs
# the benchmark of the toolkit's loop against a plain model.fit script (experiments.bench.peer).
# Each creates .venv and installs the project into it first (re-done when setup.py changes).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv compare test test-unit test-integration bench clean

venv: $(STAMP)

# A venv without pip (python3-venv was missing when it was made) is made again. pip shows each
# download: TensorFlow's wheel alone is several hundred MB and the installed venv about 2.7 GB.
$(STAMP): setup.py
	@if ! $(BIN)/python -m pip --version >/dev/null 2>&1; then \
	    $(PY) -c 'import sys; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 12))' || { \
	        echo "make: '$(PY)' is missing or not Python 3.10-3.12 (TensorFlow 2.21 needs one):" \
	             "try make PY=python3.11 $(MAKECMDGOALS)" >&2; exit 1; }; \
	    echo "make: creating $(VENV) with $$($(PY) --version)"; \
	    $(PY) -m venv --clear $(VENV) || { echo "make: '$(PY) -m venv' failed; on" \
	        "Debian/Ubuntu install python3-venv (or python3.X-venv) and rerun" >&2; exit 1; }; \
	fi
	$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "make: installing the project and its pinned packages into $(VENV) (TensorFlow 2.21," \
	     "Keras, TFDS, matplotlib, the Vertex SDK, pytest): several hundred MB to download," \
	     "about 2.7 GB on disk; minutes on a slow connection"
	$(BIN)/python -m pip install --progress-bar on -e '.[test]'
	@echo "make: $(VENV) is ready (activate it for bare python -m commands: . $(BIN)/activate)"
	touch $(STAMP)

compare: $(STAMP)
	$(BIN)/python -m experiments.compare --results_dir=runs/compare

bench: $(STAMP)
	$(BIN)/python -m experiments.bench.peer

# Two tests at a time (pytest-xdist): one at a time leaves most of a core idle on 2 vCPUs while
# a test waits on its processes. No test rests on timing (timing goals are benchmarks), so none
# needs the machine to itself. TEST_WORKERS=1 runs everything one at a time.
TEST_WORKERS ?= 2
PARALLEL := $(if $(filter 1,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist worksteal)
# The tests that marker expression $(1) selects ("" for all). --durations: the slowest tests,
# where the suite's time goes (CI's log).
define suite
	$(BIN)/python -m pytest -q tests $(PARALLEL) --durations=25 $(if $(1),-m "$(1)")
endef

test: $(STAMP)
	$(call suite,)

test-unit: $(STAMP)
	$(call suite,not integration)

test-integration: $(STAMP)
	$(call suite,integration)

clean:
	rm -rf $(VENV) runs *.egg-info
