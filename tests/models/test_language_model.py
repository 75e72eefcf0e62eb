"""The training head: the sampled softmax against a NumPy float64 reference (every backend) and
TensorFlow's `tf.nn.sampled_softmax_loss` (TensorFlow), the host-side candidate sampler."""

import math

import keras
import numpy as np
import pytest

from elmo_keras.models.language_model import (
    log_uniform_candidates,
    log_uniform_expected_count,
    sampled_softmax_nll,
)

tensorflow_only = pytest.mark.tensorflow_only

VOCAB, DIM, ROWS = 50, 6, 40


def _problem(candidates, seed=0):
    rng = np.random.default_rng(seed)
    kernel = rng.normal(size=(VOCAB, DIM))
    bias = rng.normal(size=(VOCAB,))
    hidden = rng.normal(size=(ROWS, DIM))
    targets = rng.integers(0, VOCAB, size=ROWS)
    targets[:10] = candidates[np.arange(10) % len(candidates)]  # accidental hits
    return kernel, bias, hidden, targets


def _numpy_reference(kernel, bias, hidden, targets, candidates):
    """float64: every candidate equal to the row's target is left out of its softmax."""

    def log_q(ids):
        return np.log(
            len(candidates) * (np.log(ids + 2.0) - np.log(ids + 1.0)) / math.log(VOCAB + 1.0)
        )

    out = []
    for h, target in zip(hidden, targets, strict=True):
        true = h @ kernel[target] + bias[target] - log_q(target)
        sampled = kernel[candidates] @ h + bias[candidates] - log_q(candidates)
        logits = np.concatenate([[true], sampled[candidates != target]])
        top = logits.max()
        out.append(top + np.log(np.exp(logits - top).sum()) - true)
    return np.array(out)


def _ours(kernel, bias, hidden, targets, candidates):
    return sampled_softmax_nll(kernel, bias, hidden, targets, candidates, VOCAB)


def _tensorflow(kernel, bias, hidden, targets, candidates):
    import tensorflow as tf

    labels = targets[:, None]
    num_sampled = candidates.shape[0]
    return tf.nn.sampled_softmax_loss(
        weights=kernel,
        biases=bias,
        labels=labels,
        inputs=hidden,
        num_sampled=num_sampled,
        num_classes=VOCAB,
        sampled_values=(
            candidates,
            log_uniform_expected_count(labels, num_sampled, VOCAB),
            log_uniform_expected_count(candidates, num_sampled, VOCAB),
        ),
        remove_accidental_hits=True,
    )


def _loss_and_grads(fn, kernel, bias, hidden, targets, candidates):
    import tensorflow as tf

    tensors = [tf.constant(x, tf.float32) for x in (kernel, bias, hidden)]
    with tf.GradientTape() as tape:
        tape.watch(tensors)
        loss = fn(*tensors, tf.constant(targets, tf.int64), tf.constant(candidates, tf.int64))
        total = tf.reduce_sum(loss)
    grads = tape.gradient(total, tensors)
    return [loss.numpy()] + [tf.convert_to_tensor(g).numpy() for g in grads]


@tensorflow_only
@pytest.mark.parametrize("num_sampled", [8, 30])
def test_matches_tensorflow_on_distinct_candidates(num_sampled):
    """Loss and gradients equal TensorFlow's (`ComputeAccidentalHits`) within 1e-5 when the
    candidates are distinct, as bilm-tf's sampler draws them; 10 rows have accidental hits."""
    candidates = np.random.default_rng(7).choice(VOCAB, size=num_sampled, replace=False)
    problem = _problem(candidates)
    ours = _loss_and_grads(_ours, *problem, candidates)
    theirs = _loss_and_grads(_tensorflow, *problem, candidates)
    for got, expected in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(ours[0], _numpy_reference(*problem, candidates), atol=1e-5)


def test_matches_the_numpy_reference_on_every_backend():
    """Our sampler draws with replacement: a target drawn twice must leave the softmax twice.
    (TensorFlow's `ComputeAccidentalHits` removes one copy only: this case differs from it.)
    The loss against the float64 reference, within 1e-5, on the running Keras backend."""
    candidates = log_uniform_candidates(64, VOCAB, (3, 4))
    problem = _problem(candidates)
    repeated = [np.sum(candidates == t) for t in problem[3]]
    assert max(repeated) >= 2
    kernel, bias, hidden, targets = problem
    args = [keras.ops.convert_to_tensor(x, "float32") for x in (kernel, bias, hidden)]
    ours = keras.ops.convert_to_numpy(
        sampled_softmax_nll(*args, targets.astype("int32"), candidates, VOCAB)
    )
    np.testing.assert_allclose(ours, _numpy_reference(*problem, candidates), atol=1e-5)
    assert np.all(np.isfinite(ours))


