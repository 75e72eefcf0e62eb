"""bfloat16 inference: a `BiLM` loaded under Keras's `mixed_bfloat16` policy (float32
variables, bfloat16 compute) stays close to float32, and float32 stays the exact default.

The reference is bilm-tf's own output for the fixture model (tests/fixtures/bilm_tf: the top
layer of its first batch, from zero state), and the float32 path for the other layers."""

import json

import h5py
import keras
import numpy as np
import pytest

from elmo_keras.models import BiLM
from elmo_keras.text import batch_to_char_ids

pytestmark = pytest.mark.tensorflow_only


@pytest.fixture(scope="module")
def first_batch(bilm_tf_fixture):
    """The fixture's first batch (3 sentences, 21-50 tokens) and bilm-tf's top layer for it."""
    folder = bilm_tf_fixture / "model"
    rows = json.loads((folder / "lm_embeddings_sentences.json").read_text())
    batch = [rows[k][0].split() for k in range(3)]
    expected = []
    for k, sentence in enumerate(batch):
        with h5py.File(folder / f"lm_embeddings_{k}.hdf5", "r") as handle:
            want = handle["0"][...]
        expected.append(np.concatenate([want[0], want[1]], axis=-1)[: len(sentence)])
    return folder, batch, expected


def _load(folder, **kwargs):
    return BiLM.from_bilm_tf(folder / "options.json", folder / "lm_weights.hdf5", **kwargs)


@pytest.fixture(scope="module")
def outputs(first_batch):
    """A `mixed_bfloat16` model is loaded and called first, then a default one: the second
    must not have picked up the first's policy. Returns what the tests check."""
    folder, batch, _ = first_batch
    ids = batch_to_char_ids(batch)
    bf16 = _load(folder, dtype="mixed_bfloat16")
    bf16_out = bf16(ids, training=False)["activations"]
    policy_after = keras.config.dtype_policy().name
    float32 = _load(folder)
    return {
        "bf16_dtypes": (bf16.compute_dtype, bf16.variable_dtype, bf16_out.dtype.name),
        "bf16": np.asarray(bf16_out, np.float32),
        "policy_after_bf16": policy_after,
        "float32_dtypes": (float32.compute_dtype, float32.variable_dtype),
        "float32": float32(ids, training=False)["activations"].numpy(),
    }


def _cosine(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.sum(a * b, -1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def test_mixed_bfloat16_bilm_is_close_to_float32_per_token(first_batch, outputs):
    _, batch, expected = first_batch
    # Float32 variables (the published weights load exactly), bfloat16 compute and outputs.
    assert outputs["bf16_dtypes"] == ("bfloat16", "float32", "bfloat16")
    got, float32 = outputs["bf16"], outputs["float32"]
    assert np.isfinite(got).all()
    for k, sentence in enumerate(batch):
        n = len(sentence)
        # Every layer, every real token, against the float32 model...
        cos = _cosine(got[k, :, :n], float32[k, :, :n])
        assert cos.min() > 0.99, (k, cos.min())
        # ...and the top layer against bilm-tf's own float32 output.
        top = _cosine(got[k, -1, :n], expected[k])
        assert top.min() > 0.99, (k, top.min())
        # bfloat16 is not float32: the test would notice the cast being skipped.
        assert np.abs(got[k, :, :n] - float32[k, :, :n]).max() > 1e-4


def test_float32_stays_the_exact_default_next_to_a_bf16_model(first_batch, outputs):
    _, batch, expected = first_batch
    assert outputs["policy_after_bf16"] == "float32"
    assert outputs["float32_dtypes"] == ("float32", "float32")
    got = outputs["float32"]
    assert got.dtype == np.float32
    for k, sentence in enumerate(batch):
        np.testing.assert_allclose(got[k, -1, : len(sentence)], expected[k], atol=1e-5, rtol=0)
