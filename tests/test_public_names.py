"""Every public name that the 0.1.0 README used still works (or warns with its replacement).

The list below was taken from the 0.1.0 README (commit 84e1aa6) by hand: its imports, the
dotted names in its prose, and the constructor arguments of its examples.
"""

import importlib
import warnings

import numpy as np
import pytest

NAMES_0_1_0 = [
    ("elmo_keras.layers", "CharCNN"),
    ("elmo_keras.layers", "Highway"),
    ("elmo_keras.layers", "ProjectedLSTMCell"),
    ("elmo_keras.layers", "ProjectedBiLSTM"),
    ("elmo_keras.layers", "ScalarMix"),
    ("elmo_keras.layers", "ElmoEmbedding"),
    ("elmo_keras.models", "BiLM"),
    ("elmo_keras.models.bilm_embedder", "BiLMEmbedder"),
    ("elmo_keras.text", "batch_to_char_ids"),
    ("elmo_keras.text", "tf_char_ids"),
    ("elmo_keras.weights", "load_weights"),
    ("elmo_keras.weights", "save_weights"),
    ("elmo_keras.weights", "read_options"),
    ("elmo_keras.weights", "write_options"),
    ("elmo_keras.training", "train"),
    ("elmo_keras.training", "export_checkpoint"),
    ("elmo_keras.training.pipeline", "quickstart"),
    ("elmo_keras.training.datasets", "wikitext2"),
    ("elmo_keras.runtime", "OnnxEmbedder"),
    ("elmo_keras.export", "export_model"),
    ("elmo_keras.export", "export_savedmodel"),
    ("elmo_keras.export", "export_onnx"),
    ("elmo_keras.export", "quantize_onnx"),
    ("elmo_keras.export", "atomic_directory"),
]


# Removed on purpose, each with an error that names its replacement: `elmo_keras.weights` (the
# file format) no longer imports the models to build one (issue 27: no import cycle).
REMOVED = [("elmo_keras.weights", "load_bilm", "BiLM.from_bilm_tf")]


# Renamed in 0.4 (issue 42: names that say what they hold); the old names still work and warn
# with the new one.
def test_the_old_tokenizer_module_warns_with_its_new_name_and_still_works():
    import sys

    sys.modules.pop("elmo_keras.text.tokenizer", None)  # a module warns when first imported
    with pytest.warns(DeprecationWarning, match=r"elmo_keras\.text\.tf_tokenization"):
        old = importlib.import_module("elmo_keras.text.tokenizer")
    assert old.tokenize is importlib.import_module("elmo_keras.text.tf_tokenization").tokenize


def test_the_old_training_export_model_warns_and_saves_the_language_model(monkeypatch):
    from elmo_keras import training
    from elmo_keras.training import model_files

    calls = []
    monkeypatch.setattr(model_files, "save_language_model", lambda *args: calls.append(args))
    with pytest.warns(DeprecationWarning, match="save_language_model"):
        training.export_model("model", "vocabulary", "folder")
    assert calls == [("model", "vocabulary", "folder")]


@pytest.mark.parametrize("module, name, replacement", REMOVED)
def test_removed_name_points_to_its_replacement(module, name, replacement):
    with pytest.raises(AttributeError, match=replacement.replace(".", r"\.")):
        getattr(importlib.import_module(module), name)


def test_deprecated_loaders_warn_and_load_the_same_model(allennlp_fixture):
    from elmo_keras.models import BiLM, load_bilm

    files = (allennlp_fixture / "options.json", allennlp_fixture / "lm_weights.hdf5")
    with pytest.warns(DeprecationWarning, match="use `BiLM.from_bilm_tf`"):
        old = load_bilm(*files)
    new = BiLM.from_bilm_tf(*files)
    old_arrays, new_arrays = old.get_weight_arrays(), new.get_weight_arrays()
    assert old_arrays.keys() == new_arrays.keys()
    for name, array in old_arrays.items():
        np.testing.assert_array_equal(array, new_arrays[name])


@pytest.mark.parametrize("module, name", NAMES_0_1_0, ids=[f"{m}.{n}" for m, n in NAMES_0_1_0])
def test_name_from_0_1_0_still_resolves(module, name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a plain import of a kept name does not warn
        assert getattr(importlib.import_module(module), name) is not None


def test_renamed_constructor_arguments_warn_and_build_the_same_layer():
    from elmo_keras.layers import ProjectedBiLSTM, ProjectedLSTMCell, ScalarMix

    cases = [
        (
            ProjectedBiLSTM,
            {"units": 8, "projection_dim": 4},
            {"lstm_units": 8, "projection_dim": 4},
        ),
        (
            ProjectedLSTMCell,
            {"units": 8, "projection_dim": 4},
            {"lstm_units": 8, "projection_dim": 4},
        ),
        (ScalarMix, {"num_layers": 3}, {"n_layers": 3}),
    ]
    for cls, old, new in cases:
        with pytest.warns(DeprecationWarning, match="is deprecated; use"):
            layer = cls(**old)
        config, expected = layer.get_config(), cls(**new).get_config()
        config.pop("name"), expected.pop("name")
        assert config == expected, cls.__name__
