# Two commands for a fresh machine:  `make run` (install + main job)  and  `make test` (install + tests).
# While editing: `make test-fast` (the tests not marked slow, in parallel; under 2 minutes on 2 cores), and after
# adding or changing tests `make durations DURATIONS_TESTS=tests/test_x.py` so the lanes know what they cost.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: install run test test-fast durations leaderboard bench bench-executors clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml scripts/install-torch.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	bash scripts/install-torch.sh $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,onnx,site]"
	$(BIN)/python -m pip install --quiet --no-deps useb==0.0.1
	touch $@

# The main job: the pretrained Bi-Encoder, and Cross-Encoder / Cross-Bi-Encoder trained on STS-B (their default
# source), on SentEval STS and every available USEB member (quick profile). It writes to the working store
# ./results (not tracked by git, empty on a fresh clone), so it really trains and evaluates on this machine.
# On a CPU, where it has bfloat16 instructions, it trains under bfloat16
# autocast (scripts/main-job-flags.py prints what it chose); the run's last line gives its total time.
run: install
	$(BIN)/harness run --models be,ce,cbe --tasks senteval,useb $$($(BIN)/python scripts/main-job-flags.py)

# pytest-xdist (test extras) spreads the tests over the cores; each test file stays on one worker, so a file's
# module fixtures (a Ray cluster, an installed example plugin) are built once. The fast lane uses it by default.
# The full lane runs in one process unless PYTEST_WORKERS is set (e.g. PYTEST_WORKERS=auto make test): under xdist
# one test (tests/test_concurrent_store.py, two concurrent runs) once stored different training numbers than its
# run alone, an order effect not yet explained, and CI must not depend on it.
PYTEST_WORKERS ?= 0
FAST_WORKERS ?= auto
test: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile

test-fast: install
	$(BIN)/python -m pytest -q -m "not slow" -n $(FAST_WORKERS) --dist loadfile

# The lanes come from measured durations (tests/lanes.py): a test is slow when tests/durations.json says it took
# over lanes.SLOW_SECONDS, when it is missing from the file (new, not measured yet) or when it is marked integration.
# This target measures the tests in one process and merges their seconds into the file (whole or not at all):
# DURATIONS_TESTS=tests/test_x.py measures one file (seconds), the default the whole suite (tens of minutes).
# Measure on a quiet machine or say in the commit what ran beside it; times under load are inflated.
DURATIONS_TESTS ?= tests
durations: install
	$(BIN)/python -m pytest -q -n 0 --record-durations tests/durations.json $(DURATIONS_TESTS)

# The committed tables in leaderboards/ from the committed records in published/ (`harness publish` adds records;
# your own tables: harness leaderboard --results results, written to results/leaderboards/).
# The paper tables of the matrices that have been run (published) go to leaderboards/matrices/.
PAPER_MATRICES := thesis-tables-6-7-6-8 thesis-table-6-10-unsupervised-quick topic-distillation-quick \
	nugget-paser-quick nugget-passages-quick subencoder-table-1

leaderboard: install
	$(BIN)/harness leaderboard --formats md,csv,html
	$(BIN)/harness plot leaderboard
	for matrix in $(PAPER_MATRICES); do \
		$(BIN)/harness leaderboard --matrix matrices/$$matrix.yaml --formats md,csv,html || exit 1; done

bench: install
	$(BIN)/python -m pip install --quiet -e ".[bench]"
	$(BIN)/python benchmarks/encode_speed.py

# Local executor against Ray with 1 and 2 workers on this machine (Ray comes with the test extras of `make install`).
bench-executors: install
	$(BIN)/python benchmarks/executor_scaling.py

clean:
	rm -rf $(VENV)
