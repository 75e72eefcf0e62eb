"""The biLM with its training head: a word softmax shared by both directions.

Written with `keras.ops`: the same model trains on TensorFlow (`training.trainer`) and on JAX
(`training.jax_trainer`). The sampled softmax's candidates are drawn on the host, in NumPy, from a
counter-based generator keyed by `(seed, step)`: every replica, worker and backend gets the same
candidates for a step, and the compiled step takes them as an input.
"""

import math

import keras
import numpy as np
from keras import ops

from elmo_keras.models.bilm import BiLM
from elmo_keras.validation import check_int

# Added to the logit of a candidate equal to the row's target (an accidental hit), as
# TensorFlow's `sampled_softmax_loss` does: the candidate leaves the softmax.
_HIT_PENALTY = float(np.finfo(np.float32).max)


def log_uniform_candidates(num_sampled, range_max, seed):
    """Draws `num_sampled` word ids from the log-uniform (Zipf) distribution, statelessly.

    `P(k) = log((k + 2) / (k + 1)) / log(range_max + 1)`, as TensorFlow's
    `log_uniform_candidate_sampler` (which expects a vocabulary sorted by frequency), drawn with
    replacement in NumPy float64 from a Philox generator keyed by `seed`: the same key gives the
    same candidates on every replica, every worker and every Keras backend.

    Args:
        num_sampled: int. Number of candidates.
        range_max: int. The vocabulary size.
        seed: int, or a sequence of non-negative ints (the trainers use `(seed, step)`).

    Returns:
        The candidates, a NumPy int32 array `[num_sampled]` (repeats possible).
    """
    key = [int(k) for k in np.atleast_1d(np.asarray(seed, dtype=np.int64))]
    generator = np.random.Generator(np.random.Philox(key=_philox_key(key)))
    u = generator.random(num_sampled)
    candidates = np.floor(np.exp(u * math.log(range_max + 1.0))).astype(np.int64) - 1
    return np.clip(candidates, 0, range_max - 1).astype(np.int32)


def _philox_key(values):
    """Packs up to two non-negative ints into Philox's 128-bit key."""
    if len(values) > 2 or min(values, default=0) < 0:
        raise ValueError(
            f"`seed` must be one or two non-negative integers. Received: seed={values!r}"
        )
    values = list(values) + [0] * (2 - len(values))
    return (values[0] % 2**64) | ((values[1] % 2**64) << 64)


def log_uniform_expected_count(ids, num_sampled, range_max):
    """`num_sampled * P(id)` of the log-uniform sampler, float32 (a tensor of any backend).

    `log((k + 2) / (k + 1))` is computed as `log1p(1 / (k + 1))`, exact in float32 for ids
    near a million, where the difference of two logarithms would lose every digit.
    """
    ids = ops.cast(ids, "float32")
    probability = ops.log1p(1.0 / (ids + 1.0)) / math.log(range_max + 1.0)
    return num_sampled * probability


def sampled_softmax_nll(kernel, bias, hidden, targets, candidates, num_classes):
    """The sampled softmax loss of `tf.nn.sampled_softmax_loss`, with `keras.ops` only.

    Same result as `tf.nn.sampled_softmax_loss(kernel, bias, targets[:, None], hidden,
    len(candidates), num_classes, sampled_values=(candidates, log-uniform expected counts),
    remove_accidental_hits=True)`: the logits are corrected by `-log(expected count)`, and a
    candidate equal to the target gets `-FLT_MAX` added (every copy of it: candidates are drawn
    with replacement). An equality mask finds those accidental hits, so the loss compiles with
    XLA on every backend.

    Args:
        kernel: `[num_classes, dim]`. bias: `[num_classes]`.
        hidden: `[n, dim]`. targets: int `[n]`. candidates: int `[num_sampled]`.
        num_classes: int. The vocabulary size (the sampler's range).

    Returns:
        The loss of each row, `[n]`.
    """
    return sampled_softmax_from_rows(
        ops.take(kernel, targets, axis=0),
        ops.take(bias, targets, axis=0),
        ops.take(kernel, candidates, axis=0),
        ops.take(bias, candidates, axis=0),
        hidden,
        targets,
        candidates,
        num_classes,
    )


