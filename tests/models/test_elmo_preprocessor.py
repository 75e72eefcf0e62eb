"""`ElmoPreprocessor`: strings -> character ids (the NumPy twins are the reference), the same
vectors as `ElmoEmbedding(input_type="sentences")`, `tf.data`, presets (local folders and a
loopback mirror), and `tf.data` under any Keras backend."""

import keras
import numpy as np
import pytest

from elmo_keras.models import ElmoEmbedding, ElmoPreprocessor
from elmo_keras.text import batch_to_char_ids, tokenize_python
from tests.file_io.test_download import FileServer, serve_presets

# TensorFlow string ops throughout; the PyTorch pass (no TensorFlow) skips the file.
tf = pytest.importorskip("tensorflow")

SENTENCES = ["The bank's rates rose, again.", "I read it", "Hi!"]


def _reference(sentences, mode="punctuation", width=50):
    return batch_to_char_ids(
        [tokenize_python(s, mode) for s in sentences], max_characters_per_token=width
    )


@pytest.mark.tensorflow_only
def test_sentences_in_any_form_give_the_numpy_twins_ids():
    preprocessor = ElmoPreprocessor()
    for as_given in (list, np.array, lambda s: np.array(s, dtype=object), tf.constant):
        ids = preprocessor(as_given(SENTENCES))
        np.testing.assert_array_equal(ids, _reference(SENTENCES))


@pytest.mark.tensorflow_only
def test_tokens_and_whitespace_mode_and_width():
    tokens = [["Hello", "world", "!"], ["Hi", "", ""]]
    ids = ElmoPreprocessor(input_type="tokens", max_characters_per_token=10)(tokens)
    np.testing.assert_array_equal(
        ids, batch_to_char_ids([["Hello", "world", "!"], ["Hi"]], max_characters_per_token=10)
    )
    ids = ElmoPreprocessor(tokenization_mode="whitespace")(np.array(SENTENCES))
    np.testing.assert_array_equal(ids, _reference(SENTENCES, "whitespace"))


@pytest.mark.tensorflow_only
def test_then_char_ids_equals_the_layer_that_tokenizes_inside():
    preprocessor = ElmoPreprocessor.from_preset("tiny")
    on_ids = ElmoEmbedding.from_preset("tiny", dropout=0.0)
    on_strings = ElmoEmbedding.from_preset("tiny", input_type="sentences", dropout=0.0)
    np.testing.assert_allclose(
        on_ids(preprocessor(SENTENCES)), on_strings(tf.constant(SENTENCES)), atol=1e-6
    )


@pytest.mark.tensorflow_only
def test_runs_in_a_tf_data_pipeline_and_in_a_functional_model():
    preprocessor = ElmoPreprocessor()
    dataset = tf.data.Dataset.from_tensor_slices(SENTENCES).batch(3).map(preprocessor)
    np.testing.assert_array_equal(next(iter(dataset)), _reference(SENTENCES))
    inputs = keras.Input((), dtype="string")
    outputs = preprocessor(inputs)
    assert tuple(outputs.shape) == (None, None, 50)
    np.testing.assert_array_equal(
        keras.Model(inputs, outputs)(tf.constant(SENTENCES)), _reference(SENTENCES)
    )


@pytest.mark.tensorflow_only
def test_wrong_inputs_and_arguments_are_one_line():
    with pytest.raises(
        ValueError, match=r"expects a string tensor \[batch\] of sentences\. Received: "
    ):
        ElmoPreprocessor()([[1, 2]])
    with pytest.raises(ValueError, match=r"padded with ''\. Received: dtype=string, shape=\(2,\)"):
        ElmoPreprocessor(input_type="tokens")(["a b", "c"])
    with pytest.raises(ValueError, match=r"`input_type` must be one of .*Received: input_type="):
        ElmoPreprocessor(input_type="char_ids")


def test_a_mistyped_preset_names_the_known_ones():
    """As `BiLM.from_preset` and `ElmoEmbedding.from_preset` do (it said only that the folder
    did not exist)."""
    with pytest.raises(ValueError, match=r"^Did you mean 'mini_en'\? `preset` must be one of"):
        ElmoPreprocessor.from_preset("mini-en")


@pytest.mark.tensorflow_only
def test_saved_into_a_preset_folder_and_read_back(tmp_path):
    folder = ElmoEmbedding.from_preset("tiny").save_to_preset(tmp_path / "preset")
    assert ElmoPreprocessor.from_preset(folder).get_config()["tokenization_mode"] == "punctuation"
    preprocessor = ElmoPreprocessor(tokenization_mode="whitespace", name="mine")
    path = preprocessor.save_to_preset(folder)
    assert path == folder / "preprocessor.json"
    loaded = ElmoPreprocessor.from_preset(folder)
    assert loaded.get_config() == preprocessor.get_config()
    assert ElmoPreprocessor.from_preset(folder, input_type="tokens").input_type == "tokens"


@pytest.mark.tensorflow_only
def test_follows_a_saved_embedding_that_takes_strings(tmp_path):
    elmo = ElmoEmbedding.from_preset("tiny", input_type="tokens", tokenization_mode="whitespace")
    folder = elmo.save_to_preset(tmp_path / "preset")
    preprocessor = ElmoPreprocessor.from_preset(folder)
    assert (preprocessor.input_type, preprocessor.tokenization_mode) == ("tokens", "whitespace")


@pytest.mark.tensorflow_only
def test_a_published_preset_downloads_only_its_options(monkeypatch, tmp_path):
    server = serve_presets(FileServer(), monkeypatch, tmp_path)
    try:
        preprocessor = ElmoPreprocessor.from_preset("original", cache_dir=tmp_path / "cache")
        paths = [entry["path"] for entry in server.log]
    finally:
        server.stop()
    assert preprocessor.max_characters_per_token == 50
    assert len(paths) == 1 and paths[0].endswith("_options.json"), paths


def test_runs_in_tf_data_under_any_backend():
    # The split's point: strings are handled in tf.data, and the model after it takes NumPy
    # character ids on any backend (test_elmo_embedding_backends.py runs it under JAX).
    dataset = tf.data.Dataset.from_tensor_slices(SENTENCES).batch(3).map(ElmoPreprocessor())
    ids = next(dataset.as_numpy_iterator())
    assert ids.dtype == np.int32
    np.testing.assert_array_equal(ids, _reference(SENTENCES))
