"""Presets: the registry's published names, `resolve_preset`, model folders, and loading a
published model by name through a loopback mirror (`$ELMO_KERAS_MIRROR`)."""

import numpy as np
import pytest

from elmo_keras import presets
from elmo_keras.file_io.download import DownloadError
from elmo_keras.presets import PRESETS, find_model_files, resolve_preset
from tests.file_io.test_download import FIXTURES, FileServer, serve_presets
from tests.fresh_interpreter import run_script

PUBLISHED = {
    "small": "2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway",
    "medium": "2x2048_256_2048cnn_1xhighway/elmo_2x2048_256_2048cnn_1xhighway",
    "original": "2x4096_512_2048cnn_2xhighway/elmo_2x4096_512_2048cnn_2xhighway",
    "original_5.5b": "2x4096_512_2048cnn_2xhighway_5.5B/elmo_2x4096_512_2048cnn_2xhighway_5.5B",
}


@pytest.fixture
def mirror(monkeypatch, tmp_path):
    server = serve_presets(FileServer(), monkeypatch, tmp_path)
    yield server
    server.stop()


def test_the_registry_holds_the_published_file_names_and_sizes(monkeypatch):
    monkeypatch.delenv("ELMO_KERAS_MIRROR", raising=False)
    efml = {name for name in PRESETS if name.startswith("efml_")}  # tests/test_efml_presets.py
    assert set(PRESETS) - efml == {*PUBLISHED, "mini_en", "tiny"} and len(efml) == 44
    for name, stem in PUBLISHED.items():
        assert presets.preset_sources(name) == (
            f"{presets.BASE_URL}{stem}_options.json",
            f"{presets.BASE_URL}{stem}_weights.hdf5",
        )
    assert presets.BASE_URL == "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/"
    sizes = {n: (e["lstm_units"], e["projection_dim"], e["n_highway"]) for n, e in PRESETS.items()}
    assert sizes["small"] == (1024, 128, 1) and sizes["medium"] == (2048, 256, 1)
    assert sizes["original"] == sizes["original_5.5b"] == (4096, 512, 2)
    assert "Wikipedia (1.9B)" in PRESETS["original_5.5b"]["trained_on"]


@pytest.mark.parametrize(
    "mirror_value", ["http://mirror.example/elmo", "http://mirror.example/elmo/"]
)
def test_the_mirror_replaces_the_base_url(monkeypatch, mirror_value):
    monkeypatch.setenv("ELMO_KERAS_MIRROR", mirror_value)
    assert presets.preset_sources("ORIGINAL")[1] == (
        f"http://mirror.example/elmo/{PUBLISHED['original']}_weights.hdf5"
    )


def test_tiny_is_the_packaged_model():
    options, weights = resolve_preset("tiny")
    assert options.read_bytes() == (FIXTURES / "options.json").read_bytes()
    assert weights.read_bytes() == (FIXTURES / "lm_weights.hdf5").read_bytes()
    assert weights.parent.parts[-2:] == ("assets", "tiny_allennlp")


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError) as info:
        resolve_preset("large")
    message = str(info.value)
    assert message.startswith("`preset` must be one of ") and "Received: preset='large'" in message
    for name in PRESETS:
        assert repr(name) in message or name.startswith("efml_")
    assert "'efml_<language>' (ELMoForManyLangs' 44 languages" in message


def test_model_folders(tmp_path):
    run = tmp_path / "run"  # what `elmo-keras train` writes
    run.mkdir()
    for name in ("options.json", "lm_weights.hdf5", "softmax.hdf5", "vocab.txt"):
        (run / name).write_text("x")
    assert resolve_preset(run) == (run / "options.json", run / "lm_weights.hdf5")
    assert resolve_preset(str(run)) == find_model_files(run)
    published = tmp_path / "published"  # the two files as AllenNLP names them
    published.mkdir()
    for name in ("elmo_2x1024_options.json", "elmo_2x1024_weights.hdf5", "softmax.hdf5"):
        (published / name).write_text("x")
    assert find_model_files(published) == (
        published / "elmo_2x1024_options.json",
        published / "elmo_2x1024_weights.hdf5",
    )
    (published / "other.hdf5").write_text("x")
    with pytest.raises(
        ValueError, match=r"no weights file .*: found elmo_2x1024_weights.hdf5, oth"
    ):
        find_model_files(published)
    (run / "options.json").unlink()
    with pytest.raises(ValueError, match="no options.json in the model folder"):
        find_model_files(run)
    with pytest.raises(ValueError, match=r"`folder` must be a folder .* Received: folder="):
        find_model_files(tmp_path / "missing")


