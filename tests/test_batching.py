"""Sort-by-length batching and the sentence-input rules shared by both embedders."""

import re

import numpy as np
import pytest

from elmo_keras.batching import as_sentences, iter_embeddings, length_batches


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


# Issue 10: a token budget per batch, and embedding a stream a chunk at a time.


def _lengths(n, seed=0):
    import random

    rng = random.Random(seed)
    return [["w"] * rng.choice([0, 1, 2, 3, 5, 8, 13, 40]) for _ in range(n)]


def test_a_token_budget_bounds_every_batch_and_a_long_sentence_is_alone():
    for batch_size, max_tokens in [(4, 16), (64, 16), (3, 1), (64, 40), (8, None)]:
        _check_batches(_lengths(200), batch_size, max_tokens)


def _check_batches(sentences, batch_size, max_tokens):
    batches = list(length_batches(sentences, batch_size, max_tokens=max_tokens))
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(len(sentences)))
    # Shortest first, stable: the order is the sorted order of (length, index).
    assert flat == sorted(range(len(sentences)), key=lambda i: (len(sentences[i]), i))
    assert batches[0] == [i for i, s in enumerate(sentences) if not s]
    for batch in batches[1:]:
        longest = max(len(sentences[i]) for i in batch)
        assert len(batch) <= batch_size
        if max_tokens is not None and longest > max_tokens:
            assert len(batch) == 1  # the only way past the budget: alone
        elif max_tokens is not None:
            assert len(batch) * longest <= max_tokens
    # Greedy: a batch stopped only because the next sentence would break a limit.
    for batch, following in zip(batches[1:], batches[2:], strict=False):
        grown = len(batch) + 1
        nxt = len(sentences[following[0]])
        assert grown > batch_size or (max_tokens is not None and grown * nxt > max_tokens)
    again = list(length_batches(sentences, batch_size, max_tokens=max_tokens))
    assert again == batches  # deterministic


def test_the_budget_counts_padded_tokens():
    sentences = [["a"] * 3, ["a"] * 4, ["a"] * 4, ["a"] * 9, ["a"] * 2]
    assert list(length_batches(sentences, 64, max_tokens=8)) == [[4, 0], [1, 2], [3]]
    assert list(length_batches(sentences, 64, max_tokens=12)) == [[4, 0, 1], [2], [3]]


BAD_BATCHING = [
    ({"batch_size": 0}, "`batch_size` must be an integer >= 1. Received: batch_size=0"),
    ({"batch_size": 2.0}, "`batch_size` must be an integer >= 1. Received: batch_size=2.0"),
    ({"max_tokens": 0}, "`max_tokens` must be an integer >= 1 or None. Received: max_tokens=0"),
    ({"max_tokens": True}, "Received: max_tokens=True"),
]


def test_batching_arguments_are_checked_when_called():
    for kwargs, message in BAD_BATCHING:
        arguments = {"batch_size": 2, **kwargs}
        with pytest.raises(ValueError, match=re.escape(message)):
            length_batches([["a"]], **arguments)  # no iteration needed
        with pytest.raises(ValueError, match=re.escape(message)):
            iter_embeddings(_fake_embed, [["a"]], **arguments)


def _fake_embed(batch, calls=None):
    """An embedder without a model: per token, its length and its position; one call logged."""
    if calls is not None:
        calls.append([list(tokens) for tokens in batch])
    return [
        np.array([[len(token), position] for position, token in enumerate(tokens)], np.float64)
        for tokens in batch
    ]


def _expected(tokens):
    return np.array([[len(t), p] for p, t in enumerate(tokens)], np.float64).reshape(-1, 2)


def test_iter_embeddings_yields_every_index_with_its_own_array():
    sentences = [["w" * (k % 7 + 1)] * (k % 11) for k in range(57)]
    calls, seen = [], []
    pairs = iter_embeddings(
        lambda batch: _fake_embed(batch, calls),
        iter(sentences),
        batch_size=4,
        max_tokens=20,
        chunk_size=10,
        empty=lambda: np.zeros((0, 2)),
        progress=seen.append,
    )
    result = dict(pairs)
    assert sorted(result) == list(range(len(sentences)))
    for index, tokens in enumerate(sentences):
        np.testing.assert_array_equal(result[index].reshape(-1, 2), _expected(tokens))
    assert all(batch for call in calls for batch in call)  # no model call for an empty one
    assert all(len(c) <= 4 and len(c) * max(map(len, c)) <= 20 for c in calls)
    assert sum(len(c) for c in calls) == sum(1 for s in sentences if s)
    assert seen == sorted(seen) and seen[-1] == len(sentences)  # after each batch


