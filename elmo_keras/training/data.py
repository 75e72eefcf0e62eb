"""Training text: files -> lines -> tokenized sentences, epoch after epoch; the vocabulary.

Text is read line by line. Shuffled, every epoch is a fresh permutation of all the corpus's
lines, read back through an index of their byte offsets (about 12 bytes a line in memory: the
offsets and the epoch's order); given `shuffle_buffer=N`, the lines stream through an `N`-line
buffer instead, for a corpus whose index would not fit. The order is deterministic given the
seed (and the NumPy and Python versions, whose generators draw it). The sentences are packed
into windows by `elmo_keras.training.windows` (whose names are importable from here as well).

A line longer than 256 KiB is never held whole: it stays a `StreamedSentence`, whose tokens
are read from its file a piece at a time, forward and backward, as the packer fills windows
(memory does not grow with the line's length, nor with that times the batch, where each row
may hold the line); the windows are those of the line tokenized whole.

Everything here is Python except `tokenize_lines` (tensorflow-text).
"""

import array
import collections
import glob
import itertools
import os
import random
import re
import warnings

import numpy as np

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
# Files kept open at once while reading lines by their offsets (the least recently used closes).
_OPEN_FILES = 64
# Line numbers looked up per NumPy call (bounds the Python objects alive at once).
_LINES_PER_LOOKUP = 65_536
# Bytes read at a time to find the end of a line.
_READ_BYTES = 4096
# A line longer than this is never held whole: its tokens are streamed from its file, a piece
# at a time, forward and backward (`LongLine`), so memory does not grow with a line's length
# times the batch (each row of a batch may hold a line). Shorter lines are read and tokenized
# whole. Both give the same tokens: this bound changes memory, never the batches.
_LONG_LINE_BYTES = 2**18
# Bytes of a long line read and tokenized at a time (cut at a space or a tab).
_PIECE_BYTES = 2**16
# Bytes read at a time by the line scanner.
_SCAN_BYTES = 2**16
# Where a line ends: `\n`, `\r\n` or a lone `\r` (Python's text mode).
_LINE_END = re.compile(rb"\r\n?|\n")
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


def _scan_lines(f):
    """`(offset, bytes)` of each line of the binary file `f` that holds more than ASCII white
    space, in order; `(offset, None)` for a line longer than `_LONG_LINE_BYTES`, which is not
    held (the scan skips to its end). A line ends at `\\n`, `\\r\\n` or a lone `\\r`, as in
    Python's text mode; the line's bytes exclude its end."""
    buffer, base, skipping = b"", 0, False  # `base`: the file offset of `buffer[0]`
    while True:
        block = f.read(_SCAN_BYTES)
        buffer += block
        start = 0
        for end in _LINE_END.finditer(buffer):
            if block and end.end() == len(buffer) and end.group() == b"\r":
                break  # perhaps the first half of a CR LF pair: decided with the next block
            if skipping:
                skipping = False  # the end of a long line
            elif end.start() - start > _LONG_LINE_BYTES:
                yield base + start, None
            elif buffer[start : end.start()].strip():
                yield base + start, buffer[start : end.start()]
            start = end.end()
        buffer, base = buffer[start:], base + start
        if not block:
            if not skipping and len(buffer) > _LONG_LINE_BYTES:
                yield base, None
            elif buffer.strip() and not skipping:
                yield base, buffer
            return
        if not skipping and len(buffer) > _LONG_LINE_BYTES:
            yield base, None
            skipping = True
        if skipping:  # keep a final CR: it may end the long line with the next block's LF
            kept = buffer[-1:] if buffer.endswith(b"\r") else b""
            buffer, base = kept, base + len(buffer) - len(kept)


def _read_lines(files):
    """The stripped non-empty lines of `files` (text mode's rules, undecodable bytes replaced);
    a `LongLine` for each line longer than `_LONG_LINE_BYTES`."""
    for path in files:
        with open(path, "rb") as f:
            for offset, line in _scan_lines(f):
                if line is None:
                    yield LongLine(path, offset, _signature(os.fstat(f.fileno())))
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


def _iter_sentences(files, tokenization_mode):
    return _tokenized(_read_lines(files), tokenization_mode)


