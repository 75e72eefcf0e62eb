"""Corpus-scale embedding on Apache Beam (`pip install "elmo-keras[beam]"`); see docs/beam.md.

- `ReadLines(file_pattern)`: files -> `(source, line_number, text)`, exact 0-based numbers.
- `EmbedLines(model_path, batch_size=64, max_batch_tokens=4096, ...)`: -> one `EmbeddedLine`
  per line, with an exported ONNX model in ONNX Runtime (the workers import no TensorFlow).
- `WriteEmbeddings(file_path_prefix)`: -> TFRecord shards of `tf.train.Example`s.
- `read_embeddings(file_pattern)`: the shards as a `tf.data.Dataset`;
  `to_hdf5(file_pattern, source, output)`: one input file's records in `elmo-keras embed`'s
  hdf5 layout.

Importing this package needs neither apache-beam nor TensorFlow: the transforms (which need
apache-beam) and the readers (which need TensorFlow) load on first use of their names.
"""

import importlib

from elmo_keras.beam.records import EmbeddedLine, embedding_example, encode_example

_LAZY = {
    "ReadLines": "transforms",
    "EmbedLines": "transforms",
    "EmbedBatches": "transforms",
    "WriteEmbeddings": "transforms",
    "read_embeddings": "reading",
    "to_hdf5": "reading",
}

__all__ = ["EmbeddedLine", "embedding_example", "encode_example", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        from elmo_keras.installs import require_module  # noqa: PLC0415

        if _LAZY[name] == "transforms":
            require_module("apache_beam", f"elmo_keras.beam.{name}", "beam")
        else:  # the readers make a tf.data.Dataset
            require_module("tensorflow", f"elmo_keras.beam.{name}", "tensorflow")
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
