"""ELMoForManyLangs' models, loaded from their folders, give EFML's numbers (any backend).

The expected values are EFML 0.0.4.post2's own outputs for 32 sentences in many scripts
(`tests/fixtures/efml/README.md`); within 2e-5 is a match, one convention wrong moves them by
0.7 to 2.6.
"""

import json

import h5py
import keras
import numpy as np
import pytest

from elmo_keras.models import BiLM, ElmoEmbedding, ElmoPreprocessor
from elmo_keras.models.bilm_embedder import BiLMEmbedder
from elmo_keras.models.bilm_vocabulary import batch_ids

MODELS = ("cnn_elmo_chars", "cnn_elmo_words")
ATOL = 2e-5


@pytest.fixture(scope="module")
def sentences(efml_fixture):
    return json.loads((efml_fixture / "sentences.json").read_text(encoding="utf-8"))["sentences"]


@pytest.fixture(scope="module", params=MODELS)
def efml_model(request, efml_fixture):
    """(name, BiLM loaded from the EFML folder, {group: {index: array}} EFML's outputs)."""
    name = request.param
    with h5py.File(efml_fixture / f"{name}.expected.h5", "r") as h5:
        expected = {
            group: {int(key): h5[group][key][()] for key in h5[group]} for group in h5.keys()
        }
    return name, BiLM.from_preset(efml_fixture / name), expected


def worst(got, want):
    """The largest absolute difference over matching arrays (0 for empty ones)."""
    diffs = [np.max(np.abs(g - w)) for g, w in zip(got, want, strict=True) if w.size]
    return float(max(diffs))


def test_dictionary_ids_are_efml_ids(efml_model, sentences):
    _, bilm, expected = efml_model
    dictionary = bilm.token_dictionary
    for i, sentence in enumerate(sentences):
        rows = np.stack([dictionary.token_ids(t) for t in ["<bos>", *sentence, "<eos>"]])
        np.testing.assert_array_equal(rows[:, :50] - 1, expected["char_ids"][i])  # ids + 1
        if "word_ids" in expected:
            np.testing.assert_array_equal(rows[:, 50], expected["word_ids"][i])


def test_bilm_all_layers_and_markers(efml_model, sentences):
    _, bilm, expected = efml_model
    ids = batch_ids(bilm, sentences)
    layers = keras.ops.convert_to_numpy(bilm(ids)["activations"])
    got = [layers[i, :, : len(s)] for i, s in enumerate(sentences)]
    assert worst(got, [expected["all_layers"][i] for i in range(len(sentences))]) < ATOL
    marked = bilm(ids, keep_sentence_boundaries=True)["activations"]
    marked = keras.ops.convert_to_numpy(marked)
    got = [marked[i, :, : len(s) + 2] for i, s in enumerate(sentences)]
    assert worst(got, [expected["with_markers"][i] for i in range(len(sentences))]) < ATOL


def test_bilm_embedder_is_efml_stateless_output(efml_model, sentences):
    _, bilm, expected = efml_model
    got = BiLMEmbedder(bilm, batch_size=5).embed(sentences)
    assert worst(got, [expected["all_layers"][i] for i in range(len(sentences))]) < ATOL
    assert got[31].shape == (3, 0, 2 * bilm.projection_dim)  # EFML crashes on it with -1
    average = [np.mean(got[i], axis=0) for i in expected["average"]]
    assert worst(average, list(expected["average"].values())) < ATOL


def test_state_carried_in_reproduces_efml_second_call(efml_model, sentences):
    _, bilm, expected = efml_model
    ids = batch_ids(bilm, sentences)
    first = bilm(ids)
    second = bilm({"char_ids": ids, "state_h": first["state_h"], "state_c": first["state_c"]})
    layers = keras.ops.convert_to_numpy(second["activations"])
    got = [layers[i, :, : len(s)] for i, s in enumerate(sentences)]
    assert worst(got, [expected["second_call"][i] for i in range(len(sentences))]) < ATOL
    stateless = [expected["all_layers"][i] for i in range(len(sentences))]
    assert worst(got, stateless) > 0.5  # the fixture's second call differs: the test can fail


def test_elmo_embedding_default_mix_is_efml_average(efml_model, efml_fixture, sentences):
    name, bilm, expected = efml_model
    layer = ElmoEmbedding.from_preset(efml_fixture / name, dropout=0.0)
    indices = sorted(expected["average"])
    mixed = layer(batch_ids(bilm, [sentences[i] for i in indices]))
    mixed = keras.ops.convert_to_numpy(mixed)
    got = [mixed[row, : len(sentences[i])] for row, i in enumerate(indices)]
    assert worst(got, [expected["average"][i] for i in indices]) < ATOL


def _no_pickles(path):
    raise AssertionError(f"a converted preset folder read a pickle: {path}")


