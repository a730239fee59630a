# Entry points for a fresh clone: `make demo`, `make test` (linters, then every test) and
# `make test-fast` (linters, then the pure tests: no Ray, no network server).
# Both create .venv with a Python >= 3.12 (found by .ci/find-python) when it is missing.
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True
export RAY_USAGE_STATS_ENABLED := 0

.PHONY: demo test test-fast lint bench clean venv
venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || { PY=$$(.ci/find-python) && echo "creating $(VENV) with $$PY" && $$PY -m venv $(VENV); }
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/ta-actors run NVDA --date 2024-05-10 --offline --vendor synthetic --store $(CURDIR)/.ta-actors/demo.duckdb

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -q

test-fast: lint
	$(BIN)/python -m pytest -q -m "not ray and not server"

bench: $(STAMP)
	$(BIN)/python -m bench.store
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .ta-actors
