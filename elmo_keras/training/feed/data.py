"""Training text: files -> lines -> tokenized sentences, epoch after epoch; the vocabulary.

Text is read line by line. Shuffled, every epoch is a fresh permutation of all the corpus's
lines, read back through an index of their byte offsets (`line_index.LineIndex`: about 12
bytes a line in memory, the offsets and the epoch's order); given `shuffle_buffer=N`, the
lines stream through an `N`-line buffer instead, for a corpus whose index would not fit. The
order is deterministic given the seed (and the NumPy and Python versions, whose generators draw
it). The sentences are packed into windows by `elmo_keras.training.feed.windows` (whose names are
importable from here as well).

A line longer than 256 KiB is never held whole (`long_line.LongLine`): it stays a
`streamed_sentence.StreamedSentence`, whose tokens are read from its file a piece at a time,
forward and backward, as the packer fills windows (memory does not grow with the line's length,
nor with that times the batch, where each row may hold the line); the windows are those of the
line tokenized whole.

Everything here is Python except `tokenization.tokenize_lines` (tensorflow-text).
"""

import glob
import os
import random
import warnings

import numpy as np

from elmo_keras.backend import keras_backend
from elmo_keras.text.tokenization import TOKENIZATION_MODES
from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training.feed.encoded_sentence import encoded_sentences, encoding_pool
from elmo_keras.training.feed.file_changes import signature
from elmo_keras.training.feed.line_index import LineIndex
from elmo_keras.training.feed.long_line import LongLine, scan_lines
from elmo_keras.training.feed.tokenization import (
    TOKENIZATION_RENAMED,
    no_other_arguments,
    tokenize_lines,
)
from elmo_keras.training.feed.windows import (  # noqa: F401  (public here before the split)
    WindowPacker,
    batch_spec,
    make_dataset,
)
from elmo_keras.validation import check_choice, check_int, renamed_argument, renamed_attribute

_LINES_PER_CHUNK = 2048


def expand_files(pattern):
    """The sorted files matching a glob (or a list of globs); an error when there are none."""
    patterns = [pattern] if isinstance(pattern, str | os.PathLike) else list(pattern)
    files = []
    for item in patterns:
        matched = sorted(glob.glob(os.fspath(item)))
        if not matched and os.path.isfile(os.fspath(item)):
            matched = [os.fspath(item)]
        files.extend(path for path in matched if os.path.isfile(path))
    if not files:
        raise ValueError(f"No text file matches `train`/`data`. Received: {pattern!r}")
    return files


def _read_lines(files):
    """The stripped non-empty lines of `files` (text mode's rules, undecodable bytes replaced);
    a `LongLine` for each line longer than `long_line.LONG_LINE_BYTES`."""
    for path in files:
        with open(path, "rb") as f:
            for offset, line in scan_lines(f):
                if line is None:
                    yield LongLine(path, offset, signature(os.fstat(f.fileno())))
                    continue
                line = line.decode("utf-8", errors="replace").strip()
                if line:
                    yield line


def iter_sentences(files, tokenization_mode="whitespace", **kwargs):
    """Yields the tokens of every non-empty line of `files`, in order (chunked tokenization)."""
    tokenization_mode = renamed_argument(
        kwargs, *TOKENIZATION_RENAMED, tokenization_mode, "whitespace", "iter_sentences"
    )
    no_other_arguments(kwargs, "iter_sentences")
    mode = check_choice("tokenization_mode", tokenization_mode, TOKENIZATION_MODES)
    return (s if isinstance(s, list) else list(s) for s in _iter_sentences(files, mode))


def _iter_sentences(files, tokenization_mode, encoding=None):
    return _tokenized(_read_lines(files), tokenization_mode, encoding)


def _tokenized(lines, tokenization_mode, encoding=None):
    """The non-empty sentences of `lines`, tokenized `_LINES_PER_CHUNK` lines at a time: token
    lists, or `EncodedSentence`s with `encoding` (`(vocabulary, pool, backend)`, see
    `encoded_sentence.encoded_sentences`); a `LongLine` stays one, in its place (streamed
    later), unless it holds no token."""
    chunks = _chunks(lines, tokenization_mode)
    if encoding is not None:
        return encoded_sentences(chunks, tokenization_mode, *encoding)
    return (
        sentence
        for chunk in chunks
        for sentence in (
            tokenize_lines(chunk, tokenization_mode) if isinstance(chunk, list) else [chunk]
        )
        if sentence
    )