def test_the_preset_modules_import_no_tensorflow():
    code = (
        "import sys, elmo_keras.presets, elmo_keras.file_io.download, elmo_keras.cli.presets; "
        "assert not {'tensorflow', 'keras'} & set(sys.modules), sorted(sys.modules)"
    )
    run_script(code, timeout=60)


def test_original_through_the_mirror_equals_the_files_loaded_directly(mirror):
    from elmo_keras.models import BiLM
    from elmo_keras.text import batch_to_char_ids

    ids = batch_to_char_ids([["The", "bank", "raised", "rates", "."], ["Rivers", "flood"]])
    direct = BiLM.from_bilm_tf(FIXTURES / "options.json", FIXTURES / "lm_weights.hdf5")(ids)
    by_name = BiLM.from_preset("original")(ids)  # the tiny fixture under the original's names
    np.testing.assert_array_equal(by_name["activations"], direct["activations"])
    weights_path = f"/elmo/{PUBLISHED['original']}_weights.hdf5"
    assert [r["status"] for r in mirror.requests(weights_path)] == [200]
    BiLM.from_preset("original")  # the second time from the cache: no new request
    assert len(mirror.requests(weights_path)) == 1
    by_url = BiLM.from_bilm_tf(
        mirror.url(f"/elmo/{PUBLISHED['small']}_options.json"),
        mirror.url(f"/elmo/{PUBLISHED['small']}_weights.hdf5"),
    )
    np.testing.assert_array_equal(by_url(ids)["activations"], direct["activations"])


def test_elmo_embedding_from_a_preset_and_from_urls(mirror):
    import tensorflow as tf

    from elmo_keras.models import ElmoEmbedding

    tiny = ElmoEmbedding.from_preset("tiny", input_type="sentences", dropout=0.0)
    stem = f"/elmo/{PUBLISHED['medium']}"
    remote = ElmoEmbedding.from_bilm_tf(
        mirror.url(f"{stem}_options.json"),
        mirror.url(f"{stem}_weights.hdf5"),
        input_type="sentences",
        dropout=0.0,
    )
    sentences = tf.constant(["The bank closed early.", "Rivers flood."])
    assert tiny(sentences).shape == (2, 5, 32)
    np.testing.assert_array_equal(remote(sentences), tiny(sentences))


def test_a_mirror_serving_another_model_under_a_presets_names_is_refused(
    monkeypatch, tmp_path, capsys
):
    """Issue 30, point 11: `tiny`'s files under `small`'s names gave 32-dim vectors, exit 0."""
    from elmo_keras.cli import main

    server = serve_presets(FileServer(), monkeypatch, tmp_path, pin=False)
    try:
        with pytest.raises(DownloadError) as info:
            resolve_preset("small")
        assert main(["presets", "small"]) == 1
    finally:
        server.stop()
    assert str(info.value).endswith(
        "is not the published preset 'small': lstm.dim is 64, the published model has 1024 "
        "(does $ELMO_KERAS_MIRROR serve another model under its names?)"
    )
    assert capsys.readouterr().err.count("\n") == 1  # one line
    assert server.requests(f"/elmo/{PUBLISHED['small']}_weights.hdf5") == []  # never fetched


def test_the_published_architectures_are_pinned():
    # From the published *_options.json: char CNN filters [[1, 32], [2, 32], [3, 64], [4, 128],
    # [5, 256], [6, 512], [7, 1024]] (2048), character embedding 16, two LSTM layers.
    cnn = {"char_cnn.filters": 2048, "char_cnn.embedding.dim": 16, "lstm.n_layers": 2}
    sizes = {"small": (1024, 128, 1), "medium": (2048, 256, 1), "original": (4096, 512, 2)}
    sizes["original_5.5b"] = sizes["original"]
    for name, (dim, projection, highway) in sizes.items():
        expected = {"lstm.dim": dim, "lstm.projection_dim": projection, **cnn}
        assert PRESETS[name]["architecture"] == {**expected, "char_cnn.n_highway": highway}


@pytest.mark.parametrize(
    ("preset", "start"),
    [
        ("smal", "Did you mean 'small'? `preset` must be one of "),
        ("orignal", "Did you mean 'original'? `preset` must be one of "),
        ("hf://allenai/elmo", "`preset` does not take hf:// handles (model hubs such as hf:// "),
        ("kaggle://allenai/elmo", "`preset` does not take kaggle:// handles"),
    ],
)
def test_a_typo_gets_a_suggestion_and_a_hub_handle_a_specific_line(preset, start):
    with pytest.raises(ValueError) as info:
        resolve_preset(preset)
    assert str(info.value).startswith(start) and f"Received: preset={preset!r}" in str(info.value)
