import keras
import numpy as np
import pytest

from elmo_keras.layers import Highway
from tests import numpy_reference as ref
from tests.layer_checks import check_config_round_trip, check_one_training_step


def test_highway_matches_numpy_reference():
    rng = np.random.default_rng(0)
    layer = Highway()
    x = rng.normal(size=(3, 5, 12)).astype("float32")
    layer.build(x.shape)
    for w in layer.weights:
        w.assign(rng.normal(size=w.shape).astype("float32"))
    got = np.asarray(layer(x))
    x64 = x.astype(np.float64)
    wc, bc = np.asarray(layer.carry.kernel, np.float64), np.asarray(layer.carry.bias, np.float64)
    wt = np.asarray(layer.transform.kernel, np.float64)
    bt = np.asarray(layer.transform.bias, np.float64)
    gate = ref.sigmoid(x64 @ wc + bc)
    expected = gate * np.maximum(x64 @ wt + bt, 0) + (1 - gate) * x64
    np.testing.assert_allclose(got, expected, atol=2e-5, rtol=1e-5)


def test_highway_initial_carry_bias_is_minus_two_and_weight_count():
    layer = Highway()
    layer.build((None, 7))
    np.testing.assert_array_equal(np.asarray(layer.carry.bias), np.full(7, -2.0))
    assert layer.count_params() == 2 * (7 * 7 + 7)


def test_highway_config_and_training_step():
    layer = Highway(activation="relu")
    clone = check_config_round_trip(layer)
    assert isinstance(clone, Highway)
    x = np.random.default_rng(1).normal(size=(4, 6)).astype("float32")
    model = keras.Sequential([keras.Input((6,)), Highway()])
    before, after = check_one_training_step(model, x, lambda y: keras.ops.mean(y**2))
    assert after < before


def test_highway_needs_known_features():
    with pytest.raises(ValueError, match="known last dimension"):
        Highway().build((None, None))
