# Two entry points for a fresh clone: `make demo` and `make test`. Both create `.venv` first.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
LINTED := elmo_keras export tests benchmarks experiments README.md docs

.PHONY: demo test lint format clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/elmo-keras demo

# The linter runs first: a lint error fails `make test` (and so CI) in seconds.
test: lint
	$(VENV)/bin/python -m pytest -q
	KERAS_BACKEND=jax $(VENV)/bin/python -m pytest -q tests/layers

lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)

format: $(STAMP)
	$(VENV)/bin/ruff format $(LINTED)
	$(VENV)/bin/ruff check --fix $(LINTED)

clean:
	rm -rf $(VENV) build *.egg-info
