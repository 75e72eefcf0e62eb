"""Tokens -> ELMo character ids with TensorFlow ops, for graphs and SavedModels.

Computes exactly what `elmo_keras.text.char_ids` computes in NumPy (see that module for the
convention), using only standard TensorFlow ops (`StringLength`, `Substr`, `DecodeRaw`, `Equal`,
`SelectV2`, ...): no `py_function`, no custom ops, so it runs inside `tf.function`, is saved into
SavedModels, and loads without this package.
"""

import tensorflow as tf

from elmo_keras.text.char_ids import (
    BOS_CHAR_ID,
    BOS_TOKEN,
    BOW_CHAR_ID,
    EOS_CHAR_ID,
    EOS_TOKEN,
    EOW_CHAR_ID,
    MAX_CHARACTERS_PER_TOKEN,
    PAD_CHAR_ID,
    _check_max_characters,
)


def flat_tokens_to_char_ids(tokens, max_characters_per_token=MAX_CHARACTERS_PER_TOKEN):
    """Converts a tensor of tokens of any shape to character ids (no padding handling).

    Args:
        tokens: string tensor of shape `[...]`.
        max_characters_per_token: int. The number of ids per token. Defaults to `50`.

    Returns:
        An int32 tensor of shape `[..., max_characters_per_token]`.
    """
    max_characters_per_token = _check_max_characters(max_characters_per_token)
    max_bytes = max_characters_per_token - 2
    tokens = tf.convert_to_tensor(tokens, dtype=tf.string)
    n_bytes = tf.minimum(tf.strings.length(tokens, unit="BYTE"), max_bytes)  # [...]
    # `fixed_length` pads the short tokens with zero bytes and cuts the long ones.
    raw = tf.io.decode_raw(
        tf.strings.substr(tokens, 0, max_bytes, unit="BYTE"), tf.uint8, fixed_length=max_bytes
    )
    byte_ids = tf.cast(raw, tf.int32) + 1  # [..., max_bytes]

    is_bos = tf.equal(tokens, BOS_TOKEN)
    is_eos = tf.equal(tokens, EOS_TOKEN)
    boundary_id = tf.where(is_bos, BOS_CHAR_ID, EOS_CHAR_ID)
    is_boundary = tf.logical_or(is_bos, is_eos)
    # A boundary token is a one-"byte" token whose byte is BOS or EOS.
    n_bytes = tf.where(is_boundary, 1, n_bytes)
    first = tf.where(is_boundary, boundary_id, byte_ids[..., 0])
    byte_ids = tf.concat([first[..., tf.newaxis], byte_ids[..., 1:]], axis=-1)

    # Position p of the output: BOW at 0, byte p - 1 for 1 <= p <= n, EOW at n + 1, PAD after.
    position = tf.range(max_characters_per_token, dtype=tf.int32)
    n = n_bytes[..., tf.newaxis]
    shifted_bytes = tf.concat(
        [
            tf.fill(tf.concat([tf.shape(byte_ids)[:-1], [1]], axis=0), BOW_CHAR_ID),
            byte_ids,
            tf.fill(tf.concat([tf.shape(byte_ids)[:-1], [1]], axis=0), PAD_CHAR_ID),
        ],
        axis=-1,
    )  # [..., max_characters_per_token]: BOW, bytes, one filler
    ids = tf.where(position <= n, shifted_bytes, PAD_CHAR_ID)
    ids = tf.where(tf.equal(position, n + 1), EOW_CHAR_ID, ids)
    return ids


def _flat_ids(tokens, max_characters_per_token, dictionary):
    """Bytes (`flat_tokens_to_char_ids`), or a model's own dictionary (`TokenDictionary`)."""
    if dictionary is None:
        return flat_tokens_to_char_ids(tokens, max_characters_per_token)
    from elmo_keras.text.tf_token_dictionary import flat_tokens_to_ids  # noqa: PLC0415

    return flat_tokens_to_ids(tokens, dictionary)


