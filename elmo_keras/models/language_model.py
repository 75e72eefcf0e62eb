"""The biLM with its training head: a word softmax shared by both directions."""

import math

import keras
import tensorflow as tf

from elmo_keras.backend import require_tensorflow_backend
from elmo_keras.models.bilm import BiLM
from elmo_keras.validation import check_int


def log_uniform_candidates(num_sampled, range_max, seed):
    """Draws `num_sampled` word ids from the log-uniform (Zipf) distribution, statelessly.

    `P(k) = log((k + 2) / (k + 1)) / log(range_max + 1)`, as TensorFlow's
    `log_uniform_candidate_sampler` (which expects a vocabulary sorted by frequency), but drawn
    with replacement from a stateless generator: the same `seed` gives the same candidates on
    every replica and every worker.

    Args:
        num_sampled: int. Number of candidates.
        range_max: int. The vocabulary size.
        seed: int tensor of shape `[2]`.

    Returns:
        The candidates, int64 `[num_sampled]` (repeats possible).
    """
    log_range = math.log(range_max + 1.0)
    u = tf.random.stateless_uniform([num_sampled], seed=seed, dtype=tf.float64)
    candidates = tf.cast(tf.floor(tf.exp(u * log_range)), tf.int64) - 1
    return tf.clip_by_value(candidates, 0, range_max - 1)


def _log_uniform_expected_count(ids, num_sampled, range_max):
    ids = tf.cast(ids, tf.float64)
    probability = (tf.math.log(ids + 2.0) - tf.math.log(ids + 1.0)) / math.log(range_max + 1.0)
    return tf.cast(num_sampled * probability, tf.float32)


def sampled_softmax_nll(kernel, bias, hidden, targets, candidates, num_classes):
    """The sampled softmax loss of `tf.nn.sampled_softmax_loss`, with dense ops only.

    Same result as `tf.nn.sampled_softmax_loss(kernel, bias, targets[:, None], hidden,
    len(candidates), num_classes, sampled_values=(candidates, log-uniform expected counts),
    remove_accidental_hits=True)`: the logits are corrected by `-log(expected count)`, and a
    candidate equal to the target gets `-FLT_MAX` added. TensorFlow finds those accidental hits
    with `ComputeAccidentalHits`, which XLA cannot compile; here an equality mask does it, so
    the training step also compiles with `jit_compile=True`.

    Args:
        kernel: `[num_classes, dim]`. bias: `[num_classes]`.
        hidden: `[n, dim]`. targets: int64 `[n]`. candidates: int64 `[num_sampled]`.
        num_classes: int. The vocabulary size (the sampler's range).

    Returns:
        The loss of each row, `[n]`.
    """
    num_sampled = candidates.shape[0]
    true_logits = tf.reduce_sum(hidden * tf.gather(kernel, targets), axis=1)
    true_logits += tf.gather(bias, targets)
    true_logits -= tf.math.log(_log_uniform_expected_count(targets, num_sampled, num_classes))
    sampled_logits = tf.matmul(hidden, tf.gather(kernel, candidates), transpose_b=True)
    sampled_logits += tf.gather(bias, candidates)
    hits = tf.equal(targets[:, None], candidates[None, :])
    sampled_logits = tf.where(hits, sampled_logits - tf.float32.max, sampled_logits)
    sampled_logits -= tf.math.log(_log_uniform_expected_count(candidates, num_sampled, num_classes))
    logits = tf.concat([true_logits[:, None], sampled_logits], axis=1)
    return tf.reduce_logsumexp(logits, axis=1) - true_logits


