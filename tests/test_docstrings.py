"""The `Example:` sections of the package's docstrings run as doctests, one test per module.

Examples see their module's globals plus `np`, `keras`, `tf` and `elmo_keras` (with
`elmo_keras.text` and `elmo_keras.models` imported). Examples that need files are marked
`# doctest: +SKIP` in the package and stay skipped.
"""

import doctest
import importlib
import io
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

import elmo_keras
import elmo_keras.models
import elmo_keras.text

PACKAGE = pathlib.Path(elmo_keras.__file__).parent
# Folders and single modules whose examples run; private modules (`_name.py`) are left out.
SOURCES = [
    "layers/*.py",
    "models/*.py",
    "text/*.py",
    "runtime/*.py",
    "batching.py",
    "embedder.py",
    "validation.py",
    "data.py",
    "corpus/*.py",
]
# Modules that import an optional dependency: skipped where it is not installed.
OPTIONAL = {"elmo_keras.runtime": "onnxruntime"}
# Examples known to fail, reported for a fix in the package; strict, so a fix shows up here.
KNOWN_FAILURES = {}
GLOBALS = {"np": np, "keras": keras, "tf": tf, "elmo_keras": elmo_keras}
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _modules():
    params = []
    for pattern in SOURCES:
        for path in sorted(PACKAGE.glob(pattern)):
            if path.stem.startswith("_") and path.stem != "__init__":
                continue
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
            name = ".".join(parts[:-1] if path.stem == "__init__" else parts)
            reason = KNOWN_FAILURES.get(name)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.mark.parametrize("module_name", _modules())
def test_docstring_examples(module_name):
    for prefix, requirement in OPTIONAL.items():
        if module_name.startswith(prefix):
            pytest.importorskip(requirement)
    module = importlib.import_module(module_name)
    tests = doctest.DocTestFinder().find(module, extraglobs=GLOBALS)
    tests = [t for t in tests if t.examples]
    if not tests:
        pytest.skip(f"{module_name} has no docstring examples")
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report = io.StringIO()
    for test in tests:
        runner.run(test, out=report.write)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{results.failed} failing example(s):\n{report.getvalue()}"