def _tokenized(lines, tokenization_mode):
    """The non-empty token lists of `lines`, tokenized `_LINES_PER_CHUNK` lines at a time; a
    `LongLine` stays one, in its place (streamed later), unless it holds no token."""
    chunk = []
    for line in lines:
        if isinstance(line, LongLine):
            yield from (s for s in tokenize_lines(chunk, tokenization_mode) if s)
            chunk = []
            line = line.sentence(tokenization_mode)
            if line.positions(0, 2) == 2:  # a token, then `</S>`
                yield line
            continue
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


def _line_offsets(path):
    """The byte offsets of the lines of `path` that hold more than white space (int64). A line
    ends at `\\n`, `\\r\\n` or a lone `\\r`, as in Python's text mode. (A long line is held as
    bytes here for a moment, once per index: this loop is several times faster than
    `_scan_lines` on ordinary text.)"""
    offsets = array.array("q")  # 8 bytes a line while it grows, too
    position = 0
    with open(path, "rb") as f:
        for piece in f:  # up to and with a newline byte: a CR LF pair is never split
            if b"\r" not in piece:
                if piece.strip():
                    offsets.append(position)
            else:
                start = 0
                for end in _LINE_END.finditer(piece):
                    if piece[start : end.start()].strip():
                        offsets.append(position + start)
                    start = end.end()
                if piece[start:].strip():
                    offsets.append(position + start)
            position += len(piece)
    return np.frombuffer(offsets, dtype=np.int64) if offsets else np.zeros(0, np.int64)


def _read_line(f, offset):
    """The stripped text of the line at `offset` of the unbuffered binary file `f`; `None`
    when `offset` is at or past the end of the file (it was cut short); `LongLine` (the class)
    for a line longer than `_LONG_LINE_BYTES`, which is not read whole."""
    f.seek(offset)
    blocks = []
    size = 0
    while True:
        block = f.read(_READ_BYTES)
        end = _LINE_END.search(block)
        if end is not None:
            blocks.append(block[: end.start()])
            size += end.start()
            break
        blocks.append(block)
        size += len(block)
        if len(block) < _READ_BYTES:
            break
        if size > _LONG_LINE_BYTES:
            return LongLine
    if size > _LONG_LINE_BYTES:
        return LongLine
    if not blocks[0]:
        return None
    return b"".join(blocks).decode("utf-8", errors="replace").strip()


class LongLine:
    """A line longer than `_LONG_LINE_BYTES`, by its file and byte offset; never held whole.

    `sentence(mode)` gives a `StreamedSentence` over its tokens: read from the file a piece
    (`_PIECE_BYTES`, cut at a space or a tab) at a time, forward from its start and backward
    from its end, and tokenized piece by piece with `tokenize_lines` (tokens never cross white
    space, so the pieces give the tokens of the whole line). tensorflow-text ignores a line
    from its first NUL character on: on the TensorFlow backend the line ends there too.
    """

    def __init__(self, path, offset, signature):
        self.path = path
        self.offset = offset
        self.signature = signature  # of the file when the line was found (`_signature`)

    def _open(self):
        """The file, if it is still the one the line was found in; else `ChangedFileError`."""
        f = open(self.path, "rb")  # noqa: SIM115 (the callers close it)
        if _signature(os.fstat(f.fileno())) != self.signature:
            f.close()
            raise ChangedFileError(
                f"The training file {self.path} changed while the run read it: the line at "
                f"byte {self.offset} is no longer there to read. Keep the text unchanged "
                "during a run (write a new corpus elsewhere)."
            )
        return f

    def sentence(self, tokenization_mode):
        return StreamedSentence(self, tokenization_mode)

    def end(self):
        """The offset where the line's text ends (its line end, the file's end, or on the
        TensorFlow backend its first NUL byte), found by one pass over its bytes."""
        stop = re.compile(rb"[\r\n\0]" if keras_backend() == "tensorflow" else rb"[\r\n]")
        with self._open() as f:
            f.seek(self.offset)
            position = self.offset
            while block := f.read(_SCAN_BYTES):
                found = stop.search(block)
                if found is not None:
                    return position + found.start()
                position += len(block)
        return position

    def pieces(self, start, end, backward=False):
        """Decoded pieces of the bytes `[start, end)`, each cut at a space or a tab, in file
        order or (`backward`) from the end."""
        with self._open() as f:
            rest = b""
            position = start if not backward else end
            while True:
                size = min(_PIECE_BYTES, (end - position) if not backward else (position - start))
                if backward:
                    position -= size
                    f.seek(position)
                    buffer = f.read(size) + rest
                else:
                    f.seek(position)
                    buffer = rest + f.read(size)
                    position += size
                last = size == 0 or position == (start if backward else end)
                if last:
                    if buffer:
                        yield buffer.decode("utf-8", errors="replace")
                    return
                if backward:
                    cut = min(
                        (i for i in (buffer.find(b" "), buffer.find(b"\t")) if i >= 0), default=-1
                    )
                    if cut >= 0:
                        rest, piece = buffer[: cut + 1], buffer[cut + 1 :]
                        yield piece.decode("utf-8", errors="replace")
                    else:
                        rest = buffer
                else:
                    cut = max(buffer.rfind(b" "), buffer.rfind(b"\t"))
                    if cut >= 0:
                        piece, rest = buffer[: cut + 1], buffer[cut + 1 :]
                        yield piece.decode("utf-8", errors="replace")
                    else:
                        rest = buffer


