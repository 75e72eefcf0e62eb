"""Tokens -> id rows through a model's own dictionary, with TensorFlow ops (graphs, SavedModels).

The TensorFlow twin of `elmo_keras.text.token_dictionary.TokenDictionary` (its docstring states
the conventions): the same rows, computed with standard ops only, no lookup-table resources, so
that it runs inside `tf.function` and is saved into SavedModels. Characters: the token's code
points (`UnicodeDecode`), cut, then found by `searchsorted` in the sorted code points of the
dictionary's one-character entries. Words: the cut token's 62-bit fingerprint found the same
way in the sorted fingerprints of the word dictionary, and the entry's text compared, so a
collision can never give another word's id.
"""

import numpy as np
import tensorflow as tf

_BUCKETS = 1 << 62


def _character_table(dictionary):
    """Sorted code points of the one-character entries and their ids + 1 (a -1 sentinel)."""
    pairs = sorted((ord(c), i + 1) for c, i in dictionary._chars.items() if len(c) == 1)
    pairs = [(-1, dictionary._chars["<oov>"] + 1), *pairs]
    return np.array([p for p, _ in pairs], np.int32), np.array([i for _, i in pairs], np.int32)


def _word_table(dictionary):
    """`(sorted fingerprints, their words, their ids)` of the word dictionary, made once."""
    table = getattr(dictionary, "_tf_word_table", None)
    if table is None:
        words = list(dictionary._words)
        with tf.init_scope():  # eager, once, even when first called inside a tf.function
            hashes = tf.strings.to_hash_bucket_fast(tf.constant(words), _BUCKETS).numpy()
        order = np.argsort(hashes, kind="stable")
        ids = np.array([dictionary._words[words[k]] for k in order], np.int32)
        texts = np.array([words[k].encode("utf-8") for k in order], object)
        table = (hashes[order], texts, ids)
        dictionary._tf_word_table = table
    return table


def _sorted_lookup(keys, values, queries, default):
    position = tf.minimum(tf.searchsorted(keys, queries), tf.shape(keys)[0] - 1)
    return position, tf.where(
        tf.gather(keys, position) == queries, tf.gather(values, position), default
    )


def _word_ids(dictionary, cut):
    hashes, words, ids = _word_table(dictionary)
    queries = tf.strings.to_hash_bucket_fast(cut, _BUCKETS)
    oov = dictionary._words["<oov>"]
    position, found = _sorted_lookup(tf.constant(hashes), tf.constant(ids), queries, oov)
    same_text = tf.gather(tf.constant(words, tf.string), position) == cut
    return tf.where(same_text, found, oov)


def flat_tokens_to_ids(tokens, dictionary):
    """A string tensor of tokens `[...]` -> int32 id rows `[..., dictionary.width]`."""
    tokens = tf.convert_to_tensor(tokens, dtype=tf.string)
    flat = tf.reshape(tokens, [-1])
    chars, width = dictionary._chars, dictionary.max_characters_per_token
    points = tf.strings.unicode_decode(flat, "UTF-8")[:, : width - 2]  # cut by code points
    cut = tf.strings.unicode_encode(points, "UTF-8")
    keys, values = _character_table(dictionary)
    oov = chars["<oov>"] + 1
    _, ids = _sorted_lookup(tf.constant(keys), tf.constant(values), points.flat_values, oov)
    inner = points.with_flat_values(ids).to_tensor(chars["<pad>"] + 1, shape=[None, width - 2])
    n = tf.cast(points.row_lengths(), tf.int32)
    is_bos, is_eos = tf.equal(cut, "<bos>"), tf.equal(cut, "<eos>")
    first = tf.where(is_bos, chars["<bos>"] + 1, tf.where(is_eos, chars["<eos>"] + 1, inner[:, 0]))
    is_marker = tf.logical_or(is_bos, is_eos)
    n = tf.where(is_marker, 1, n)
    inner = tf.concat(
        [first[:, None], tf.where(is_marker[:, None], chars["<pad>"] + 1, inner[:, 1:])], 1
    )
    column = tf.ones_like(n)[:, None]
    rows = tf.concat([column * (chars["<eow>"] + 1), inner, column * (chars["<pad>"] + 1)], 1)
    position = tf.range(width, dtype=tf.int32)[None, :]
    rows = tf.where(position == (n + 1)[:, None], chars["<bow>"] + 1, rows)  # EFML's swap
    if dictionary.words is not None:
        rows = tf.concat([rows, _word_ids(dictionary, cut)[:, None]], axis=1)
    return tf.reshape(rows, tf.concat([tf.shape(tokens), [dictionary.width]], axis=0))
