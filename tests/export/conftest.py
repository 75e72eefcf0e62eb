"""Session fixtures for the export tests: each fixture biLM loaded, exported and converted once."""

import json

import pytest
from export_helpers import make_mix


@pytest.fixture(scope="session")
def fixture_bilms(bilm_tf_fixture, allennlp_fixture):
    from elmo_keras.models import BiLM

    paths = {
        "bilm_tf": (
            bilm_tf_fixture / "model" / "options.json",
            bilm_tf_fixture / "model" / "lm_weights.hdf5",
        ),
        "allennlp": (allennlp_fixture / "options.json", allennlp_fixture / "lm_weights.hdf5"),
    }
    models = {}
    for name, (options, weights) in paths.items():
        bilm = BiLM.from_bilm_tf(options, weights)
        mix = make_mix(bilm.n_layers)
        models[name] = {"bilm": bilm, "mix": mix, "options": options, "weights": weights}
    return models


class _LazyExports(dict):
    """Name -> entry; the SavedModel and ONNX files are written on first access of each."""

    def __init__(self, bilms, root):
        super().__init__({name: _LazyEntry(entry, root / name) for name, entry in bilms.items()})


class _LazyEntry(dict):
    def __init__(self, entry, root):
        super().__init__(entry)
        self._root = root

    def __missing__(self, key):
        from elmo_keras.export import export_onnx, export_savedmodel

        self._root.mkdir(parents=True, exist_ok=True)
        if key == "savedmodel":
            path = self._root / "savedmodel"
            export_savedmodel(self["bilm"], path, scalar_mix=self["mix"])
        elif key == "onnx":
            path = self._root / "model.onnx"
            export_onnx(self["bilm"], path, scalar_mix=self["mix"])
        else:
            raise KeyError(key)
        self[key] = path
        return path


@pytest.fixture(scope="session")
def exported(fixture_bilms, tmp_path_factory):
    """Both fixtures with a non-uniform ScalarMix; `entry["savedmodel"]` and `entry["onnx"]`
    are exported on first use, once per session."""
    return _LazyExports(fixture_bilms, tmp_path_factory.mktemp("exported"))


@pytest.fixture(scope="session")
def loaded_savedmodels(exported):
    """Each fixture's SavedModel, loaded once per session with `tf.saved_model.load`."""
    import tensorflow as tf

    return {name: tf.saved_model.load(str(entry["savedmodel"])) for name, entry in exported.items()}


@pytest.fixture(scope="session")
def stateful_onnx(exported, tmp_path_factory):
    """The bilm-tf fixture's stateful ONNX model."""
    from elmo_keras.export import export_onnx

    entry = exported["bilm_tf"]
    path = tmp_path_factory.mktemp("stateful") / "bilm_tf_stateful.onnx"
    export_onnx(entry["bilm"], path, scalar_mix=entry["mix"], stateful=True)
    return path


@pytest.fixture(scope="session")
def fixture_sentences(bilm_tf_fixture):
    """The 30 bilm-tf fixture sentences (3..53 tokens)."""
    rows = json.loads((bilm_tf_fixture / "model" / "lm_embeddings_sentences.json").read_text())
    return [sentence.split() for row in rows for sentence in row]
