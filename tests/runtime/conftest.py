"""Session fixture for the runtime tests: the AllenNLP fixture biLM as ONNX, converted once."""

import pytest


@pytest.fixture(scope="session")
def keras_bilm(allennlp_fixture):
    from elmo_keras.weights import load_bilm

    return load_bilm(allennlp_fixture / "options.json", allennlp_fixture / "lm_weights.hdf5")


@pytest.fixture(scope="session")
def onnx_model(keras_bilm, tmp_path_factory):
    from elmo_keras.export import export_onnx

    path = tmp_path_factory.mktemp("runtime") / "allennlp.onnx"
    export_onnx(keras_bilm, path)
    return path
