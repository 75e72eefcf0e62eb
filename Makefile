# Two entry points for a fresh clone: `make demo` and `make test`. Both create `.venv` first.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
LINTED := elmo_keras export tests benchmarks experiments README.md docs

.PHONY: demo test test-fast lint format clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/elmo-keras demo

# The linter runs first: a lint error fails `make test` (and so CI) in seconds.
# The suite runs in TEST_WORKERS processes (pytest-xdist), one test file per process at a time:
# most of its time is single-threaded Python (tracing graphs, tf2onnx conversions, subprocesses),
# so two processes on two cores take about half the wall time of one (10.9 against ~24 min here).
# Each process imports TensorFlow and converts its own session fixtures, so do not raise it
# beyond the cores you have; TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 2

# The second command runs the layers, the models, the weight files and the exactness tests again
# on Keras' JAX backend (what runs on a GPU); the TensorFlow-only tests skip there by marker.
JAX_TESTS := tests/layers tests/models tests/test_weights.py tests/training/test_jax_steps.py \
	tests/training/test_evaluation.py

# The third runs the layers, the models, the weight files and the AllenNLP drop-in
# (`elmo_keras.allennlp`) on Keras' PyTorch backend, in
# processes where importing TensorFlow or JAX fails (tests/conftest.py blocks them), as for a
# user of `pip install "elmo-keras[torch]"`.
TORCH_TESTS := tests/layers tests/models tests/test_weights.py tests/allennlp

test: lint
	$(VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile
	KERAS_BACKEND=jax $(VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(JAX_TESTS)
	KERAS_BACKEND=torch $(VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(TORCH_TESTS)

# The tier for working, not for CI: the TensorFlow pass without the tests marked `slow`
# (tests/slow_tests.py: those that start a process, install, build a wheel or run a notebook,
# and those over ~20 s), on TensorFlow only. `make test` still runs every test.
test-fast: lint
	$(VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)

format: $(STAMP)
	$(VENV)/bin/ruff format $(LINTED)
	$(VENV)/bin/ruff check --fix $(LINTED)

clean:
	rm -rf $(VENV) build *.egg-info
