"""A `.keras` file saved on any of TensorFlow, JAX and PyTorch loads on the other two and gives
the same outputs (1e-5), and the PyTorch process imports neither TensorFlow nor JAX.

This file runs on TensorFlow (`make test`'s first command). One module fixture saves a seeded
biLM here, then runs `tests/backend_child.py` three times, each a fresh process where the other
backends cannot be imported: JAX (loads TensorFlow's file, saves its own), PyTorch (loads both,
saves its own), JAX again (loads PyTorch's). This process then loads JAX's and PyTorch's files.
Each biLM is called with state carried in, on sentences of several lengths.
"""

import json
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

from elmo_keras.text import batch_to_char_ids
from tests import backend_child

pytestmark = pytest.mark.tensorflow_only

ROOT = pathlib.Path(__file__).resolve().parents[2]
SENTENCES = [["The", "bank", "raised", "its", "rates", "."], [], ["Hi"], ["Rivers", "flood"]]
CONFIG = dict(lstm_units=12, projection_dim=5, n_layers=2, filters=[(1, 4), (2, 6)], n_highway=1)
TOLERANCE = 1e-5
CHILDREN = ("jax", "torch", "jax")  # the second JAX run loads PyTorch's file


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    pytest.importorskip("torch", reason="the PyTorch side needs `pip install torch`")
    pytest.importorskip("jax", reason="the JAX side needs JAX")
    workdir = tmp_path_factory.mktemp("keras_files")
    rng = np.random.default_rng(3)
    shape = (len(SENTENCES), 2, CONFIG["n_layers"])
    inputs = {
        "char_ids": batch_to_char_ids(SENTENCES),
        "state_h": rng.normal(0, 0.3, (*shape, CONFIG["projection_dim"])).astype("float32"),
        "state_c": rng.normal(0, 0.3, (*shape, CONFIG["lstm_units"])).astype("float32"),
    }
    np.savez(workdir / "inputs.npz", **inputs)
    (workdir / "config.json").write_text(json.dumps(CONFIG))
    backend_child.save_made("tensorflow", workdir, inputs)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for backend in CHILDREN:
        result = subprocess.run(
            [sys.executable, "-m", "tests.backend_child", backend, str(workdir)],
            cwd=ROOT,
            env={**env, "KERAS_BACKEND": backend},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-3000:]
    backend_child.load_others("tensorflow", workdir, inputs)
    return workdir


@pytest.mark.parametrize(
    "maker, loader",
    [(m, lo) for m in backend_child.BACKENDS for lo in backend_child.BACKENDS if m != lo],
)
def test_a_keras_file_loads_on_every_other_backend_with_the_same_outputs(workdir, maker, loader):
    want = np.load(workdir / f"{maker}_made.npz")
    got = np.load(workdir / f"{maker}_on_{loader}.npz")
    for key in backend_child.OUTPUTS:
        np.testing.assert_allclose(got[key], want[key], atol=TOLERANCE, rtol=0, err_msg=key)


def test_the_torch_process_imported_neither_tensorflow_nor_jax(workdir):
    report = json.loads((workdir / "torch_report.json").read_text())
    assert report == {"backend": "torch", "imported": ["torch"]}
    assert keras.config.backend() == "tensorflow"
