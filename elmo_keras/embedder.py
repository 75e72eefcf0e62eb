"""The embedders' shared part: batching by length, input order, empty sentences, raw text.

No TensorFlow, no Keras, no ONNX Runtime: `elmo_keras.runtime.OnnxEmbedder` builds on it.
"""

import numpy as np

from elmo_keras import batching
from elmo_keras.text.tokenization import DEFAULT_TOKENIZATION_MODE, tokenize_python
from elmo_keras.validation import check_int


class Embedder:
    """Base class of the ELMo embedders: many tokenized sentences in, one array per sentence out.

    It owns everything but the model call: the input rules (`elmo_keras.batching.as_sentences`),
    the streaming and the sort-by-length batching (`elmo_keras.batching.iter_embeddings`), the
    return to input order, empty sentences (answered without a model call) and untokenized
    text (`embed_text`). Each sentence's array is float32 `(n_layers + 1, n_tokens,
    2 * projection_dim)`: layer 0 is the token embedding repeated twice, layer `k` the
    concatenated forward and backward outputs of biLSTM layer `k`.

    A subclass calls `super().__init__(batch_size, max_tokens)` and provides `embed_batch`
    (one model call for one batch) and the properties `n_layers` and `projection_dim`.
    `elmo_keras.models.BiLMEmbedder` (Keras) and `elmo_keras.runtime.OnnxEmbedder` (ONNX
    Runtime) are the two.

    Args:
        batch_size: int. The most sentences per `embed_batch` call. Defaults to `64`.
        max_tokens: int or `None`. The most padded token positions (sentences x longest
            sentence) per call; a longer sentence runs alone. Defaults to `None`, no limit.

    Example:

    >>> class Lengths(Embedder):  # a stand-in model: every value is the sentence's length
    ...     n_layers, projection_dim = 1, 2
    ...     def embed_batch(self, sentences):
    ...         return [np.full((2, len(s), 4), len(s), np.float32) for s in sentences]
    >>> [a.shape for a in Lengths(batch_size=2).embed([["a", "b"], [], ["c"]])]
    [(2, 2, 4), (2, 0, 4), (2, 1, 4)]
    """

    # Optional: a callable that starts one batch's model call and returns a callable giving its
    # arrays (`elmo_keras.batching.iter_embeddings`' `start_batch`: the next batch is prepared
    # and started while one batch's arrays are taken and used). `None`: `embed_batch` only.
    start_batch = None

    def __init__(self, batch_size=64, max_tokens=None):
        self.batch_size = check_int("batch_size", batch_size)
        self.max_tokens = check_int("max_tokens", max_tokens, allow_none=True)

    def _missing(self, name):
        return NotImplementedError(
            f"{type(self).__name__} must implement `{name}`: a subclass of `Embedder` provides "
            "`embed_batch(sentences)` and the properties `n_layers` and `projection_dim`."
        )

    @property
    def n_layers(self):
        """int. The number of biLSTM layers (the embeddings have `n_layers + 1` layers)."""
        raise self._missing("n_layers")

    @property
    def projection_dim(self):
        """int. The biLM's projection size `P` (the embeddings have `2 * P` features)."""
        raise self._missing("projection_dim")

    @property
    def output_dim(self):
        """int. The number of features of each layer's vectors, `2 * projection_dim`."""
        return 2 * self.projection_dim

    def embed_batch(self, sentences):
        """Embeds one batch with one model call; each subclass implements it.

        Args:
            sentences: a list of sentences, each a sequence of `str` tokens.

        Returns:
            A list, in the given order, of float32 arrays `(n_layers + 1, n_tokens,
            2 * projection_dim)`.
        """
        raise self._missing("embed_batch")

    def _empty(self):
        """The array of an empty sentence, `(n_layers + 1, 0, output_dim)`, with no model call."""
        return np.zeros((self.n_layers + 1, 0, self.output_dim), np.float32)

    def iter_embed(self, sentences, progress=None):
        """Streams the embeddings of any number of sentences, batch by batch.

        Reads `sentences` lazily, a chunk at a time (`elmo_keras.batching.iter_embeddings`):
        memory holds one chunk of token lists and one batch of arrays (two with `start_batch`, as
        on JAX), however long the input.
        The pairs come in batch order, not input order.

        Args:
            sentences: an iterable (list, generator, a file's lines split...) of sentences,
                each a sequence of `str` tokens. A string where a sequence of tokens belongs,
                or a token that is not a string, is a `ValueError` (the rules of
                `elmo_keras.batching.as_sentences`).
            progress: callable or `None`. Called with the number of sentences done after each
                batch. Defaults to `None`.

        Returns:
            An iterator over `(index, layers)` pairs: `index` is the sentence's 0-based
            position in the input, `layers` its array as in `embed`.
        """
        return batching.iter_embeddings(
            self.embed_batch,
            sentences,
            self.batch_size,
            self.max_tokens,
            empty=self._empty,
            progress=progress,
            start_batch=self.start_batch,
        )

    def embed(self, sentences, progress=None):
        """Computes the layer activations of each tokenized sentence.

        Args:
            sentences: an iterable (list, generator, ...) of sentences, each a sequence of
                `str` tokens. A string where a sequence of tokens belongs, or a token that is
                not a string, is a `ValueError` (`elmo_keras.batching.as_sentences`).
            progress: callable or `None`. Called with the number of sentences done after each
                batch. Defaults to `None`.

        Returns:
            A list, in input order, of float32 arrays of shape
            `(n_layers + 1, n_tokens, 2 * projection_dim)`: layer 0 is the token embedding
            repeated twice, layer k the concatenated forward and backward outputs of biLSTM
            layer k. An empty sentence gives shape `(n_layers + 1, 0, 2 * projection_dim)`.
        """
        results = {}
        for index, layers in self.iter_embed(sentences, progress=progress):
            results[index] = layers
        return [results[index] for index in range(len(results))]

    def embed_text(self, texts, mode=DEFAULT_TOKENIZATION_MODE):
        """Tokenizes untokenized sentences in Python and embeds them.

        Args:
            texts: list of str. Untokenized sentences.
            mode: str. `"punctuation"` or `"whitespace"` (see
                `elmo_keras.text.tokenization.tokenize_python`). Defaults to `"punctuation"`, the
                split of every elmo-keras entry point (`DEFAULT_TOKENIZATION_MODE`).

        Returns:
            A tuple `(tokens, embeddings)`: the list of token lists and what `embed` returns.
        """
        if isinstance(texts, str | bytes):
            raise ValueError(f"`texts` must be a list of str. Received: texts={texts!r}")
        tokens = [tokenize_python(text, mode=mode) for text in texts]
        return tokens, self.embed(tokens)

    def __repr__(self):
        return (
            f"{type(self).__name__}(batch_size={self.batch_size}, max_tokens={self.max_tokens}, "
            f"n_layers={self.n_layers}, projection_dim={self.projection_dim})"
        )