def test_save_to_preset_converts_once_without_pickles(
    efml_model, efml_fixture, tmp_path, sentences, monkeypatch
):
    name, bilm, expected = efml_model
    folder = bilm.save_to_preset(tmp_path / "converted")
    layer_folder = ElmoEmbedding.from_preset(efml_fixture / name, dropout=0.0).save_to_preset(
        tmp_path / "layer"
    )
    for saved in (folder, layer_folder):
        assert not [p.name for p in saved.iterdir() if p.suffix in (".pkl", ".dic")]
    import elmo_keras.efml  # noqa: PLC0415

    monkeypatch.setattr(elmo_keras.efml, "read_state_dict", _no_pickles)  # torch_pickle's
    loaded = BiLM.from_preset(folder)
    assert loaded.char_vocabulary == bilm.char_vocabulary
    got = BiLMEmbedder(loaded).embed(sentences)
    assert worst(got, [expected["all_layers"][i] for i in range(len(sentences))]) < ATOL
    layer = ElmoEmbedding.from_preset(layer_folder)
    indices = sorted(expected["average"])
    mixed = keras.ops.convert_to_numpy(layer(batch_ids(bilm, [sentences[i] for i in indices])))
    got = [mixed[row, : len(sentences[i])] for row, i in enumerate(indices)]
    assert worst(got, [expected["average"][i] for i in indices]) < ATOL


def test_text_becomes_ids_through_the_model_dictionary(
    efml_model, efml_fixture, sentences, tmp_path
):
    # ElmoPreprocessor (TensorFlow's string ops, or NumPy on another backend), and on
    # TensorFlow ElmoEmbedding(input_type="tokens") in one graph, give EFML's numbers.
    name, bilm, expected = efml_model
    chosen = [i for i, s in enumerate(sentences) if s and all(s)]  # "" pads "tokens" input
    longest = max(len(sentences[i]) for i in chosen)
    tokens = np.array([sentences[i] + [""] * (longest - len(sentences[i])) for i in chosen])
    preprocessor = ElmoPreprocessor.from_preset(efml_fixture / name, input_type="tokens")
    ids = keras.ops.convert_to_numpy(preprocessor(tokens))
    np.testing.assert_array_equal(ids, batch_ids(bilm, [sentences[i] for i in chosen]))
    converted = bilm.save_to_preset(tmp_path / "converted")
    again = ElmoPreprocessor.from_preset(converted, input_type="tokens")
    assert again.dictionary.width == preprocessor.dictionary.width
    assert again.get_config() == {**preprocessor.get_config(), "name": again.name}
    if keras.config.backend() != "tensorflow":
        return
    layer = ElmoEmbedding.from_preset(efml_fixture / name, input_type="tokens", dropout=0.0)
    mixed = keras.ops.convert_to_numpy(layer(tokens))
    got = [mixed[row, : len(sentences[i])] for row, i in enumerate(chosen)]
    assert worst(got, [expected["average"][i] for i in chosen]) < ATOL


def test_a_word_cache_uses_the_model_dictionary(efml_model, efml_fixture, sentences):
    name, _, expected = efml_model
    chosen = [i for i in expected["average"] if all(sentences[i])]
    vocabulary = ["<padding>", *sorted({t for i in chosen for t in sentences[i]})]  # 0: padding
    layer = ElmoEmbedding.from_preset(efml_fixture / name, dropout=0.0, vocab_to_cache=vocabulary)
    mixed = layer(layer.word_ids([sentences[i] for i in chosen]))
    mixed = keras.ops.convert_to_numpy(mixed)
    got = [mixed[row, : len(sentences[i])] for row, i in enumerate(chosen)]
    assert worst(got, [expected["average"][i] for i in chosen]) < ATOL


def test_loading_does_not_draw_initial_weights(
    efml_fixture, bilm_tf_fixture, tmp_path, monkeypatch
):
    """A model loaded from a folder is built for the weights assigned next: its LSTM cells start
    from zeros, not from their orthogonal initializer (a QR decomposition of each recurrent
    kernel, which was most of a 4096-cell model's load time: benchmarks/efml_load.py)."""
    reference = BiLM.from_preset(efml_fixture / "cnn_elmo_chars")
    converted = reference.save_to_preset(tmp_path / "converted")

    def refused(self, shape, dtype=None):
        raise AssertionError("a loaded model drew initial weights")

    monkeypatch.setattr(keras.initializers.Orthogonal, "__call__", refused)
    for source in (efml_fixture / "cnn_elmo_chars", converted):
        arrays = BiLM.from_preset(source).get_weight_arrays()
        for key, array in reference.get_weight_arrays().items():
            np.testing.assert_array_equal(arrays[key], array)
    model = bilm_tf_fixture / "model"
    BiLM.from_bilm_tf(model / "options.json", model / "lm_weights.hdf5")
    with pytest.raises(AssertionError, match="drew initial weights"):
        BiLM(lstm_units=8, projection_dim=4, filters=[[1, 4]]).build()  # a new model draws
