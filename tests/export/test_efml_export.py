"""An ELMoForManyLangs model exported as a SavedModel or ONNX gives EFML's numbers from strings:
through the Python API, and through `elmo-keras export` from its EFML folder and from the
preset folder `save_to_preset` converts it into."""

import json

import h5py
import numpy as np
import pytest
import tensorflow as tf
from elmo_keras.export.onnx import export_onnx
from elmo_keras.export.savedmodel import export_savedmodel

from elmo_keras.cli import main
from elmo_keras.models import BiLM
from elmo_keras.runtime import OnnxEmbedder

MODEL = "cnn_elmo_words"
ATOL = 2e-5


def _sentences(efml_fixture):
    return json.loads((efml_fixture / "sentences.json").read_text())["sentences"]


def check_tokens_signature(loaded, efml_fixture, model):
    """The SavedModel's `tokens` signature on the fixture's sentences: EFML's layers and
    average within `ATOL`."""
    sentences = _sentences(efml_fixture)
    chosen = [i for i, s in enumerate(sentences) if s and all(s)]  # "" pads the signature
    longest = max(len(sentences[i]) for i in chosen)
    tokens = [sentences[i] + [""] * (longest - len(sentences[i])) for i in chosen]
    lengths = [len(sentences[i]) for i in chosen]
    out = loaded.signatures["tokens"](tokens=tf.constant(tokens), sequence_len=tf.constant(lengths))
    with h5py.File(efml_fixture / f"{model}.expected.h5", "r") as h5:
        for row, i in enumerate(chosen):
            n, want = lengths[row], h5["all_layers"][f"{i:03d}"][()]
            for k, name in ((1, "lstm_outputs1"), (2, "lstm_outputs2")):
                np.testing.assert_allclose(out[name][row, :n].numpy(), want[k], atol=ATOL)
            average = h5["average"][f"{i:03d}"][()]
            np.testing.assert_allclose(out["elmo"][row, :n].numpy(), average, atol=ATOL)


def check_onnx_client(path, efml_fixture, model):
    """`OnnxEmbedder` on the fixture's sentences (ids through the dictionaries in the model's
    metadata): EFML's layers within `ATOL`."""
    got = OnnxEmbedder(str(path), batch_size=8).embed(_sentences(efml_fixture))
    with h5py.File(efml_fixture / f"{model}.expected.h5", "r") as h5:
        for i, array in enumerate(got):
            np.testing.assert_allclose(array, h5["all_layers"][f"{i:03d}"][()], atol=ATOL)


def test_savedmodel_tokens_signature_uses_the_model_dictionary(efml_fixture, tmp_path):
    bilm = BiLM.from_preset(efml_fixture / MODEL)
    export_savedmodel(bilm, tmp_path / "saved")
    check_tokens_signature(tf.saved_model.load(str(tmp_path / "saved")), efml_fixture, MODEL)


def test_onnx_client_uses_the_model_dictionary(efml_fixture, tmp_path):
    bilm = BiLM.from_preset(efml_fixture / MODEL)
    export_onnx(bilm, tmp_path / "m.onnx")
    check_onnx_client(tmp_path / "m.onnx", efml_fixture, MODEL)


@pytest.fixture(scope="module")
def cli_exports(efml_fixture, tmp_path_factory):
    """{model: export folder} written by `elmo-keras export`: `cnn_elmo_chars` from its EFML
    folder (`--model`), `cnn_elmo_words` from the preset folder it was converted into
    (`--preset`), with the pickle reader made to fail (the converted folder needs none)."""
    import elmo_keras.efml

    root = tmp_path_factory.mktemp("efml_cli_exports")
    converted = BiLM.from_preset(efml_fixture / "cnn_elmo_words").save_to_preset(root / "words")
    sources = {
        "cnn_elmo_chars": ["--model", str(efml_fixture / "cnn_elmo_chars")],
        "cnn_elmo_words": ["--preset", str(converted)],
    }
    folders = {}
    with pytest.MonkeyPatch.context() as patch:
        for model, flags in sources.items():
            if model == "cnn_elmo_words":
                patch.setattr(elmo_keras.efml, "read_state_dict", _no_pickles)
            folders[model] = root / f"{model}_export"
            assert main(["export", *flags, "--output", str(folders[model])]) == 0
    return folders


def _no_pickles(path):
    raise AssertionError(f"a converted preset folder read a pickle: {path}")


@pytest.mark.parametrize("model", ["cnn_elmo_chars", "cnn_elmo_words"])
def test_cli_export_of_an_efml_model_gives_efml_numbers(cli_exports, efml_fixture, model):
    folder = cli_exports[model]
    manifest = json.loads((folder / "export.json").read_text())
    assert manifest["files"] == {"savedmodel": "savedmodel", "onnx": "model.onnx"}
    check_tokens_signature(tf.saved_model.load(str(folder / "savedmodel")), efml_fixture, model)
    check_onnx_client(folder / "model.onnx", efml_fixture, model)
