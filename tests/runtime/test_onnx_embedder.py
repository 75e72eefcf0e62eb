"""The ONNX Runtime client: parity with Keras, batching by length, order, no TensorFlow."""

import os
import textwrap

import numpy as np
import pytest

from elmo_keras.runtime import OnnxEmbedder
from elmo_keras.runtime.onnx_embedder import ARENA_SHRINKAGE
from elmo_keras.text.char_ids import batch_to_char_ids
from elmo_keras.text.tokenization import tokenize_python
from tests.fresh_interpreter import script_report

SENTENCES = [
    ["A", "much", "longer", "sentence", "that", "goes", "on", "and", "on", "until", "it", "ends"],
    ["Hi"],
    [],
    ["The", "cat", "sat", "on", "the", "mat", "."],
    ["Déjà", "vu", ",", "naïve", "café", "!"],
    ["x" * 60, "tail"],
    ["Hi"],
    ["the", "cat", "and", "the", "dog", "and", "the", "cat"],  # repeated tokens
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
    report = script_report(script, env=env, cwd=tmp_path, timeout=120)
    assert report["heavy"] == []
    assert report["shapes"] == [[3, 2, 32], [3, 1, 32], [3, 0, 32]]


@pytest.fixture(scope="module")
def char_ids_model(keras_bilm, tmp_path_factory):
    """The same biLM exported in the older `char_ids` input form (models written before)."""
    from elmo_keras.export import export_onnx

    path = tmp_path_factory.mktemp("char_ids_form") / "allennlp_char_ids.onnx"
    export_onnx(keras_bilm, path, input_form="char_ids")
    return path


def test_old_char_ids_model_still_works(keras_bilm, char_ids_model):
    embedder = OnnxEmbedder(char_ids_model, batch_size=3)
    assert embedder.input_form == "char_ids" and embedder.metadata["input_form"] == "char_ids"
    assert [value.name for value in embedder._session.get_inputs()] == ["char_ids"]
    for sentence, layers in zip(SENTENCES, embedder.embed(SENTENCES), strict=True):
        assert layers.shape == (3, len(sentence), 32)
        if sentence:
            np.testing.assert_allclose(layers, _keras_layers(keras_bilm, sentence), atol=1e-5)
    with pytest.raises(ValueError, match="`run_tokens` needs a model of the `token_index`"):
        embedder.run_tokens(np.zeros((1, 50), np.int32), np.zeros((1, 1), np.int32))


class _CountingSession:
    """Wraps an `InferenceSession`, recording the feeds of each `run`."""

    def __init__(self, session):
        self._session, self.feeds = session, []

    def run(self, names, feeds, run_options=None):
        self.feeds.append(feeds)
        return self._session.run(names, feeds, run_options)


def test_embed_batch_is_one_call_with_each_distinct_token_once(keras_bilm, onnx_model):
    embedder = OnnxEmbedder(onnx_model)
    assert embedder.input_form == "token_index"
    embedder._session = _CountingSession(embedder._session)
    batch = [SENTENCES[7], ["Hi"], [], ["cat", "cat", "Hi"]]
    results = embedder.embed_batch(batch)
    (feeds,) = embedder._session.feeds
    distinct = {token for sentence in batch for token in sentence}
    assert feeds["token_char_ids"].shape == (len(distinct), 50)
    assert feeds["token_index"].shape == (4, 8) and (feeds["token_index"][2] == -1).all()
    for sentence, layers in zip(batch, results, strict=True):
        assert layers.shape == (3, len(sentence), 32)
        if sentence:
            np.testing.assert_allclose(layers, _keras_layers(keras_bilm, sentence), atol=1e-5)
    assert [x.shape for x in embedder.embed_batch([[], []])] == [(3, 0, 32)] * 2
    assert len(embedder._session.feeds) == 1  # no call for empty sentences only


def test_run_deduplicates_char_ids_on_the_host(keras_bilm, onnx_model, char_ids_model):
    char_ids = batch_to_char_ids([SENTENCES[7], ["Hi"], [], ["the", "cat"]])
    expected = np.asarray(keras_bilm(char_ids, training=False)["activations"])
    for path in (onnx_model, char_ids_model):
        outputs = OnnxEmbedder(path).run(char_ids)
        np.testing.assert_array_equal(outputs["sequence_len"], [8, 1, 0, 2])
        for k in (1, 2):
            np.testing.assert_allclose(outputs[f"lstm_outputs{k}"], expected[:, k], atol=1e-5)
    padding_only = OnnxEmbedder(onnx_model).run(np.zeros((2, 3, 50), np.int32))
    np.testing.assert_array_equal(padding_only["sequence_len"], [0, 0])


def test_run_tokens_errors(onnx_model):
    embedder = OnnxEmbedder(onnx_model)
    ids = batch_to_char_ids([["a", "b"]])[0]
    with pytest.raises(ValueError, match=r"`token_char_ids` must have shape \[distinct_tokens"):
        embedder.run_tokens(ids[:, :7], np.zeros((1, 2), np.int32))
    with pytest.raises(ValueError, match=r"`token_index` must have shape \[batch, tokens\]"):
        embedder.run_tokens(ids, np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="`token_index` values must be -1"):
        embedder.run_tokens(ids, np.array([[0, 2]], np.int32))
    outputs = embedder.run_tokens(ids, np.array([[1, 0], [1, -1]], np.int32))
    np.testing.assert_array_equal(outputs["sequence_len"], [2, 1])


def test_iter_embed_streams_with_max_tokens(onnx_model):
    embedder = OnnxEmbedder(onnx_model, batch_size=4, max_tokens=10)
    plain = OnnxEmbedder(onnx_model).embed(SENTENCES)
    pairs = list(embedder.iter_embed(iter(SENTENCES)))
    assert sorted(index for index, _ in pairs) == list(range(len(SENTENCES)))
    for index, layers in pairs:
        np.testing.assert_allclose(layers, plain[index], atol=1e-5)
    with pytest.raises(ValueError, match="`max_tokens` must be an integer >= 1"):
        OnnxEmbedder(onnx_model, max_tokens=0)


def _shrinking_calls(embedder, n_calls):
    """Which of `n_calls` calls asked ONNX Runtime to shrink its CPU arena (1-based)."""
    session, seen = embedder._session, []

    class Recording:
        def run(self, names, feeds, options=None):
            shrink = options is not None and options.get_run_config_entry(ARENA_SHRINKAGE)
            seen.append(shrink == "cpu:0")
            return session.run(names, feeds, options)

    embedder._session = Recording()
    for _ in range(n_calls):
        embedder.embed_batch([["Hi", "there"]])
    return [call for call, shrink in enumerate(seen, start=1) if shrink]


def test_memory_arena_shrinks_every_eighth_call_by_default(onnx_model):
    import onnxruntime

    assert _shrinking_calls(OnnxEmbedder(onnx_model), 17) == [8, 16]
    assert _shrinking_calls(OnnxEmbedder(onnx_model, shrink_arena_every=1), 3) == [1, 2, 3]
    assert _shrinking_calls(OnnxEmbedder(onnx_model, shrink_arena_every=0), 9) == []
    own = onnxruntime.SessionOptions()
    assert _shrinking_calls(OnnxEmbedder(onnx_model, session_options=own), 9) == []
    both = OnnxEmbedder(onnx_model, session_options=own, shrink_arena_every=2)
    assert _shrinking_calls(both, 4) == [2, 4]
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="shrink_arena_every"):
            OnnxEmbedder(onnx_model, shrink_arena_every=bad)
