import keras
import numpy as np
import pytest

from elmo_keras.layers import CharCNN
from tests import numpy_reference as ref
from tests.test_case import as_numpy, run_layer_test

FILTERS = [(1, 4), (2, 6), (3, 8)]
# One small configuration for most tests: under JAX every new weight shape costs a compilation.
SMALL = {"char_embedding_dim": 5, "filters": FILTERS, "n_highway": 2, "projection_dim": 7}


def random_ids(rng, batch, tokens, lengths):
    ids = np.zeros((batch, tokens, 50), "int32")
    for b, length in enumerate(lengths):
        for t in range(length):
            n = rng.integers(1, 10)
            ids[b, t, 0] = 259
            ids[b, t, 1 : n + 1] = rng.integers(1, 257, size=n)
            ids[b, t, n + 1] = 260
            ids[b, t, n + 2 :] = 261
    return ids


def layer_weights64(layer):
    emb = as_numpy(layer.char_embedding.embeddings, np.float64)
    convs = [
        (as_numpy(c.kernel, np.float64), as_numpy(c.bias, np.float64)) for c in layer.convolutions
    ]
    highways = [
        tuple(
            as_numpy(v, np.float64)
            for v in (h.carry.kernel, h.carry.bias, h.transform.kernel, h.transform.bias)
        )
        for h in layer.highways
    ]
    proj = (
        as_numpy(layer.projection.kernel, np.float64),
        as_numpy(layer.projection.bias, np.float64),
    )
    return emb, convs, highways, proj


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_char_cnn_matches_numpy_reference(activation):
    rng = np.random.default_rng(0)
    layer = CharCNN(**SMALL, activation=activation)
    ids = random_ids(rng, 3, 4, [4, 2, 0])
    got = as_numpy(layer(ids))
    emb, convs, highways, proj = layer_weights64(layer)
    expected = ref.char_cnn(ids.reshape(-1, 50), emb, convs, highways, proj, activation)
    expected = expected.reshape(3, 4, 7)
    real = ids[..., 0] != 0
    np.testing.assert_allclose(got[real], expected[real], atol=1e-5, rtol=1e-5)
    # Padding tokens give zero vectors and are masked.
    np.testing.assert_array_equal(got[~real], 0.0)
    np.testing.assert_array_equal(as_numpy(layer.compute_mask(ids)), real)


def test_char_cnn_unfolded_convolution_matches_keras_conv1d():
    # The layer computes each convolution as one matrix product over unfolded windows; Keras's
    # own Conv1D, run on the same weights, is the reference. Widths 1 and 50 (one position)
    # are the edge cases of the unfolding.
    layer = CharCNN(char_embedding_dim=3, filters=[(1, 2), (4, 3), (50, 2)], projection_dim=4)
    layer.build()
    embedded = np.random.default_rng(1).standard_normal((6, 50, 3)).astype("float32")
    for conv in layer.convolutions:
        got = as_numpy(layer._convolve(conv, embedded))
        expected = as_numpy(conv(embedded))
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(
    keras.config.backend() != "tensorflow",
    reason="backend-independent arithmetic, checked in the TensorFlow run (building the "
    "published sizes costs ~7 s of JAX compilations)",
)
def test_char_cnn_weight_count_matches_the_published_formula():
    layer = CharCNN()  # the published configuration
    layer.build((None, None, 50))
    # REFERENCE.md section 2: char 4,176 (261 rows + padding row here); CNN 199,168;
    # highway 2 x 2 x (2048^2 + 2048); projection 2048 x 512 + 512.
    assert layer.char_embedding.count_params() == 262 * 16
    assert sum(c.count_params() for c in layer.convolutions) == 199_168
    assert sum(h.count_params() for h in layer.highways) == 2 * 2 * (2048 * 2048 + 2048)
    assert layer.projection.count_params() == 2048 * 512 + 512


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_char_cnn_layer(activation):
    ids = random_ids(np.random.default_rng(3), 2, 3, [3, 1])
    run_layer_test(
        CharCNN,
        {
            **SMALL,
            "activation": activation,
            "n_characters": 300,
            "max_characters_per_token": 50,
            "kernel_initializer": "he_uniform",
        },
        ids,
        (2, 3, 7),
        expected_output_mask=ids[..., 0] != 0,
        # embedding + 3 convolutions x (kernel, bias) + 2 highways x (2 x 2) + projection (2)
        expected_num_trainable_weights=1 + 3 * 2 + 2 * 4 + 2,
    )


def test_char_cnn_mixed_precision_runs():
    layer = CharCNN(**SMALL, dtype="mixed_float16")
    ids = random_ids(np.random.default_rng(4), 2, 3, [3, 1])
    out = layer(ids)
    assert keras.backend.standardize_dtype(out.dtype) == "float16"
    assert np.all(np.isfinite(as_numpy(out, np.float32)))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"projection_dim": 0},
            "`projection_dim` must be an integer >= 1. Received: projection_dim=0",
        ),
        ({"activation": "gelu"}, "`activation` must be one of ('relu', 'tanh')"),
        ({"filters": [(1, 0)]}, "`filters` must be a non-empty list"),
        ({"filters": "abc"}, "`filters` must be a list of"),
        ({"filters": [(60, 2)]}, "filter width must be <= `max_characters_per_token`"),
    ],
)
def test_char_cnn_argument_errors(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        CharCNN(**kwargs)


def test_char_cnn_rejects_wrong_number_of_characters_per_token():
    layer = CharCNN(**SMALL)
    with pytest.raises(ValueError, match="50"):
        layer(np.zeros((1, 2, 30), "int32"))
