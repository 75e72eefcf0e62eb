"""`.keras` files saved by elmo-keras 0.1.0 load with today's code and give the same outputs."""

import pathlib

import keras
import numpy as np
import pytest

import elmo_keras.models  # noqa: F401  (registers the classes)

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "keras_v0_1_0"


@pytest.mark.parametrize("name", ["elmo_embedding_model", "layers_model"])
def test_keras_file_from_0_1_0_loads_with_identical_outputs(name):
    expected = np.load(FIXTURES / "expected.npz")
    model = keras.models.load_model(FIXTURES / f"{name}.keras")
    outputs = np.asarray(model(expected["char_ids"]))
    # Same weights, same graph: only float reassociation may differ.
    np.testing.assert_allclose(outputs, expected[name], rtol=0, atol=1e-6)
