"""One embedded line as a `tf.train.Example`, serialized without TensorFlow.

Plain Python and NumPy: the Beam workers write TFRecords of `tf.train.Example`s but must not
import TensorFlow, and apache-beam does not carry the `Example` proto. So the protobuf wire
format is written here by hand; `tests/beam/test_records.py` parses the bytes with
`tf.train.Example.FromString`.

The messages (tensorflow/core/example/example.proto and feature.proto):

    Example   { Features features = 1; }
    Features  { map<string, Feature> feature = 1; }   # each entry: { key = 1; value = 2; }
    Feature   { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                             Int64List int64_list = 3; } }
    BytesList { repeated bytes value = 1; }
    FloatList { repeated float value = 1 [packed = true]; }
    Int64List { repeated int64 value = 1 [packed = true]; }

Every field here is length-delimited (wire type 2): a tag byte `(field << 3) | 2`, the length
as a varint, then the payload. Packed floats are little-endian float32; packed int64s are
varints (a negative value takes ten bytes, as two's complement).
"""

from typing import NamedTuple

import numpy as np

FEATURE_KINDS = ("bytes", "float", "int64")
_KIND_FIELD = {"bytes": 1, "float": 2, "int64": 3}  # the Feature oneof's field numbers


class EmbeddedLine(NamedTuple):
    """One input line and its biLM layers: what `EmbedLines` emits.

    Attributes:
        source: str. The input file's path, as the file system matched it.
        line: int. The 0-based line number in `source`.
        tokens: list of str. The line's tokens (`EmbedLines`' `tokenization_mode`).
        embeddings: float32 array `(n_layers + 1, n_tokens, 2 * projection_dim)`.
    """

    source: str
    line: int
    tokens: list
    embeddings: np.ndarray


def _varint(value):
    value &= (1 << 64) - 1  # int64 -> its uint64 bit pattern, as protobuf encodes it
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number, payload):
    """A length-delimited field: tag, length, payload."""
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def _as_bytes(value):
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def _list_payload(kind, values):
    """The BytesList / FloatList / Int64List message for `values`."""
    if kind == "bytes":
        return b"".join(_field(1, _as_bytes(value)) for value in values)
    if kind == "float":
        packed = np.ascontiguousarray(values, dtype="<f4").tobytes()
    else:
        packed = b"".join(_varint(int(value)) for value in values)
    return _field(1, packed) if packed else b""  # an empty packed list is left out


def encode_example(features):
    """Serializes a `tf.train.Example` from plain Python values, without TensorFlow.

    Args:
        features: dict from feature name (str) to `(kind, values)`, `kind` one of `"bytes"`
            (str values are UTF-8 encoded), `"float"` (anything NumPy turns into float32,
            flattened in row-major order) or `"int64"`. Entries are written in the dict's order.

    Returns:
        bytes. What `tf.train.Example(...).SerializeToString()` would parse back to the same
        message.

    Example:

    >>> from elmo_keras.beam.records import encode_example
    >>> data = encode_example({"line": ("int64", [3]), "tokens": ("bytes", ["Hi", "!"])})
    >>> len(data)
    38
    """
    entries = []
    for name, (kind, values) in features.items():
        if kind not in _KIND_FIELD:
            raise ValueError(
                f"The kind of feature {name!r} must be one of {FEATURE_KINDS}. Received: {kind!r}"
            )
        if kind == "float":
            values = np.asarray(values).reshape(-1)
        feature = _field(_KIND_FIELD[kind], _list_payload(kind, values))
        entries.append(_field(1, _field(1, _as_bytes(name)) + _field(2, feature)))
    return _field(1, b"".join(entries))


def embedding_example(record):
    """The serialized `tf.train.Example` of one `EmbeddedLine`.

    Its features: `source` (bytes), `line` (int64), `tokens` (bytes list), `shape` (int64 list
    `[n_layers + 1, n_tokens, 2 * projection_dim]`) and `embeddings` (float list, row-major).
    An empty line has `n_tokens = 0` and no embedding values.
    """
    source, line, tokens, embeddings = record
    embeddings = np.asarray(embeddings, dtype=np.float32)
    if embeddings.ndim != 3 or embeddings.shape[1] != len(tokens):
        raise ValueError(
            "`embeddings` must have shape (n_layers + 1, n_tokens, 2 * projection_dim) with "
            f"n_tokens = len(tokens) = {len(tokens)}. Received: shape={embeddings.shape} for "
            f"line {line} of {source}"
        )
    return encode_example(
        {
            "source": ("bytes", [source]),
            "line": ("int64", [line]),
            "tokens": ("bytes", tokens),
            "shape": ("int64", embeddings.shape),
            "embeddings": ("float", embeddings),
        }
    )