class _Cursor:
    """The tokens of an iterator of token lists, by index, holding only those from the lowest
    index still wanted on (`lo`: indices only move forward) to the highest asked for."""

    def __init__(self, token_lists):
        self.source = token_lists
        self.tokens = collections.deque()
        self.first = 0  # the index of `tokens[0]`
        self.count = None  # the number of tokens, once the source is exhausted

    def _advance(self, lo, index):
        """Reads until token `index` is held (or the source ends), forgetting those below `lo`."""
        self._drop(lo)
        while self.count is None and self.first + len(self.tokens) <= index:
            tokens = next(self.source, None)
            if tokens is None:
                self.count = self.first + len(self.tokens)
            elif not self.tokens and self.first + len(tokens) <= lo:
                self.first += len(tokens)  # skipped (a resumed run), never held
            else:
                self.tokens.extend(tokens)
                self._drop(lo)

    def _drop(self, lo):
        while self.tokens and self.first < lo:
            self.tokens.popleft()
            self.first += 1

    def get(self, lo, hi):
        """Tokens `lo..hi-1`, those that exist."""
        self._advance(lo, hi - 1)
        return list(itertools.islice(self.tokens, 0, max(0, hi - self.first)))

    def available(self, lo, index):
        """Whether token `index` exists."""
        self._advance(lo, index)
        return self.count is None or index < self.count


class StreamedSentence:
    """The tokens of a `LongLine` for `elmo_keras.training.windows.WindowPacker`, a window at a
    time: the packer asks how many positions are left (`positions`) and for the tokens of
    positions `[start, stop)` in each direction (`window`), always moving forward. Memory holds
    about one piece of the line per direction, however long it is."""

    def __init__(self, line, tokenization_mode):
        self.line = line
        self.tokenization_mode = tokenization_mode
        self._end = None
        self._asked = 0  # the start of the last `positions` call
        self._forward = self._cursor(backward=False)
        self._backward = None  # opened at the first window

    def _token_lists(self, backward=False):
        if self._end is None:
            self._end = self.line.end()
        pieces = self.line.pieces(self.line.offset, self._end, backward)
        for piece in pieces:
            tokens = tokenize_lines([piece], self.tokenization_mode)[0]
            yield tokens[::-1] if backward else tokens

    def _cursor(self, backward):
        return _Cursor(self._token_lists(backward))

    def __iter__(self):
        """All its tokens, in order, read afresh from the file (a piece at a time)."""
        for tokens in self._token_lists():
            yield from tokens

    def positions(self, start, most):
        """How many of the `most` positions from `start` the sentence still has (its `n`
        tokens and the end marker: positions `0..n`)."""
        if most <= 0:
            return 0
        # The window asked about last may not be packed yet (`WindowPacker.iter_positions`
        # plans a whole batch first): its tokens stay; those before it are forgotten.
        lo, self._asked = max(self._asked - 1, 0), start
        last = start + most - 1  # position `p` needs token `p - 1`
        if self._forward.available(lo, last - 1):
            return most
        return max(0, self._forward.count + 1 - start)

    def window(self, start, stop):
        """`(forward, backward)`: for each direction the tokens at positions `[start, stop)`'s
        inputs (from position 1 on) and targets (to position `n - 1`): the token lists
        `tokens[start - 1 : stop]` of that direction, clipped to the sentence."""
        if self._backward is None:
            self._backward = self._cursor(backward=True)
        lo = max(start - 1, 0)
        return self._forward.get(lo, stop), self._backward.get(lo, stop)


def _signature(status):
    """What tells a file apart from its earlier self: device, inode, size, modification time."""
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


