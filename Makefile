# turnkeep developer entry points. `make local` and `make test` work on a fresh machine:
# each creates .venv and installs the project first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup local serve test test-real-model reliability lint bench clean sam-local-test sam-local-up

# Progress lines say what runs; pip prints what it collects and installs (a fresh install
# takes a minute or two).
$(STAMP): pyproject.toml
	@echo "== creating the virtual environment $(VENV) ($(PYTHON))"
	$(PYTHON) -m venv $(VENV)
	@echo "== upgrading pip"
	$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "== installing turnkeep and its dev tools into $(VENV) (about 1-2 minutes on a fresh machine)"
	$(BIN)/python -m pip install --progress-bar off -e ".[dev]"
	@touch $(STAMP)
	@echo "== $(VENV) is ready"

setup: $(STAMP)

## Run the main job locally: scripted-model turns on SQLite, streamed to the terminal.
local: $(STAMP)
	@echo "== running the demo: scripted-model turns on .local/turnkeep.db"
	$(BIN)/turnkeep demo

## Serve the HTTP API on 127.0.0.1 (PORT=8787): SQLite, scripted model, dev tokens.
PORT ?= 8787
serve: $(STAMP)
	$(BIN)/turnkeep serve --port $(PORT)

## Run the whole test suite, in TEST_WORKERS processes (pytest-xdist; a file's tests stay in one
## worker, so its module fixtures are built once). More workers than CI's 2 cores: much of the
## suite waits on subprocesses, servers and the browser rather than computing.
TEST_WORKERS ?= 3
test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

## A real model (not part of `make test`): prepares llama.cpp's llama-server and SmolLM2-135M once
## per machine in ~/.cache/turnkeep/real-model (the first run builds, ~10-15 min on 2 cores), then
## runs tests/real_model/ against it (tools/real_model/). A failed build or download fails.
test-real-model: $(STAMP)
	$(BIN)/python -m tools.real_model

## SAM local, for real (Docker + SAM CLI; not part of `make test`): builds x86_64, runs the
## scenario against Lambda containers, stops what it started. Exit 2 without Docker or SAM CLI.
## SAM_LOCAL_FLAGS=--skip-pull-image where images are present but cannot be pulled.
sam-local-test: $(STAMP)
	$(BIN)/python -m tools.sam_local test

## The same stack, kept up until Ctrl-C (for `sam local invoke` and curl against start-api).
sam-local-up: $(STAMP)
	$(BIN)/python -m tools.sam_local up

## The whole reliability suite: the crash matrix on SQLite, JSONL and AWS (moto), more kills and
## races (CI's `make test` runs the SQLite matrix only), then the report with its full figures.
reliability: $(STAMP)
	TURNKEEP_RELIABILITY=full $(BIN)/python -m pytest -q -m reliability --timeout 3600 tests/reliability
	$(BIN)/python bench/reliability_report.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy shared/turnkeep

## Benchmarks print figures (medians, ratios); BENCH_ARGS=--smoke for the quick CI mode.
bench: $(STAMP)
	@for b in bench/*.py; do echo "== $$b $(BENCH_ARGS)"; $(BIN)/python $$b $(BENCH_ARGS) || exit 1; done

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .local .aws-sam
