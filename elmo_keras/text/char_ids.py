"""Tokens -> ELMo character ids, in NumPy (no TensorFlow, no Keras).

This module is what the ONNX Runtime client uses to prepare inputs, so it must never import
TensorFlow or Keras. `elmo_keras.text.tf_char_ids` computes exactly the same ids with TensorFlow
ops, for use inside graphs and SavedModels.

The ids follow the inference convention of the published models (bilm-tf and AllenNLP): a token
is its UTF-8 bytes (`token.encode("utf-8", "ignore")`), cut to `max_characters_per_token - 2`
bytes (48 for the usual 50, even in the middle of a multi-byte character), every byte `b` becomes
`b + 1`, and the bytes are wrapped as `[BOW, b0 + 1, ..., bk + 1, EOW, PAD, PAD, ...]`. The id 0
is reserved: a padding token (a position past the end of a sentence) is all zeros. The literal
tokens `<S>` and `</S>` become the sentence-boundary rows `[BOW, BOS, EOW, PAD, ...]` and
`[BOW, EOS, EOW, PAD, ...]`.
"""

import functools

import numpy as np

from elmo_keras.validation import check_int

# Inference convention: the training ids (bytes 0..255, then BOS 256, EOS 257, BOW 258, EOW 259,
# PAD 260) shifted by +1, so that 0 can mean "padding token".
BOS_CHAR_ID = 257
EOS_CHAR_ID = 258
BOW_CHAR_ID = 259
EOW_CHAR_ID = 260
PAD_CHAR_ID = 261
N_CHARACTERS = 262
MAX_CHARACTERS_PER_TOKEN = 50
MAX_TOKEN_BYTES = MAX_CHARACTERS_PER_TOKEN - 2

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"

_BOUNDARY_TOKENS = {
    BOS_TOKEN: BOS_CHAR_ID,
    EOS_TOKEN: EOS_CHAR_ID,
    BOS_TOKEN.encode(): BOS_CHAR_ID,
    EOS_TOKEN.encode(): EOS_CHAR_ID,
}


def _check_max_characters(max_characters_per_token):
    return check_int("max_characters_per_token", max_characters_per_token, 3)


def _check_token(token):
    if not isinstance(token, str | bytes):
        raise ValueError(
            f"A token must be a `str` (or UTF-8 `bytes`). Received: token={token!r} "
            f"of type {type(token).__name__}"
        )


@functools.lru_cache(maxsize=1 << 16)
def _cached_char_ids(token, max_characters_per_token):
    """Read-only int32 ids of one token; shared between callers, so never written to."""
    ids = _char_ids_row(token, max_characters_per_token)
    ids.flags.writeable = False
    return ids


def _char_ids_row(token, max_characters_per_token):
    """The int32 ids of one token, a new array (the rule of this module, in one place)."""
    ids = np.full((max_characters_per_token,), PAD_CHAR_ID, dtype=np.int32)
    ids[0] = BOW_CHAR_ID
    boundary = _BOUNDARY_TOKENS.get(token)
    if boundary is not None:
        ids[1] = boundary
        ids[2] = EOW_CHAR_ID
    else:
        data = token.encode("utf-8", "ignore") if isinstance(token, str) else token
        data = data[: max_characters_per_token - 2]
        n = len(data)
        ids[1 : n + 1] = np.frombuffer(data, dtype=np.uint8).astype(np.int32) + 1
        ids[n + 1] = EOW_CHAR_ID
    return ids


def token_to_char_ids(token, max_characters_per_token=MAX_CHARACTERS_PER_TOKEN):
    """Converts one token to its character ids.

    Args:
        token: str. The token; `bytes` are taken as its UTF-8 encoding. The literal tokens
            `"<S>"` and `"</S>"` give the sentence-boundary rows.
        max_characters_per_token: int. The number of ids per token, including the
            begin-of-word and end-of-word ids; longer tokens are cut to
            `max_characters_per_token - 2` bytes. Defaults to `50`.

    Returns:
        An int32 array of shape `[max_characters_per_token]`.

    Example:

    >>> token_to_char_ids("Hi")[:5].tolist()
    [259, 73, 106, 260, 261]
    """
    max_characters_per_token = _check_max_characters(max_characters_per_token)
    _check_token(token)
    return _cached_char_ids(token, max_characters_per_token).copy()


def char_id_table(tokens, max_characters_per_token=MAX_CHARACTERS_PER_TOKEN):
    """The character ids of many tokens as one table: row `i` is `token_to_char_ids(tokens[i])`.

    A vocabulary's table lets a batch of word ids become character ids with one gather
    (`table[word_ids]`), as the training feed does.

    Args:
        tokens: sequence of str (or UTF-8 `bytes`).
        max_characters_per_token: int. The number of ids per token. Defaults to `50`.

    Returns:
        An int32 array of shape `[len(tokens), max_characters_per_token]`.

    Example:

    >>> char_id_table(["<S>", "Hi"])[:, :4].tolist()
    [[259, 257, 260, 261], [259, 73, 106, 260]]
    """
    max_characters_per_token = _check_max_characters(max_characters_per_token)
    table = np.empty((len(tokens), max_characters_per_token), np.int32)
    for i, token in enumerate(tokens):
        _check_token(token)
        table[i] = _char_ids_row(token, max_characters_per_token)
    return table


