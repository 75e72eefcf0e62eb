"""A line longer than `LONG_LINE_BYTES`: streamed from its file into the windows of the line
tokenized whole, refused if its file changed, and never held whole (nor once per row)."""

import numpy as np
import pytest

from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training.feed import long_line
from elmo_keras.training.feed.data import SentenceStream, WindowPacker
from elmo_keras.training.feed.file_changes import ChangedFileError
from elmo_keras.training.feed.tokenization import tokenize_lines


def _long_text(n_words, seed):
    """A line of `n_words` words with every kind of separator: spaces, tabs, runs of them, an
    ideographic space, punctuation, undecodable bytes, a NUL (tensorflow-text ends a line
    there), accented letters."""
    rng = np.random.default_rng(seed)
    words = ["a", "b", "c", "d", "e", "xyz", "caf\u00e9", "U.S.", "don't", "(e)"]
    seps = [" ", " ", "  ", "\t", "\u3000", " \udcff ", ", ", " \u00e9"]
    parts = [
        words[i] + seps[j]
        for i, j in zip(rng.integers(0, 10, n_words), rng.integers(0, 8, n_words), strict=True)
    ]
    parts.insert(n_words * 3 // 4, "d\0e ")
    return "".join(parts).encode("utf-8", errors="surrogateescape")


def test_a_long_line_is_streamed_into_the_same_windows(tmp_path, monkeypatch):
    """Issue 39, point 6: a line longer than `LONG_LINE_BYTES` is read from its file a piece
    at a time (forward and backward) instead of held as tokens: the batches, resumed ones
    included, are those of the same lines tokenized whole (the list path, checked by hand in
    `test_packing_both_directions`), in every shuffle mode."""
    monkeypatch.setattr(long_line, "LONG_LINE_BYTES", 300)
    monkeypatch.setattr(long_line, "_PIECE_BYTES", 64)
    lines = [b"short one", b"first " + _long_text(400, 0), b"c d"]
    lines += [b"second " + _long_text(150, 1), b"  ", b"e"]
    path = tmp_path / "text.txt"
    path.write_bytes(b"\r\n".join(lines) + b"\n")
    whole = [t for t in tokenize_lines([x.decode("utf-8", "replace") for x in lines]) if t]
    assert len(whole) == 5 and len(whole[1]) > 250
    by_first = {tokens[0]: tokens for tokens in whole}  # short, first, c, second, e
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", "a", "b", "c", "d", "e", "xyz", ","])

    def batches(sentences, skip=0):
        packer = WindowPacker(sentences, vocab, batch_size=3, unroll_steps=7)
        return [{k: v.tolist() for k, v in b.items()} for b in packer.batches(skip=skip)]

    kinds = [type(s).__name__ for s in SentenceStream(path, shuffle=False, epochs=1)]
    assert kinds == ["list", "StreamedSentence", "list", "StreamedSentence", "list"]
    expected = batches(whole)
    assert len(expected) >= 40
    assert batches(SentenceStream(path, shuffle=False, epochs=1)) == expected
    assert batches(SentenceStream(path, shuffle=False, epochs=1), skip=25) == expected[25:]
    for buffer in (0, 2):  # the whole-text shuffle (the line index), and through a buffer
        stream = SentenceStream(path, shuffle_buffer=buffer, seed=2, epochs=2)
        order = [s[0] if isinstance(s, list) else s.window(0, 1)[0][0] for s in stream]
        reference = batches([by_first[first] for first in order])
        assert batches(SentenceStream(path, shuffle_buffer=buffer, seed=2, epochs=2)) == reference
        resumed = SentenceStream(path, shuffle_buffer=buffer, seed=2, epochs=2)
        assert batches(resumed, skip=30) == reference[30:]


def test_a_long_line_of_a_file_changed_under_it_is_one_clear_error(tmp_path, monkeypatch):
    """Issue 39, points 6 and 9: a long line is read from its file as the windows need it; a
    file rewritten since the line was found is refused, never read at the old offset."""
    monkeypatch.setattr(long_line, "LONG_LINE_BYTES", 300)
    path = tmp_path / "text.txt"
    path.write_bytes(b"short line\n" + b"a b " * 200 + b"\n")
    for shuffle in (False, True):
        stream = iter(SentenceStream(path, shuffle=shuffle, seed=0, epochs=1))
        sentences = [next(stream), next(stream)]
        long = next(s for s in sentences if not isinstance(s, list))
        path.write_bytes(b"short line\n" + b"b a " * 200 + b"c\n")  # rewritten in place
        with pytest.raises(ChangedFileError, match=f"^The training file {path} changed"):
            long.window(0, 5)
        path.write_bytes(b"short line\n" + b"a b " * 200 + b"\n")


def test_packing_a_long_line_holds_pieces_not_copies_of_it(tmp_path, monkeypatch):
    """Issue 39, point 6: a one-line corpus at batch 16 held a tokenized copy of the line in
    every row (one 10M-token line: 13.8 GB). Each row now holds a piece of it: the peak of
    packing is the same for a line 4 times longer, and far below one copy per row."""
    import tracemalloc

    monkeypatch.setattr(long_line, "LONG_LINE_BYTES", 4096)
    monkeypatch.setattr(long_line, "_PIECE_BYTES", 1024)
    vocab = Vocabulary(["<S>", "</S>", "<UNK>", "a", "b", "c", "d", "e"])
    peaks = {}
    for n_words in (20_000, 80_000):
        path = tmp_path / f"line{n_words}.txt"
        path.write_bytes(b" ".join([b"a", b"bb", b"c", b"dd", b"eee"] * (n_words // 5)) + b"\n")
        stream = SentenceStream(path, seed=0, epochs=None)
        batches = WindowPacker(stream, vocab, batch_size=16, unroll_steps=20).batches()
        tracemalloc.start()
        try:
            for _ in range(3):
                next(batches)
            peaks[n_words] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        batches.close()
    # One copy of the 80,000-word line as tokens is about 5 MB; 16 rows held 16 of them.
    assert peaks[80_000] < 2 * 2**20, peaks
    assert peaks[80_000] < 1.5 * peaks[20_000], peaks
