"""Beam transforms: text files -> lines -> biLM layers -> TFRecord shards.

The worker path imports neither TensorFlow nor Keras: the model runs in ONNX Runtime
(`elmo_keras.runtime.OnnxEmbedder`) and the records are serialized by `records.py`.

    lines = pipeline | ReadLines("corpus/*.txt")        # (source, line, text)
    layers = lines | EmbedLines("model.onnx")           # EmbeddedLine, one per line
    layers | WriteEmbeddings("out/embeddings")          # out/embeddings-00000-of-0000N, ...

Exactly once per line: a bundle that fails is retried by the runner and its partial output is
discarded; `WriteEmbeddings` writes through Beam's file sink (each bundle into a temporary
file, renamed into place when the pipeline finalizes), so a retry neither drops nor repeats
a record.
"""

import os
import shutil
import tempfile

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.tfrecordio import WriteToTFRecord

from elmo_keras.batching import length_batches
from elmo_keras.beam.records import EmbeddedLine, embedding_example
from elmo_keras.text.text_files import split_lines
from elmo_keras.text.tokenization import (
    DEFAULT_TOKENIZATION_MODE,
    TOKENIZATION_MODES,
    tokenize_python,
)
from elmo_keras.validation import check_choice, check_int


def file_lines(readable_file):
    """Yields `(source, line_number, text)` for each line of a `fileio.ReadableFile`.

    The rule of `elmo-keras embed` (`elmo_keras.text.text_files.split_lines`): only "\\n" ends a
    line (an optional "\\r" before it is dropped), a final "\\n" starts no extra line, and a
    leading UTF-8 byte-order mark is dropped. Line numbers are 0-based and exact, because the
    whole file is read by one call.
    """
    source = readable_file.metadata.path
    data = readable_file.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"input file {source} is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None
    for number, line in enumerate(split_lines(text)):
        yield source, number, line


class ReadLines(beam.PTransform):
    """Reads every file that `file_pattern` matches as `(source, line_number, text)` elements.

    Each file is read whole (`fileio.MatchFiles` + `fileio.ReadMatches`) so that line numbers
    are exact; compressed files (`.gz`, `.bz2`, ...) are decompressed by their extension.

    Args:
        file_pattern: str. A glob on any Beam file system (local, `gs://`, `s3://`, ...).
    """

    def __init__(self, file_pattern):
        super().__init__()
        self.file_pattern = str(file_pattern)

    def expand(self, pbegin):
        return (
            pbegin
            | "Match" >> fileio.MatchFiles(self.file_pattern)
            | "Read" >> fileio.ReadMatches()
            | "Split" >> beam.FlatMap(file_lines)
        )


def budget_batches(sentences, batch_size, max_batch_tokens):
    """Yields lists of indices into `sentences`: by length, within a count and a token budget.

    `elmo_keras.batching.length_batches` groups similar lengths (`batch_size` at the most);
    each group is then cut so that a batch's padded size (its sentences times the longest
    one) stays within `max_batch_tokens`. A sentence longer than the budget is a batch alone.
    """
    for rows in length_batches(sentences, batch_size):
        batch = []
        for index in rows:  # increasing length, so the newest sentence is the longest
            if batch and (len(batch) + 1) * len(sentences[index]) > max_batch_tokens:
                yield batch
                batch = []
            batch.append(index)
        yield batch


def local_model_path(model_path):
    """`(path, temporary)`: a local file holding the model; `temporary` is the copy to delete
    at teardown, or `None` when `model_path` is local already."""
    if os.path.isfile(model_path):
        return model_path, None
    fd, temporary = tempfile.mkstemp(prefix="elmo-keras-", suffix=".onnx")
    with (
        os.fdopen(fd, "wb") as local,
        FileSystems.open(model_path, compression_type=CompressionTypes.UNCOMPRESSED) as remote,
    ):
        shutil.copyfileobj(remote, local)
    return temporary, temporary


