"""`ElmoEmbedding`'s AllenNLP options: `scalar_mix_parameters`, `keep_sentence_boundaries`,
`vocab_to_cache` (the AllenNLP fixture biLM; references: the char CNN path, NumPy float64).
They run on TensorFlow and, in the second command of `make test`, on JAX."""

import keras
import numpy as np
import pytest

from elmo_keras.models import BiLM
from elmo_keras.models.elmo_embedding import ElmoEmbedding
from elmo_keras.text import batch_to_char_ids, bos_char_ids, eos_char_ids
from tests.test_case import as_numpy

SENTENCES = [["The", "bank", "of", "the", "river", "."], ["I", "read", "it"], ["Hi"]]
VOCAB = ["@@PADDING@@", "read", "The", "bank", "of", "the", "river", ".", "I", "it", "Hi", "x"]


@pytest.fixture(scope="module")
def bilm(allennlp_fixture):
    return BiLM.from_bilm_tf(
        allennlp_fixture / "options.json", allennlp_fixture / "lm_weights.hdf5"
    )


def _activations(bilm, sentences, **kwargs):
    outputs = bilm(batch_to_char_ids(sentences), **kwargs)
    return as_numpy(outputs["activations"], np.float64), as_numpy(outputs["mask"])


def test_scalar_mix_parameters_fix_the_mix_and_are_not_trained(bilm):
    parameters = [0.5, -1.0, 2.0]
    elmo = ElmoEmbedding(bilm, dropout=0.0, scalar_mix_parameters=parameters)
    got = as_numpy(elmo(batch_to_char_ids(SENTENCES)))
    layers, _ = _activations(bilm, SENTENCES)
    weights = np.exp(parameters) / np.exp(parameters).sum()  # float64 softmax
    np.testing.assert_allclose(got, np.einsum("l,blti->bti", weights, layers), atol=1e-6)
    assert elmo.scalar_mix_parameters == parameters
    assert elmo.trainable_weights == []  # nor gamma: AllenNLP freezes the whole mix
    clone = ElmoEmbedding.from_config(elmo.get_config())  # a new biLM: the config only
    clone.build()
    assert clone.get_config() == elmo.get_config() and clone.trainable_weights == []
    np.testing.assert_array_equal(as_numpy(clone.scalar_mixes[0].scalar_weights), parameters)


def test_scalar_mix_parameters_select_one_layer(bilm):
    elmo = ElmoEmbedding(bilm, dropout=0.0, scalar_mix_parameters=[-9e10, 1.0, -9e10])
    layers, _ = _activations(bilm, SENTENCES)
    np.testing.assert_allclose(as_numpy(elmo(batch_to_char_ids(SENTENCES))), layers[:, 1])


def test_keep_sentence_boundaries_adds_s_and_end_positions(bilm):
    elmo = ElmoEmbedding(bilm, dropout=0.0, keep_sentence_boundaries=True)
    plain = ElmoEmbedding(bilm, dropout=0.0)
    ids = batch_to_char_ids(SENTENCES)
    got, want = elmo(ids), as_numpy(plain(ids))
    mask = as_numpy(got._keras_mask)
    got = as_numpy(got)
    assert got.shape == (3, 8, 32) and mask.tolist()[1] == [True] * 5 + [False] * 3
    np.testing.assert_array_equal(mask, as_numpy(elmo.compute_mask(ids)))
    for row, sentence in enumerate(SENTENCES):
        n = len(sentence)
        np.testing.assert_allclose(got[row, 1 : n + 1], want[row, :n], atol=1e-6)
        assert np.all(got[row, n + 2 :] == 0)
    # Layer 0 (the token vector, twice) at <S> and </S>: the char CNN of the boundary rows.
    only_tokens = ElmoEmbedding(
        bilm, dropout=0.0, keep_sentence_boundaries=True, scalar_mix_parameters=[1, -9e10, -9e10]
    )
    vectors = as_numpy(only_tokens(ids))
    boundary = as_numpy(bilm.char_cnn(np.stack([bos_char_ids(), eos_char_ids()])))
    np.testing.assert_allclose(vectors[:, 0, :16], np.repeat(boundary[:1], 3, 0), atol=1e-6)
    np.testing.assert_allclose(vectors[2, 2, 16:], boundary[1], atol=1e-6)  # "Hi" </S>


def test_keep_sentence_boundaries_mask_reaches_a_functional_lstm(bilm):
    inputs = keras.Input((None, 50), dtype="int32")
    elmo = ElmoEmbedding(bilm, dropout=0.0, keep_sentence_boundaries=True)
    model = keras.Model(inputs, keras.layers.LSTM(3, go_backwards=True)(elmo(inputs)))
    batch = model(batch_to_char_ids(SENTENCES))
    alone = model(batch_to_char_ids(SENTENCES[2:]))
    np.testing.assert_allclose(as_numpy(batch)[2], as_numpy(alone)[0], atol=1e-5)