def tokens_to_char_ids(
    tokens, max_characters_per_token=MAX_CHARACTERS_PER_TOKEN, max_length=None, dictionary=None
):
    """Converts a ragged batch of tokens to a dense, right-padded tensor of character ids.

    Same ids as `elmo_keras.text.batch_to_char_ids`; padding positions are all zeros.

    Args:
        tokens: string `tf.RaggedTensor` of shape `[B, (T)]`, e.g. from
            `elmo_keras.text.tf_tokenization.tokenize`.
        max_characters_per_token: int. The number of ids per token. Defaults to `50`.
        max_length: int or `None`. Pads (or cuts) the token axis to this length. Defaults to
            `None`, the length of the longest sentence.
        dictionary: a `TokenDictionary` or `None`. A model's own dictionary (ELMoForManyLangs'
            models): its rows (`dictionary.width` ids) instead of bytes. Defaults to `None`.

    Returns:
        An int32 tensor of shape `[B, T, max_characters_per_token]`.

    Example:

    >>> import tensorflow as tf
    >>> ids = tokens_to_char_ids(tf.ragged.constant([["Hello", "!"], ["Hi"]]))
    >>> ids.shape
    TensorShape([2, 2, 50])
    """
    max_characters_per_token = _check_max_characters(max_characters_per_token)
    if not isinstance(tokens, tf.RaggedTensor):
        raise ValueError(
            "`tokens` must be a tf.RaggedTensor of strings of shape [batch, (tokens)]; use "
            "`dense_tokens_to_char_ids` for a dense tensor. "
            f"Received: tokens={tokens!r}"
        )
    if tokens.ragged_rank != 1:
        raise ValueError(
            "`tokens` must have shape [batch, (tokens)] (ragged rank 1). "
            f"Received: tokens.shape={tokens.shape}"
        )
    ids = _flat_ids(tokens.flat_values, max_characters_per_token, dictionary)
    ragged_ids = tokens.with_flat_values(ids)
    width = max_characters_per_token if dictionary is None else dictionary.width
    shape = None
    if max_length is not None:
        shape = [None, max_length, width]
    dense = ragged_ids.to_tensor(default_value=0, shape=shape)
    return tf.ensure_shape(dense, [None, max_length, width])


def dense_tokens_to_char_ids(
    tokens, sequence_len, max_characters_per_token=MAX_CHARACTERS_PER_TOKEN, dictionary=None
):
    """Converts a dense, padded batch of tokens to character ids.

    Args:
        tokens: string tensor of shape `[B, T]`. Positions at or past a sentence's length are
            padding, whatever they hold.
        sequence_len: integer tensor of shape `[B]`. The number of tokens of each sentence.
        max_characters_per_token: int. The number of ids per token. Defaults to `50`.
        dictionary: a `TokenDictionary` or `None`, as in `tokens_to_char_ids`.

    Returns:
        An int32 tensor of shape `[B, T, max_characters_per_token]`, all zeros at padding
        positions.

    Example:

    >>> import tensorflow as tf
    >>> ids = dense_tokens_to_char_ids(tf.constant([["Hello", "!"], ["Hi", ""]]), [2, 1])
    >>> int(tf.reduce_max(ids[1, 1]))
    0
    """
    tokens = tf.convert_to_tensor(tokens, dtype=tf.string)
    sequence_len = tf.cast(tf.convert_to_tensor(sequence_len), tf.int32)
    if tokens.shape.rank is not None and tokens.shape.rank != 2:
        raise ValueError(
            f"`tokens` must have shape [batch, tokens]. Received: tokens.shape={tokens.shape}"
        )
    if sequence_len.shape.rank is not None and sequence_len.shape.rank != 1:
        raise ValueError(
            "`sequence_len` must have shape [batch]. "
            f"Received: sequence_len.shape={sequence_len.shape}"
        )
    ids = _flat_ids(tokens, max_characters_per_token, dictionary)
    mask = tf.sequence_mask(sequence_len, maxlen=tf.shape(tokens)[1])
    return ids * tf.cast(mask, tf.int32)[..., tf.newaxis]
