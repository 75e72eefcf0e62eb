"""`BiLM`'s length-aware inference (distinct tokens, packed biLSTM) and `BiLMEmbedder`.

Expected numbers come from the plain path (`length_aware=False`), which test_bilm.py checks
against the published fixtures and the NumPy reference. The running backend's fast path
(`projected_bilstm.fast_path()`: TensorFlow's, PyTorch's or JAX's) is the one tested.
"""

import contextlib

import keras
import numpy as np
import pytest

from elmo_keras.layers.projected_bilstm import fast_path
from elmo_keras.models import BiLM, BiLMEmbedder
from elmo_keras.text import batch_to_char_ids
from tests.fast_path_context import without_autograd as inference
from tests.test_case import as_numpy

FAST_PATH = fast_path()
BACKEND = keras.config.backend()

pytestmark = pytest.mark.skipif(FAST_PATH is None, reason=f"no fast path on {BACKEND}")


@pytest.fixture(autouse=True)
def _jax_inference():
    """On JAX the fast path runs inside `jax_fast_path.inference()` (BiLMEmbedder's context)."""
    with getattr(FAST_PATH, "inference", contextlib.nullcontext)():
        yield


CONFIG = {"lstm_units": 16, "projection_dim": 6, "filters": [(1, 4), (2, 6)], "n_highway": 1}
SENTENCES = [
    ["the", "cat", "the", "cat", "sat"],
    [],
    ["sat"],
    ["a", "b", "the", "c", "a", "a", "d", "the"],
    ["é", "the"],
]


@pytest.fixture(scope="module")
def models():
    """A length-aware biLM and a plain one with the same random weights."""
    rng = np.random.default_rng(0)
    packed, plain = BiLM(**CONFIG), BiLM(length_aware=False, **CONFIG)
    packed.build()
    plain.build()
    for w in packed.weights:
        w.assign((0.8 * rng.normal(size=w.shape) / np.sqrt(w.shape[0])).astype("float32"))
    plain.set_weights(packed.get_weights())
    return packed, plain


@pytest.fixture(scope="module")
def embedder(models):
    """One embedder (its `tf.function` is traced once for the module)."""
    return BiLMEmbedder(models[0], batch_size=2, max_tokens=12)


def distinct_inputs(sentences):
    """The token_char_ids / token_index form of `sentences`, written out independently."""
    vocabulary = sorted({t for s in sentences for t in s}, reverse=True)
    steps = max(len(s) for s in sentences)
    index = np.full((len(sentences), steps), -1, np.int32)
    for i, sentence in enumerate(sentences):
        index[i, : len(sentence)] = [vocabulary.index(t) for t in sentence]
    char_ids = batch_to_char_ids([vocabulary]).reshape(len(vocabulary), -1)
    return {"token_char_ids": char_ids, "token_index": index}


def assert_outputs_close(got, want, atol=1e-6):
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_allclose(
            as_numpy(got[key], np.float64), as_numpy(want[key], np.float64), atol=atol, rtol=0
        )


@pytest.mark.parametrize("order", [[0, 1, 2, 3, 4], [3, 2, 4, 1, 0], [1, 2]])
def test_length_aware_equals_plain(models, order):
    packed, plain = models
    ids = batch_to_char_ids([SENTENCES[i] for i in order])
    with inference():
        assert_outputs_close(packed(ids), plain(ids))


def test_token_char_ids_form_equals_char_ids(models):
    packed, plain = models
    want = plain(batch_to_char_ids(SENTENCES))
    inputs = distinct_inputs(SENTENCES)
    with inference():
        assert_outputs_close(packed(inputs), want)
        assert_outputs_close(plain(inputs), want)  # the plain path takes this form too
        nothing = {
            "token_char_ids": np.zeros((0, 50), "int32"),
            "token_index": np.full((2, 1), -1, "int32"),
        }
        for model in models:  # all sentences empty: no distinct token
            assert tuple(model(nothing)["activations"].shape) == (2, 3, 1, 12)
    if BACKEND == "tensorflow":
        import tensorflow as tf

        run = tf.function(lambda a, b: packed({"token_char_ids": a, "token_index": b}))
        assert_outputs_close(run(inputs["token_char_ids"], inputs["token_index"]), want)


def test_state_in_and_out(models):
    packed, plain = models
    rng = np.random.default_rng(1)
    ids = batch_to_char_ids(SENTENCES)
    state = {
        "state_h": rng.normal(size=(5, 2, 2, 6)).astype("float32"),
        "state_c": rng.normal(size=(5, 2, 2, 16)).astype("float32"),
    }
    want = plain({"char_ids": ids, **state})
    with inference():
        assert_outputs_close(packed({"char_ids": ids, **state}), want)
        assert_outputs_close(packed({**distinct_inputs(SENTENCES), **state}), want)