def _chunks(lines, tokenization_mode):
    """`lines` in lists of `_LINES_PER_CHUNK`, and each `LongLine` holding a token as its
    `StreamedSentence`, in their order."""
    chunk = []
    for line in lines:
        if isinstance(line, LongLine):
            if chunk:
                yield chunk
            chunk = []
            line = line.sentence(tokenization_mode)
            if line.positions(0, 2) == 2:  # a token, then `</S>`
                yield line
            continue
        chunk.append(line)
        if len(chunk) == _LINES_PER_CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def build_vocabulary(pattern, min_count=1, max_size=None, tokenization_mode="whitespace", **kwargs):
    """Counts the tokens of the files matching `pattern`: `<S>`, `</S>`, `<UNK>`, then by frequency.

    Streams the files (memory grows with the number of distinct tokens only). Save the result
    with `Vocabulary.save` (bilm-tf's vocabulary file format). (`tokenization=` is the
    deprecated name of `tokenization_mode`.)
    """
    tokenization_mode = renamed_argument(
        kwargs, *TOKENIZATION_RENAMED, tokenization_mode, "whitespace", "build_vocabulary"
    )
    no_other_arguments(kwargs, "build_vocabulary")
    check_choice("tokenization_mode", tokenization_mode, TOKENIZATION_MODES)
    return Vocabulary.build(
        _iter_sentences(expand_files(pattern), tokenization_mode),  # a long line streamed
        min_count=min_count,
        max_size=max_size,
    )


def count_tokens(pattern, tokenization_mode="whitespace", **kwargs):
    """The number of tokens and of sentences in the files (for the epoch length)."""
    tokenization_mode = renamed_argument(
        kwargs, *TOKENIZATION_RENAMED, tokenization_mode, "whitespace", "count_tokens"
    )
    no_other_arguments(kwargs, "count_tokens")
    check_choice("tokenization_mode", tokenization_mode, TOKENIZATION_MODES)
    n_tokens = n_sentences = 0
    for sentence in _iter_sentences(expand_files(pattern), tokenization_mode):
        n_tokens += len(sentence) if isinstance(sentence, list) else sum(1 for _ in sentence)
        n_sentences += 1
    return n_tokens, n_sentences


def _shuffled(items, buffer_size, rng):
    """A streaming shuffle through a buffer of `buffer_size` items (as tf.data's)."""
    buffer = []
    for item in items:
        if len(buffer) < buffer_size:
            buffer.append(item)
            continue
        j = rng.randrange(buffer_size)
        yield buffer[j]
        buffer[j] = item
    rng.shuffle(buffer)
    yield from buffer


