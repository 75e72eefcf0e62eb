"""Issue 39, point 15: an ONNX model's metadata is checked against its graph. `n_layers "1"`
returned 2 layers of 3, `"-1"` was an `IndexError`, `max_characters_per_token` 1e9 tried to
allocate 7.45 GiB; now each is one line naming the file, the key and the limit or the graph's
value. The model is the session's `onnx_model` (2 layers, projection 16, 50 characters) with
one metadata entry changed."""

import onnx
import pytest

from elmo_keras.runtime import OnnxEmbedder


def _with_metadata(onnx_model, tmp_path, **changes):
    model = onnx.load(str(onnx_model))
    for entry in model.metadata_props:
        if entry.key in changes:
            entry.value = changes.pop(entry.key)
    assert not changes, changes
    path = tmp_path / "changed.onnx"
    onnx.save_model(model, str(path))
    return path


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("n_layers", "1", "`n_layers` is 1, but the graph has 2 (its lstm_outputs{k} outputs)"),
        ("n_layers", "-1", "`n_layers` must be an integer in [1, 64]. Received: '-1'"),
        ("n_layers", "two", "`n_layers` must be an integer in [1, 64]. Received: 'two'"),
        (
            "max_characters_per_token",
            "1000000000",
            "`max_characters_per_token` must be an integer in [3, 1,000]",
        ),
        (
            "max_characters_per_token",
            "40",
            "`max_characters_per_token` is 40, but the graph has 50 (the character input's",
        ),
        ("projection_dim", "8", "`projection_dim` is 8, but the graph has 16 (word_emb's"),
    ],
)
def test_metadata_that_disagrees_with_the_graph_is_one_line(
    onnx_model, tmp_path, key, value, message
):
    path = _with_metadata(onnx_model, tmp_path, **{key: value})
    with pytest.raises(ValueError) as error:
        OnnxEmbedder(path)
    text = str(error.value)
    assert text.startswith(f"ONNX model {path}: metadata ") and message in text, text
    assert "\n" not in text


def test_the_checked_metadata_is_what_the_client_uses(onnx_model):
    embedder = OnnxEmbedder(onnx_model)
    assert (embedder.n_layers, embedder.projection_dim) == (2, 16)
    assert embedder.max_characters_per_token == 50


def test_export_refuses_metadata_that_would_replace_the_models_own(keras_bilm, tmp_path):
    from elmo_keras.export import export_onnx

    with pytest.raises(ValueError, match=r"must not set the keys .*Received: \['n_layers'\]"):
        export_onnx(keras_bilm, tmp_path / "m.onnx", metadata={"n_layers": "1", "mine": "x"})
    assert not (tmp_path / "m.onnx").exists()
