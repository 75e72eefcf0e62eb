"""Checks every layer should pass (in the spirit of keras-hub's layer test case)."""

import keras
import numpy as np


def check_config_round_trip(layer):
    config = layer.get_config()
    clone = layer.__class__.from_config(config)
    assert clone.get_config() == config
    return clone


def check_keras_file_round_trip(model, inputs, tmp_path, atol=0.0):
    """Saves a model as .keras, loads it, and checks the outputs are identical."""
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    before = keras.tree.flatten(model(inputs))
    after = keras.tree.flatten(loaded(inputs))
    for a, b in zip(before, after, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=atol)
    return loaded


def check_one_training_step(model, inputs, target_fn, learning_rate=0.01):
    """One gradient step on a loss: every trainable weight gets a finite, non-zero gradient."""
    import tensorflow as tf

    optimizer = keras.optimizers.SGD(learning_rate)
    with tf.GradientTape() as tape:
        loss = target_fn(model(inputs, training=True))
    grads = tape.gradient(loss, model.trainable_weights)
    for weight, grad in zip(model.trainable_weights, grads, strict=True):
        assert grad is not None, f"no gradient for {weight.path}"
        g = tf.convert_to_tensor(grad).numpy()
        assert np.all(np.isfinite(g)), f"non-finite gradient for {weight.path}"
    optimizer.apply(grads, model.trainable_weights)
    after = target_fn(model(inputs, training=True))
    return float(loss), float(after)
