"""The TensorFlow twin of `TokenDictionary` gives the same rows, in a graph too (TensorFlow)."""

import json

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from elmo_keras.efml import read_dictionary  # noqa: E402
from elmo_keras.text.tf_char_ids import tokens_to_char_ids  # noqa: E402
from elmo_keras.text.token_dictionary import TokenDictionary  # noqa: E402


@pytest.mark.parametrize("words", [False, True])
def test_graph_rows_equal_the_numpy_rows(efml_fixture, words):
    folder = efml_fixture / "cnn_elmo_words"
    dictionary = TokenDictionary(
        read_dictionary(folder / "char.dic"),
        read_dictionary(folder / "word.dic") if words else None,
    )
    sentences = json.loads((efml_fixture / "sentences.json").read_text())["sentences"]
    sentences += [["<bos>", "<eos>x", "x" * 60 + "<bos>", "tagt", "Donaudampf"]]
    expected = dictionary.batch_ids(sentences)
    ragged = tf.ragged.constant(sentences, dtype=tf.string, ragged_rank=1)
    eager = tokens_to_char_ids(ragged, dictionary=dictionary).numpy()
    np.testing.assert_array_equal(eager, expected)
    graph = tf.function(lambda t: tokens_to_char_ids(t, dictionary=dictionary))
    np.testing.assert_array_equal(graph(ragged).numpy(), expected)