def test_candidates_are_log_uniform_and_keyed_by_the_seed():
    """The host sampler: the same key gives the same ids (any process, any backend), another
    key other ids, and the frequencies follow P(k) = log((k+2)/(k+1)) / log(V+1) (chi-square
    over the 5 most likely ids and the rest, 200,000 draws)."""
    first = log_uniform_candidates(16, VOCAB, (0, 5))
    np.testing.assert_array_equal(first, log_uniform_candidates(16, VOCAB, (0, 5)))
    assert not np.array_equal(first, log_uniform_candidates(16, VOCAB, (0, 6)))
    assert first.dtype == np.int32 and first.min() >= 0 and first.max() < VOCAB
    draws = log_uniform_candidates(200_000, VOCAB, 11)
    k = np.arange(VOCAB, dtype=np.float64)
    probability = np.log((k + 2) / (k + 1)) / math.log(VOCAB + 1)
    counts = np.bincount(draws, minlength=VOCAB)
    observed = np.append(counts[:5], counts[5:].sum())
    expected = 200_000 * np.append(probability[:5], probability[5:].sum())
    chi_square = float(np.sum((observed - expected) ** 2 / expected))
    assert chi_square < 20.5, chi_square  # 5 degrees of freedom: p = 0.001
    expected_count = log_uniform_expected_count(np.array([0, 999_999]), 10, 1_000_000)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(expected_count),
        10 * np.log([2.0, 1_000_001 / 1_000_000]) / math.log(1_000_001),
        rtol=1e-6,
    )
    with pytest.raises(ValueError, match="`seed` must be one or two non-negative integers"):
        log_uniform_candidates(4, VOCAB, (1, 2, 3))


@tensorflow_only
def test_compiles_with_xla():
    import tensorflow as tf

    candidates = log_uniform_candidates(16, VOCAB, (0, 1))
    kernel, bias, hidden, targets = (tf.constant(x) for x in _problem(candidates, seed=1))
    args = [tf.cast(x, tf.float32) for x in (kernel, bias, hidden)]
    compiled = tf.function(sampled_softmax_nll, jit_compile=True)
    np.testing.assert_allclose(
        compiled(*args, targets, candidates, VOCAB).numpy(),
        sampled_softmax_nll(*args, targets, candidates, VOCAB).numpy(),
        atol=1e-5,
    )


@tensorflow_only
def test_window_nll_is_the_loss_of_both_directions():
    """`window_nll` (the one loss of training, evaluation and `call`) against the parts."""
    from elmo_keras.models.bilm import BiLM
    from elmo_keras.models.language_model import LanguageModel
    from elmo_keras.text.char_ids import batch_to_char_ids

    keras.utils.set_random_seed(0)
    model = LanguageModel(BiLM(lstm_units=16, projection_dim=8, filters=[(1, 4), (2, 4)]), 20, 8)
    model.build()
    forward = batch_to_char_ids([["a", "b", "c"], ["d"]], max_characters_per_token=50)
    backward = batch_to_char_ids([["c", "b", "a"], ["d"]], max_characters_per_token=50)
    batch = {
        "forward_char_ids": forward,
        "backward_char_ids": backward,
        "forward_targets": np.array([[3, 4, 5], [6, 0, 0]], np.int32),
        "backward_targets": np.array([[7, 8, 9], [10, 0, 0]], np.int32),
    }
    out = model.window_nll(batch)
    assert float(out["tokens"]) == 4.0
    import tensorflow as tf

    fw, bw, mask, h, c = model.encode(forward, backward)
    np.testing.assert_allclose(
        float(out["forward_nll"]),
        float(tf.reduce_sum(model.token_losses(fw, batch["forward_targets"], mask))),
        rtol=1e-6,
    )
    np.testing.assert_allclose(out["state_h"].numpy(), h.numpy(), rtol=1e-6)
    called = model(batch)
    assert sorted(called) == ["backward_nll", "forward_nll", "tokens"]
    np.testing.assert_allclose(float(called["backward_nll"]), float(out["backward_nll"]), rtol=1e-6)
    # With candidates: the sampled softmax, a different (but finite) loss.
    candidates = model.sample_candidates(0, 1)
    sampled = model.window_nll(batch, candidates=candidates)
    assert np.isfinite(float(sampled["forward_nll"]))


def test_basis_softmax_matches_the_numpy_reference():
    """The shared-basis loss against float64 NumPy (1e-5), on the running backend: a target in
    the basis costs -log p(target); one outside it -log of the summed probability of every word
    outside the basis."""
    from elmo_keras.models.language_model import basis_softmax_nll

    kernel, bias, hidden, targets = _problem(np.arange(10))
    in_basis = np.random.default_rng(3).random(VOCAB) < 0.6
    assert 0 < in_basis[targets].sum() < ROWS  # targets on both sides
    logits = hidden @ kernel.T + bias
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    expected = np.where(
        in_basis[targets],
        -np.log(probs[np.arange(ROWS), targets]),
        -np.log(probs[:, ~in_basis].sum(axis=1)),
    )
    args = [keras.ops.convert_to_tensor(x, "float32") for x in (kernel, bias, hidden)]
    ours = basis_softmax_nll(*args, targets.astype("int32"), in_basis)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(ours), expected, atol=1e-5)
    # Every word in the basis: the plain full softmax.
    everything = basis_softmax_nll(*args, targets.astype("int32"), np.ones(VOCAB, bool))
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(everything),
        -np.log(probs[np.arange(ROWS), targets]),
        atol=1e-5,
    )
