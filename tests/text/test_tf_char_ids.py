"""TensorFlow character ids agree with the NumPy ones, eagerly, in tf.function and SavedModels."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from elmo_keras import text
from elmo_keras.text.tf_char_ids import (
    dense_tokens_to_char_ids,
    flat_tokens_to_char_ids,
    tokens_to_char_ids,
)

TOKENS = st.one_of(
    st.text(max_size=8),
    st.text(min_size=15, max_size=70),  # often over 48 bytes, cut mid-character
    st.sampled_from(["<S>", "</S>", "", "<S", "S>", "<s>", " <S>", "€" * 20, "a" + "é" * 30]),
)
# Core TensorFlow ops only (no PyFunc, no custom ops from tensorflow_text).
STANDARD_OPS = {
    "AddV2",
    "Cast",
    "ConcatV2",
    "Const",
    "DecodePaddedRaw",
    "EnsureShape",
    "Equal",
    "ExpandDims",
    "Fill",
    "Identity",
    "Less",
    "LessEqual",
    "LogicalOr",
    "Minimum",
    "Mul",
    "NoOp",
    "Placeholder",
    "RaggedTensorToTensor",
    "Range",
    "SelectV2",
    "Shape",
    "StridedSlice",
    "StringLength",
    "Substr",
}
SENTENCES = st.lists(st.lists(TOKENS, max_size=6), min_size=1, max_size=5)


def ragged(sentences):
    return tf.RaggedTensor.from_row_lengths(
        tf.constant([t for s in sentences for t in s], dtype=tf.string),
        [len(s) for s in sentences],
    )


@tf.function(input_signature=[tf.RaggedTensorSpec([None, None], tf.string, ragged_rank=1)])
def ragged_fn(tokens):
    return tokens_to_char_ids(tokens)


@tf.function(
    input_signature=[tf.TensorSpec([None, None], tf.string), tf.TensorSpec([None], tf.int32)]
)
def dense_fn(tokens, lengths):
    return dense_tokens_to_char_ids(tokens, lengths)


@settings(max_examples=150, deadline=None)
@given(SENTENCES, st.integers(0, 3))
def test_tf_matches_numpy_on_arbitrary_unicode(sentences, extra):
    expected = text.batch_to_char_ids(sentences)
    np.testing.assert_array_equal(ragged_fn(ragged(sentences)).numpy(), expected)
    # Dense + lengths: padding positions hold garbage tokens that must come out as zeros.
    width = expected.shape[1] + extra
    dense = [s + ["garbage€"] * (width - len(s)) for s in sentences]
    lengths = [len(s) for s in sentences]
    out = dense_fn(tf.constant(dense, dtype=tf.string), tf.constant(lengths, tf.int32)).numpy()
    np.testing.assert_array_equal(out[:, : expected.shape[1]], expected)
    assert not out[:, expected.shape[1] :].any()


def test_boundaries_and_widths_eager():
    tokens = tf.ragged.constant([["<S>", "The", "</S>"], ["Second"]])
    ids = tokens_to_char_ids(tokens).numpy()
    assert ids.shape == (2, 3, 50) and ids.dtype == np.int32
    assert ids[0, 0].tolist() == text.bos_char_ids().tolist()
    assert ids[0, 2].tolist() == text.eos_char_ids().tolist()
    assert not ids[1, 1:].any()
    for width in (3, 4, 10):
        np.testing.assert_array_equal(
            tokens_to_char_ids(tokens, max_characters_per_token=width).numpy(),
            text.batch_to_char_ids(
                [["<S>", "The", "</S>"], ["Second"]], max_characters_per_token=width
            ),
        )
    flat = flat_tokens_to_char_ids(tf.constant([["a", "<S>"]])).numpy()
    assert flat.shape == (1, 2, 50)


def test_max_length_and_empty_batches():
    tokens = tf.ragged.constant([["a", "b"], ["c"]])
    ids = tokens_to_char_ids(tokens, max_length=4)
    assert ids.shape == (2, 4, 50)
    np.testing.assert_array_equal(
        ids.numpy(), text.batch_to_char_ids([["a", "b"], ["c"]], max_length=4)
    )
    empty = ragged([[], []])
    assert tokens_to_char_ids(empty).shape == (2, 0, 50)
    assert ragged_fn(ragged([[]])).shape == (1, 0, 50)
    assert dense_fn(tf.zeros([0, 3], tf.string), tf.zeros([0], tf.int32)).shape == (0, 3, 50)


def test_errors():
    with pytest.raises(ValueError, match="`tokens` must be a tf.RaggedTensor"):
        tokens_to_char_ids(tf.constant([["a"]]))
    with pytest.raises(ValueError, match=r"ragged rank 1"):
        tokens_to_char_ids(tf.ragged.constant([[["a"]]]))
    with pytest.raises(ValueError, match=r"Received: max_characters_per_token=2"):
        tokens_to_char_ids(tf.ragged.constant([["a"]]), max_characters_per_token=2)
    with pytest.raises(ValueError, match=r"`tokens` must have shape \[batch, tokens\]"):
        dense_tokens_to_char_ids(tf.constant(["a"]), [1])
    with pytest.raises(ValueError, match=r"`sequence_len` must have shape \[batch\]"):
        dense_tokens_to_char_ids(tf.constant([["a"]]), [[1]])


def test_saved_model_uses_only_standard_ops(tmp_path):
    module = tf.Module()
    module.char_ids = ragged_fn
    module.dense_char_ids = dense_fn
    tf.saved_model.save(module, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    sentences = [["<S>", "naïve", "x" * 60], ["日本語"]]
    np.testing.assert_array_equal(
        loaded.char_ids(ragged(sentences)).numpy(), text.batch_to_char_ids(sentences)
    )
    op_types = set()
    for fn in (ragged_fn, dense_fn):
        graph = fn.get_concrete_function().graph.as_graph_def()
        op_types |= {node.op for node in graph.node}
        for library_fn in graph.library.function:
            op_types |= {node.op for node in library_fn.node_def}
    assert {"Substr", "DecodePaddedRaw", "StringLength"} <= op_types
    assert op_types <= STANDARD_OPS, op_types - STANDARD_OPS
