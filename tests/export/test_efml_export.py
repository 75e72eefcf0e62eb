"""An ELMoForManyLangs model exported as a SavedModel gives EFML's numbers from strings."""

import json

import h5py
import numpy as np
import tensorflow as tf
from elmo_keras.export.onnx import export_onnx
from elmo_keras.export.savedmodel import export_savedmodel

from elmo_keras.models import BiLM
from elmo_keras.runtime import OnnxEmbedder

MODEL = "cnn_elmo_words"


def test_savedmodel_tokens_signature_uses_the_model_dictionary(efml_fixture, tmp_path):
    bilm = BiLM.from_preset(efml_fixture / MODEL)
    export_savedmodel(bilm, tmp_path / "saved")
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    sentences = json.loads((efml_fixture / "sentences.json").read_text())["sentences"]
    chosen = [i for i, s in enumerate(sentences) if s and all(s)]  # "" pads the signature
    longest = max(len(sentences[i]) for i in chosen)
    tokens = [sentences[i] + [""] * (longest - len(sentences[i])) for i in chosen]
    lengths = [len(sentences[i]) for i in chosen]
    out = loaded.signatures["tokens"](tokens=tf.constant(tokens), sequence_len=tf.constant(lengths))
    with h5py.File(efml_fixture / f"{MODEL}.expected.h5", "r") as h5:
        for row, i in enumerate(chosen):
            n, want = lengths[row], h5["all_layers"][f"{i:03d}"][()]
            for k, name in ((1, "lstm_outputs1"), (2, "lstm_outputs2")):
                np.testing.assert_allclose(out[name][row, :n].numpy(), want[k], atol=2e-5)
            average = h5["average"][f"{i:03d}"][()]
            np.testing.assert_allclose(out["elmo"][row, :n].numpy(), average, atol=2e-5)


def test_onnx_client_uses_the_model_dictionary(efml_fixture, tmp_path):
    bilm = BiLM.from_preset(efml_fixture / MODEL)
    export_onnx(bilm, tmp_path / "m.onnx")
    sentences = json.loads((efml_fixture / "sentences.json").read_text())["sentences"]
    got = OnnxEmbedder(str(tmp_path / "m.onnx"), batch_size=8).embed(sentences)
    with h5py.File(efml_fixture / f"{MODEL}.expected.h5", "r") as h5:
        for i, array in enumerate(got):
            np.testing.assert_allclose(array, h5["all_layers"][f"{i:03d}"][()], atol=2e-5)