class EmbedBatches(beam.DoFn):
    """Embeds lists of `(source, line_number, text)` with an ONNX model, one record per line.

    The model is loaded once per DoFn instance, in `setup` (a worker keeps it across bundles);
    a model on a remote file system is copied to a local temporary file first. Each input
    list is sorted by length and run in batches of `batch_size` lines at the most, within
    `max_batch_tokens` padded token positions. Counts `lines` and `tokens` (Beam metrics).

    Args:
        model_path: str. An `.onnx` file from `elmo-keras export`, local or on a Beam file
            system.
        batch_size: int. The most lines per ONNX Runtime call. Defaults to `64`.
        max_batch_tokens: int. The most padded token positions per call. Defaults to `4096`.
        intra_op_threads: int or `None`. ONNX Runtime threads per worker; `None` for its
            default (one per core). Defaults to `None`.
        tokenization_mode: str. How each line is split into tokens (`"punctuation"` or
            `"whitespace"`, see `elmo_keras.text.tokenize_python`). Defaults to
            `"punctuation"`.
    """

    def __init__(
        self,
        model_path,
        batch_size=64,
        max_batch_tokens=4096,
        intra_op_threads=None,
        tokenization_mode=DEFAULT_TOKENIZATION_MODE,
    ):
        super().__init__()
        self.model_path = str(model_path)
        self.batch_size = check_int("batch_size", batch_size)
        self.max_batch_tokens = check_int("max_batch_tokens", max_batch_tokens)
        self.intra_op_threads = check_int("intra_op_threads", intra_op_threads, allow_none=True)
        self.tokenization_mode = check_choice(
            "tokenization_mode", tokenization_mode, TOKENIZATION_MODES
        )
        self._embedder = None
        self._temporary = None
        self._lines = beam.metrics.Metrics.counter("elmo_keras", "lines")
        self._tokens = beam.metrics.Metrics.counter("elmo_keras", "tokens")

    def setup(self):
        from elmo_keras.runtime import OnnxEmbedder

        path, self._temporary = local_model_path(self.model_path)
        options = None
        if self.intra_op_threads is not None:
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = self.intra_op_threads
        self._embedder = OnnxEmbedder(path, batch_size=self.batch_size, session_options=options)

    def process(self, lines):
        mode = self.tokenization_mode
        sentences = [tokenize_python(text, mode) for _, _, text in lines]
        for rows in budget_batches(sentences, self.batch_size, self.max_batch_tokens):
            arrays = self._embedder.embed([sentences[i] for i in rows])
            for index, array in zip(rows, arrays, strict=True):
                source, number, _ = lines[index]
                yield EmbeddedLine(source, number, sentences[index], array)
            self._lines.inc(len(rows))
            self._tokens.inc(sum(len(sentences[i]) for i in rows))

    def teardown(self):
        self._embedder = None
        if self._temporary is not None:
            os.unlink(self._temporary)
            self._temporary = None


class EmbedLines(beam.PTransform):
    """`(source, line_number, text)` elements -> one `EmbeddedLine` per element.

    The lines are spread over the workers (`beam.Reshuffle`: the lines of one large file are
    not left on the worker that read it), gathered into pools of `pool_size` lines within a
    bundle (`beam.BatchElements`), and each pool is embedded by `EmbedBatches`: sorted by
    length, in batches within `batch_size` lines and `max_batch_tokens` padded positions.
    Tokens are the text split by `elmo_keras.text.tokenize_python(text, tokenization_mode)`,
    as `elmo-keras embed` splits; an empty line gives `n_tokens = 0`. Every line starts from
    the zero state, so a result never depends on the other lines of its batch.

    Args:
        model_path: str. An `.onnx` file from `elmo-keras export`, local or on a Beam file
            system (`gs://...`), read once per worker.
        batch_size: int. The most lines per ONNX Runtime call. Defaults to `64`.
        max_batch_tokens: int. The most padded token positions per call. Defaults to `4096`.
        pool_size: int or `None`. Lines sorted together by length. Defaults to `None`,
            `16 * batch_size`.
        intra_op_threads: int or `None`. ONNX Runtime threads per worker. Defaults to `None`
            (ONNX Runtime's default: one per core).
        tokenization_mode: str. `"punctuation"` (every elmo-keras entry point's split) or
            `"whitespace"` (for text tokenized already). Defaults to `"punctuation"`.

    Example:

    >>> import apache_beam as beam  # doctest: +SKIP
    >>> from elmo_keras.beam import EmbedLines, ReadLines, WriteEmbeddings  # doctest: +SKIP
    >>> with beam.Pipeline() as pipeline:  # doctest: +SKIP
    ...     _ = (pipeline | ReadLines("corpus/*.txt") | EmbedLines("model.onnx")
    ...          | WriteEmbeddings("/tmp/embeddings"))
    """

    def __init__(
        self,
        model_path,
        batch_size=64,
        max_batch_tokens=4096,
        pool_size=None,
        intra_op_threads=None,
        tokenization_mode=DEFAULT_TOKENIZATION_MODE,
    ):
        super().__init__()
        self.fn = EmbedBatches(
            model_path, batch_size, max_batch_tokens, intra_op_threads, tokenization_mode
        )
        pool_size = 16 * self.fn.batch_size if pool_size is None else pool_size
        self.pool_size = check_int("pool_size", pool_size)

    def expand(self, lines):
        return (
            lines
            | "Spread" >> beam.Reshuffle()
            | "Pool" >> beam.BatchElements(self.pool_size, self.pool_size)
            | "Embed" >> beam.ParDo(self.fn)
        )


class WriteEmbeddings(beam.PTransform):
    """Writes `EmbeddedLine`s as TFRecord shards `{prefix}-SSSSS-of-NNNNN` of `tf.train.Example`s.

    The features are those of `elmo_keras.beam.records.embedding_example`; read them back with
    `elmo_keras.beam.read_embeddings(prefix + "-*")`. Returns the written file names.

    Args:
        file_path_prefix: str. The shards' path prefix, on any Beam file system.
        num_shards: int. The number of shards; `0` lets the runner decide. Defaults to `0`.
    """

    def __init__(self, file_path_prefix, num_shards=0):
        super().__init__()
        self.file_path_prefix = str(file_path_prefix)
        self.num_shards = check_int("num_shards", num_shards, minimum=0)

    def expand(self, records):
        return (
            records
            | "Serialize" >> beam.Map(embedding_example)
            | "Write" >> WriteToTFRecord(self.file_path_prefix, num_shards=self.num_shards)
        )