@pytest.mark.parametrize("chunks", [(3,), (5, 2)])
def test_char_cnn_in_chunks(models, monkeypatch, chunks):
    """Chunks of a few tokens (on JAX, of several sizes, the last covering the rest) give the
    same numbers."""
    packed, plain = models
    if BACKEND == "jax":
        monkeypatch.setattr(FAST_PATH, "CHAR_CNN_CHUNKS", chunks)
        monkeypatch.setattr(FAST_PATH, "TOKEN_CHUNKS", chunks[::-1])
    else:
        monkeypatch.setattr(FAST_PATH, "CHAR_CNN_CHUNK", chunks[0])
    ids = batch_to_char_ids(SENTENCES)
    with inference():
        assert_outputs_close(packed(ids), plain(ids))


@pytest.mark.skipif(BACKEND != "torch", reason="PyTorch's char CNN on packed products")
@pytest.mark.parametrize("threads", [1, 2])
def test_on_torch_the_char_cnn_runs_on_packed_products(monkeypatch, threads):
    """PyTorch's fast path runs the char CNN itself, its products packed for oneDNN
    (convolutions in chunks of `CONVOLUTION_CHUNK` tokens, chunks of tokens shared by the two
    pool threads): the layer's numbers, for a tanh activation, two highways, a filter of
    width 7 and word embeddings, padding rows zero; the layer itself is not called."""
    import torch

    from elmo_keras.layers import CharCNN

    rng = np.random.default_rng(3)
    layer = CharCNN(
        filters=[(1, 4), (3, 5), (7, 9)],
        n_highway=2,
        projection_dim=8,
        activation="tanh",
        n_words=7,
        word_embedding_dim=3,
    )
    layer.build()
    for w in layer.weights:
        w.assign((0.2 * rng.normal(size=w.shape)).astype("float32"))
    ids = rng.integers(1, 262, size=(70, 51)).astype("int32")
    ids[:, -1] = rng.integers(0, 7, size=70)
    ids[[3, 40]] = 0
    want = as_numpy(layer(ids))
    assert np.abs(want[[3, 40]]).max() == 0
    assert np.abs(np.delete(want, [3, 40], axis=0)).max(axis=1).min() > 0

    def not_here(*args, **kwargs):
        raise AssertionError("the fast path called the char CNN layer")

    monkeypatch.setattr(CharCNN, "call", not_here)
    monkeypatch.setattr(FAST_PATH, "CHAR_CNN_CHUNK", 16)
    monkeypatch.setattr(FAST_PATH, "CONVOLUTION_CHUNK", 5)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            got = FAST_PATH._chunked_char_cnn(layer, torch.as_tensor(ids))
    finally:
        torch.set_num_threads(before)
    np.testing.assert_allclose(as_numpy(got), want, atol=1e-6, rtol=0)


def test_a_sentence_alone_equals_it_in_a_padded_batch(models):
    packed, _ = models
    with inference():
        alone = as_numpy(packed(batch_to_char_ids([SENTENCES[4]]))["activations"])[0]
        inside = as_numpy(packed(batch_to_char_ids(SENTENCES))["activations"])[4, :, :2]
    np.testing.assert_allclose(inside, alone, atol=1e-6, rtol=0)


def test_length_aware_in_the_config(models):
    packed, plain = models
    assert packed.get_config()["length_aware"] is True and packed.bilstm.length_aware
    config = plain.get_config()
    assert config["length_aware"] is False
    assert BiLM.from_config(config).bilstm.length_aware is False
    del config["length_aware"]  # saved before the argument existed
    assert BiLM.from_config(config).length_aware is True


def test_bad_dict_inputs_are_named(models):
    packed, _ = models
    with pytest.raises(ValueError, match="'token_char_ids' and 'token_index'"):
        packed({"token_index": np.zeros((1, 2), "int32")})
    with pytest.raises(ValueError, match=r"\[distinct, max_characters_per_token\]"):
        packed(
            {
                "token_char_ids": np.zeros((2, 2, 50), "int32"),
                "token_index": np.zeros((1, 2), "int32"),
            }
        )


def test_embedder_equals_the_plain_model_sentence_by_sentence(models, embedder):
    _, plain = models
    done = []
    got = embedder.embed(iter(SENTENCES), progress=done.append)
    assert done[-1] == len(SENTENCES)
    for sentence, vectors in zip(SENTENCES, got, strict=True):
        assert vectors.shape == (3, len(sentence), 12) and vectors.dtype == np.float32
        if sentence:
            want = as_numpy(plain(batch_to_char_ids([sentence]))["activations"])[0]
            np.testing.assert_allclose(vectors, want, atol=1e-6, rtol=0)
    pairs = dict(embedder.iter_embed(SENTENCES))
    assert sorted(pairs) == list(range(len(SENTENCES)))
    np.testing.assert_array_equal(pairs[3], got[3])


