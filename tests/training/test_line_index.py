"""The whole-text shuffle's line index: every line of the corpus once per epoch, read back by
its byte offset as the plain stream reads it; a file changed between or during epochs."""

import pytest

from elmo_keras.training.feed import data, line_index
from elmo_keras.training.feed.data import SentenceStream
from elmo_keras.training.feed.file_changes import ChangedFileError


def _two_sources(folder):
    """One file written one source after the other: 12,000 lines of `a`, then 12,000 of `b`."""
    path = folder / "sources.txt"
    lines = [f"a{i} x" for i in range(12_000)] + [f"b{i} y" for i in range(12_000)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, [line.split() for line in lines]


def test_the_whole_text_is_shuffled_not_a_window_of_it(tmp_path):
    """A corpus listing its sources one after another reached the trainer one source at a time
    through the 10,000-line buffer (issue 31: the model's quality swung with where the stream
    was). The default now draws each epoch from all the lines at once."""
    path, lines = _two_sources(tmp_path)
    buffered = list(SentenceStream(path, shuffle_buffer=10_000, seed=3, epochs=1))
    assert all(s[0].startswith("a") for s in buffered[:1000])  # what the buffer cannot do
    whole = list(SentenceStream(path, seed=3, epochs=2))
    first, second = whole[:24_000], whole[24_000:]
    # 1,000 draws from 12,000 + 12,000 lines: the count of `a` is 500 +- 16; a stream that
    # stays within one source gives 1,000 or 0.
    assert 400 <= sum(s[0].startswith("a") for s in first[:1000]) <= 600
    for epoch in (first, second):  # each epoch: every line exactly once
        assert sorted(map(tuple, epoch)) == sorted(map(tuple, lines))
    assert first != second  # a new permutation each epoch
    assert whole == list(SentenceStream(path, seed=3, epochs=2))  # the seed fixes it
    assert first != list(SentenceStream(path, seed=4, epochs=1))


def test_the_whole_text_shuffle_reads_lines_as_the_plain_stream_does(tmp_path, monkeypatch):
    """Lines read back by their byte offsets are those the file order gives: blank lines and
    white space dropped, CRLF and lone CR line ends, undecodable bytes replaced, many files
    (more than the open files kept)."""
    monkeypatch.setattr(line_index, "_OPEN_FILES", 2)
    texts = [
        b"one two\r\n\r\n   \r\nthree\r\n",
        b"four\rfive six\r",
        b"\n\n seven \t\n",
        b"bad \xff byte\n\xc3\xa9t\xc3\xa9",  # no final line end
        b"\xe2\x80\x83\nnine\n",  # a line of one Unicode space
    ]
    files = []
    for i, text in enumerate(texts):
        files.append(tmp_path / f"part{i}.txt")
        files[-1].write_bytes(text)
    plain = list(SentenceStream(files, shuffle=False, epochs=1))
    assert len(plain) == 8 and ["bad", "\ufffd", "byte"] in plain and ["été"] in plain
    shuffled = list(SentenceStream(files, seed=0, epochs=3))
    for epoch in range(3):
        assert sorted(shuffled[8 * epoch : 8 * (epoch + 1)]) == sorted(plain)
    with pytest.raises(ValueError, match="`shuffle_buffer` must be an integer >= 0"):
        SentenceStream(files, shuffle_buffer=-1)


def test_the_whole_text_shuffle_splits_every_line_end(tmp_path, monkeypatch):
    """A file whose lines end in lone carriage returns is as many lines as text mode reads,
    each shuffled on its own (not one entry read back whole); a line longer than one read, and
    a CR LF across two reads, come back whole."""
    path = tmp_path / "mac.txt"
    path.write_bytes(b"\r".join(f"w{i}".encode() for i in range(2000)) + b"\r")
    plain = list(SentenceStream(path, shuffle=False, epochs=1))
    assert len(plain) == 2000
    shuffled = list(SentenceStream(path, seed=0, epochs=1))
    assert sorted(shuffled) == sorted(plain) and shuffled[:50] != plain[:50]
    monkeypatch.setattr(line_index, "_READ_BYTES", 4)
    long = "a long line of many words " * 5
    path.write_bytes(f"{long}\r\nxy z\r\n\r\n{long}q".encode())
    plain = list(SentenceStream(path, shuffle=False, epochs=1))
    assert sorted(SentenceStream(path, seed=5, epochs=1)) == sorted(plain) and len(plain) == 3


def test_the_whole_text_shuffle_indexes_a_file_replaced_or_cut_between_epochs(tmp_path):
    """Issue 39, point 9: a file replaced (`corpus build --overwrite`) or cut short between
    epochs was read through the old byte offsets: fragments of lines, or lines dropped,
    silently. Each epoch now reads the files as they are at its start, and says so."""
    path = tmp_path / "text.txt"
    old = [f"old{i} line {i}" for i in range(300)]
    path.write_text("\n".join(old) + "\n", encoding="utf-8")
    stream = iter(SentenceStream(path, seed=1, epochs=3))
    first = [next(stream) for _ in range(300)]
    assert sorted(first) == sorted(s.split() for s in old)
    new = [f"n{i}" for i in range(40)]  # shorter lines: the old offsets fall inside them
    replacement = tmp_path / "new.txt"
    replacement.write_text("\n".join(new) + "\n", encoding="utf-8")
    replacement.replace(path)
    with pytest.warns(UserWarning, match=f"training file {path} changed .*epoch 1 reads"):
        second = [next(stream) for _ in range(40)]
    assert sorted(second) == sorted([line] for line in new)
    with open(path, "r+b") as f:  # cut short in place: the same file, a smaller size
        f.truncate(len("".join(f"{line}\n" for line in new[:10])))
    with pytest.warns(UserWarning, match="its size went from 150 to 30 bytes"):
        third = list(stream)
    assert sorted(third) == sorted([line] for line in new[:10])


def test_a_file_cut_short_during_an_epoch_is_one_clear_error(tmp_path, monkeypatch):
    """Issue 39, point 9: within an epoch the offsets cannot be redone: a file that changes
    under the reading is refused with one line naming it, never read at stale offsets."""
    monkeypatch.setattr(line_index, "_LINES_PER_LOOKUP", 100)
    monkeypatch.setattr(data, "_LINES_PER_CHUNK", 100)
    path = tmp_path / "text.txt"
    path.write_text("".join(f"line {i}\n" for i in range(1000)), encoding="utf-8")
    stream = iter(SentenceStream(path, seed=1, epochs=1))
    next(stream)
    with open(path, "r+b") as f:
        f.truncate(500)
    message = f"^The training file {path} changed while the run read it \\(its size went from"
    with pytest.raises(ChangedFileError, match=message):
        list(stream)