def bos_char_ids(max_characters_per_token=MAX_CHARACTERS_PER_TOKEN):
    """The character ids of the begin-of-sentence token `<S>`: `[259, 257, 260, 261, ...]`."""
    return token_to_char_ids(BOS_TOKEN, max_characters_per_token)


def eos_char_ids(max_characters_per_token=MAX_CHARACTERS_PER_TOKEN):
    """The character ids of the end-of-sentence token `</S>`: `[259, 258, 260, 261, ...]`."""
    return token_to_char_ids(EOS_TOKEN, max_characters_per_token)


def batch_to_char_ids(
    sentences, max_length=None, max_characters_per_token=MAX_CHARACTERS_PER_TOKEN
):
    """Converts a batch of tokenized sentences to a right-padded array of character ids.

    No sentence boundaries are added (the model adds them); padding positions are all zeros.

    Args:
        sentences: list of lists of str. The tokens of each sentence.
        max_length: int or `None`. The number of token positions `T` of the output. Defaults
            to `None`, the length of the longest sentence.
        max_characters_per_token: int. The number of ids per token. Defaults to `50`.

    Returns:
        An int32 array of shape `[len(sentences), T, max_characters_per_token]`.

    Example:

    >>> ids = batch_to_char_ids([["Hello", "world", "!"], ["Hi"]])
    >>> ids.shape
    (2, 3, 50)
    >>> int(ids[1, 1].max())
    0
    """
    max_characters_per_token = _check_max_characters(max_characters_per_token)
    if isinstance(sentences, str | bytes):
        raise ValueError(
            "`sentences` must be a list of sentences, each a list of tokens. "
            f"Received: sentences={sentences!r}"
        )
    sentences = list(sentences)
    for i, sentence in enumerate(sentences):
        if isinstance(sentence, str | bytes):
            raise ValueError(
                "Each sentence must be a list of tokens, not a string (split it first, e.g. "
                f"with `tokenize_python`). Received: sentences[{i}]={sentence!r}"
            )
    lengths = [len(sentence) for sentence in sentences]
    longest = max(lengths, default=0)
    if max_length is None:
        max_length = longest
    elif (
        isinstance(max_length, bool)
        or not isinstance(max_length, int | np.integer)
        or max_length < 0
    ):
        raise ValueError(
            "`max_length` must be a non-negative integer or None. "
            f"Received: max_length={max_length!r}"
        )
    elif longest > max_length:
        i = lengths.index(longest)
        raise ValueError(
            f"Sentence {i} has {longest} tokens, more than `max_length`. "
            f"Received: max_length={max_length}"
        )
    out = np.zeros((len(sentences), int(max_length), max_characters_per_token), dtype=np.int32)
    for i, sentence in enumerate(sentences):
        for j, token in enumerate(sentence):
            _check_token(token)
            out[i, j] = _cached_char_ids(token, max_characters_per_token)
    return out


def distinct_token_ids(sentences, max_characters_per_token=MAX_CHARACTERS_PER_TOKEN):
    """The batch's distinct tokens and where each position's token is: the biLM's
    deduplicated input (`BiLM` and the ONNX model take it as `token_char_ids`, `token_index`).

    Exact: tokens are compared as strings, so the same token always gets the same row, and the
    character CNN runs once per distinct token of the batch.

    Args:
        sentences: list of sentences, each a list of `str` tokens.
        max_characters_per_token: int. The number of ids per token. Defaults to `50`.

    Returns:
        A tuple `(token_char_ids, token_index)`: int32 `[distinct_tokens, C]` in order of first
        appearance, and int32 `[len(sentences), longest]` holding each position's row, -1 for
        padding.

    Example:

    >>> chars, index = distinct_token_ids([["a", "b", "a"], ["b"]])
    >>> chars.shape, index.tolist()
    ((2, 50), [[0, 1, 0], [1, -1, -1]])
    """
    max_characters_per_token = _check_max_characters(max_characters_per_token)
    longest = max((len(sentence) for sentence in sentences), default=0)
    rows = {}  # token -> its row, in order of first appearance
    token_index = np.full((len(sentences), longest), -1, np.int32)
    for i, sentence in enumerate(sentences):
        token_index[i, : len(sentence)] = [rows.setdefault(t, len(rows)) for t in sentence]
    token_char_ids = np.zeros((len(rows), max_characters_per_token), np.int32)
    for row, token in enumerate(rows):
        _check_token(token)
        token_char_ids[row] = _cached_char_ids(token, max_characters_per_token)
    return token_char_ids, token_index
