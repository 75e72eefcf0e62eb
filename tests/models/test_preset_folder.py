"""Preset folders (keras-hub's conventions): `presets` on the classes, `save_to_preset(folder)`
and `from_preset(folder)` round trips of `BiLM` and `ElmoEmbedding`, bilm-tf's files kept in the
folder, and one-line errors for a folder that is not a preset. Offline: `tmp_path` folders and
the packaged `tiny` preset. The files are the same on every backend: TensorFlow only, but for
the listing."""

import json

import keras
import numpy as np
import pytest

from elmo_keras.models import BiLM, ElmoEmbedding, ElmoPreprocessor
from elmo_keras.options import options_to_bilm_kwargs, read_options
from elmo_keras.presets import PRESETS, find_model_files, resolve_preset
from elmo_keras.text import batch_to_char_ids

SENTENCES = ["The bank of the river was flooded .", "I read it", "Hi !"]
IDS = batch_to_char_ids([s.split() for s in SENTENCES])
TOLERANCE = 1e-6  # float32 outputs of the same weights: equal up to reordering of sums


def _weights_equal(one, other):
    first, second = one.get_weight_arrays(), other.get_weight_arrays()
    assert first.keys() == second.keys()
    for name in first:
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)


def test_presets_are_listed_on_the_classes_with_descriptions():
    for cls in (BiLM, ElmoEmbedding, ElmoPreprocessor):
        assert list(cls.presets) == list(PRESETS)
        assert cls.presets["tiny"]["parameters"] == "0.1M"
        assert "64-unit LSTM" in cls.presets["tiny"]["description"]
        assert cls.presets["original"]["source"] == "download"
        with pytest.raises(TypeError):
            cls.presets["mine"] = {}  # read-only: the registry is PRESETS


@pytest.mark.tensorflow_only
def test_bilm_round_trips_through_a_preset_folder(tmp_path):
    bilm = BiLM.from_preset("tiny", length_aware=False, name="my_bilm")
    folder = bilm.save_to_preset(tmp_path / "preset")
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json",
        "lm_weights.hdf5",
        "metadata.json",
        "options.json",
    ]
    metadata = json.loads((folder / "metadata.json").read_text())
    assert metadata["class"] == "BiLM"
    assert metadata["parameter_count"] == bilm.count_params()
    loaded = BiLM.from_preset(folder)
    assert loaded.get_config() == bilm.get_config()  # length_aware and the name too
    _weights_equal(loaded, bilm)
    np.testing.assert_allclose(loaded(IDS)["activations"], bilm(IDS)["activations"], atol=TOLERANCE)
    assert BiLM.from_preset(str(folder), length_aware=True).length_aware  # kwargs override


@pytest.mark.tensorflow_only
def test_a_preset_folder_is_still_a_bilm_tf_model_folder(tmp_path):
    bilm = BiLM.from_preset("tiny")
    folder = bilm.save_to_preset(tmp_path / "preset")
    options, weights = find_model_files(folder)
    assert (options.name, weights.name) == ("options.json", "lm_weights.hdf5")
    tiny_options = read_options(resolve_preset("tiny")[0])
    assert options_to_bilm_kwargs(read_options(options)) == options_to_bilm_kwargs(tiny_options)
    _weights_equal(BiLM.from_bilm_tf(options, weights), bilm)
    (folder / "config.json").unlink()  # without config.json: read as bilm-tf's files
    _weights_equal(BiLM.from_preset(folder), bilm)


