"""Vocabulary: bilm-tf files, building, round trips, unknown tokens, errors."""

import numpy as np
import pytest

from elmo_keras.text import Vocabulary
from tests.fresh_interpreter import run_script


def test_bilm_tf_token_batcher_ids(bilm_tf_fixture):
    # bilm-tf TestTokenBatcher: [['The','first','.'],['It','said']] ->
    # [[2,18,75,6,1],[2,67,21,1,0]] = vocab index + 1 with <S>/</S> added, 0 = padding.
    vocab = Vocabulary.load(bilm_tf_fixture / "data" / "vocab_test.txt")
    assert len(vocab) == 100
    assert (vocab.eos_id, vocab.bos_id, vocab.unk_id) == (0, 1, 2)  # this file starts </S>, <S>
    assert vocab.encode(["The", "first", "."]).tolist() == [17, 74, 5]
    assert (vocab.encode(["The", "first", "."], add_boundaries=True) + 1).tolist() == [
        2,
        18,
        75,
        6,
        1,
    ]
    assert (vocab.encode(["It", "said"], add_boundaries=True) + 1).tolist() == [2, 67, 21, 1]
    assert vocab.encode(["It"]).dtype == np.int32


def test_bilm_tf_training_vocab(bilm_tf_fixture):
    vocab = Vocabulary.load(bilm_tf_fixture / "train" / "vocab.txt")
    assert len(vocab) == 32
    assert vocab.tokens[:4] == ("<S>", "</S>", "<UNK>", "of")
    assert (vocab.bos_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2)
    # Same token set as bilm-tf built from its corpus with min_count 2 (bilm-tf's own tie order
    # is not reproducible, ours is by first occurrence).
    with open(bilm_tf_fixture / "train" / "data.txt", encoding="utf-8") as f:
        built = Vocabulary.build(line.split() for line in f)
    with open(bilm_tf_fixture / "train" / "data.txt", encoding="utf-8") as f:
        built2 = Vocabulary.build((line.split() for line in f), min_count=2)
    assert set(built2.tokens) == set(vocab.tokens)
    assert built2.tokens[:6] == ("<S>", "</S>", "<UNK>", "of", "the", "neural")
    assert len(built) == 77 + 3


def test_model_vocab_without_unk(bilm_tf_fixture):
    vocab = Vocabulary.load(bilm_tf_fixture / "model" / "vocab_test.txt")
    assert len(vocab) == 448 and vocab.unk_id is None
    with pytest.raises(
        ValueError,
        match=r"Token 'not-a-word-xyz' is not in the vocabulary, "
        r"which has no '<UNK>'",
    ):
        vocab.token_to_id("not-a-word-xyz")


def test_build_order_counts_and_ties():
    data = [["b", "a", "c", "a"], "c", ["d"], ("e", "b", "<S>", "<UNK>")]
    vocab = Vocabulary.build(data)
    # counts: a 2, b 2, c 2, d 1, e 1; ties keep first occurrence (b before a before c).
    assert vocab.tokens == ("<S>", "</S>", "<UNK>", "b", "a", "c", "d", "e")
    assert Vocabulary.build(data, min_count=2).tokens[3:] == ("b", "a", "c")
    assert Vocabulary.build(data, max_size=4).tokens == ("<S>", "</S>", "<UNK>", "b")
    assert Vocabulary.build(data, max_size=3).tokens == ("<S>", "</S>", "<UNK>")
    assert Vocabulary.build(iter(())).tokens == ("<S>", "</S>", "<UNK>")
    # A generator is read once (stream-friendly).
    assert Vocabulary.build(t for t in ["x", "y", "y"]).tokens[3:] == ("y", "x")


def test_lookup_unknown_and_decode():
    vocab = Vocabulary.build([["the", "cat", "the"]])
    assert vocab.token_to_id("the") == 3 and vocab.token_to_id("dog") == vocab.unk_id == 2
    assert vocab.encode(["cat", "dog"]).tolist() == [4, 2]
    assert vocab.encode([]).tolist() == []
    assert vocab.id_to_token(4) == "cat" and vocab.id_to_token(np.int64(0)) == "<S>"
    assert vocab.decode(vocab.encode(["the", "cat"], add_boundaries=True)) == [
        "<S>",
        "the",
        "cat",
        "</S>",
    ]
    assert "cat" in vocab and "dog" not in vocab and list(vocab)[3] == "the"
    assert repr(vocab) == "Vocabulary(size=5)"