def test_length_grouped_batches_equal_one_padded_batch(models):
    """20 sentences of 1-17 tokens in one padded batch (on JAX every phase of the recurrence
    runs) and the same sentences grouped by length four at a time: the same vectors per row."""
    rng = np.random.default_rng(2)
    words = ["the", "cat", "sat", "a", "é", "on", "mat", "dog", "ran", "b"]
    lengths = [1, 17, 3, 9, 5, 12, 2, 7, 15, 4, 8, 6, 11, 3, 10, 1, 14, 5, 2, 13]
    sentences = [[words[i] for i in rng.integers(0, len(words), n)] for n in lengths]
    together = BiLMEmbedder(models[0], batch_size=20).embed_batch(sentences)
    grouped = BiLMEmbedder(models[0], batch_size=4).embed(sentences)
    for one, other in zip(together, grouped, strict=True):
        np.testing.assert_allclose(one, other, atol=1e-6, rtol=0)


def test_embed_batch_sends_each_distinct_token_once(embedder, monkeypatch):
    calls = []
    run = embedder._run
    monkeypatch.setattr(
        embedder, "_run", lambda ids, index: calls.append((ids, index)) or run(ids, index)
    )
    arrays = embedder.embed_batch(SENTENCES)
    assert len(calls) == 1
    ids, index = calls[0]
    assert ids.shape[0] == len({t for s in SENTENCES for t in s})
    assert index.shape == (5, 8) and int(np.min(index[1])) == -1
    assert [a.shape[1] for a in arrays] == [len(s) for s in SENTENCES]
    assert [a.shape[1] for a in embedder.embed_batch([[], []])] == [0, 0]


def test_embedder_argument_and_input_errors(models):
    packed, _ = models
    with pytest.raises(ValueError, match="max_tokens"):
        BiLMEmbedder(packed, max_tokens=0)
    with pytest.raises(ValueError, match="batch_size"):
        BiLMEmbedder(packed, batch_size=0)
    embedder = BiLMEmbedder(packed)
    with pytest.raises(ValueError, match="single string"):
        embedder.embed("the cat sat")
    with pytest.raises(ValueError, match=r"sentences\[0\]\[1\]"):
        embedder.embed([["the", 3]])


def test_a_call_can_ask_for_the_plain_path(models, monkeypatch):
    """`length_aware=False` in the call (what `BiLMEmbedder(jit_compile=True)` uses)."""
    packed, plain = models

    def not_here(*args, **kwargs):
        raise AssertionError("the packed path ran")

    ids = batch_to_char_ids(SENTENCES)
    monkeypatch.setattr(FAST_PATH, "embed_distinct_tokens", not_here)
    monkeypatch.setattr(FAST_PATH, "packed_bilstm", not_here)
    with inference():
        assert_outputs_close(packed(ids, length_aware=False), plain(ids), atol=0)


@pytest.mark.skipif(BACKEND != "torch", reason="PyTorch's embedder runs the model eagerly")
def test_the_embedder_on_torch_takes_the_fast_path(models, monkeypatch):
    calls = []
    for name in ("embed_distinct_tokens", "packed_bilstm"):
        real = getattr(FAST_PATH, name)
        monkeypatch.setattr(
            FAST_PATH, name, lambda *a, _r=real, _n=name: calls.append(_n) or _r(*a)
        )
    BiLMEmbedder(models[0]).embed_batch(SENTENCES)
    assert calls == ["embed_distinct_tokens", "packed_bilstm"]


@pytest.mark.skipif(BACKEND != "jax", reason="JAX's embedder keeps the step kernels transposed")
def test_the_jax_embedder_makes_its_step_kernels_again_when_the_weights_change(models):
    """The transposed step kernels `BiLMEmbedder` keeps between calls follow `assign`: after new
    weights, its vectors are those of the plain path on the new weights."""
    packed, plain = models
    embedder = BiLMEmbedder(packed)
    before = embedder.embed_batch(SENTENCES)
    saved = packed.get_weights()
    rng = np.random.default_rng(11)
    try:
        packed.set_weights([w + 0.3 * rng.normal(size=w.shape).astype("float32") for w in saved])
        plain.set_weights(packed.get_weights())
        after = embedder.embed_batch(SENTENCES)
        want = as_numpy(plain(batch_to_char_ids(SENTENCES))["activations"])
    finally:
        packed.set_weights(saved)
        plain.set_weights(saved)
    for row, (old, new) in enumerate(zip(before, after, strict=True)):
        n = len(SENTENCES[row])
        np.testing.assert_allclose(new, want[row, :, :n], atol=1e-5, rtol=0)
        if n:
            assert np.abs(new - old).max() > 1e-3
