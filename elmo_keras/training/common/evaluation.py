"""Held-out perplexity of a `LanguageModel` with the full softmax, on TensorFlow or JAX."""

import numpy as np

from elmo_keras.text.vocabulary import UNK_TOKEN
from elmo_keras.training.backends import training_backend
from elmo_keras.training.common.metrics import perplexity
from elmo_keras.training.feed.data import SentenceStream
from elmo_keras.training.feed.tokenization import TOKENIZATION_RENAMED, no_other_arguments
from elmo_keras.training.feed.windows import WindowPacker
from elmo_keras.validation import check_int, renamed_argument


def evaluate_model(
    model,
    vocabulary,
    data,
    batch_size=16,
    unroll_steps=20,
    max_tokens=None,
    tokenization_mode="whitespace",
    basis=None,
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
        basis: iterable of words or None. Score on a shared word basis, to compare models
            whose vocabularies differ: the words of `vocabulary` that are also in `basis`
            (`<UNK>` never) are predicted one by one, every other word counts as one
            event, "other" (`basis_softmax_nll`). Evaluating model A with B's vocabulary as
            basis and B with A's puts both on the basis A ∩ B. None: the model's own
            vocabulary.

    Returns:
        A dict: `perplexity_forward`, `perplexity_backward`, `perplexity` (exp of the mean of
        both losses, bilm-tf's average; `inf` where the exponential overflows a float64, a
        mean loss above about 709.78 nats per token), `tokens` (predicted tokens per
        direction); with `basis` also `basis_words` (its size) and `basis_coverage` (the share
        of the targets inside it).
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
    in_basis = None if basis is None else basis_mask(vocabulary, basis)
    eval_step = training_backend().make_eval_step(model, in_basis)
    state_h, state_c = model.zero_state(batch_size)
    total_fw = total_bw = total_tokens = total_inside = 0.0
    for batch in packer:
        nll_fw, nll_bw, tokens, state_h, state_c, inside = eval_step(batch, state_h, state_c)
        total_fw += float(nll_fw)
        total_bw += float(nll_bw)
        total_tokens += float(tokens)
        total_inside += float(inside)
        if max_tokens is not None and total_tokens >= max_tokens:
            break
    if not total_tokens:
        raise ValueError(f"No tokens to evaluate in {data!r}.")
    loss_fw, loss_bw = total_fw / total_tokens, total_bw / total_tokens
    metrics = {
        "perplexity_forward": perplexity(loss_fw),
        "perplexity_backward": perplexity(loss_bw),
        "perplexity": perplexity(0.5 * (loss_fw + loss_bw)),
        "tokens": int(total_tokens),
    }
    if in_basis is not None:
        metrics["basis_words"] = int(in_basis.sum())
        metrics["basis_coverage"] = total_inside / (2.0 * total_tokens)
    return metrics


def basis_mask(vocabulary, basis):
    """bool `[len(vocabulary)]`: the vocabulary's words found in `basis` (an iterable of words),
    `<UNK>` left out: it is the class of the unknown words, a different set in each vocabulary.
    (`<S>` and `</S>` stay: the backward and forward sentence boundaries.)"""
    words = set(basis)
    words.discard(UNK_TOKEN)
    return np.array([token in words for token in vocabulary.tokens], dtype=bool)