def sampled_softmax_from_rows(
    target_rows, target_bias, candidate_rows, candidate_bias, hidden, targets, candidates, classes
):
    """`sampled_softmax_nll` given the softmax rows of the targets and of the candidates.

    The JAX trainer differentiates with respect to these rows (not the whole softmax), so that
    a step touches only the rows it uses.
    """
    num_sampled = ops.shape(candidates)[0]
    true_logits = ops.sum(hidden * target_rows, axis=1) + target_bias
    true_logits -= ops.log(log_uniform_expected_count(targets, num_sampled, classes))
    sampled_logits = ops.matmul(hidden, ops.transpose(candidate_rows)) + candidate_bias
    hits = ops.equal(ops.cast(targets, "int32")[:, None], ops.cast(candidates, "int32")[None, :])
    sampled_logits = ops.where(hits, sampled_logits - _HIT_PENALTY, sampled_logits)
    sampled_logits -= ops.log(log_uniform_expected_count(candidates, num_sampled, classes))
    logits = ops.concatenate([true_logits[:, None], sampled_logits], axis=1)
    return ops.logsumexp(logits, axis=1) - true_logits


def full_softmax_nll(kernel, bias, hidden, targets):
    """Negative log-likelihood of `targets` `[n]` under the full softmax of `hidden` `[n, dim]`."""
    logits = ops.matmul(hidden, ops.transpose(kernel)) + bias
    return ops.sparse_categorical_crossentropy(targets, logits, from_logits=True)


def basis_softmax_nll(kernel, bias, hidden, targets, in_basis):
    """Like `full_softmax_nll`, over a word basis shared with another vocabulary.

    The words where `in_basis` `[vocabulary_size]` (bool) is true stay events of their own; all
    the others (`<UNK>` among them) become one event, "other", whose probability is the sum of
    theirs. A target outside the basis is scored as "other". Two models whose bases hold the same
    words then predict the same events, whatever their vocabularies: their perplexities compare.
    """
    logits = ops.matmul(hidden, ops.transpose(kernel)) + bias
    log_z = ops.logsumexp(logits, axis=-1)
    in_basis = ops.cast(in_basis, "bool")
    own = ops.take_along_axis(logits, ops.expand_dims(targets, -1), axis=-1)[:, 0]
    other = ops.logsumexp(ops.where(in_basis[None, :], -1e30, logits), axis=-1)
    return log_z - ops.where(ops.take(in_basis, targets, axis=0), own, other)


