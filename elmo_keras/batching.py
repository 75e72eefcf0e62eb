"""Sort-by-length batching for the embedders, shared by the Keras and ONNX Runtime clients.

Plain Python (no TensorFlow, no NumPy). Sentences are grouped with others of similar length so
that a batch carries little padding, and results are put back in input order by the caller
through the indices each batch carries.
"""

from elmo_keras.validation import check_int


def as_sentences(sentences, name="sentences"):
    """Returns `sentences` as a list of token lists, refusing a string where tokens belong.

    Accepts any iterable (a list, a tuple, a generator) of token sequences, each token a `str`
    (or its UTF-8 `bytes`). A string given as the whole input, or as one sentence, is an error
    (iterating it would embed its characters as tokens), and so is a token of another type.
    The Keras and the ONNX Runtime embedders both start with this, so they take the same
    inputs and raise the same `ValueError`s.
    """
    if isinstance(sentences, str | bytes):
        raise ValueError(
            f"`{name}` must be an iterable of sentences, each a sequence of tokens; received a "
            f"single string. Wrap it: {name}=[{sentences!r}.split()]"
        )
    try:
        items = list(sentences)
    except TypeError:
        raise ValueError(
            f"`{name}` must be an iterable of sentences, each a sequence of tokens. "
            f"Received: {name}={sentences!r}"
        ) from None
    result = []
    for index, sentence in enumerate(items):
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
        result.append(tokens)
    return result


def length_batches(sentences, batch_size):
    """Yields lists of indices into `sentences`, shortest first, `batch_size` at the most.

    Empty sentences come first, in one group of their own (they need no model call), then the
    others by increasing length; a batch never mixes the two. The sort is stable, so equal
    lengths keep their input order and the batching is deterministic.
    """
    batch_size = check_int("batch_size", batch_size)
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    n_empty = sum(1 for s in sentences if len(s) == 0)
    if n_empty:
        yield order[:n_empty]
    for start in range(n_empty, len(order), batch_size):
        yield order[start : start + batch_size]
