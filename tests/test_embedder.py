"""`Embedder`, the embedders' shared base: input order, empty sentences, streams, raw text.

A NumPy stand-in model (`Fake`) computes each token's vectors from its characters, a padded
batch at a time; the expected arrays are written out per sentence in float64 (`expected`),
independently of any batching.
"""

import numpy as np
import pytest

from elmo_keras.embedder import Embedder
from elmo_keras.text.tokenization import tokenize_python

N_LAYERS, PROJECTION_DIM = 2, 3
SENTENCES = [
    ["a", "much", "longer", "sentence", "than", "the", "others"],
    ["hi"],
    [],
    ["the", "cat", "sat"],
    ["é", "ü"],
    [],
    ["hi"],
    ["one", "two", "three", "four"],
]


def expected(tokens):
    """Layer k, token j, feature f: k + ord(first character) / 1000 + len(token) + f / 10."""
    layers = np.zeros((N_LAYERS + 1, len(tokens), 2 * PROJECTION_DIM), np.float64)
    for j, token in enumerate(tokens):
        for k in range(N_LAYERS + 1):
            for f in range(2 * PROJECTION_DIM):
                layers[k, j, f] = k + ord(token[0]) / 1000 + len(token) + f / 10
    return layers


class Fake(Embedder):
    """A model call on a padded batch, in NumPy; records the batches it is given."""

    n_layers, projection_dim = N_LAYERS, PROJECTION_DIM

    def __init__(self, batch_size=2, max_tokens=None):
        super().__init__(batch_size, max_tokens)
        self.batches = []

    def embed_batch(self, sentences):
        self.batches.append([list(s) for s in sentences])
        steps = max(len(s) for s in sentences)
        first = np.zeros((len(sentences), steps), np.float32)
        length = np.zeros((len(sentences), steps), np.float32)
        for i, sentence in enumerate(sentences):
            first[i, : len(sentence)] = [ord(t[0]) / 1000 for t in sentence]
            length[i, : len(sentence)] = [len(t) for t in sentence]
        layer = np.arange(N_LAYERS + 1, dtype=np.float32)[None, :, None, None]
        feature = np.arange(2 * PROJECTION_DIM, dtype=np.float32) / 10
        padded = layer + (first + length)[:, None, :, None] + feature  # [B, L + 1, T, 2P]
        return [padded[i, :, : len(s)] for i, s in enumerate(sentences)]


def test_embed_restores_input_order_across_length_sorted_batches():
    embedder = Fake(batch_size=2)
    got = embedder.embed(SENTENCES)
    # The model saw length-sorted batches, not the input order: the order is put back.
    lengths = [len(s) for batch in embedder.batches for s in batch]
    assert lengths == sorted(lengths) and len(embedder.batches) > 1
    assert len(got) == len(SENTENCES)
    for sentence, layers in zip(SENTENCES, got, strict=True):
        assert layers.shape == (N_LAYERS + 1, len(sentence), 2 * PROJECTION_DIM)
        np.testing.assert_allclose(layers, expected(sentence), rtol=0, atol=1e-5)
    pairs = dict(Fake(batch_size=3).iter_embed(SENTENCES))
    assert sorted(pairs) == list(range(len(SENTENCES)))
    np.testing.assert_array_equal(pairs[3], got[3])


def test_empty_sentences_need_no_model_call():
    embedder = Fake()
    assert embedder.output_dim == 2 * PROJECTION_DIM
    assert embedder.embed([]) == []
    got = embedder.embed([[], []])
    assert embedder.batches == []
    for layers in got:
        assert layers.shape == (N_LAYERS + 1, 0, 2 * PROJECTION_DIM)
        assert layers.dtype == np.float32


def test_a_generator_is_read_and_progress_is_reported():
    embedder, done = Fake(batch_size=2, max_tokens=6), []
    got = embedder.embed((list(s) for s in SENTENCES), progress=done.append)
    assert done == sorted(done) and done[-1] == len(SENTENCES)
    assert len(done) == len(embedder.batches) + 1  # the empty sentences: one group, no call
    for sentence, layers in zip(SENTENCES, got, strict=True):
        np.testing.assert_allclose(layers, expected(sentence), rtol=0, atol=1e-5)


def test_embed_text_tokenizes_then_embeds():
    embedder = Fake()
    tokens, layers = embedder.embed_text(["Hello, world!", "", "U.S. cats"])
    assert tokens == [["Hello", ",", "world", "!"], [], ["U", ".", "S", ".", "cats"]]
    for sentence, got in zip(tokens, layers, strict=True):
        np.testing.assert_allclose(got, expected(sentence), rtol=0, atol=1e-5)
    tokens, _ = embedder.embed_text(["Hello, world!"], mode="whitespace")
    assert tokens == [["Hello,", "world!"]]
    with pytest.raises(ValueError, match="`texts` must be a list of str"):
        embedder.embed_text("Hello, world!")
    with pytest.raises(ValueError, match="mode"):
        embedder.embed_text(["Hello"], mode="words")


def test_argument_and_input_errors():
    with pytest.raises(ValueError, match="batch_size"):
        Fake(batch_size=0)
    with pytest.raises(ValueError, match="max_tokens"):
        Fake(max_tokens=0)
    with pytest.raises(ValueError, match="single string"):
        Fake().embed("the cat sat")
    with pytest.raises(ValueError, match=r"sentences\[1\]\[0\]"):
        Fake().embed([["the"], [3]])


def test_a_subclass_must_provide_the_model_parts():
    embedder = Embedder(batch_size=4)
    for name in ("n_layers", "projection_dim", "output_dim"):
        with pytest.raises(NotImplementedError, match="must implement `"):
            getattr(embedder, name)
    with pytest.raises(NotImplementedError, match="Embedder must implement `embed_batch`"):
        embedder.embed([["a"]])
    assert repr(Fake(max_tokens=8)) == (
        "Fake(batch_size=2, max_tokens=8, n_layers=2, projection_dim=3)"
    )


def test_both_embedders_share_the_base():
    from elmo_keras.models import BiLMEmbedder
    from elmo_keras.runtime import OnnxEmbedder

    for cls in (BiLMEmbedder, OnnxEmbedder):
        assert issubclass(cls, Embedder)
        for name in ("embed", "iter_embed", "embed_text", "_empty", "output_dim"):
            assert name not in vars(cls), f"{cls.__name__} keeps its own copy of {name}"


@pytest.mark.tensorflow_only
def test_bilm_embedder_embed_text_equals_embed_of_the_tokens():
    from elmo_keras.models import BiLM, BiLMEmbedder

    bilm = BiLM(lstm_units=8, projection_dim=4, filters=[(1, 4), (2, 4)], n_highway=1)
    bilm.build()
    embedder = BiLMEmbedder(bilm, batch_size=2)
    texts = ["The cat sat, then left.", "Hi!", ""]
    tokens, layers = embedder.embed_text(texts)
    assert tokens == [tokenize_python(text) for text in texts]
    want = embedder.embed(tokens)
    for got, ref, sentence in zip(layers, want, tokens, strict=True):
        assert got.shape == (3, len(sentence), 8)
        np.testing.assert_array_equal(got, ref)
