"""Sort-by-length batching for the embedders, shared by the Keras and ONNX Runtime clients.

Plain Python (no TensorFlow, no NumPy). Sentences are grouped with others of similar length so
that a batch carries little padding, and results are put back in input order by the caller
through the indices each batch carries. `iter_embeddings` does the same on a stream: it reads
its input a chunk at a time, so memory does not grow with the input.
"""

import collections
import itertools

from elmo_keras.validation import check_int


def _iterate(sentences, name):
    """An iterator over `sentences`, refusing a string (or a non-iterable) as the whole input."""
    if isinstance(sentences, str | bytes):
        raise ValueError(
            f"`{name}` must be an iterable of sentences, each a sequence of tokens; received a "
            f"single string. Wrap it: {name}=[{sentences!r}.split()]"
        )
    try:
        return iter(sentences)
    except TypeError:
        raise ValueError(
            f"`{name}` must be an iterable of sentences, each a sequence of tokens. "
            f"Received: {name}={sentences!r}"
        ) from None


def _check_sentence(sentence, index, name):
    """`sentence` as a list of tokens; `index` is its position in the whole input."""
    if isinstance(sentence, str | bytes):
        raise ValueError(
            f"`{name}[{index}]` must be a sequence of tokens, not a string. Received: "
            f"{sentence!r} (tokenize it first, e.g. {sentence!r}.split())"
        )
    try:
        tokens = list(sentence)
    except TypeError:
        raise ValueError(
            f"`{name}[{index}]` must be a sequence of tokens. Received: {sentence!r}"
        ) from None
    for position, token in enumerate(tokens):
        if not isinstance(token, str | bytes):
            raise ValueError(
                f"`{name}[{index}][{position}]` must be a token, a `str`. Received: "
                f"{token!r} of type {type(token).__name__}"
            )
    return tokens


def as_sentences(sentences, name="sentences"):
    """Returns `sentences` as a list of token lists, refusing a string where tokens belong.

    Accepts any iterable (a list, a tuple, a generator) of token sequences, each token a `str`
    (or its UTF-8 `bytes`). A string given as the whole input, or as one sentence, is an error
    (iterating it would embed its characters as tokens), and so is a token of another type.
    The Keras and the ONNX Runtime embedders both start with this (or with `iter_embeddings`,
    which applies the same rules), so they take the same inputs and raise the same
    `ValueError`s.
    """
    items = _iterate(sentences, name)
    return [_check_sentence(sentence, index, name) for index, sentence in enumerate(items)]


def length_batches(sentences, batch_size, max_tokens=None):
    """Returns an iterator over lists of indices into `sentences`, shortest first.

    Empty sentences come first, in one group of their own (they need no model call), then the
    others by increasing length; a batch never mixes the two. The sort is stable, so equal
    lengths keep their input order and the batching is deterministic.

    Args:
        sentences: a sequence (`len` and indexing) of token sequences.
        batch_size: int. The most sentences in a batch.
        max_tokens: int or `None`. The most padded tokens in a batch: a batch stops growing
            before `len(batch) * (its longest sentence)` would exceed it. A sentence longer
            than `max_tokens` gets a batch of its own. Defaults to `None` (no limit).

    Example:
    >>> list(length_batches([["a", "b"], [], ["c"], ["d", "e"]], batch_size=8, max_tokens=4))
    [[1], [2, 0], [3]]
    """
    batch_size = check_int("batch_size", batch_size)
    max_tokens = check_int("max_tokens", max_tokens, allow_none=True)
    return _length_batches(sentences, batch_size, max_tokens)


def _length_batches(sentences, batch_size, max_tokens):
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    n_empty = sum(1 for s in sentences if len(s) == 0)
    if n_empty:
        yield order[:n_empty]
    batch = []
    for i in order[n_empty:]:
        # Sorted by length: the sentence joining the batch is its longest.
        full = len(batch) == batch_size
        over = max_tokens is not None and (len(batch) + 1) * len(sentences[i]) > max_tokens
        if batch and (full or over):
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


def _check_callable(name, value, allow_none=False):
    if (value is None and allow_none) or callable(value):
        return value
    expected = "a callable or None" if allow_none else "a callable"
    raise ValueError(f"`{name}` must be {expected}. Received: {name}={value!r}")