@keras.saving.register_keras_serializable(package="elmo_keras")
class LanguageModel(keras.Model):
    """A `BiLM` with the word softmax used to train it (bilm-tf's `LanguageModel`).

    Both directions share one softmax over the word vocabulary (`softmax_kernel`
    `[vocabulary_size, projection_dim]`, `softmax_bias` `[vocabulary_size]`) applied to the top
    LSTM layer. Training uses a sampled softmax with `n_negative_samples` candidates from a
    log-uniform sampler (the vocabulary must be sorted by frequency and larger than the sample
    count); evaluation uses the full softmax. The loss is `0.5 * (forward + backward)`.
    Written with `keras.ops`: it runs and trains on TensorFlow and on JAX.

    The model works on windows that carry their own `<S>` / `</S>` tokens (see
    `elmo_keras.training.feed.data`): it calls `bilm.char_cnn` and `bilm.bilstm` directly, feeding
    the backward LSTM its own window, and takes and returns the LSTM state explicitly.

    Args:
        bilm: `BiLM`. The biLM to train.
        vocabulary_size: int. Number of words of the softmax.
        n_negative_samples: int or None. Candidates of the sampled softmax; `None` or `0`
            trains with the full softmax. Defaults to `8192` (bilm-tf).
        **kwargs: other keyword arguments of `keras.Model`.

    Example:
    >>> lm = LanguageModel(BiLM(lstm_units=32, projection_dim=8, filters=[(1, 4)]), 100, 16)
    """

    def __init__(self, bilm, vocabulary_size, n_negative_samples=8192, **kwargs):
        super().__init__(**kwargs)
        if isinstance(bilm, dict):
            bilm = keras.saving.deserialize_keras_object(bilm)
        if not isinstance(bilm, BiLM):
            raise ValueError(f"`bilm` must be a `BiLM`. Received: bilm={bilm!r}")
        vocabulary_size = check_int("vocabulary_size", vocabulary_size, minimum=2)
        n_negative_samples = int(n_negative_samples or 0)
        if n_negative_samples < 0:
            raise ValueError(
                "`n_negative_samples` must be >= 0 (0: full softmax). "
                f"Received: n_negative_samples={n_negative_samples}"
            )
        if n_negative_samples and vocabulary_size <= n_negative_samples:
            raise ValueError(
                "The sampled softmax needs a vocabulary larger than its sample count: "
                f"vocabulary_size={vocabulary_size} is not larger than "
                f"n_negative_samples={n_negative_samples}. Use fewer samples "
                "(`n_negative_samples_batch`) or the full softmax (0)."
            )
        self.bilm = bilm
        self.vocabulary_size = vocabulary_size
        self.n_negative_samples = n_negative_samples

    @property
    def projection_dim(self):
        return self.bilm.projection_dim

    def build(self, input_shape=None):
        if not self.bilm.built:
            self.bilm.build()
        dim = self.projection_dim
        self.softmax_kernel = self.add_weight(
            name="softmax_kernel",
            shape=(self.vocabulary_size, dim),
            initializer=keras.initializers.RandomNormal(stddev=1.0 / math.sqrt(dim)),
        )
        self.softmax_bias = self.add_weight(
            name="softmax_bias", shape=(self.vocabulary_size,), initializer="zeros"
        )
        self.built = True

    @staticmethod
    def token_mask(char_ids):
        """True at the real tokens of `char_ids` `[batch, steps, max_chars]` (padding is all 0)."""
        return ops.not_equal(char_ids[:, :, 0], 0)

    def zero_state(self, batch_size):
        """Zero `(state_h, state_c)` for `batch_size` rows."""
        bilm = self.bilm
        return (
            ops.zeros([batch_size, 2, bilm.n_layers, bilm.projection_dim]),
            ops.zeros([batch_size, 2, bilm.n_layers, bilm.lstm_units]),
        )

    def encode(
        self, forward_char_ids, backward_char_ids, state_h=None, state_c=None, training=False
    ):
        """Top-layer outputs of both directions for a batch of windows.

        Args:
            forward_char_ids, backward_char_ids: int `[batch, steps, max_chars]`, natural
                order, right-padded, the same number of real tokens per row.
            state_h, state_c: optional initial state (see `ProjectedBiLSTM`).
            training: bool.

        Returns:
            `(forward [B, T, P], backward [B, T, P], mask [B, T], state_h, state_c)`.
        """
        batch = ops.shape(forward_char_ids)[0]
        both = ops.concatenate([forward_char_ids, backward_char_ids], axis=0)
        embedded = self.bilm.char_cnn(both, training=training)
        forward_embedded, backward_embedded = embedded[:batch], embedded[batch:]
        mask = self.token_mask(forward_char_ids)
        initial_state = None if state_h is None else [state_h, state_c]
        outputs, new_h, new_c = self.bilm.bilstm(
            forward_embedded,
            mask=mask,
            initial_state=initial_state,
            backward_inputs=backward_embedded,
            training=training,
        )
        top = ops.cast(outputs[:, -1], "float32")
        dim = self.projection_dim
        return top[..., :dim], top[..., dim:], mask, new_h, new_c

    def sample_candidates(self, seed, step=0):
        """The sampled softmax's candidates of `step` for `seed`, NumPy int32
        `[n_negative_samples]` (`log_uniform_candidates`); None for the full softmax."""
        if not self.n_negative_samples:
            return None
        return log_uniform_candidates(self.n_negative_samples, self.vocabulary_size, (seed, step))

    @staticmethod
    def softmax_row_ids(batch, candidates):
        """The softmax rows a sampled step reads: the forward targets, the backward targets
        (both flattened) and the candidates, in the order `window_nll(softmax_rows=...)` takes
        their rows."""
        return ops.concatenate(
            [
                ops.reshape(ops.cast(batch["forward_targets"], "int32"), [-1]),
                ops.reshape(ops.cast(batch["backward_targets"], "int32"), [-1]),
                ops.cast(candidates, "int32"),
            ],
            axis=0,
        )

    def token_losses(
        self, hidden, targets, mask, candidates=None, softmax_rows=None, in_basis=None
    ):
        """Negative log-likelihood of every target, 0 at padding. hidden `[..., P]`.

        With `candidates` (from `sample_candidates`): the sampled softmax, reading the softmax's
        rows for `ops.concatenate([targets.flat, candidates])` from `softmax_rows` (a
        `(kernel_rows, bias_rows)` pair) when given; otherwise the full softmax, over the word
        basis `in_basis` (bool `[vocabulary_size]`, see `basis_softmax_nll`) when given.
        """
        dim = self.projection_dim
        flat_hidden = ops.reshape(ops.cast(hidden, "float32"), [-1, dim])
        flat_targets = ops.reshape(ops.cast(targets, "int32"), [-1])
        if candidates is not None:
            if softmax_rows is None:
                ids = ops.concatenate([flat_targets, ops.cast(candidates, "int32")], axis=0)
                softmax_rows = self._rows(ids)
            rows, bias = softmax_rows
            n = ops.shape(flat_targets)[0]
            nll = sampled_softmax_from_rows(
                rows[:n],
                bias[:n],
                rows[n:],
                bias[n:],
                flat_hidden,
                flat_targets,
                candidates,
                self.vocabulary_size,
            )
        else:
            kernel = ops.cast(self.softmax_kernel, "float32")
            bias = ops.cast(self.softmax_bias, "float32")
            if in_basis is None:
                nll = full_softmax_nll(kernel, bias, flat_hidden, flat_targets)
            else:
                nll = basis_softmax_nll(kernel, bias, flat_hidden, flat_targets, in_basis)
        nll = ops.reshape(nll, ops.shape(targets))
        return nll * ops.cast(mask, nll.dtype)

    def _rows(self, ids):
        kernel = ops.cast(self.softmax_kernel, "float32")
        bias = ops.cast(self.softmax_bias, "float32")
        return ops.take(kernel, ids, axis=0), ops.take(bias, ids, axis=0)

    def window_nll(
        self,
        batch,
        state_h=None,
        state_c=None,
        candidates=None,
        training=False,
        softmax_rows=None,
        in_basis=None,
    ):
        """The language-model loss of a batch of windows: summed NLL of both directions.

        The one place where the two directions' losses are computed (training, evaluation and
        `call` use it). The training loss of bilm-tf is `0.5 * (forward_nll + backward_nll)`
        divided by the number of tokens.

        Args:
            batch: dict. `forward_char_ids`, `backward_char_ids` `[batch, steps, max_chars]`
                and `forward_targets`, `backward_targets` `[batch, steps]` (see
                `elmo_keras.training.feed.windows.WindowPacker`).
            state_h, state_c: optional initial LSTM state (see `ProjectedBiLSTM`).
            candidates: int `[n_negative_samples]` or None. The sampled softmax's candidates
                (`sample_candidates`); None: the full softmax.
            training: bool. Dropout on.
            softmax_rows: `(kernel_rows, bias_rows)` or None. With `candidates`: the softmax's
                rows for `softmax_row_ids(batch, candidates)`, already gathered (the JAX
                trainer differentiates with respect to them); None: gathered here.
            in_basis: bool `[vocabulary_size]` or None. The full softmax over a word basis
                (`basis_softmax_nll`); the result then also holds `basis_tokens`, the targets
                inside the basis (both directions).

        Returns:
            A dict: `forward_nll` and `backward_nll` (float32 sums over the real tokens),
            `tokens` (their number, float32), `state_h` and `state_c` (the final LSTM state).
        """
        forward, backward, mask, new_h, new_c = self.encode(
            batch["forward_char_ids"],
            batch["backward_char_ids"],
            state_h,
            state_c,
            training=training,
        )
        # Both directions in one softmax call: one gather of the rows, one matmul.
        hidden = ops.concatenate([forward, backward], axis=0)
        targets = ops.concatenate([batch["forward_targets"], batch["backward_targets"]], axis=0)
        both_mask = ops.concatenate([mask, mask], axis=0)
        nll = self.token_losses(hidden, targets, both_mask, candidates, softmax_rows, in_basis)
        rows = ops.shape(forward)[0]
        out = {
            "forward_nll": ops.sum(nll[:rows]),
            "backward_nll": ops.sum(nll[rows:]),
            "tokens": ops.sum(ops.cast(mask, "float32")),
            "state_h": new_h,
            "state_c": new_c,
        }
        if in_basis is not None:
            inside = ops.take(ops.cast(in_basis, "float32"), ops.cast(targets, "int32"), axis=0)
            out["basis_tokens"] = ops.sum(inside * ops.cast(both_mask, "float32"))
        return out

    def call(self, inputs, training=False):
        """`inputs`: a window batch dict (see `window_nll`). Returns the summed forward and
        backward negative log-likelihoods (full softmax) and the token count."""
        out = self.window_nll(inputs, training=training)
        return {key: out[key] for key in ("forward_nll", "backward_nll", "tokens")}

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "bilm": keras.saving.serialize_keras_object(self.bilm),
                "vocabulary_size": self.vocabulary_size,
                "n_negative_samples": self.n_negative_samples,
            }
        )
        return config