def test_vocab_to_cache_equals_the_char_cnn_path(bilm):
    cached = ElmoEmbedding(bilm, dropout=0.0, vocab_to_cache=VOCAB, num_output_representations=2)
    plain = ElmoEmbedding(bilm, dropout=0.0, num_output_representations=2)
    assert cached.input_type == "word_ids"
    ids = cached.word_ids(SENTENCES)
    assert ids[2].tolist() == [10, 0, 0, 0, 0, 0]
    for got, want in zip(cached(ids), plain(batch_to_char_ids(SENTENCES)), strict=True):
        np.testing.assert_allclose(as_numpy(got), as_numpy(want), atol=1e-6, rtol=0)
        np.testing.assert_array_equal(as_numpy(got._keras_mask), as_numpy(want._keras_mask))
    # The cache holds the char CNN's output per word, and is not trained.
    want = as_numpy(bilm.char_cnn(batch_to_char_ids([VOCAB])))[0]
    np.testing.assert_allclose(as_numpy(cached.word_vectors), want, atol=1e-6)
    assert cached.trainable_weights == [w for m in cached.scalar_mixes for w in m.weights]


def test_vocab_to_cache_keeps_boundaries_and_survives_a_keras_file(bilm, tmp_path):
    kwargs = {"dropout": 0.0, "keep_sentence_boundaries": True, "pooling": "mean"}
    cached = ElmoEmbedding(bilm, vocab_to_cache=VOCAB, **kwargs)
    plain = ElmoEmbedding(bilm, **kwargs)
    ids = cached.word_ids(SENTENCES)
    want = as_numpy(plain(batch_to_char_ids(SENTENCES)))
    np.testing.assert_allclose(as_numpy(cached(ids)), want, atol=1e-6)
    inputs = keras.Input((None,), dtype="int32")
    model = keras.Model(inputs, cached(inputs))
    model.save(tmp_path / "cached.keras")
    loaded = keras.models.load_model(tmp_path / "cached.keras")
    np.testing.assert_array_equal(as_numpy(loaded(ids)), as_numpy(model(ids)))
    np.testing.assert_allclose(loaded.predict(ids, verbose=0), want, atol=1e-6)  # in a graph
    assert loaded.layers[-1].get_config() == cached.get_config()


def test_a_saved_cache_is_loaded_not_computed_again(bilm, tmp_path, monkeypatch):
    from elmo_keras.models import elmo_embedding

    cached = ElmoEmbedding(bilm, vocab_to_cache=VOCAB, dropout=0.0)
    ids = cached.word_ids(SENTENCES)
    want = as_numpy(cached(ids))
    cached.save_to_preset(tmp_path / "preset")
    calls = []
    original = elmo_embedding.cached_word_vectors
    monkeypatch.setattr(
        elmo_embedding, "cached_word_vectors", lambda *a: calls.append(1) or original(*a)
    )
    loaded = ElmoEmbedding.from_preset(tmp_path / "preset")
    np.testing.assert_array_equal(as_numpy(loaded(ids)), want)
    assert calls == []  # the char CNN did not run over the vocabulary again


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"vocab_to_cache": ["only-padding"]}, "`vocab_to_cache` must be a list of at least 2"),
        ({"vocab_to_cache": VOCAB, "input_type": "tokens"}, "go together"),
        ({"input_type": "word_ids"}, "go together"),
        ({"scalar_mix_parameters": [1.0, 2.0]}, "must be 3 floats"),
    ],
)
def test_bad_options_are_one_line(bilm, kwargs, message):
    with pytest.raises(ValueError, match=message) as error:
        ElmoEmbedding(bilm, **kwargs)
    assert "\n" not in str(error.value)


def test_a_word_outside_the_cache_is_named(bilm):
    elmo = ElmoEmbedding(bilm, vocab_to_cache=VOCAB)
    with pytest.raises(ValueError, match="no entry for the word 'cat' \\(sentence 1, position 0"):
        elmo.word_ids([["The"], ["cat"]])


@pytest.mark.tensorflow_only
def test_vocab_to_cache_built_by_a_first_call_inside_a_tf_function(bilm):
    import tensorflow as tf

    cached = ElmoEmbedding(bilm, dropout=0.0, vocab_to_cache=VOCAB)
    ids = cached.word_ids(SENTENCES)
    got = tf.function(lambda x: cached(x))(ids)  # Keras builds the layer in the graph
    want = ElmoEmbedding(bilm, dropout=0.0)(batch_to_char_ids(SENTENCES))
    np.testing.assert_allclose(as_numpy(got), as_numpy(want), atol=1e-6)
