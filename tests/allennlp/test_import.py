"""Importing `elmo_keras.allennlp` away from Keras's torch backend is one line saying what to
do (this runs in the TensorFlow and JAX passes; the torch pass skips it)."""

import importlib

import keras
import pytest


def test_import_elsewhere_than_torch_says_what_to_do():
    if keras.config.backend() == "torch":
        pytest.skip("this process runs on the torch backend: see test_elmo.py")
    with pytest.raises(ImportError) as raised:
        importlib.import_module("elmo_keras.allennlp")
    message = str(raised.value)
    assert "\n" not in message
    assert "elmo-keras[torch]" in message or "KERAS_BACKEND=torch" in message
