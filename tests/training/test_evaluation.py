"""Held-out perplexity over a shared word basis (`evaluate_model(basis=...)`), on TensorFlow
and on JAX (this file also runs in the `KERAS_BACKEND=jax` pass of `make test`)."""

import pathlib

import keras
import numpy as np
import pytest

from elmo_keras.models.bilm import BiLM
from elmo_keras.models.language_model import LanguageModel
from elmo_keras.training.common.evaluation import basis_mask, evaluate_model


@pytest.fixture(scope="module")
def model(train_vocab):
    keras.utils.set_random_seed(4)
    model = LanguageModel(
        BiLM(lstm_units=16, projection_dim=8, filters=[(1, 4), (2, 4)]), len(train_vocab), 8
    )
    model.build()
    # Give <UNK> a large share of the probability, so that a mistake in "other" shows.
    model.softmax_bias.assign(np.where(np.arange(len(train_vocab)) == train_vocab.unk_id, 3.0, 0.0))
    return model


def _text_counts(path, words):
    """Targets per direction, and targets inside `words`, counted from the text itself: each
    line's tokens plus one sentence boundary per direction (`</S>` forward, `<S>` backward)."""
    text = pathlib.Path(path).read_text(encoding="utf-8")
    lines = [line.split() for line in text.splitlines() if line.split()]
    tokens = sum(len(line) for line in lines)
    inside = sum(token in words for line in lines for token in line)
    return tokens + len(lines), 2 * inside + len(lines) * (("</S>" in words) + ("<S>" in words))


def test_a_basis_of_every_word_is_the_plain_perplexity(model, train_vocab, train_text):
    """Every word but <UNK> in the basis: "other" is <UNK> alone, the perplexity unchanged."""
    plain = evaluate_model(model, train_vocab, train_text, batch_size=3, unroll_steps=5)
    full = evaluate_model(
        model, train_vocab, train_text, batch_size=3, unroll_steps=5, basis=train_vocab.tokens
    )
    assert full["perplexity"] == pytest.approx(plain["perplexity"], rel=1e-5)
    assert full["basis_words"] == len(train_vocab) - 1  # <UNK> is never in it
    tokens, inside = _text_counts(train_text, set(train_vocab.tokens) - {"<UNK>"})
    assert full["tokens"] == tokens
    assert full["basis_coverage"] == pytest.approx(inside / (2 * tokens), abs=1e-9)


def test_a_smaller_basis_merges_the_other_words(model, train_vocab, train_text):
    """Half the words: the targets outside it become one likelier event, so the perplexity
    falls; the coverage is the share of the text's targets inside the basis."""
    words = set(train_vocab.tokens[::2])
    plain = evaluate_model(model, train_vocab, train_text, batch_size=3, unroll_steps=5)
    half = evaluate_model(
        model, train_vocab, train_text, batch_size=3, unroll_steps=5, basis=words | {"zzz"}
    )
    assert half["basis_words"] == int(basis_mask(train_vocab, words).sum())
    assert half["perplexity"] < plain["perplexity"]
    tokens, inside = _text_counts(train_text, words - {"<UNK>"})
    assert half["basis_coverage"] == pytest.approx(inside / (2 * tokens), abs=1e-9)


def test_basis_mask_leaves_out_the_unknown_token(train_vocab):
    mask = basis_mask(train_vocab, ["<S>", "</S>", "<UNK>", train_vocab.tokens[5], "not-a-word"])
    assert np.flatnonzero(mask).tolist() == sorted([train_vocab.bos_id, train_vocab.eos_id, 5])


def test_a_loss_above_709_reports_an_infinite_perplexity(train_vocab, train_text):
    """A model that gives every target a loss near 10,000 nats: exp overflows a float64, so the
    perplexity is `inf` (was an `OverflowError`, `math range error`); the token count stands."""
    keras.utils.set_random_seed(4)
    bad = LanguageModel(
        BiLM(lstm_units=16, projection_dim=8, filters=[(1, 4), (2, 4)]), len(train_vocab), 8
    )
    bad.build()
    # All the probability on <UNK>, which the text never holds (its vocabulary covers it).
    bias = np.where(np.arange(len(train_vocab)) == train_vocab.unk_id, 1e4, 0.0)
    bad.softmax_bias.assign(bias)
    metrics = evaluate_model(bad, train_vocab, train_text, batch_size=3, unroll_steps=5)
    assert metrics["perplexity"] == metrics["perplexity_forward"] == np.inf
    assert metrics["perplexity_backward"] == np.inf
    assert metrics["tokens"] == _text_counts(train_text, set())[0]
