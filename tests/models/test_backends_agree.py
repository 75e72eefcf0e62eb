"""TensorFlow and JAX give the same numbers, and the JAX path runs where TensorFlow cannot load.

This file runs on TensorFlow (`make test`'s first command). One module fixture writes random
biLMs as `.keras` files with their inputs and state, runs `tests/jax_child.py` once in a fresh
process with `KERAS_BACKEND=jax` and `import tensorflow` blocked, and reads back what that
process computed and saved. Tolerance 1e-5 (absolute) throughout: float32 on two backends that
order their sums differently.
"""

import json
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

from elmo_keras.models import BiLM, BiLMEmbedder
from elmo_keras.text import batch_to_char_ids
from tests.test_case import as_numpy

pytestmark = pytest.mark.tensorflow_only

ROOT = pathlib.Path(__file__).resolve().parents[2]
SENTENCES = [
    ["The", "bank", "raised", "its", "rates", "."],
    ["Rivers", "flood", "."],
    [],
    ["A", "much", "longer", "sentence", "with", "the", "bank", "of", "the", "river", "."],
    ["Hi"],
]
# Random configurations: layers, skips, clips, activations, highways, filters.
CONFIGS = {
    "tf_two_layers": dict(
        lstm_units=24, projection_dim=6, n_layers=2, filters=[(1, 4), (3, 6)], n_highway=2
    ),
    "tf_one_layer_tanh_no_clip": dict(
        lstm_units=16,
        projection_dim=5,
        n_layers=1,
        cell_clip=None,
        proj_clip=None,
        activation="tanh",
        filters=[(2, 5)],
        n_highway=0,
    ),
    "tf_three_layers_no_skip": dict(
        lstm_units=12,
        projection_dim=4,
        n_layers=3,
        use_skip_connections=False,
        cell_clip=0.5,
        proj_clip=0.3,
        filters=[(1, 3), (2, 3), (4, 5)],
        n_highway=1,
    ),
}
JAX_CONFIG = dict(lstm_units=20, projection_dim=7, n_layers=2, filters=[(1, 4), (2, 6)])
TOLERANCE = 1e-5


def _random_bilm(config, seed):
    bilm = BiLM(**config)
    bilm.build()
    rng = np.random.default_rng(seed)
    for variable in bilm.weights:
        variable.assign(rng.normal(0, 0.5, variable.shape).astype("float32"))
    return bilm


@pytest.fixture(scope="module")
def jax_run(tmp_path_factory, allennlp_fixture):
    workdir = tmp_path_factory.mktemp("backends")
    ids = batch_to_char_ids(SENTENCES)
    inputs, expected = {"char_ids": ids}, {}
    rng = np.random.default_rng(5)
    for seed, (name, config) in enumerate(CONFIGS.items()):
        bilm = _random_bilm(config, seed)
        bilm.save(workdir / f"{name}.keras")
        n = len(SENTENCES)
        shape = (n, 2, bilm.n_layers)
        state = {  # carried in: the state of an earlier window
            "state_h": rng.normal(0, 0.3, (*shape, bilm.projection_dim)).astype("float32"),
            "state_c": rng.normal(0, 0.3, (*shape, bilm.lstm_units)).astype("float32"),
        }
        inputs.update({f"{name}/{key}": value for key, value in state.items()})
        expected[name] = bilm({"char_ids": ids, **state})
    np.savez(workdir / "inputs.npz", **inputs)
    (workdir / "sentences.json").write_text(json.dumps(SENTENCES))
    (workdir / "jax_config.json").write_text(json.dumps(JAX_CONFIG))
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "tests.jax_child", str(workdir)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((workdir / "report.json").read_text())
    return workdir, report, expected


def test_the_jax_process_never_imported_tensorflow(jax_run):
    _, report, _ = jax_run
    assert report["backend"] == "jax"
    assert report["tensorflow_imported"] is False


@pytest.mark.parametrize("name", list(CONFIGS))
def test_keras_file_saved_on_tensorflow_gives_the_same_outputs_on_jax(jax_run, name):
    workdir, _, expected = jax_run
    got = np.load(workdir / "outputs_jax.npz")
    for key in ("activations", "state_h", "state_c"):
        want = as_numpy(expected[name][key])
        np.testing.assert_allclose(got[f"{name}/{key}"], want, atol=TOLERANCE, rtol=0)


def test_keras_file_saved_on_jax_gives_the_same_outputs_on_tensorflow(jax_run):
    workdir, _, _ = jax_run
    model = keras.saving.load_model(workdir / "jax_made.keras")
    ids = batch_to_char_ids(SENTENCES)
    want = np.load(workdir / "jax_made.npz")["activations"]
    for length_aware in (True, False):  # the TensorFlow fast path and the core path
        got = as_numpy(model(ids, length_aware=length_aware)["activations"])
        np.testing.assert_allclose(got, want, atol=TOLERANCE, rtol=0)


def test_embedder_on_jax_equals_the_embedder_on_tensorflow(jax_run, keras_bilm):
    workdir, report, _ = jax_run
    got = np.load(workdir / "embed_jax.npz")
    embedder = BiLMEmbedder(keras_bilm, batch_size=4)
    want = embedder.embed(SENTENCES)
    for index, array in enumerate(want):
        np.testing.assert_allclose(got[f"arr_{index}"], array, atol=TOLERANCE, rtol=0)
    _, text = embedder.embed_text(["The bank, by the river, closed."])
    np.testing.assert_allclose(got["text"], text[0], atol=TOLERANCE, rtol=0)
    # Two batches (4 and 1 sentences; the empty one needs no call), each its own bucket.
    assert len(report["compiled_shapes"]) == 2


def test_the_readme_example_on_jax_without_tensorflow_equals_tensorflows(jax_run):
    """`ElmoPreprocessor` then `ElmoEmbedding` under JAX (where `import tensorflow` fails) gives
    what `ElmoEmbedding(input_type="sentences")` gives on TensorFlow."""
    from elmo_keras.models import ElmoEmbedding

    workdir, report, _ = jax_run
    assert report["tensorflow_imported"] is False
    got = np.load(workdir / "embed_jax.npz")
    elmo = ElmoEmbedding.from_preset("mini_en", input_type="sentences", dropout=0.0)
    want = elmo(tf_strings(["The bank raised its rates.", "We sat on the river bank."]))
    np.testing.assert_allclose(got["front_door"], as_numpy(want), atol=TOLERANCE, rtol=0)
    np.testing.assert_array_equal(got["token_ids"], batch_to_char_ids([["The", "bank"], ["Hi"]]))


def tf_strings(texts):
    import tensorflow as tf  # noqa: PLC0415  (this side runs on TensorFlow)

    return tf.constant(texts)