class SentenceStream:
    """The sentences of a corpus, epoch after epoch, optionally shuffled (deterministically).

    While it is iterated, `epoch` is the pass (from 0) of the sentence yielded last.

    Args:
        pattern: str or list. A glob of text files, one sentence or paragraph per line.
        tokenization_mode: `"whitespace"` (already tokenized text) or `"punctuation"`.
            (`tokenization=` is its deprecated name.)
        shuffle: bool. Shuffle every epoch.
        shuffle_buffer: int. `0` (the default): every epoch is a permutation of all the lines
            of all the files, read by their byte offsets (about 12 bytes a line: an index
            built by one pass over the files, and the epoch's order; a file that changed
            since, seen by its size, modification time and inode, is indexed again at the next
            epoch, with a warning, and during an epoch is a `ChangedFileError`, never read at
            stale offsets). `N >= 1`: the file order
            is shuffled and the lines go through an `N`-line buffer (tf.data's streaming
            shuffle), for a corpus whose index would not fit in memory; a file written one
            topic after another then stays that way beyond about `N` lines.
        seed: int. Seed of the shuffles (epoch `e` uses `(seed, e)`).
        epochs: int or None. Passes over the data; `None` repeats forever.
        vocabulary: `Vocabulary` or None. When given, each sentence is an
            `encoded_sentence.EncodedSentence` (its word ids) instead of a list of str, for
            `WindowPacker` (the same batches).
        workers: int. With `vocabulary`: processes tokenizing and looking up the lines, 2,048
            at a time (0, the default: in the iterating thread). The sentences are the same
            whatever the number. The processes are spawned (never forked: JAX and TensorFlow
            run threads), so a script that trains must start under
            `if __name__ == "__main__":`, as `multiprocessing` requires.

    Each sentence is a list of str, except a line longer than 256 KiB: a `StreamedSentence`
    (iterate it for its tokens), streamed from its file as `WindowPacker` fills windows.

    Example:

    ```python
    stream = SentenceStream("corpus/*.txt", seed=1, epochs=1)
    first = next(iter(stream))  # the tokens of one line, drawn from the whole corpus
    ```
    """

    tokenization = renamed_attribute("tokenization", "tokenization_mode")

    def __init__(
        self,
        pattern,
        tokenization_mode="whitespace",
        shuffle=True,
        shuffle_buffer=0,
        seed=0,
        epochs=None,
        vocabulary=None,
        workers=0,
        **kwargs,
    ):
        tokenization_mode = renamed_argument(
            kwargs, *TOKENIZATION_RENAMED, tokenization_mode, "whitespace", "SentenceStream"
        )
        self.vocabulary = vocabulary
        self.workers = check_int("workers", workers, minimum=0)
        no_other_arguments(kwargs, "SentenceStream")
        self.files = expand_files(pattern)
        self.tokenization_mode = check_choice(
            "tokenization_mode", tokenization_mode, TOKENIZATION_MODES
        )
        self.shuffle = bool(shuffle)
        self.shuffle_buffer = check_int("shuffle_buffer", shuffle_buffer, minimum=0)
        self.seed = int(seed)
        if epochs is not None:
            check_int("epochs", epochs)
        self.epochs = epochs
        self.epoch = 0
        self._index = None

    def _epoch_sentences(self, epoch, encoding):
        files = list(self.files)
        if not self.shuffle:
            return _iter_sentences(files, self.tokenization_mode, encoding)
        if self.shuffle_buffer == 0:
            change = None if self._index is None else self._index.changes()
            if change is not None:
                # A file changed since the last epoch (`corpus build --overwrite` into the
                # folder trained on): this epoch draws from the files as they are now.
                warnings.warn(
                    f"The training file {change[0]} changed ({change[1]}): epoch {epoch} "
                    "reads the text as it is now (its lines indexed again).",
                    stacklevel=2,
                )
            if self._index is None or change is not None:
                self._index = LineIndex(files)
            order = self._index.permutation(np.random.default_rng([self.seed % 2**64, epoch]))
            return _tokenized(self._index.lines(order), self.tokenization_mode, encoding)
        rng = random.Random(f"{self.seed}:{epoch}")
        rng.shuffle(files)
        sentences = _iter_sentences(files, self.tokenization_mode, encoding)
        return _shuffled(sentences, self.shuffle_buffer, rng)

    def __iter__(self):
        epoch = 0
        any_sentence = False
        encoding = pool = None
        if self.vocabulary is not None:
            backend = keras_backend()
            pool = encoding_pool(self.vocabulary, self.workers, backend)
            encoding = (self.vocabulary, pool, backend)
        try:
            while self.epochs is None or epoch < self.epochs:
                for sentence in self._epoch_sentences(epoch, encoding):
                    any_sentence = True
                    self.epoch = epoch
                    yield sentence
                if not any_sentence:
                    raise ValueError(f"The files hold no text. Received: {self.files}")
                epoch += 1
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)


def __getattr__(name):
    if name == "TOKENIZATIONS":  # the name before `elmo_keras.text.tokenization.TOKENIZATION_MODES`
        warnings.warn(
            "`data.TOKENIZATIONS` is deprecated; use "
            "`elmo_keras.text.tokenization.TOKENIZATION_MODES`.",
            DeprecationWarning,
            stacklevel=2,
        )
        return TOKENIZATION_MODES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
