"""ONNX export: checker, dynamic axes, metadata, parity with Keras, state, int8 quantization."""

import json

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


def _token_feeds(char_ids):
    """The `token_index` form of `char_ids`, deduplicated here in plain Python (independent
    of the client's `np.unique`): the distinct rows in order of first use, -1 for padding."""
    rows, index = {}, np.full(char_ids.shape[:2], -1, np.int32)
    for b in range(char_ids.shape[0]):
        for t in range(char_ids.shape[1]):
            if char_ids[b, t, 0] != 0:
                index[b, t] = rows.setdefault(tuple(char_ids[b, t]), len(rows))
    distinct = np.array(list(rows) or [[0] * char_ids.shape[2]], np.int32)
    return {"token_char_ids": distinct, "token_index": index}


# Repeated tokens within and across sentences, a one-token sentence and an empty one.
REPEATS = [["the", "cat", "and", "the", "dog", "and", "the", "cat"], ["the"], [], ["cat", "cat"]]


def test_model_is_valid_with_dynamic_axes_and_metadata(exported):
    model = onnx.load(str(exported["allennlp"]["onnx"]))
    onnx.checker.check_model(model, full_check=True)
    assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) >= 17
    inputs = {
        i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
        for i in model.graph.input
    }
    assert inputs == {"token_char_ids": ["distinct_tokens", 50], "token_index": ["batch", "tokens"]}
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
    assert metadata["input_form"] == "token_index"
    assert json.loads(metadata["inputs"]) == ["token_char_ids", "token_index"]


@pytest.mark.parametrize("name", ["bilm_tf", "allennlp"])
def test_onnx_matches_keras(exported, fixture_sentences, name):
    entry = exported[name]
    batches = [
        [SENTENCES[1]],
        SENTENCES[:3],
        SENTENCES,
        fixture_sentences[:6],
        fixture_sentences[20:21],
        REPEATS,
    ]
    for batch in batches:
        char_ids = batch_to_char_ids(batch)
        expected = keras_outputs(entry["bilm"], entry["mix"], char_ids)
        assert_outputs_close(_run(entry["onnx"], _token_feeds(char_ids)), expected)


def test_onnx_ignores_padding(exported):
    entry = exported["bilm_tf"]
    alone = _run(entry["onnx"], _token_feeds(batch_to_char_ids([SENTENCES[1]])))
    padded = _run(entry["onnx"], _token_feeds(batch_to_char_ids([SENTENCES[1], SENTENCES[3]])))
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
    inputs = ["token_char_ids", "token_index", "state_h", "state_c"]
    assert [i.name for i in model.graph.input] == inputs
    state = (
        np.zeros((3, 2, bilm.n_layers, bilm.projection_dim), np.float32),
        np.zeros((3, 2, bilm.n_layers, bilm.lstm_units), np.float32),
    )
    for window in (fixture_sentences[0:3], fixture_sentences[3:6]):
        char_ids = batch_to_char_ids(window)
        expected = keras_outputs(bilm, entry["mix"], char_ids, state=state)
        feeds = {**_token_feeds(char_ids), "state_h": state[0], "state_c": state[1]}
        actual = _run(stateful_onnx, feeds)
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
    graphs = list(_graphs(model.graph))  # the char CNN's loop, the LSTMs' nested loops
    assert len(graphs) > 5
    ops = [node.op_type for graph in graphs for node in graph.node]
    assert "MatMul" not in ops and "Conv" not in ops  # every product, per-step ones too
    innermost = [g for g in graphs[1:] if not any(n.op_type == "Loop" for n in g.node)]
    for graph in innermost:  # the per-step LSTM products (and the char CNN's chunk loop)
        assert "MatMulInteger" in {node.op_type for node in graph.node}
    assert destination.stat().st_size < 0.9 * entry["onnx"].stat().st_size
    char_ids = batch_to_char_ids(fixture_sentences[:8])
    full = _run(entry["onnx"], _token_feeds(char_ids))
    quantized = _run(destination, _token_feeds(char_ids))
    mask = full["sequence_len"][:, None] > np.arange(char_ids.shape[1])[None]
    a, b = full["elmo"][mask], quantized["elmo"][mask]
    cosine = np.sum(a * b, -1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
    assert cosine.mean() > 0.9, cosine.mean()


def test_opset_below_17_is_rejected(exported, tmp_path):
    from elmo_keras.export import export_onnx

    with pytest.raises(ValueError, match="`opset` must be an integer >= 17"):
        export_onnx(exported["bilm_tf"]["bilm"], tmp_path / "m.onnx", opset=13)
    with pytest.raises(ValueError, match="`input_form` must be one of"):
        export_onnx(exported["bilm_tf"]["bilm"], tmp_path / "m.onnx", input_form="tokens")
    assert not (tmp_path / "m.onnx").exists()


def test_runtime_client_on_the_stateful_model(exported, stateful_onnx):
    from elmo_keras.runtime import OnnxEmbedder

    plain = OnnxEmbedder(exported["bilm_tf"]["onnx"], batch_size=2)
    streaming = OnnxEmbedder(stateful_onnx, batch_size=2)
    assert streaming.stateful and not plain.stateful
    for a, b in zip(plain.embed(SENTENCES), streaming.embed(SENTENCES), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)


def _graphs(graph):
    """`graph` and its subgraphs, nested ones too."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from _graphs(attribute.g)


def _all_initializers(graph):
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from _all_initializers(attribute.g)


def test_weights_enter_as_initializers_with_their_exact_values(exported):
    """The weights were graph inputs during the conversion: each variable's values are in the
    model (the LSTM weights inside their loop bodies), not copied, none left as an input."""
    from onnx import numpy_helper

    entry = exported["allennlp"]
    model = onnx.load(str(entry["onnx"]))
    assert not [i.name for i in model.graph.input if i.name.startswith("weight")]
    values = [numpy_helper.to_array(t) for t in _all_initializers(model.graph)]
    by_size = {}
    for value in values:
        by_size.setdefault(value.size, []).append(np.sort(value, axis=None))
    for variable in entry["bilm"].weights:
        expected = np.sort(np.asarray(variable), axis=None)  # layouts differ (Conv kernels)
        matches = [v for v in by_size.get(expected.size, []) if np.array_equal(v, expected)]
        assert matches, variable.path
    floats = sum(v.size for v in values if v.dtype == np.float32)
    assert floats <= sum(int(np.prod(v.shape)) for v in entry["bilm"].weights) + 1000
