"""`ElmoEmbedding` on character ids, on every Keras backend (`make test` runs it under JAX too):
the mix against NumPy, the mask, the layer contract, a frozen biLM, a `.keras` round trip."""

import numpy as np
import pytest

from elmo_keras.models import BiLM, ElmoEmbedding
from elmo_keras.text import batch_to_char_ids
from tests.test_case import as_numpy, check_keras_file_round_trip, run_layer_test

SENTENCES = [["The", "bank", "of", "the", "river", "."], ["I", "read", "it"], ["Hi"]]


@pytest.fixture(scope="module")
def ids():
    return batch_to_char_ids(SENTENCES)


def _tiny_bilm(**kwargs):
    bilm = BiLM(lstm_units=16, projection_dim=4, filters=[(1, 4), (2, 4)], n_highway=1, **kwargs)
    bilm.build()
    return bilm


def test_output_is_the_mix_of_the_bilm_layers(allennlp_fixture, ids):
    folder = allennlp_fixture
    elmo = ElmoEmbedding.from_bilm_tf(
        folder / "options.json", folder / "lm_weights.hdf5", dropout=0.0
    )
    out = elmo(ids)
    assert tuple(out.shape) == (3, 6, 32)
    mix = elmo.scalar_mixes[0]
    mix.scalar_weights.assign([0.3, -1.0, 2.0])
    mix.gamma.assign(0.7)
    activations = as_numpy(elmo.bilm(ids)["activations"], np.float64)
    weights = np.exp([0.3, -1.0, 2.0]) / np.exp([0.3, -1.0, 2.0]).sum()
    expected = 0.7 * np.einsum("l,bltd->btd", weights, activations)
    np.testing.assert_allclose(as_numpy(elmo(ids)), expected, atol=1e-6)
    np.testing.assert_array_equal(
        as_numpy(elmo.compute_mask(ids)),
        [[True] * 6, [True] * 3 + [False] * 3, [True] + [False] * 5],
    )


@pytest.mark.parametrize(
    "kwargs, output_shape",
    [
        (
            {"num_output_representations": 2, "l2_coef": 0.01, "do_layer_norm": True},
            [(2, 3, 8)] * 2,
        ),
        ({"pooling": "mean", "trainable_bilm": True}, (2, 8)),
    ],
)
def test_elmo_embedding_layer_on_char_ids(kwargs, output_shape):
    ids = batch_to_char_ids([["The", "bank", "."], ["Hi"]])
    check_elmo_layer(_tiny_bilm(), ids, output_shape, **kwargs)


def check_elmo_layer(bilm, inputs, output_shape, **kwargs):
    """`run_layer_test` of an `ElmoEmbedding` around `bilm` on a 2-row batch of lengths 3 and 1."""
    n_bilm = len(bilm.weights)
    n_mixes = kwargs.get("num_output_representations", 1)
    trainable_bilm = kwargs.get("trainable_bilm", False)
    mask = None if kwargs.get("pooling") else np.array([[1, 1, 1], [1, 0, 0]], bool)
    run_layer_test(
        ElmoEmbedding,
        {"bilm": bilm, "dropout": 0.1, **kwargs},
        inputs,
        output_shape,
        expected_output_mask=mask,
        expected_num_trainable_weights=2 * n_mixes + (n_bilm if trainable_bilm else 0),
        expected_num_non_trainable_weights=0 if trainable_bilm else n_bilm,
    )


def test_frozen_bilm_runs_in_inference_mode(ids):
    bilm = _tiny_bilm(dropout=0.9)
    frozen = ElmoEmbedding(bilm, dropout=0.0)
    np.testing.assert_array_equal(as_numpy(frozen(ids, training=True)), as_numpy(frozen(ids)))
    unfrozen = ElmoEmbedding(bilm, dropout=0.0, trainable_bilm=True)
    assert not np.allclose(as_numpy(unfrozen(ids, training=True)), as_numpy(unfrozen(ids)))


def test_keras_file_round_trip_on_char_ids(ids, tmp_path):
    import keras

    inputs = keras.Input((None, 50), dtype="int32")
    elmo = ElmoEmbedding(_tiny_bilm(), dropout=0.0, num_output_representations=2)
    first, second = elmo(inputs)
    model = keras.Model(inputs, [first, keras.layers.Dense(3)(second)])
    check_keras_file_round_trip(model, ids, tmp_path)