@pytest.mark.tensorflow_only
def test_elmo_embedding_round_trips_with_its_mixes(tmp_path):
    elmo = ElmoEmbedding.from_preset(
        "tiny", input_type="sentences", dropout=0.0, num_output_representations=2
    )
    elmo.build()
    for k, mix in enumerate(elmo.scalar_mixes):  # away from the initial values
        mix.scalar_weights.assign([0.5 + k, -1.0, 2.0 - k])
        mix.gamma.assign(1.5 + k)
    folder = elmo.save_to_preset(tmp_path / "elmo")
    assert (folder / "embedding.weights.h5").is_file()
    loaded = ElmoEmbedding.from_preset(folder)
    assert loaded.get_config() == elmo.get_config()
    _weights_equal(loaded.bilm, elmo.bilm)
    for (w1, g1), (w2, g2) in zip(
        loaded.scalar_mix_weights(), elmo.scalar_mix_weights(), strict=True
    ):
        np.testing.assert_array_equal(w1, w2)
        assert g1 == g2
    import tensorflow as tf

    sentences = tf.constant(SENTENCES)
    for got, want in zip(loaded(sentences), elmo(sentences), strict=True):
        np.testing.assert_allclose(got, want, atol=TOLERANCE)
    assert ElmoEmbedding.from_preset(folder, dropout=0.25).dropout == 0.25
    _weights_equal(BiLM.from_preset(folder), elmo.bilm)  # the biLM alone


@pytest.mark.tensorflow_only
def test_a_biLM_folder_gives_a_new_embedding_made_with_the_arguments(tmp_path):
    folder = BiLM.from_preset("tiny").save_to_preset(tmp_path / "bilm")
    inputs = keras.Input((None, 50), dtype="int32")
    elmo = ElmoEmbedding.from_preset(folder, pooling="mean", dropout=0.0)
    model = keras.Model(inputs, elmo(inputs))  # and it is a layer of a Functional model
    assert elmo.pooling == "mean"
    expected = ElmoEmbedding.from_preset("tiny", pooling="mean", dropout=0.0)
    np.testing.assert_allclose(model(IDS), expected(IDS), atol=TOLERANCE)


@pytest.mark.tensorflow_only
def test_saving_keeps_an_existing_folder_unless_asked(tmp_path):
    """Without `overwrite` an existing folder is kept. With it (issue 39, point 1: it replaced
    any folder) only an earlier preset folder is replaced, keeping the preprocessor.json saved
    there; a folder holding anything else (the user's files, a training run's) is one line
    naming it and what it holds, and stays as it was."""
    bilm = BiLM.from_preset("tiny")
    folder = tmp_path / "preset"
    folder.mkdir()
    (folder / "mine.txt").write_text("kept")
    with pytest.raises(FileExistsError, match="already exists; pass `overwrite=True`"):
        bilm.save_to_preset(folder)
    with pytest.raises(ValueError, match=r"preset is not a preset folder \(it holds mine.txt\)"):
        bilm.save_to_preset(folder, overwrite=True)
    assert [p.name for p in folder.iterdir()] == ["mine.txt"]
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "training_config.json").write_text("{}")
    with pytest.raises(ValueError, match=r"run is not a preset folder \(it holds checkpoints, "):
        bilm.save_to_preset(run, overwrite=True)
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints", "training_config.json"]
    (folder / "mine.txt").unlink()
    ElmoPreprocessor.from_preset("tiny").save_to_preset(folder)
    bilm.save_to_preset(folder, overwrite=True)  # a folder holding a preprocessor only
    bilm.save_to_preset(folder, overwrite=True)  # an earlier preset folder
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json",
        "lm_weights.hdf5",
        "metadata.json",
        "options.json",
        "preprocessor.json",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["preset", "run"]  # nothing left


@pytest.mark.tensorflow_only
def test_a_foreign_config_json_is_ignored_and_a_wrong_one_is_one_line(tmp_path):
    bilm = BiLM.from_preset("tiny")
    folder = bilm.save_to_preset(tmp_path / "preset")
    config = folder / "config.json"
    allennlp = {"dataset_reader": {"type": "sequence_tagging"}, "model": {"type": "crf_tagger"}}
    keras_hub = {"class_name": "BertBackbone", "registered_name": "keras_hub>BertBackbone"}
    for foreign in (allennlp, keras_hub):  # beside bilm-tf's files: read as a model folder
        config.write_text(json.dumps({**foreign, "config": {}}))
        _weights_equal(BiLM.from_preset(folder), bilm)
    config.write_text(json.dumps({"registered_name": "elmo_keras>LanguageModel", "config": {}}))
    with pytest.raises(ValueError, match=r"must describe one of .*'elmo_keras>LanguageModel'"):
        BiLM.from_preset(folder)
    config.write_text("{not json")
    with pytest.raises(ValueError, match=r"config.json is not valid JSON"):
        BiLM.from_preset(folder)


