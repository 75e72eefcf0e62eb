"""The ONNX Runtime client: parity with Keras, batching by length, order, no TensorFlow."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from elmo_keras.runtime import OnnxEmbedder
from elmo_keras.text.char_ids import batch_to_char_ids
from elmo_keras.text.pretokenize import tokenize_python

SENTENCES = [
    ["A", "much", "longer", "sentence", "that", "goes", "on", "and", "on", "until", "it", "ends"],
    ["Hi"],
    [],
    ["The", "cat", "sat", "on", "the", "mat", "."],
    ["Déjà", "vu", ",", "naïve", "café", "!"],
    ["x" * 60, "tail"],
    ["Hi"],
]


def _keras_layers(bilm, sentence):
    """The sentence alone through the Keras model: `[n_layers + 1, n_tokens, 2P]`."""
    out = bilm(batch_to_char_ids([sentence]), training=False)
    return np.asarray(out["activations"])[0]


def test_embed_matches_keras_in_input_order(keras_bilm, onnx_model):
    embedder = OnnxEmbedder(onnx_model, batch_size=2)  # several batches of similar lengths
    assert embedder.n_layers == 2 and embedder.projection_dim == 16
    results = embedder.embed(SENTENCES)
    assert len(results) == len(SENTENCES)
    for sentence, layers in zip(SENTENCES, results, strict=True):
        assert layers.dtype == np.float32
        assert layers.shape == (3, len(sentence), 32)
        if sentence:
            np.testing.assert_allclose(layers, _keras_layers(keras_bilm, sentence), atol=1e-5)


def test_each_sentence_starts_from_zero_state(onnx_model):
    embedder = OnnxEmbedder(onnx_model, batch_size=64)
    together = embedder.embed(SENTENCES)
    for sentence, layers in zip(SENTENCES, together, strict=True):
        (alone,) = embedder.embed([sentence])
        np.testing.assert_allclose(layers, alone, atol=1e-5)


def test_empty_inputs(onnx_model):
    embedder = OnnxEmbedder(onnx_model)
    assert embedder.embed([]) == []
    (empty,) = embedder.embed([[]])
    assert empty.shape == (3, 0, 32) and empty.dtype == np.float32


def test_embed_text_tokenizes_in_python(onnx_model):
    embedder = OnnxEmbedder(onnx_model)
    tokens, layers = embedder.embed_text(["Hello, world!", "Hi"])
    assert tokens == [tokenize_python("Hello, world!"), ["Hi"]]
    np.testing.assert_allclose(layers[0], embedder.embed([tokens[0]])[0], atol=1e-6)


def test_run_returns_every_output(onnx_model):
    embedder = OnnxEmbedder(onnx_model)
    outputs = embedder.run(batch_to_char_ids([["a", "b"], ["c"]]))
    assert set(outputs) == set(embedder.output_names)
    np.testing.assert_array_equal(outputs["sequence_len"], [2, 1])
    with pytest.raises(ValueError, match="`char_ids` must have shape"):
        embedder.run(np.zeros((1, 2, 7), np.int32))
    with pytest.raises(ValueError, match="no state inputs"):
        embedder.run(batch_to_char_ids([["a"]]), state_h=np.zeros((1, 2, 2, 16), np.float32))


def test_argument_errors(onnx_model):
    with pytest.raises(ValueError, match="`batch_size` must be an integer >= 1"):
        OnnxEmbedder(onnx_model, batch_size=0)
    embedder = OnnxEmbedder(onnx_model)
    with pytest.raises(ValueError, match="`sentences` must be an iterable of sentences"):
        embedder.embed("not a list")
    with pytest.raises(ValueError, match=r"`sentences\[0\]` must be a sequence of tokens"):
        embedder.embed(["not tokenized"])


def test_runtime_never_imports_tensorflow_or_keras(onnx_model, tmp_path):
    """A fresh process that embeds with the client has imported neither TensorFlow nor Keras."""
    script = textwrap.dedent(
        f"""
        import json, sys
        from elmo_keras.runtime import OnnxEmbedder

        embedder = OnnxEmbedder({str(onnx_model)!r}, batch_size=2)
        layers = embedder.embed([["Hello", "world"], ["Hi"], []])
        shapes = [list(x.shape) for x in layers]
        heavy = sorted(m for m in sys.modules
                       if m.split(".")[0] in ("tensorflow", "keras", "tf_keras", "tf2onnx"))
        print(json.dumps({{"shapes": shapes, "heavy": heavy}}))
        """
    )
    env = dict(os.environ)
    env.pop("KERAS_BACKEND", None)
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["heavy"] == []
    assert report["shapes"] == [[3, 2, 32], [3, 1, 32], [3, 0, 32]]
