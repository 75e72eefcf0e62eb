"""Keras vs reloaded SavedModel vs ONNX Runtime on random architectures and random weights."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from export_helpers import SENTENCES, assert_outputs_close, keras_outputs, make_mix

from elmo_keras.runtime import OnnxEmbedder
from elmo_keras.text.char_ids import batch_to_char_ids

CONFIGS = {
    # Three layers, residual, no highway, tanh convolutions, 20 characters per token.
    "three_layers": {
        "lstm": {
            "dim": 24,
            "projection_dim": 8,
            "n_layers": 3,
            "cell_clip": 3,
            "proj_clip": 3,
            "use_skip_connections": True,
        },
        "char_cnn": {
            "embedding": {"dim": 3},
            "filters": [[1, 4], [3, 6]],
            "n_highway": 0,
            "n_characters": 262,
            "max_characters_per_token": 20,
            "activation": "tanh",
        },
    },
    # One layer, no residual, one highway.
    "one_layer": {
        "lstm": {
            "dim": 40,
            "projection_dim": 12,
            "n_layers": 1,
            "cell_clip": 3,
            "proj_clip": 3,
            "use_skip_connections": False,
        },
        "char_cnn": {
            "embedding": {"dim": 5},
            "filters": [[2, 8], [4, 8]],
            "n_highway": 1,
            "n_characters": 262,
            "max_characters_per_token": 50,
            "activation": "relu",
        },
    },
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_random_config_parity(name, tmp_path):
    from elmo_keras.export import export_onnx, export_savedmodel

    from elmo_keras.models import BiLM

    options = CONFIGS[name]
    keras.utils.set_random_seed(len(name))
    bilm = BiLM.from_options(options)
    chars = options["char_cnn"]["max_characters_per_token"]
    bilm(batch_to_char_ids([["warm", "up"]], max_characters_per_token=chars))
    n_layers = options["lstm"]["n_layers"]
    mix = make_mix(n_layers, weights=list(np.linspace(-0.5, 0.5, n_layers + 1)), gamma=0.7)
    export_savedmodel(bilm, tmp_path / "sm", scalar_mix=mix)
    export_onnx(bilm, tmp_path / "m.onnx", scalar_mix=mix)
    signature = tf.saved_model.load(str(tmp_path / "sm")).signatures["char_ids"]
    embedder = OnnxEmbedder(tmp_path / "m.onnx")
    for batch in ([SENTENCES[1]], SENTENCES[:2], SENTENCES):
        char_ids = batch_to_char_ids(batch, max_characters_per_token=chars)
        expected = keras_outputs(bilm, mix, char_ids)
        reloaded = {k: v.numpy() for k, v in signature(char_ids=tf.constant(char_ids)).items()}
        assert_outputs_close(reloaded, expected)
        onnx_out = embedder.run(char_ids)
        assert_outputs_close(onnx_out, expected)
