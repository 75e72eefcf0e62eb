"""ONNX export: checker, dynamic axes, metadata, parity with Keras, state, int8 quantization,
tf2onnx's rollback copies (off, retried with them on failure, the user's setting kept)."""

import collections
import contextlib
import json
import os
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from export_helpers import SENTENCES, assert_outputs_close, keras_outputs

from elmo_keras.text.char_ids import batch_to_char_ids, bos_char_ids, token_to_char_ids


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
    # A client without elmo-keras builds character ids from the metadata alone: bilm-tf's
    # inference convention, PAD included (filling with 0 instead changes the outputs).
    bow, eow, pad, bos = (int(metadata[f"char_id_{k}"]) for k in ("bow", "eow", "pad", "bos"))
    width = int(metadata["max_characters_per_token"])
    word = [bow, *(b + 1 for b in "café".encode()), eow]
    np.testing.assert_array_equal(token_to_char_ids("café"), word + [pad] * (width - len(word)))
    np.testing.assert_array_equal(bos_char_ids(), [bow, bos, eow] + [pad] * (width - 3))
    assert f"PAD {pad}" in metadata["char_id_convention"]


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


CATCH_ERRORS = "TF2ONNX_CATCH_ERRORS"
UNSET = "<unset>"


@pytest.fixture
def fake_conversion(monkeypatch):
    """Replaces tf2onnx's conversion by a stub that records `TF2ONNX_CATCH_ERRORS` at each call
    and raises at the calls whose index is in `failures`; the others return an empty model,
    which `export_onnx` finishes in milliseconds. Yields `(calls, failures)`."""
    import tf2onnx

    calls, failures = [], set()

    def from_function(function, input_signature, opset):
        calls.append(os.environ.get(CATCH_ERRORS, UNSET))
        if len(calls) - 1 in failures:
            raise RuntimeError(f"conversion {len(calls)} failed\nsecond line")
        graph = onnx.helper.make_graph([], "empty", [], [])
        opsets = [onnx.helper.make_opsetid("", opset)]
        return onnx.helper.make_model(graph, opset_imports=opsets), None

    monkeypatch.setattr(tf2onnx.convert, "from_function", from_function)
    return calls, failures


@contextlib.contextmanager
def _retry_warnings():
    """Yields a list that receives the messages of the retry warnings given in the block."""
    retries = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield retries
    retries.extend(str(w.message) for w in caught if "rollback copies" in str(w.message))


@pytest.mark.parametrize("user_value", [None, "TRUE", "FALSE", "0"])
def test_conversion_runs_once_and_leaves_the_environment_as_it_was(
    exported, fake_conversion, tmp_path, monkeypatch, user_value
):
    from elmo_keras.export import export_onnx

    calls, _ = fake_conversion
    if user_value is None:
        monkeypatch.delenv(CATCH_ERRORS, raising=False)
    else:
        monkeypatch.setenv(CATCH_ERRORS, user_value)
    before = dict(os.environ)
    with _retry_warnings() as retries:
        export_onnx(exported["bilm_tf"]["bilm"], tmp_path / "m.onnx")
    assert dict(os.environ) == before
    # Unset: the copies are off for the call (any value means off to tf2onnx 1.17); set: the
    # user's value, untouched.
    assert calls == ["FALSE" if user_value is None else user_value]
    assert not retries
    assert (tmp_path / "m.onnx").exists()


def test_a_failed_conversion_is_retried_with_tf2onnx_default_and_warns(
    exported, fake_conversion, tmp_path, monkeypatch
):
    from elmo_keras.export import export_onnx

    calls, failures = fake_conversion
    monkeypatch.delenv(CATCH_ERRORS, raising=False)
    failures.add(0)
    before = dict(os.environ)
    with _retry_warnings() as retries:
        export_onnx(exported["bilm_tf"]["bilm"], tmp_path / "m.onnx")
    assert calls == ["FALSE", UNSET]  # tf2onnx's default, with the copies, the second time
    assert len(retries) == 1 and "\n" not in retries[0]
    assert "RuntimeError: conversion 1 failed" in retries[0] and "second line" not in retries[0]
    assert dict(os.environ) == before
    assert (tmp_path / "m.onnx").exists()


def test_when_the_retry_fails_too_its_error_is_raised_and_the_environment_restored(
    exported, fake_conversion, tmp_path, monkeypatch
):
    from elmo_keras.export import export_onnx

    calls, failures = fake_conversion
    monkeypatch.delenv(CATCH_ERRORS, raising=False)
    failures.update({0, 1})
    before = dict(os.environ)
    with _retry_warnings() as retries, pytest.raises(RuntimeError, match="conversion 2 failed"):
        export_onnx(exported["bilm_tf"]["bilm"], tmp_path / "m.onnx")
    assert calls == ["FALSE", UNSET]
    assert len(retries) == 1
    assert dict(os.environ) == before
    assert not (tmp_path / "m.onnx").exists()


@pytest.mark.parametrize("user_value", ["FALSE", "TRUE"])
def test_a_users_setting_is_respected_without_retry(
    exported, fake_conversion, tmp_path, monkeypatch, user_value
):
    from elmo_keras.export import export_onnx

    calls, failures = fake_conversion
    monkeypatch.setenv(CATCH_ERRORS, user_value)
    failures.add(0)
    with _retry_warnings() as retries, pytest.raises(RuntimeError, match="conversion 1 failed"):
        export_onnx(exported["bilm_tf"]["bilm"], tmp_path / "m.onnx")
    assert calls == [user_value]
    assert not retries
    assert os.environ[CATCH_ERRORS] == user_value


class _FailingPass:
    """A tf2onnx optimizer pass that always raises."""

    graph_been_opt = False

    def optimize(self, graph, iteration):
        raise RuntimeError("this optimizer pass always fails")


def test_an_optimizer_pass_that_fails_is_rolled_back_on_the_retry(exported, tmp_path, monkeypatch):
    """The real conversion: without the copies tf2onnx raises from the failing pass; the retry
    rolls the pass back (tf2onnx's default) and the model still matches Keras. The failing pass
    is the only one, so the unoptimized graph also checks the surgery does not rely on them."""
    import tf2onnx.optimizer
    from elmo_keras.export import export_onnx

    entry = exported["bilm_tf"]
    monkeypatch.delenv(CATCH_ERRORS, raising=False)
    passes = collections.OrderedDict([("always_fails", _FailingPass)])
    monkeypatch.setattr(tf2onnx.optimizer, "_optimizers", passes)
    path = tmp_path / "m.onnx"
    with _retry_warnings() as retries:
        export_onnx(entry["bilm"], path, scalar_mix=entry["mix"])
    assert len(retries) == 1 and "this optimizer pass always fails" in retries[0]
    assert CATCH_ERRORS not in os.environ
    char_ids = batch_to_char_ids(SENTENCES[:3])
    expected = keras_outputs(entry["bilm"], entry["mix"], char_ids)
    assert_outputs_close(_run(path, _token_feeds(char_ids)), expected)
