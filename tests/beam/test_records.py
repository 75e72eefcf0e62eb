"""The hand-written `tf.train.Example` wire format, parsed back by TensorFlow's own proto."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip(
    "apache_beam", reason='apache-beam is not installed: pip install "elmo-keras[beam]"'
)

from elmo_keras.beam.records import EmbeddedLine, embedding_example, encode_example  # noqa: E402

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
FLOAT32 = st.floats(width=32, allow_nan=False)
FEATURE = st.one_of(
    st.tuples(st.just("bytes"), st.lists(st.one_of(st.text(), st.binary()), max_size=4)),
    st.tuples(st.just("int64"), st.lists(INT64, max_size=4)),
    st.tuples(st.just("float"), st.lists(FLOAT32, max_size=40)),
)


def _values(feature):
    kind = feature.WhichOneof("kind")
    values = list(getattr(feature, kind).value)
    return {"bytes_list": "bytes", "int64_list": "int64", "float_list": "float"}[kind], values


def _as_bytes(value):
    return value.encode("utf-8") if isinstance(value, str) else value


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=12), FEATURE, max_size=5))
def test_encode_example_parses_back_with_tensorflow(features):
    example = tf.train.Example.FromString(encode_example(features))
    parsed = {name: _values(feature) for name, feature in example.features.feature.items()}
    assert set(parsed) == set(features)
    for name, (kind, values) in features.items():
        parsed_kind, parsed_values = parsed[name]
        assert parsed_kind == kind
        if kind == "bytes":
            assert parsed_values == [_as_bytes(v) for v in values]
        elif kind == "float":
            np.testing.assert_array_equal(np.float32(parsed_values), np.float32(values))
        else:
            assert parsed_values == values


def test_encode_example_equals_tensorflow_serialization():
    features = {
        "tokens": ("bytes", ["Déjà", "vu"]),
        "line": ("int64", [2**40]),
        "embeddings": ("float", np.float32([[0.5, -1.25], [3e38, -0.0]])),
    }
    expected = tf.train.Example(
        features=tf.train.Features(
            feature={
                "tokens": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=["Déjà".encode(), b"vu"])
                ),
                "line": tf.train.Feature(int64_list=tf.train.Int64List(value=[2**40])),
                "embeddings": tf.train.Feature(
                    float_list=tf.train.FloatList(value=[0.5, -1.25, 3e38, -0.0])
                ),
            }
        )
    )
    assert tf.train.Example.FromString(encode_example(features)) == expected


def test_embedding_example_has_the_five_features():
    layers = np.arange(3 * 2 * 4, dtype=np.float32).reshape(3, 2, 4) / 7
    data = embedding_example(EmbeddedLine("corpus/a.txt", 5, ["The", "café"], layers))
    feature = tf.train.Example.FromString(data).features.feature
    assert sorted(feature) == ["embeddings", "line", "shape", "source", "tokens"]
    assert feature["source"].bytes_list.value == [b"corpus/a.txt"]
    assert feature["line"].int64_list.value == [5]
    assert feature["tokens"].bytes_list.value == [b"The", "café".encode()]
    assert feature["shape"].int64_list.value == [3, 2, 4]
    np.testing.assert_array_equal(feature["embeddings"].float_list.value, layers.reshape(-1))


def test_an_empty_line_has_no_values_but_its_shape():
    data = embedding_example(EmbeddedLine("a.txt", 0, [], np.zeros((3, 0, 32), np.float32)))
    feature = tf.train.Example.FromString(data).features.feature
    assert feature["shape"].int64_list.value == [3, 0, 32]
    assert feature["tokens"].bytes_list.value == []
    assert feature["embeddings"].float_list.value == []


def test_errors():
    with pytest.raises(ValueError, match="kind of feature 'x' must be one of"):
        encode_example({"x": ("double", [1.0])})
    with pytest.raises(ValueError, match=r"n_tokens = len\(tokens\) = 2\. Received: shape="):
        embedding_example(EmbeddedLine("a.txt", 0, ["a", "b"], np.zeros((3, 1, 4), np.float32)))
