import numpy as np
import pytest

from elmo_keras.layers import ScalarMix
from tests import numpy_reference as ref
from tests.test_case import as_numpy, run_layer_test


def layers_and_mask(seed=0):
    rng = np.random.default_rng(seed)
    layers = rng.normal(size=(3, 3, 5, 6)).astype("float32") * 2 + 1
    mask = np.arange(5)[None, :] < np.array([5, 2, 3])[:, None]
    layers = layers * mask[:, None, :, None]
    return layers, mask


@pytest.mark.parametrize("do_layer_norm", [False, True])
def test_scalar_mix_matches_bilm_tf_formula(do_layer_norm):
    # The weights and gamma of bilm-tf's own test (tests/test_elmo.py).
    layers, mask = layers_and_mask()
    mix = ScalarMix(
        3, do_layer_norm=do_layer_norm, initial_scalar_weights=[0.1, 0.3, 0.5], initial_gamma=1.1
    )
    got = as_numpy(mix(layers, mask=mask))
    expected = ref.scalar_mix(
        layers.astype(np.float64), mask, np.array([0.1, 0.3, 0.5]), 1.1, do_layer_norm
    )
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)
    # A list of layers gives the same result as the stacked tensor.
    as_list = as_numpy(mix([layers[:, j] for j in range(3)], mask=mask))
    np.testing.assert_allclose(as_list, got, atol=1e-6)


def test_scalar_mix_layer_norm_ignores_padding_values():
    layers, mask = layers_and_mask(1)
    mix = ScalarMix(3, do_layer_norm=True)
    a = as_numpy(mix(layers, mask=mask))
    noisy = layers.copy()
    noisy[~np.broadcast_to(mask[:, None, :], noisy.shape[:3])] = 1e3
    b = as_numpy(mix(noisy, mask=mask))
    np.testing.assert_allclose(a[mask], b[mask], atol=1e-5)


def test_scalar_mix_top_only_and_l2():
    layers, mask = layers_and_mask(2)
    mix = ScalarMix(3, use_top_only=True, initial_gamma=0.88)
    np.testing.assert_allclose(as_numpy(mix(layers)), 0.88 * layers[:, -1], atol=1e-6)
    reg = ScalarMix(3, l2_coef=0.5, initial_scalar_weights=[1.0, 2.0, 0.0])
    reg(layers)
    np.testing.assert_allclose(float(sum(reg.losses)), 0.5 * (1 + 4), rtol=1e-6)


@pytest.mark.parametrize("do_layer_norm", [False, True])
def test_scalar_mix_layer(do_layer_norm):
    layers, mask = layers_and_mask(3)
    run_layer_test(
        ScalarMix,
        {
            "n_layers": 3,
            "do_layer_norm": do_layer_norm,
            "l2_coef": 0.1,
            "initial_scalar_weights": [0.5, 0.0, -1.0],
            "initial_gamma": 0.9,
            "layer_norm_epsilon": 1e-10,
        },
        layers,
        (3, 5, 6),
        mask=mask,
        expected_num_trainable_weights=2,
    )


def test_scalar_mix_layer_on_a_list_of_layers():
    layers, mask = layers_and_mask(4)
    run_layer_test(
        ScalarMix,
        {"n_layers": 3},
        [layers[:, j] for j in range(3)],
        (3, 5, 6),
        mask=mask,
        expected_num_trainable_weights=2,
        run_keras_round_trip=False,  # the same save path as `test_scalar_mix_layer`
        run_mixed_precision_check=False,
        run_training_check=False,  # it runs without a mask: the xfail below
    )


def test_scalar_mix_on_a_list_of_layers_without_a_mask():
    # Keras fills `mask` with one None per list entry: that is no mask.
    layers, _ = layers_and_mask(4)
    out = ScalarMix(3)([layers[:, j] for j in range(3)])
    np.testing.assert_allclose(as_numpy(out), layers.mean(axis=1), atol=1e-6)


def test_scalar_mix_on_a_list_of_layers_with_their_masks():
    # One mask per entry (what Keras passes when the layers carry masks): the positions' mask.
    layers, mask = layers_and_mask(4)
    mix = ScalarMix(3, do_layer_norm=True)
    listed = mix([layers[:, j] for j in range(3)], mask=[mask] * 3)
    stacked = mix(layers, mask=mask)
    np.testing.assert_allclose(as_numpy(listed), as_numpy(stacked), atol=1e-6)
    expected = ref.scalar_mix(layers.astype(np.float64), mask, np.zeros(3), 1.0, True)
    np.testing.assert_allclose(as_numpy(listed), expected, atol=1e-5)


@pytest.mark.tensorflow_only  # the JAX twin is in test_backends.py
def test_scalar_mix_gradients_reach_both_weights():
    import tensorflow as tf

    layers, mask = layers_and_mask(3)
    mix = ScalarMix(3)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(mix(layers, mask=mask) * np.arange(6, dtype="float32"))
    grads = tape.gradient(loss, mix.trainable_weights)
    assert all(np.any(as_numpy(g) != 0) for g in grads)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_layers": 0}, "`n_layers` must be an integer >= 1"),
        ({"n_layers": 3, "initial_scalar_weights": [1.0]}, "`initial_scalar_weights` must have"),
        ({"n_layers": 3, "l2_coef": -1}, "`l2_coef` must be a number >= 0"),
    ],
)
def test_scalar_mix_argument_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ScalarMix(**kwargs)


def test_scalar_mix_wrong_layer_count():
    with pytest.raises(ValueError, match="expects 3 layers"):
        ScalarMix(3)([np.ones((1, 2, 4), "float32")] * 2)


def test_old_name_num_layers_still_works_and_warns():
    with pytest.warns(DeprecationWarning, match="num_layers"):
        old = ScalarMix(num_layers=3, name="mix")
    assert old.get_config() == ScalarMix(n_layers=3, name="mix").get_config()
    with pytest.warns(DeprecationWarning, match="n_layers"):
        assert old.num_layers == 3
    with pytest.raises(ValueError, match="both `n_layers` and its old name `num_layers`"):
        ScalarMix(n_layers=3, num_layers=2)


def test_a_config_saved_with_num_layers_still_loads():
    config = ScalarMix(2).get_config()
    config["num_layers"] = config.pop("n_layers")
    assert ScalarMix.from_config(config).n_layers == 2
