"""Sentences as word ids, tokenized and looked up in worker processes: `EncodedSentence`, and
`encoded_sentences`, which `data.SentenceStream(vocabulary=...)` reads its chunks of lines
through.

The serial part of the training feed was Python in one thread: tokenizing every line, then
looking up every token's word id. Here worker processes do both for chunks of lines and send
back int32 arrays (not strings); the chunks come back in order, so the sentences, and the
batches `windows.WindowPacker` packs of them, are the same whatever the number of workers.
"""

import collections
import concurrent.futures
import multiprocessing

import numpy as np

from elmo_keras.training.feed.tokenization import tokenize_on

_AHEAD = 2  # chunks submitted per worker beyond the one awaited


class EncodedSentence:
    """One sentence as word ids, for `windows.WindowPacker`.

    Args:
        ids: int32 array `[n]`: each token's word id, -1 for a token outside the vocabulary.
        outside: dict {position: token} of the tokens outside the vocabulary.
    """

    __slots__ = ("ids", "outside")

    def __init__(self, ids, outside):
        self.ids = ids
        self.outside = outside

    def __len__(self):
        return len(self.ids)


_WORKER = {}  # a worker process's vocabulary (word -> id) and Keras backend


def _start_worker(tokens, backend):
    _WORKER.update(word_ids={token: i for i, token in enumerate(tokens)}, backend=backend)


def _encode_chunk(lines, tokenization_mode, word_ids=None, backend=None):
    """The non-empty sentences of `lines`: `(lengths, ids, outside)` (all ids in one array;
    `outside`: (sentence, position, token) of the tokens outside the vocabulary)."""
    word_ids = word_ids if word_ids is not None else _WORKER["word_ids"]
    backend = backend if backend is not None else _WORKER["backend"]
    sentences = [s for s in tokenize_on(lines, tokenization_mode, backend) if s]
    lengths = np.fromiter(map(len, sentences), np.int64, len(sentences))
    tokens = [token for sentence in sentences for token in sentence]
    get = word_ids.get
    ids = np.fromiter((get(token, -1) for token in tokens), np.int32, len(tokens))
    at = np.flatnonzero(ids < 0)
    ends = np.cumsum(lengths)
    sentence = np.searchsorted(ends, at, side="right")
    position = at - (ends - lengths)[sentence]
    words = [tokens[i] for i in at.tolist()]
    return lengths, ids, list(zip(sentence.tolist(), position.tolist(), words, strict=True))


def _sentences(result):
    lengths, ids, outside = result
    by_sentence = collections.defaultdict(dict)
    for sentence, position, token in outside:
        by_sentence[sentence][position] = token
    parts = np.split(ids, np.cumsum(lengths)[:-1]) if len(lengths) else []
    return [EncodedSentence(part, by_sentence.get(i, {})) for i, part in enumerate(parts)]


def encoding_pool(vocabulary, workers, backend):
    """`workers` processes tokenizing and looking up chunks for `encoded_sentences` (None for
    0); the caller shuts it down (`shutdown(cancel_futures=True)`)."""
    if not workers:
        return None
    return concurrent.futures.ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),  # no fork of a process running JAX
        initializer=_start_worker,
        initargs=(vocabulary.tokens, backend),
    )


def encoded_sentences(items, tokenization_mode, vocabulary, pool, backend):
    """The sentences of `items` in order: each list of lines (a chunk) becomes its non-empty
    sentences as `EncodedSentence`s, tokenized and looked up by the processes of `pool` (an
    `encoding_pool`; None: here), a few chunks ahead; any other item (a long line's
    `StreamedSentence`) is passed on as it is. An error of a worker is raised here as it is;
    closing the generator cancels the chunks not started."""
    if pool is None:
        word_ids = {token: i for i, token in enumerate(vocabulary.tokens)}
        for item in items:
            if isinstance(item, list):
                yield from _sentences(_encode_chunk(item, tokenization_mode, word_ids, backend))
            else:
                yield item
        return
    pending = collections.deque()
    try:
        for item in items:
            if isinstance(item, list):
                item = pool.submit(_encode_chunk, item, tokenization_mode)
            pending.append(item)
            while len(pending) > _AHEAD * pool._max_workers:
                yield from _done(pending.popleft())
        while pending:
            yield from _done(pending.popleft())
    finally:
        for item in pending:
            if isinstance(item, concurrent.futures.Future):
                item.cancel()


def _done(item):
    if isinstance(item, concurrent.futures.Future):
        return _sentences(item.result())
    return [item]