# Issue 39, point 7: one source of truth per preset folder. `config.json` and `options.json`
# are checked against each other and through the options' limits and the memory check.


@pytest.fixture(scope="module")
def saved_bilm(tmp_path_factory):
    return BiLM.from_preset("tiny").save_to_preset(tmp_path_factory.mktemp("saved") / "preset")


@pytest.fixture
def preset(saved_bilm, tmp_path):
    import shutil

    return shutil.copytree(saved_bilm, tmp_path / "preset")


def _edit_config(folder, **values):
    path = folder / "config.json"
    config = json.loads(path.read_text())
    inner = config["config"]["bilm"]["config"] if "bilm" in config["config"] else config["config"]
    inner.update(values)
    path.write_text(json.dumps(config))


def _one_line(call):
    with pytest.raises(ValueError) as error:
        call()
    message = str(error.value)
    assert "\n" not in message, message
    return message


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("key, value", [("cell_clip", 5.0), ("activation", "tanh")])
def test_config_and_options_that_disagree_are_one_line_naming_both(preset, key, value):
    """A different `cell_clip` or `activation` gave vectors 2.37 apart between
    `from_preset(folder)` and `embed --model folder`, without a word."""
    _edit_config(preset, **{key: value})
    message = _one_line(lambda: BiLM.from_preset(preset))
    assert str(preset / "config.json") in message and str(preset / "options.json") in message
    assert f"disagree on `{key}`: {value!r} in config.json" in message


@pytest.mark.tensorflow_only
def test_a_config_beyond_the_options_limits_is_refused_before_building(preset):
    """`lstm_units` 2,000,000 in config.json crashed with SIGSEGV."""
    _edit_config(preset, lstm_units=2_000_000)
    message = _one_line(lambda: BiLM.from_preset(preset))
    assert f"preset config {preset / 'config.json'}" in message
    assert "`lstm.dim` must be an integer in [1, 65,536]. Received: 2000000" in message
    _edit_config(preset, lstm_units=read_options(preset / "options.json")["lstm"]["dim"])
    message = _one_line(lambda: BiLM.from_preset(preset, lstm_units=70_000))
    assert "with the arguments ['lstm_units']" in message and "65,536" in message


@pytest.mark.tensorflow_only
def test_a_preset_folder_too_large_for_memory_is_one_line(preset, monkeypatch):
    """A 4 TB architecture in config.json allocated until TensorFlow's OOM."""
    from elmo_keras import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 1000)
    with pytest.raises(memory.NotEnoughMemory, match=r"config.json: its weights would need"):
        BiLM.from_preset(preset)


@pytest.mark.tensorflow_only
def test_an_embedding_config_without_its_bilm_is_one_line(tmp_path):
    folder = ElmoEmbedding.from_preset("tiny").save_to_preset(tmp_path / "elmo")
    config = json.loads((folder / "config.json").read_text())
    del config["config"]["bilm"]
    (folder / "config.json").write_text(json.dumps(config))
    message = _one_line(lambda: ElmoEmbedding.from_preset(folder))  # was a KeyError
    assert str(folder / "config.json") in message and "`config.bilm`" in message


@pytest.mark.tensorflow_only
def test_a_key_given_twice_in_a_preset_file_is_one_line(preset):
    text = (preset / "config.json").read_text()
    twice = '{"registered_name": "elmo_keras>BiLM", '
    (preset / "config.json").write_text(text.replace("{", twice, 1))  # the last one won
    message = _one_line(lambda: BiLM.from_preset(preset))
    assert "config.json gives the key 'registered_name' twice" in message