def test_save_load_round_trip(tmp_path):
    vocab = Vocabulary.build([["naïve", "日本語", ",", "naïve"]])
    path = tmp_path / "vocab.txt"
    vocab.save(path)
    assert path.read_bytes() == "<S>\n</S>\n<UNK>\nnaïve\n日本語\n,\n".encode()
    assert Vocabulary.load(path) == vocab
    assert Vocabulary.load(str(path)).tokens == vocab.tokens
    # No final newline, CRLF line ends and bilm-tf's !!!MAXTERMID marker are tolerated.
    path.write_bytes(b"<S>\r\n</S>\r\n!!!MAXTERMID\r\n<UNK>\r\nx")
    assert Vocabulary.load(path).tokens == ("<S>", "</S>", "<UNK>", "x")


def test_errors(tmp_path):
    with pytest.raises(
        ValueError,
        match=r"`min_count` must be an integer >= 1\. "
        r"Received: min_count=0",
    ):
        Vocabulary.build([], min_count=0)
    with pytest.raises(
        ValueError,
        match=r"`max_size` must be an integer >= 3 or None\. "
        r"Received: max_size=2",
    ):
        Vocabulary.build([], max_size=2)
    with pytest.raises(ValueError, match="`data` must hold str tokens"):
        Vocabulary.build([[1, 2]])
    with pytest.raises(ValueError, match="must contain the sentence-boundary token '</S>'"):
        Vocabulary(["<S>", "a"])
    with pytest.raises(
        ValueError,
        match=r"must not repeat a token\. Received: 'a' at positions "
        r"2 and 3",
    ):
        Vocabulary(["<S>", "</S>", "a", "a"])
    with pytest.raises(ValueError, match=r"`tokens` must all be str"):
        Vocabulary(["<S>", "</S>", 3])
    vocab = Vocabulary(["<S>", "</S>", "<UNK>"])
    with pytest.raises(
        ValueError,
        match=r"`token_id` must be an integer in \[0, 3\)\. "
        r"Received: token_id=3",
    ):
        vocab.id_to_token(3)
    with pytest.raises(ValueError, match="`tokens` must be a list of tokens, not a str"):
        vocab.encode("a b")
    with pytest.raises(ValueError, match="cannot be saved one per line"):
        Vocabulary(["<S>", "</S>", "a b "]).save(tmp_path / "bad.txt")
    path = tmp_path / "blank.txt"
    path.write_text("<S>\n\n</S>\n", encoding="utf-8")
    with pytest.raises(ValueError, match="must not have blank lines. Received: line 2"):
        Vocabulary.load(path)


@pytest.mark.parametrize(
    "data, message",
    [
        (b"<S>\n</S>\nthe\nthe\n", "give each token once. Received: 'the' on lines 3 and 4"),
        (b"<S>\n</S>\nthe\ncaf\xe9\n", "must be UTF-8 text. Received: line 4"),
    ],
    ids=["duplicate", "latin-1"],
)
def test_a_bad_vocabulary_file_is_named_with_its_line(tmp_path, data, message):
    """Issue 39, point 17: these lines named no file."""
    path = tmp_path / "vocab.txt"
    path.write_bytes(data)
    with pytest.raises(ValueError) as error:
        Vocabulary.load(path)
    assert message in str(error.value) and str(path) in str(error.value)


def test_a_byte_order_mark_is_not_part_of_the_first_token(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes("\ufeffthe\r\n<S>\r\n</S>\r\n".encode())  # as Windows editors save it
    assert Vocabulary.load(path).tokens == ("the", "<S>", "</S>")


def test_package_import_does_not_import_tensorflow():
    code = (
        "import sys, elmo_keras.text, elmo_keras.text.vocabulary, elmo_keras.text.tokenization; "
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules, "
        "sorted(m for m in sys.modules if m.startswith(('tensorflow', 'keras')))"
    )
    run_script(code, timeout=60)
