"""Sort-by-length batching and the sentence-input rules shared by both embedders."""

import pytest

from elmo_keras.batching import as_sentences, length_batches


def test_batches_cover_every_index_once_shortest_first_empty_apart():
    sentences = [["a"] * n for n in (3, 0, 1, 5, 0, 1, 2)]
    batches = list(length_batches(sentences, batch_size=2))
    assert batches[0] == [1, 4]  # the empty sentences, one group, no model call
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(len(sentences)))
    lengths = [len(sentences[i]) for i in flat]
    assert lengths == sorted(lengths)
    assert all(len(b) <= 2 for b in batches[1:])
    assert batches[1] == [2, 5]  # stable: equal lengths keep their input order


def test_no_empty_group_when_there_is_no_empty_sentence():
    assert list(length_batches([["a", "b"], ["c"]], batch_size=8)) == [[1, 0]]
    assert list(length_batches([], batch_size=8)) == []


def test_batch_size_is_checked():
    with pytest.raises(
        ValueError, match="`batch_size` must be an integer >= 1. Received: batch_size=0"
    ):
        list(length_batches([["a"]], batch_size=0))


def test_any_iterable_of_token_sequences_is_accepted():
    generator = (s.split() for s in ["a b", "", "c"])
    assert as_sentences(generator) == [["a", "b"], [], ["c"]]
    assert as_sentences((("x", "y"), ["z"])) == [["x", "y"], ["z"]]


@pytest.mark.parametrize(
    "bad, message",
    [
        ("hello world", "received a single string"),
        (b"hello", "received a single string"),
        (["hello world"], r"`sentences\[0\]` must be a sequence of tokens, not a string"),
        ([["ok"], "bad"], r"`sentences\[1\]` must be a sequence of tokens, not a string"),
        (42, "must be an iterable of sentences"),
        ([["ok"], 7], r"`sentences\[1\]` must be a sequence of tokens"),
    ],
)
def test_a_string_where_tokens_belong_is_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        as_sentences(bad)