@keras.saving.register_keras_serializable(package="elmo_keras")
class LanguageModel(keras.Model):
    """A `BiLM` with the word softmax used to train it (bilm-tf's `LanguageModel`).

    Both directions share one softmax over the word vocabulary (`softmax_kernel`
    `[vocabulary_size, projection_dim]`, `softmax_bias` `[vocabulary_size]`) applied to the top
    LSTM layer. Training uses a sampled softmax with `n_negative_samples` candidates from a
    log-uniform sampler (the vocabulary must be sorted by frequency and larger than the sample
    count); evaluation uses the full softmax. The loss is `0.5 * (forward + backward)`.

    The model works on windows that carry their own `<S>` / `</S>` tokens (see
    `elmo_keras.training.data`): it calls `bilm.char_cnn` and `bilm.bilstm` directly, feeding
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
        require_tensorflow_backend("LanguageModel")
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
        return tf.not_equal(char_ids[:, :, 0], 0)

    def zero_state(self, batch_size):
        """Zero `(state_h, state_c)` for `batch_size` rows."""
        bilm = self.bilm
        return (
            tf.zeros([batch_size, 2, bilm.n_layers, bilm.projection_dim]),
            tf.zeros([batch_size, 2, bilm.n_layers, bilm.lstm_units]),
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
        batch = tf.shape(forward_char_ids)[0]
        both = tf.concat([forward_char_ids, backward_char_ids], axis=0)
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
        top = tf.cast(outputs[:, -1], tf.float32)
        dim = self.projection_dim
        return top[..., :dim], top[..., dim:], mask, new_h, new_c

    def sample_candidates(self, sample_seed):
        """The sampled softmax's candidates for `sample_seed` (None for the full softmax)."""
        if not self.n_negative_samples:
            return None
        return log_uniform_candidates(self.n_negative_samples, self.vocabulary_size, sample_seed)

    def token_losses(self, hidden, targets, mask, sample_seed=None, candidates=None):
        """Negative log-likelihood of every target, 0 at padding. hidden `[..., P]`.

        With `candidates` (from `sample_candidates`), or `sample_seed` (int tensor `[2]`) and
        `n_negative_samples > 0`: the sampled softmax; otherwise the full softmax.
        """
        dim = self.projection_dim
        flat_hidden = tf.reshape(hidden, [-1, dim])
        flat_targets = tf.reshape(tf.cast(targets, tf.int64), [-1])
        kernel = tf.cast(self.softmax_kernel, tf.float32)
        bias = tf.cast(self.softmax_bias, tf.float32)
        if candidates is None and sample_seed is not None:
            candidates = self.sample_candidates(sample_seed)
        if candidates is not None:
            nll = sampled_softmax_nll(
                kernel, bias, flat_hidden, flat_targets, candidates, self.vocabulary_size
            )
        else:
            logits = tf.matmul(flat_hidden, kernel, transpose_b=True) + bias
            nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=flat_targets, logits=logits)
        nll = tf.reshape(nll, tf.shape(targets))
        return nll * tf.cast(mask, nll.dtype)

    def window_nll(self, batch, state_h=None, state_c=None, candidates=None, training=False):
        """The language-model loss of a batch of windows: summed NLL of both directions.

        The one place where the two directions' losses are computed (training, evaluation and
        `call` use it). The training loss of bilm-tf is `0.5 * (forward_nll + backward_nll)`
        divided by the number of tokens.

        Args:
            batch: dict. `forward_char_ids`, `backward_char_ids` `[batch, steps, max_chars]`
                and `forward_targets`, `backward_targets` `[batch, steps]` (see
                `elmo_keras.training.windows.WindowPacker`).
            state_h, state_c: optional initial LSTM state (see `ProjectedBiLSTM`).
            candidates: int64 `[n_negative_samples]` or None. The sampled softmax's candidates
                (`sample_candidates`); None: the full softmax.
            training: bool. Dropout on.

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
        nll_fw = self.token_losses(forward, batch["forward_targets"], mask, candidates=candidates)
        nll_bw = self.token_losses(backward, batch["backward_targets"], mask, candidates=candidates)
        return {
            "forward_nll": tf.reduce_sum(nll_fw),
            "backward_nll": tf.reduce_sum(nll_bw),
            "tokens": tf.reduce_sum(tf.cast(mask, tf.float32)),
            "state_h": new_h,
            "state_c": new_c,
        }

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