def test_start_batch_keeps_the_next_batch_started_while_one_is_used():
    """With `start_batch` each batch is started before the previous one's arrays are taken
    (and before its pairs reach the caller); the pairs and progress are those of
    `embed_batch`."""
    sentences = [["w" * (k % 5 + 1)] * (k % 9) for k in range(40)]
    events = []

    def start(batch):
        number = sum(1 for e in events if e[0] == "start")
        events.append(("start", number))
        arrays = _fake_embed(batch)
        return lambda: events.append(("finish", number)) or arrays

    def embed_only(batch):
        raise AssertionError("embed_batch ran although start_batch was given")

    seen, taken = [], []
    arguments = dict(batch_size=4, chunk_size=15, empty=lambda: np.zeros((0, 2)))
    for index, array in iter_embeddings(
        embed_only, iter(sentences), start_batch=start, progress=seen.append, **arguments
    ):
        taken.append((index, array))
        events.append(("pair", index))
    want = list(iter_embeddings(_fake_embed, sentences, **arguments))
    assert [i for i, _ in taken] == [i for i, _ in want]
    for (_, got), (_, expected) in zip(taken, want, strict=True):
        np.testing.assert_array_equal(got, expected)
    assert seen[-1] == len(sentences)
    started = [n for kind, n in events if kind == "start"]
    for number in started[:-1]:  # batch n + 1 was started before batch n finished
        assert events.index(("start", number + 1)) < events.index(("finish", number))
    assert len(started) == 4 + 4 + 3  # chunks of 13, 13 and 9 sentences with tokens, by 4


def test_iter_embeddings_sorts_within_a_chunk_only():
    sentences = [["a"] * n for n in (5, 1, 3, 4, 2, 0)]
    pairs = iter_embeddings(_fake_embed, sentences, batch_size=1, chunk_size=3)
    assert [index for index, _ in pairs] == [1, 2, 0, 5, 4, 3]


def test_without_empty_the_empty_sentences_are_one_batch_of_embed_batch():
    calls = []
    pairs = list(iter_embeddings(lambda b: _fake_embed(b, calls), [[], ["a"], []], 8))
    assert calls == [[[], []], [["a"]]]
    assert [index for index, _ in pairs] == [0, 2, 1]


def test_iter_embeddings_reads_its_input_one_chunk_at_a_time():
    pulled = []

    def sentences():
        for k in range(10):
            pulled.append(k)
            yield ["tok"] * (k % 3 + 1)
        raise RuntimeError("read past the end")

    pairs = iter_embeddings(_fake_embed, sentences(), batch_size=2, chunk_size=4)
    assert pulled == []  # lazy: nothing is read before the first pair is asked for
    first = [next(pairs) for _ in range(4)]
    assert sorted(index for index, _ in first) == [0, 1, 2, 3]
    assert pulled == [0, 1, 2, 3]  # one chunk
    rest = [next(pairs) for _ in range(4)]
    assert sorted(index for index, _ in rest) == [4, 5, 6, 7]
    assert pulled == list(range(8))
    with pytest.raises(RuntimeError, match="read past the end"):
        next(pairs)


def test_a_bad_input_is_refused_when_called():
    with pytest.raises(ValueError, match="received a single string. Wrap it"):
        iter_embeddings(_fake_embed, "hello world", 2)
    with pytest.raises(ValueError, match="`sentences` must be an iterable of sentences"):
        iter_embeddings(_fake_embed, 42, 2)


def test_a_bad_sentence_is_named_by_its_position_in_the_whole_input():
    for bad, message in [
        ("hello", r"`sentences\[7\]` must be a sequence of tokens, not a string"),
        (7, r"`sentences\[7\]` must be a sequence of tokens. Received: 7"),
        (["ok", 3], r"`sentences\[7\]\[1\]` must be a token, a `str`. Received: 3 of type int"),
    ]:
        sentences = [["a"]] * 7 + [bad] + [["b"]]
        pairs = iter_embeddings(_fake_embed, iter(sentences), batch_size=2, chunk_size=3)
        done = [next(pairs) for _ in range(6)]  # the first two chunks are fine
        assert sorted(index for index, _ in done) == list(range(6))
        with pytest.raises(ValueError, match=message):
            next(pairs)
        with pytest.raises(ValueError, match=message):
            as_sentences(sentences)  # the same rule and message


def test_other_arguments_of_iter_embeddings_are_checked():
    for kwargs, message in [
        ({"chunk_size": 0}, "`chunk_size` must be an integer >= 1. Received: chunk_size=0"),
        ({"empty": 0}, "`empty` must be a callable or None. Received: empty=0"),
        ({"progress": "x"}, "`progress` must be a callable or None. Received: progress='x'"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            iter_embeddings(_fake_embed, [["a"]], 2, **kwargs)
    with pytest.raises(ValueError, match=re.escape("`embed_batch` must be a callable.")):
        iter_embeddings(None, [["a"]], 2)
    with pytest.raises(ValueError, match="one array per sentence: 2 sentences gave 1 arrays"):
        list(iter_embeddings(lambda batch: [0], [["a"], ["b"]], 2))
