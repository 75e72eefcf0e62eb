"""`elmo-keras embed --backend jax` and `--backend torch` write what the TensorFlow backend
writes (within 1e-5).

Each run is a fresh process (Keras reads its backend once per process), started as a user
starts the command; this test process runs the same command on TensorFlow.
"""

import os

import h5py
import numpy as np
import pytest

from elmo_keras.cli import main
from tests.fresh_interpreter import run_cli

SENTENCES = ["The bank of the river .", "I read it", "", "A much longer line , with a comma ."]


def _read(path):
    with h5py.File(path, "r") as handle:
        return {name: handle[name][...] for name in handle}


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_another_backend_writes_the_same_hdf5(tmp_path, allennlp_fixture, backend):
    pytest.importorskip(backend)
    text = tmp_path / "in.txt"
    text.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    model = ["--options", str(allennlp_fixture / "options.json")]
    model += ["--weights", str(allennlp_fixture / "lm_weights.hdf5")]
    tf_out, jax_out = tmp_path / "tf.hdf5", tmp_path / f"{backend}.hdf5"
    assert main(["embed", *model, "--input", str(text), "--output", str(tf_out)]) == 0
    argv = ["embed", "--backend", backend, *model, "--input", str(text), "--output", str(jax_out)]
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    result = run_cli(*argv, env=env, timeout=240)
    assert "wrote 4 sentences" in result.stdout
    want, got = _read(tf_out), _read(jax_out)
    assert sorted(got) == sorted(want) == ["0", "1", "2", "3"]
    for name, array in want.items():
        assert got[name].shape == array.shape
        np.testing.assert_allclose(got[name], array, atol=1e-5, rtol=0)
