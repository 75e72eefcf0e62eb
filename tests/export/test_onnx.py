"""ONNX export: checker, dynamic axes, metadata, parity with Keras, state, int8 quantization."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from export_helpers import SENTENCES, assert_outputs_close, keras_outputs

from elmo_keras.text.char_ids import batch_to_char_ids


def _run(path, feeds):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds), strict=True))


def test_model_is_valid_with_dynamic_axes_and_metadata(exported):
    model = onnx.load(str(exported["allennlp"]["onnx"]))
    onnx.checker.check_model(model, full_check=True)
    assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) >= 17
    (char_ids,) = model.graph.input
    dims = [d.dim_param or d.dim_value for d in char_ids.type.tensor_type.shape.dim]
    assert char_ids.name == "char_ids" and dims == ["batch", "tokens", 50]
    outputs = {
        o.name: [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim]
        for o in model.graph.output
    }
    assert outputs == {
        "word_emb": ["batch", "tokens", 16],
        "lstm_outputs1": ["batch", "tokens", 32],
        "lstm_outputs2": ["batch", "tokens", 32],
        "elmo": ["batch", "tokens", 32],
        "default": ["batch", 32],
        "sequence_len": ["batch"],
    }
    metadata = {p.key: p.value for p in model.metadata_props}
    assert metadata["n_layers"] == "2" and metadata["projection_dim"] == "16"
    assert metadata["max_characters_per_token"] == "50" and metadata["lstm_units"] == "64"
    assert metadata["elmo_keras_version"]


@pytest.mark.parametrize("name", ["bilm_tf", "allennlp"])
def test_onnx_matches_keras(exported, fixture_sentences, name):
    entry = exported[name]
    batches = [
        [SENTENCES[1]],
        SENTENCES[:3],
        SENTENCES,
        fixture_sentences[:6],
        fixture_sentences[20:21],
    ]
    for batch in batches:
        char_ids = batch_to_char_ids(batch)
        expected = keras_outputs(entry["bilm"], entry["mix"], char_ids)
        assert_outputs_close(_run(entry["onnx"], {"char_ids": char_ids}), expected)


def test_onnx_ignores_padding(exported):
    entry = exported["bilm_tf"]
    alone = _run(entry["onnx"], {"char_ids": batch_to_char_ids([SENTENCES[1]])})
    padded = _run(entry["onnx"], {"char_ids": batch_to_char_ids([SENTENCES[1], SENTENCES[3]])})
    for name in ("default", "elmo", "lstm_outputs2"):
        np.testing.assert_allclose(
            padded[name][0][: alone[name].shape[1] if name != "default" else None],
            alone[name][0],
            atol=1e-5,
        )
    np.testing.assert_array_equal(padded["elmo"][0, 1:], 0.0)


def test_stateful_onnx_streams_like_keras(exported, stateful_onnx, fixture_sentences):
    entry = exported["bilm_tf"]
    bilm = entry["bilm"]
    model = onnx.load(str(stateful_onnx))
    assert [i.name for i in model.graph.input] == ["char_ids", "state_h", "state_c"]
    state = (
        np.zeros((3, 2, bilm.n_layers, bilm.projection_dim), np.float32),
        np.zeros((3, 2, bilm.n_layers, bilm.lstm_units), np.float32),
    )
    for window in (fixture_sentences[0:3], fixture_sentences[3:6]):
        char_ids = batch_to_char_ids(window)
        expected = keras_outputs(bilm, entry["mix"], char_ids, state=state)
        actual = _run(
            stateful_onnx, {"char_ids": char_ids, "state_h": state[0], "state_c": state[1]}
        )
        assert_outputs_close(actual, expected)
        state = (actual["final_state_h"], actual["final_state_c"])


def test_int8_quantization(exported, tmp_path, fixture_sentences):
    from elmo_keras.export import quantize_onnx

    entry = exported["allennlp"]
    destination = tmp_path / "model.int8.onnx"
    quantize_onnx(entry["onnx"], destination)
    model = onnx.load(str(destination))
    onnx.checker.check_model(model)
    metadata = {p.key: p.value for p in model.metadata_props}
    assert metadata["n_layers"] == "2" and "int8" in metadata["quantization"]
    ops = {node.op_type for node in model.graph.node}
    assert ops & {"DynamicQuantizeLinear", "MatMulInteger", "DynamicQuantizeMatMul"}
    loops = [node for node in model.graph.node if node.op_type == "Loop"]
    assert loops
    for loop in loops:  # the per-step LSTM products are quantized too
        body_ops = {node.op_type for node in loop.attribute[0].g.node}
        assert "MatMul" not in body_ops and "MatMulInteger" in body_ops, body_ops
    assert destination.stat().st_size < 0.9 * entry["onnx"].stat().st_size
    char_ids = batch_to_char_ids(fixture_sentences[:8])
    full = _run(entry["onnx"], {"char_ids": char_ids})
    quantized = _run(destination, {"char_ids": char_ids})
    mask = full["sequence_len"][:, None] > np.arange(char_ids.shape[1])[None]
    a, b = full["elmo"][mask], quantized["elmo"][mask]
    cosine = np.sum(a * b, -1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
    assert cosine.mean() > 0.9, cosine.mean()


def test_opset_below_17_is_rejected(exported, tmp_path):
    from elmo_keras.export import export_onnx

    with pytest.raises(ValueError, match="`opset` must be an integer >= 17"):
        export_onnx(exported["bilm_tf"]["bilm"], tmp_path / "m.onnx", opset=13)


def test_runtime_client_on_the_stateful_model(exported, stateful_onnx):
    from elmo_keras.runtime import OnnxEmbedder

    plain = OnnxEmbedder(exported["bilm_tf"]["onnx"], batch_size=2)
    streaming = OnnxEmbedder(stateful_onnx, batch_size=2)
    assert streaming.stateful and not plain.stateful
    for a, b in zip(plain.embed(SENTENCES), streaming.embed(SENTENCES), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)
