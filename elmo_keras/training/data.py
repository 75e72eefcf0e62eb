"""Training text: files -> lines -> tokenized sentences, epoch after epoch; the vocabulary.

Text is read line by line and shuffled through a bounded buffer, so a corpus larger than memory
streams; the order is deterministic given the seed. The sentences are packed into windows by
`elmo_keras.training.windows` (whose names are importable from here as well).

Everything here is Python except `tokenize_lines` (tensorflow-text).
"""

import glob
import os
import random

from elmo_keras.backend import keras_backend
from elmo_keras.text.pretokenize import TOKENIZATION_MODES, tokenize_python
from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training.windows import (  # noqa: F401  (public here before the split)
    WindowPacker,
    batch_spec,
    make_dataset,
)
from elmo_keras.validation import check_choice, check_int, renamed_argument, renamed_attribute

_LINES_PER_CHUNK = 2048
# `renamed_argument(kwargs, *TOKENIZATION_RENAMED, ...)`: the old and the new keyword.
TOKENIZATION_RENAMED = ("tokenization", "tokenization_mode")


def no_other_arguments(kwargs, owner):
    """Raises the `TypeError` Python raises for an unknown keyword argument, if any is left."""
    if kwargs:
        raise TypeError(f"{owner}() got an unexpected keyword argument {next(iter(kwargs))!r}")


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


def tokenize_lines(lines, tokenization_mode="whitespace", **kwargs):
    """Tokenizes a list of lines; returns a list of lists of str.

    On the TensorFlow backend with tensorflow-text (`elmo_keras.text.tokenizer`), elsewhere
    with its Python twin (`elmo_keras.text.pretokenize.tokenize_python`, no TensorFlow): the
    same tokens, except that tensorflow-text drops everything from a NUL character (U+0000) of
    a line on.

    Args:
        lines: list of str.
        tokenization_mode: `"whitespace"` or `"punctuation"` (see
            `elmo_keras.text.pretokenize`). Defaults to `"whitespace"`. (`tokenization=` is its
            deprecated name.)
    """
    tokenization_mode = renamed_argument(
        kwargs, *TOKENIZATION_RENAMED, tokenization_mode, "whitespace", "tokenize_lines"
    )
    no_other_arguments(kwargs, "tokenize_lines")
    check_choice("tokenization_mode", tokenization_mode, TOKENIZATION_MODES)
    if not lines:
        return []
    if keras_backend() != "tensorflow":
        return [tokenize_python(line, tokenization_mode) for line in lines]
    from elmo_keras.text.tokenizer import tokenize

    ragged = tokenize(lines, mode=tokenization_mode, use_tensorflow_text=True)
    return [[token.decode("utf-8") for token in row] for row in ragged.to_list()]


def _read_lines(files):
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if line:
                    yield line


def iter_sentences(files, tokenization_mode="whitespace", **kwargs):
    """Yields the tokens of every non-empty line of `files`, in order (chunked tokenization)."""
    tokenization_mode = renamed_argument(
        kwargs, *TOKENIZATION_RENAMED, tokenization_mode, "whitespace", "iter_sentences"
    )
    no_other_arguments(kwargs, "iter_sentences")
    return _iter_sentences(
        files, check_choice("tokenization_mode", tokenization_mode, TOKENIZATION_MODES)
    )


def _iter_sentences(files, tokenization_mode):
    chunk = []
    for line in _read_lines(files):
        chunk.append(line)
        if len(chunk) == _LINES_PER_CHUNK:
            yield from (s for s in tokenize_lines(chunk, tokenization_mode) if s)
            chunk = []
    yield from (s for s in tokenize_lines(chunk, tokenization_mode) if s)


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
    return Vocabulary.build(
        iter_sentences(expand_files(pattern), tokenization_mode),
        min_count=min_count,
        max_size=max_size,
    )


def count_tokens(pattern, tokenization_mode="whitespace", **kwargs):
    """The number of tokens and of sentences in the files (for the epoch length)."""
    tokenization_mode = renamed_argument(
        kwargs, *TOKENIZATION_RENAMED, tokenization_mode, "whitespace", "count_tokens"
    )
    no_other_arguments(kwargs, "count_tokens")
    n_tokens = n_sentences = 0
    for sentence in iter_sentences(expand_files(pattern), tokenization_mode):
        n_tokens += len(sentence)
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
        shuffle: bool. Shuffle the files and, through a buffer, the sentences of every epoch.
        shuffle_buffer: int. Sentences in the shuffle buffer.
        seed: int. Seed of the shuffles (epoch `e` uses `(seed, e)`).
        epochs: int or None. Passes over the data; `None` repeats forever.
    """

    tokenization = renamed_attribute("tokenization", "tokenization_mode")

    def __init__(
        self,
        pattern,
        tokenization_mode="whitespace",
        shuffle=True,
        shuffle_buffer=10000,
        seed=0,
        epochs=None,
        **kwargs,
    ):
        tokenization_mode = renamed_argument(
            kwargs, *TOKENIZATION_RENAMED, tokenization_mode, "whitespace", "SentenceStream"
        )
        no_other_arguments(kwargs, "SentenceStream")
        self.files = expand_files(pattern)
        self.tokenization_mode = check_choice(
            "tokenization_mode", tokenization_mode, TOKENIZATION_MODES
        )
        self.shuffle = bool(shuffle)
        self.shuffle_buffer = check_int("shuffle_buffer", shuffle_buffer)
        self.seed = int(seed)
        if epochs is not None:
            check_int("epochs", epochs)
        self.epochs = epochs
        self.epoch = 0

    def _epoch_sentences(self, epoch):
        files = list(self.files)
        if not self.shuffle:
            return _iter_sentences(files, self.tokenization_mode)
        rng = random.Random(f"{self.seed}:{epoch}")
        rng.shuffle(files)
        return _shuffled(_iter_sentences(files, self.tokenization_mode), self.shuffle_buffer, rng)

    def __iter__(self):
        epoch = 0
        any_sentence = False
        while self.epochs is None or epoch < self.epochs:
            for sentence in self._epoch_sentences(epoch):
                any_sentence = True
                self.epoch = epoch
                yield sentence
            if not any_sentence:
                raise ValueError(f"The files hold no text. Received: {self.files}")
            epoch += 1


def __getattr__(name):
    if name == "TOKENIZATIONS":  # the name before `elmo_keras.text.pretokenize.TOKENIZATION_MODES`
        import warnings

        warnings.warn(
            "`data.TOKENIZATIONS` is deprecated; use "
            "`elmo_keras.text.pretokenize.TOKENIZATION_MODES`.",
            DeprecationWarning,
            stacklevel=2,
        )
        return TOKENIZATION_MODES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
