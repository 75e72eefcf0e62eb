"""`BiLM.to_options` on a backend other than TensorFlow."""

import json
import os
import subprocess
import sys

import pytest


def test_writing_options_on_torch_imports_no_tensorflow(tmp_path):
    """Keras's serializer imports TensorFlow whenever it is installed (`Layer.get_config`):
    `to_options` and `write_options` on the torch backend must not go through it."""
    if os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow":
        pytest.skip("runs once, in the TensorFlow pass, where TensorFlow is installed")
    pytest.importorskip("torch")
    script = (
        "import sys\n"
        "from elmo_keras.models import BiLM\n"
        "from elmo_keras.weights import write_options\n"
        "model = BiLM(lstm_units=8, projection_dim=4, n_layers=1, filters=[[1, 4]],\n"
        "             char_embedding_dim=4, n_highway=1)\n"
        f"write_options(model.to_options(), {str(tmp_path / 'options.json')!r})\n"
        "print('tensorflow' in sys.modules)\n"
    )
    env = {**os.environ, "KERAS_BACKEND": "torch"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # (`import keras` itself imports JAX when it is installed: keras/src/callbacks/orbax_checkpoint)
    assert done.stdout.strip().splitlines()[-1] == "False"
    assert json.loads((tmp_path / "options.json").read_text())["lstm"]["dim"] == 8
