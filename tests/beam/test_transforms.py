"""The Beam transforms: line numbering, batching, exactly one record per line under a retried
failure, and a worker path that imports neither TensorFlow nor Keras."""

import collections
import gzip
import os
import pathlib
import textwrap

import pytest

beam = pytest.importorskip(
    "apache_beam", reason='apache-beam is not installed: pip install "elmo-keras[beam]"'
)

from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner  # noqa: E402
from apache_beam.testing.util import assert_that, equal_to  # noqa: E402

from elmo_keras.beam import (  # noqa: E402
    EmbedBatches,
    EmbedLines,
    ReadLines,
    WriteEmbeddings,
    read_embeddings,
    transforms,
)
from elmo_keras.beam.transforms import budget_batches  # noqa: E402
from elmo_keras.cli._common import read_sentences  # noqa: E402
from elmo_keras.text.text_files import split_lines  # noqa: E402
from tests.fresh_interpreter import script_report  # noqa: E402


def _expected_lines(folder):
    """(source, line, text) for every line of every file, numbered as `elmo-keras embed` does."""
    return [
        (str(path), number, text)
        for path in sorted(folder.iterdir())
        for number, text in enumerate(split_lines(path.read_bytes().decode("utf-8-sig")))
    ]


def test_read_lines_numbers_lines_as_embed_does(corpus):
    expected = _expected_lines(corpus)
    assert len(expected) == 13
    for path in corpus.iterdir():  # the same lines as `elmo-keras embed` reads
        rows = [text.split() for source, _, text in expected if source == str(path)]
        assert rows == read_sentences(path)
    with beam.Pipeline() as pipeline:
        lines = pipeline | ReadLines(str(corpus / "*.txt"))
        assert_that(lines, equal_to(expected))


def test_read_lines_decompresses_by_extension(tmp_path):
    (tmp_path / "a.txt.gz").write_bytes(gzip.compress(b"one two\n\nthree\n"))
    source = str(tmp_path / "a.txt.gz")
    with beam.Pipeline() as pipeline:
        lines = pipeline | ReadLines(str(tmp_path / "*.gz"))
        assert_that(
            lines, equal_to([(source, 0, "one two"), (source, 1, ""), (source, 2, "three")])
        )


def test_read_lines_refuses_text_that_is_not_utf8(tmp_path):
    (tmp_path / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    with pytest.raises(Exception, match="is not UTF-8 text"):
        with beam.Pipeline() as pipeline:
            _ = pipeline | ReadLines(str(tmp_path / "*.txt"))


def test_budget_batches():
    sentences = [["a"] * n for n in (5, 0, 3, 3, 1, 0, 9, 2)]
    batches = list(budget_batches(sentences, batch_size=3, max_batch_tokens=10))
    # The empty lines first, then by length in groups of 3 (1, 2, 3 | 3, 5, 9), each cut so
    # that lines x longest <= 10 (3 x 3, 2 x 5); a 9-token line with another would be 18.
    assert batches == [[1, 5], [4, 7, 2], [3, 0], [6]]
    assert sorted(i for batch in batches for i in batch) == list(range(len(sentences)))
    assert list(budget_batches([], 4, 10)) == []


class FlakyEmbedBatches(EmbedBatches):
    """Fails once, after emitting its first record: the marker file is created atomically
    (`O_EXCL`) by the one attempt that fails, so any retry goes through."""

    def __init__(self, marker, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.marker = str(marker)

    def process(self, lines):
        for count, record in enumerate(super().process(lines)):
            yield record
            if count == 0 and self._first_failure():
                raise RuntimeError("injected failure")

    def _first_failure(self):
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True


def _keys(prefix):
    return [
        (record["source"].decode(), int(record["line"]))
        for record in read_embeddings(f"{prefix}-*").as_numpy_iterator()
    ]


def test_a_retried_bundle_neither_drops_nor_repeats_a_line(onnx_model, corpus, tmp_path):
    """The bundle-based DirectRunner retries a failed bundle (the FnApiRunner, the
    DirectRunner's default for batch, does not); its partial output must be discarded."""
    marker = tmp_path / "failed-once"
    embed = EmbedLines(onnx_model, batch_size=2, pool_size=4)
    embed.fn = FlakyEmbedBatches(marker, onnx_model, batch_size=2)
    prefix = tmp_path / "out" / "embeddings"
    with beam.Pipeline(runner=BundleBasedDirectRunner()) as pipeline:
        _ = (
            pipeline
            | ReadLines(str(corpus / "*.txt"))
            | embed
            | WriteEmbeddings(str(prefix), num_shards=2)
        )
    assert marker.exists(), "the failure was never injected"
    keys = _keys(prefix)
    assert collections.Counter(keys).most_common(1)[0][1] == 1
    assert sorted(keys) == sorted((s, n) for s, n, _ in _expected_lines(corpus))


def test_the_worker_path_imports_neither_tensorflow_nor_keras(onnx_model, corpus, tmp_path):
    """A fresh process runs the whole pipeline in-process (the DirectRunner's workers are
    threads of it) and has imported neither TensorFlow nor Keras."""
    script = textwrap.dedent(
        f"""
        import json, sys
        import apache_beam as beam
        from elmo_keras.beam import EmbedLines, ReadLines, WriteEmbeddings

        with beam.Pipeline() as pipeline:
            _ = (pipeline | ReadLines({str(corpus / "*.txt")!r})
                 | EmbedLines({str(onnx_model)!r}, batch_size=2)
                 | WriteEmbeddings({str(tmp_path / "emb")!r}))
        heavy = sorted(m for m in sys.modules
                       if m.split(".")[0] in ("tensorflow", "keras", "tf_keras", "tf2onnx"))
        print(json.dumps({{"heavy": heavy}}))
        """
    )
    env = dict(os.environ)
    env.pop("KERAS_BACKEND", None)
    assert script_report(script, env=env, cwd=tmp_path, timeout=180) == {"heavy": []}
    assert len(_keys(tmp_path / "emb")) == 13


def test_a_model_off_the_local_disk_is_copied_once_and_removed(onnx_model, monkeypatch):
    """A path that is not a local file (as `gs://...` is not) is read through Beam's file
    systems into a temporary file, which `teardown` deletes."""
    monkeypatch.setattr(transforms.os.path, "isfile", lambda path: False)
    fn = EmbedBatches(onnx_model, batch_size=2)
    fn.setup()
    copy = pathlib.Path(fn._temporary)
    assert copy != onnx_model and copy.read_bytes() == onnx_model.read_bytes()
    (record,) = fn.process([("a.txt", 0, "Hello world")])
    assert record.tokens == ["Hello", "world"] and record.embeddings.shape == (3, 2, 32)
    fn.teardown()
    assert not copy.exists()


def test_argument_errors(onnx_model):
    with pytest.raises(ValueError, match="`max_batch_tokens` must be an integer >= 1"):
        EmbedLines(onnx_model, max_batch_tokens=0)
    with pytest.raises(ValueError, match="`pool_size` must be an integer >= 1"):
        EmbedLines(onnx_model, pool_size=0)
    with pytest.raises(ValueError, match="`num_shards` must be an integer >= 0"):
        WriteEmbeddings("/tmp/x", num_shards=-1)