def iter_embeddings(
    embed_batch,
    sentences,
    batch_size,
    max_tokens=None,
    chunk_size=10000,
    empty=None,
    progress=None,
    start_batch=None,
):
    """Embeds a stream of sentences, yielding `(index, array)` pairs as each batch finishes.

    `sentences` is consumed lazily, `chunk_size` sentences at a time; each is checked with the
    rules of `as_sentences` (an error names its position in the whole input). Each chunk is
    cut into batches by `length_batches` (shortest first), and each batch is one call of
    `embed_batch`. Memory: one chunk of token lists and one batch of arrays at a time, however
    long the input (two batches with `start_batch`). The pairs come in batch order, not input
    order: `index` (0-based, in the whole input) says where each belongs.

    Args:
        embed_batch: callable. Takes a list of token lists, returns a list of arrays in the
            same order (one model call).
        sentences: an iterable (list, generator, ...) of sentences, each a sequence of `str`
            tokens.
        batch_size: int. The most sentences per `embed_batch` call.
        max_tokens: int or `None`. The most padded tokens per call (`length_batches`).
            Defaults to `None` (no limit).
        chunk_size: int. Sentences read and sorted together. Larger chunks pad less, smaller
            ones hold less memory. Defaults to `10000`.
        empty: callable or `None`. Returns the array of an empty sentence, without a model
            call. Defaults to `None`: empty sentences go to `embed_batch` like the others (a
            batch of their own).
        progress: callable or `None`. Called with the number of sentences done after each
            batch (once its pairs have been taken). Defaults to `None`.
        start_batch: callable or `None`. Used instead of `embed_batch` when given: starts a
            batch's model call without waiting for it and returns a callable that returns the
            arrays. The next batch is prepared and started before a batch's arrays are taken,
            so preparing it, and whatever the caller does with the pairs (writing them), overlap
            the model's work (JAX dispatches asynchronously). Defaults to `None`.

    Returns:
        An iterator over `(index, array)` pairs, one per sentence.

    Example:
    >>> lengths = lambda batch: [len(tokens) for tokens in batch]
    >>> list(iter_embeddings(lengths, [["a", "b"], [], ["c"]], batch_size=2, empty=lambda: 0))
    [(1, 0), (2, 1), (0, 2)]
    """
    _check_callable("embed_batch", embed_batch)
    batch_size = check_int("batch_size", batch_size)
    max_tokens = check_int("max_tokens", max_tokens, allow_none=True)
    chunk_size = check_int("chunk_size", chunk_size)
    _check_callable("empty", empty, allow_none=True)
    _check_callable("progress", progress, allow_none=True)
    _check_callable("start_batch", start_batch, allow_none=True)
    items = _iterate(sentences, "sentences")  # a bad input fails here, not at the first pair
    checked = (_check_sentence(s, index, "sentences") for index, s in enumerate(items))
    started = _started(
        embed_batch, start_batch, checked, (batch_size, max_tokens), chunk_size, empty
    )
    return _stream(started, 1 if start_batch is not None else 0, progress)


def _started(embed_batch, start_batch, sentences, batching, chunk_size, empty):
    """`(indices, finish, running)` per batch, in batch order: `finish()` returns the batch's
    arrays; `running`: its model call is already under way (`start_batch`)."""
    batch_size, max_tokens = batching
    offset = 0
    while chunk := list(itertools.islice(sentences, chunk_size)):
        for indices in _length_batches(chunk, batch_size, max_tokens):
            for start in range(0, len(indices), batch_size):  # the empty group may be larger
                rows = indices[start : start + batch_size]
                batch = [chunk[i] for i in rows]
                running = start_batch is not None and not (empty is not None and not batch[0])
                if empty is not None and not batch[0]:
                    finish = lambda n=len(rows): [empty() for _ in range(n)]  # noqa: E731
                elif running:
                    finish = start_batch(batch)
                else:
                    finish = lambda batch=batch: embed_batch(batch)  # noqa: E731
                yield [offset + i for i in rows], finish, running
        offset += len(chunk)


def _stream(started, ahead, progress):
    """The pairs of each batch; with `ahead`, a batch is finished once `ahead` model calls
    after it are running (a batch of empty sentences, instant, does not count)."""
    pending = collections.deque()
    done = 0
    for item in itertools.chain(started, [None]):
        if item is not None:
            pending.append(item)
        while pending and (item is None or (len(pending) > ahead and (not ahead or item[2]))):
            indices, finish, _ = pending.popleft()
            arrays = finish()
            if len(arrays) != len(indices):
                raise ValueError(
                    f"`embed_batch` must return one array per sentence: {len(indices)} "
                    f"sentences gave {len(arrays)} arrays"
                )
            for index, array in zip(indices, arrays, strict=True):
                yield index, array
            del arrays, array, finish  # the next batch's arrays replace them, not join them
            done += len(indices)
            if progress is not None:
                progress(done)
