import keras
import numpy as np
import pytest

from elmo_keras.layers import Highway
from tests import numpy_reference as ref
from tests.test_case import as_numpy, keras_mask, run_layer_test


def test_highway_matches_numpy_reference():
    rng = np.random.default_rng(0)
    layer = Highway()
    x = rng.normal(size=(3, 5, 12)).astype("float32")
    layer.build(x.shape)
    for w in layer.weights:
        w.assign(rng.normal(size=w.shape).astype("float32"))
    got = as_numpy(layer(x))
    x64 = x.astype(np.float64)
    wc, bc = as_numpy(layer.carry.kernel, np.float64), as_numpy(layer.carry.bias, np.float64)
    wt = as_numpy(layer.transform.kernel, np.float64)
    bt = as_numpy(layer.transform.bias, np.float64)
    gate = ref.sigmoid(x64 @ wc + bc)
    expected = gate * np.maximum(x64 @ wt + bt, 0) + (1 - gate) * x64
    np.testing.assert_allclose(got, expected, atol=2e-5, rtol=1e-5)


def test_highway_initial_carry_bias_is_minus_two_and_weight_count():
    layer = Highway()
    layer.build((None, 7))
    np.testing.assert_array_equal(as_numpy(layer.carry.bias), np.full(7, -2.0))
    assert layer.count_params() == 2 * (7 * 7 + 7)


def test_highway_layer():
    x = np.random.default_rng(1).normal(size=(2, 3, 6)).astype("float32")
    run_layer_test(
        Highway,
        {"activation": "tanh", "kernel_initializer": "he_normal"},
        x,
        (2, 3, 6),
        expected_num_trainable_weights=4,
    )


def test_highway_passes_the_mask_on():
    x = np.ones((2, 3, 4), "float32")
    x[1, 2:] = 0.0
    out = Highway()(keras.layers.Masking(0.0)(x))
    np.testing.assert_array_equal(as_numpy(keras_mask(out)), [[1, 1, 1], [1, 1, 0]])


def test_highway_needs_known_features():
    with pytest.raises(ValueError, match="known last dimension"):
        Highway().build((None, None))