class ChangedFileError(ValueError):
    """A training file changed (rewritten, cut short, replaced or removed) while the whole-text
    shuffle read it by the byte offsets of its lines."""


def _changed(path, before):
    """`None` if `path` is still the file of signature `before`, else what changed, in words."""
    try:
        now = _signature(os.stat(path))
    except FileNotFoundError:
        return "it was removed"
    if now[:2] != before[:2]:
        return "it was replaced by another file"
    if now[2] != before[2]:
        return f"its size went from {before[2]} to {now[2]} bytes"
    if now[3] != before[3]:
        return "it was rewritten (a new modification time)"
    return None


class _LineIndex:
    """Every text line of `files` by number: its file and byte offset, read back one by one."""

    def __init__(self, files):
        self.files = files
        # Each file's signature, taken before its offsets: a change during the pass shows too.
        self.signatures = [_signature(os.stat(path)) for path in files]
        self.offsets = [_line_offsets(path) for path in files]
        counts = [len(o) for o in self.offsets]
        self.ends = np.cumsum(counts)  # one past each file's last line number
        self.starts = self.ends - counts

    def __len__(self):
        return int(self.ends[-1]) if len(self.ends) else 0

    def changes(self):
        """`(path, what changed)` of the first file that is no longer as it was indexed, or
        `None`."""
        for path, before in zip(self.files, self.signatures, strict=True):
            what = _changed(path, before)
            if what is not None:
                return path, what
        return None

    def check_unchanged(self):
        """Raises `ChangedFileError` (one line naming the file) if a file changed."""
        change = self.changes()
        if change is not None:
            path, what = change
            raise ChangedFileError(
                f"The training file {path} changed while the run read it ({what}): its lines' "
                "byte offsets no longer hold. Keep the text unchanged during a run (write a "
                "new corpus elsewhere)."
            )

    def permutation(self, rng):
        """A random order of the line numbers (4 bytes a line below 2**32 lines)."""
        order = np.arange(len(self), dtype=np.uint32 if len(self) < 2**32 else np.int64)
        rng.shuffle(order)
        return order

    def lines(self, order):
        """The lines numbered `order`, in that order, stripped (an empty string for a line of
        Unicode white space only, which tokenizes to nothing)."""
        handles = collections.OrderedDict()
        try:
            for chunk in range(0, len(order), _LINES_PER_LOOKUP):
                self.check_unchanged()
                numbers = order[chunk : chunk + _LINES_PER_LOOKUP]
                file_of = np.searchsorted(self.ends, numbers, side="right")
                within = numbers - self.starts[file_of]  # the line's number in its file
                for index, line in zip(file_of.tolist(), within.tolist(), strict=True):
                    f = handles.pop(index, None)
                    if f is None:  # closed when evicted or at the end
                        f = open(self.files[index], "rb", buffering=0)  # noqa: SIM115
                        handles[index] = f
                        if _signature(os.fstat(f.fileno())) != self.signatures[index]:
                            self.check_unchanged()
                    handles[index] = f
                    if len(handles) > _OPEN_FILES:
                        handles.popitem(last=False)[1].close()
                    offset = int(self.offsets[index][line])
                    text = _read_line(f, offset)
                    if text is LongLine:
                        text = LongLine(self.files[index], offset, self.signatures[index])
                    elif text is None:  # past the end: cut short since the last check
                        self.check_unchanged()
                        raise ChangedFileError(
                            f"The training file {self.files[index]} was cut short while the "
                            "run read it."
                        )
                    yield text
        finally:
            for f in handles.values():
                f.close()


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
        self.shuffle_buffer = check_int("shuffle_buffer", shuffle_buffer, minimum=0)
        self.seed = int(seed)
        if epochs is not None:
            check_int("epochs", epochs)
        self.epochs = epochs
        self.epoch = 0
        self._index = None

    def _epoch_sentences(self, epoch):
        files = list(self.files)
        if not self.shuffle:
            return _iter_sentences(files, self.tokenization_mode)
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
                self._index = _LineIndex(files)
            order = self._index.permutation(np.random.default_rng([self.seed % 2**64, epoch]))
            return _tokenized(self._index.lines(order), self.tokenization_mode)
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
        warnings.warn(
            "`data.TOKENIZATIONS` is deprecated; use "
            "`elmo_keras.text.pretokenize.TOKENIZATION_MODES`.",
            DeprecationWarning,
            stacklevel=2,
        )
        return TOKENIZATION_MODES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
