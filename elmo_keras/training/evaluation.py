"""Held-out perplexity of a `LanguageModel` with the full softmax, on TensorFlow or JAX."""

import math

from elmo_keras.backend import keras_backend
from elmo_keras.training.data import TOKENIZATION_RENAMED, SentenceStream, no_other_arguments
from elmo_keras.training.windows import WindowPacker
from elmo_keras.validation import check_int, renamed_argument


def _make_eval_step(model):
    """`eval_step(batch, state_h, state_c)`, compiled for the running backend."""
    if keras_backend() == "jax":
        from elmo_keras.training.jax_steps import make_eval_step, values

        compiled = make_eval_step(model)
        return lambda batch, h, c: compiled(values(model.variables), batch, h, c)
    return _tensorflow_eval_step(model)


def _tensorflow_eval_step(model):
    import tensorflow as tf

    @tf.function(reduce_retracing=True, autograph=False)  # no Python control flow inside
    def eval_step(batch, state_h, state_c):
        out = model.window_nll(batch, state_h, state_c, training=False)
        return (
            out["forward_nll"],
            out["backward_nll"],
            out["tokens"],
            tf.cast(out["state_h"], tf.float32),
            tf.cast(out["state_c"], tf.float32),
        )

    return eval_step


def evaluate_model(
    model,
    vocabulary,
    data,
    batch_size=16,
    unroll_steps=20,
    max_tokens=None,
    tokenization_mode="whitespace",
    **kwargs,
):
    """Full-softmax perplexity of a `LanguageModel` on text files.

    The text is packed into windows as in training (`WindowPacker`, no shuffling, one pass),
    the LSTM state is carried from window to window and dropout is off.

    Args:
        model: `LanguageModel`.
        vocabulary: `Vocabulary`. The softmax's words (others count as `<UNK>`).
        data: str or list. Glob(s) of text files.
        batch_size: int. Rows of windows. Defaults to `16`.
        unroll_steps: int. Window length. Defaults to `20`.
        max_tokens: int or None. Stop after about this many tokens.
        tokenization_mode: `"whitespace"` or `"punctuation"`. Defaults to `"whitespace"`.
            (`tokenization=` is its deprecated name.)

    Returns:
        A dict: `perplexity_forward`, `perplexity_backward`, `perplexity` (exp of the mean of
        both losses, bilm-tf's average), `tokens` (predicted tokens per direction).
    """
    tokenization_mode = renamed_argument(
        kwargs, *TOKENIZATION_RENAMED, tokenization_mode, "whitespace", "evaluate_model"
    )
    no_other_arguments(kwargs, "evaluate_model")
    if max_tokens is not None:  # the rest is checked by `SentenceStream` and `WindowPacker`
        check_int("max_tokens", max_tokens)
    packer = WindowPacker(
        SentenceStream(data, tokenization_mode=tokenization_mode, shuffle=False, epochs=1),
        vocabulary,
        batch_size,
        unroll_steps,
        model.bilm.max_characters_per_token,
    )
    eval_step = _make_eval_step(model)
    state_h, state_c = model.zero_state(batch_size)
    total_fw = total_bw = total_tokens = 0.0
    for batch in packer:
        nll_fw, nll_bw, tokens, state_h, state_c = eval_step(batch, state_h, state_c)
        total_fw += float(nll_fw)
        total_bw += float(nll_bw)
        total_tokens += float(tokens)
        if max_tokens is not None and total_tokens >= max_tokens:
            break
    if not total_tokens:
        raise ValueError(f"No tokens to evaluate in {data!r}.")
    loss_fw, loss_bw = total_fw / total_tokens, total_bw / total_tokens
    return {
        "perplexity_forward": math.exp(loss_fw),
        "perplexity_backward": math.exp(loss_bw),
        "perplexity": math.exp(0.5 * (loss_fw + loss_bw)),
        "tokens": int(total_tokens),
    }
