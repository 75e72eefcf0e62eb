"""ELMoForManyLangs' languages by name, offline: a loopback mirror serves a fixture model packed
as a published zip (`$ELMO_KERAS_MIRROR`, the cache in `tmp_path`)."""

import argparse
import io
import json
import zipfile

import h5py
import numpy as np
import pytest

from elmo_keras import efml_presets, presets
from elmo_keras.cli.export import resolve_source
from elmo_keras.file_io.download import DownloadError
from elmo_keras.presets import PRESETS, preset_sources
from tests.file_io.test_download import FileServer

MODEL = "cnn_elmo_words"
ZIP_PATH = "/elmo/11/144.zip"  # English


def published_zip(folder):
    """The fixture model as the NLPL archives are laid out: a folder and a meta.json."""
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        archive.writestr("meta.json", json.dumps({"id": 144}))
        for path in sorted(folder.iterdir()):
            archive.write(path, f"144/{path.name}")
        archive.writestr("../evil.txt", "outside")  # never written: not inside the model folder
    return data.getvalue()


@pytest.fixture
def mirror(monkeypatch, tmp_path, efml_fixture):
    server = FileServer()
    server.files[ZIP_PATH] = published_zip(efml_fixture / MODEL)
    monkeypatch.setenv("ELMO_KERAS_MIRROR", server.url("/elmo/"))
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ELMO_KERAS_READ_TIMEOUT", "5")
    monkeypatch.setenv("ELMO_KERAS_CONNECT_TIMEOUT", "5")
    yield server
    server.stop()


def test_the_44_languages_are_named_presets():
    efml = {name: entry for name, entry in PRESETS.items() if "efml" in entry}
    assert len(efml) == 44 and len({e["efml"] for e in efml.values()}) == 44
    assert PRESETS["efml_chinese"]["efml"] == "11/179.zip"
    assert PRESETS["efml_norwegian_bokmal"]["language"] == "Norwegian Bokmål"
    assert preset_sources("efml_english")[0] == "http://vectors.nlpl.eu/repository/11/144.zip"
    network = PRESETS["efml_german"]["network"]
    assert network["encoder"]["dim"] == 4096 and network["token_embedder"]["word_dim"] == 100


def test_another_model_under_a_languages_name_is_refused(mirror, tmp_path):
    from elmo_keras.models import BiLM

    with pytest.raises(DownloadError) as info:
        BiLM.from_preset("efml_english")
    assert "is not the published preset 'efml_english': encoder.dim is 48, the published " in (
        str(info.value)
    )
    assert "\n" not in str(info.value)
    assert not list((tmp_path / "cache").rglob("evil.txt"))


def test_a_language_through_the_mirror_gives_efml_numbers(
    mirror, monkeypatch, efml_fixture, tmp_path, capsys
):
    from elmo_keras.cli import main
    from elmo_keras.models import BiLM
    from elmo_keras.models.bilm_embedder import BiLMEmbedder

    network = json.loads((efml_fixture / MODEL / "cnn_20_24_24_48_sample.json").read_text())
    monkeypatch.setitem(PRESETS["efml_english"], "network", network)  # pin the fixture's
    bilm = BiLM.from_preset("efml_english")
    sentences = json.loads((efml_fixture / "sentences.json").read_text())["sentences"]
    got = BiLMEmbedder(bilm).embed(sentences)
    with h5py.File(efml_fixture / f"{MODEL}.expected.h5", "r") as h5:
        for i, array in enumerate(got):
            np.testing.assert_allclose(array, h5["all_layers"][f"{i:03d}"][()], atol=2e-5)
    BiLM.from_preset("efml_english")  # fetched once
    # By name, the commands that read a biLM take it too (`export` as `dump-token-embeddings`:
    # `elmo_keras.cli.embed.resolve_model`); <S> is the model's <bos>.
    (tmp_path / "vocab.txt").write_text("<S>\n</S>\n" + sentences[0][0] + "\n")
    argv = ["dump-token-embeddings", "--preset", "efml_english", "--output", str(tmp_path / "t")]
    assert main([*argv, "--vocab", str(tmp_path / "vocab.txt")]) == 0
    with h5py.File(tmp_path / "t", "r") as h5:
        assert h5["embedding"].shape == (3, 24)
        np.testing.assert_allclose(h5["embedding"][2], got[0][0, 0, :24], atol=2e-5)
    source = {"options": None, "weights": None, "run_dir": None, "model": None}
    assert resolve_source(argparse.Namespace(preset="efml_english", **source)) == "efml_english"
    assert len(mirror.requests(ZIP_PATH)) == 1
    assert main(["presets", "efml_english"]) == 0
    assert capsys.readouterr().out.strip().endswith("/model")
    assert main(["presets"]) == 0
    assert "efml_english" in capsys.readouterr().out
    assert efml_presets.preset_name("Old Church Slavonic") == "efml_old_church_slavonic"


def test_entry_points_reading_options_and_weights_name_the_ones_that_load_it():
    with pytest.raises(ValueError, match="'efml_german' is an ELMoForManyLangs model .* do$"):
        presets.resolve_preset("efml_german")
