"""Reading the TFRecord shards of `elmo-keras beam-embed` back: a `tf.data` pipeline, and a
converter to the hdf5 layout of `elmo-keras embed`.

TensorFlow is imported inside the functions only, so importing `elmo_keras.beam` stays light.
"""

from elmo_keras.file_io.hdf5_writer import write_datasets

_SHOWN_SOURCES = 5


def _feature_spec(tf):
    return {
        "source": tf.io.FixedLenFeature([], tf.string),
        "line": tf.io.FixedLenFeature([], tf.int64),
        "tokens": tf.io.RaggedFeature(tf.string),
        "shape": tf.io.RaggedFeature(tf.int64),
        "embeddings": tf.io.RaggedFeature(tf.float32),
    }


def _records(file_pattern):
    import tensorflow as tf

    files = sorted(tf.io.gfile.glob(str(file_pattern)))
    if not files:
        raise ValueError(
            f"`file_pattern` matched no files. Received: file_pattern={file_pattern!r}"
        )
    return tf, tf.data.TFRecordDataset(files)


def _parse(tf, serialized):
    features = tf.io.parse_single_example(serialized, _feature_spec(tf))
    return {
        "source": features["source"],
        "line": features["line"],
        "tokens": features["tokens"],
        "embeddings": tf.reshape(features["embeddings"], features["shape"]),
    }


def read_embeddings(file_pattern):
    """The records of `elmo-keras beam-embed` as a `tf.data.Dataset`, in file order.

    Args:
        file_pattern: str. A glob over the shards, e.g. `"out/embeddings-*"` (any file system
            that `tf.io.gfile` reads).

    Returns:
        A `tf.data.Dataset` of dicts: `source` (string scalar, the input file), `line` (int64
        scalar, 0-based), `tokens` (string `[n_tokens]`) and `embeddings` (float32
        `[n_layers + 1, n_tokens, 2 * projection_dim]`). The shards are read in name order;
        the records of one input file are spread over them in no particular order.

    Example:

    >>> from elmo_keras.beam import read_embeddings
    >>> for record in read_embeddings("/tmp/embeddings-*").take(1):  # doctest: +SKIP
    ...     print(record["line"].numpy(), record["embeddings"].shape)
    0 (3, 7, 1024)
    """
    tf, records = _records(file_pattern)
    return records.map(lambda serialized: _parse(tf, serialized))


def _sources(tf, records, limit):
    found = set()
    spec = {"source": tf.io.FixedLenFeature([], tf.string)}
    for serialized in records:
        found.add(tf.io.parse_single_example(serialized, spec)["source"].numpy().decode())
        if len(found) > limit:
            break
    return sorted(found)


def to_hdf5(file_pattern, source, output, overwrite=False):
    """Writes one input file's records in the hdf5 layout of `elmo-keras embed`.

    One float32 dataset per line, named by its 0-based line number, of shape
    `(n_layers + 1, n_tokens, 2 * projection_dim)`. The file appears complete or not at all
    (`elmo_keras.file_io.hdf5_writer.write_datasets`; a full disk is one `OSError`): a missing or
    repeated line number is an error and leaves nothing behind.

    Args:
        file_pattern: str. A glob over the shards, e.g. `"out/embeddings-*"`.
        source: str. The input file, spelled as the records spell it (the path the file system
            matched; `elmo-keras beam-embed` makes local paths absolute).
        output: str or path-like. The hdf5 file to write.
        overwrite: bool. Replace an existing `output`. Defaults to `False`.

    Returns:
        int. The number of lines written.
    """
    tf, records = _records(file_pattern)
    wanted = tf.constant(str(source))
    spec = {"source": tf.io.FixedLenFeature([], tf.string)}
    mine = records.filter(
        lambda serialized: tf.equal(tf.io.parse_single_example(serialized, spec)["source"], wanted)
    ).map(lambda serialized: _parse(tf, serialized))
    seen = set()

    def datasets():
        """The records as `(line, embeddings)`; the checks raise inside the writer, which then
        leaves nothing behind."""
        for record in mine.as_numpy_iterator():
            line = int(record["line"])
            if line in seen:
                raise ValueError(f"line {line} of {source} appears twice in {file_pattern}")
            seen.add(line)
            yield str(line), record["embeddings"]
        if not seen:
            shown = _sources(tf, records, _SHOWN_SOURCES)
            raise ValueError(
                f"no records for `source`={str(source)!r} in {file_pattern}; sources found "
                f"include {shown}"
            )
        missing = sorted(set(range(max(seen) + 1)) - seen)
        if missing:
            raise ValueError(
                f"{len(missing)} line(s) of {source} are missing from {file_pattern}, the first "
                f"at line {missing[0]}"
            )

    write_datasets(output, datasets(), overwrite=overwrite)
    return len(seen)
