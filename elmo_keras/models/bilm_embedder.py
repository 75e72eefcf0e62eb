import numpy as np
import tensorflow as tf

from elmo_keras import batching
from elmo_keras.embedder import Embedder
from elmo_keras.text.char_ids import distinct_token_ids


class BiLMEmbedder(Embedder):
    """Embeds many tokenized sentences with a `BiLM`, fast and independent of batching.

    Sentences are read as a stream, sorted by length a chunk at a time and cut into batches of
    similar length (`elmo_keras.batching.iter_embeddings`). Each batch is one call of a compiled
    `tf.function` that takes every distinct token of the batch once (`"token_char_ids"`) and,
    per position, the row of its token (`"token_index"`): with a length-aware `BiLM` the char
    CNN then runs once per distinct token and the biLSTM only over real positions. Every
    sentence starts from zero state, so its vectors do not depend on the batch size or on its
    neighbours.

    `embed`, `iter_embed` and `embed_text` come from `elmo_keras.embedder.Embedder`, shared
    with the ONNX Runtime client `elmo_keras.runtime.OnnxEmbedder`.

    Args:
        bilm: a `BiLM`.
        batch_size: int. Sentences per batch. Defaults to `64`.
        max_tokens: int or `None`. The most padded tokens per batch (`batch size * longest
            sentence`); a longer sentence gets a batch of its own. Defaults to `None` (no
            limit).
        jit_compile: bool. Compile with XLA (one compilation per distinct shape; the biLM then
            runs its plain, padded path, as XLA needs static shapes). Defaults to `False`.

    Example:
    >>> embedder = BiLMEmbedder(load_bilm("options.json", "weights.hdf5"))  # doctest: +SKIP
    >>> vectors = embedder.embed([["Hello", "world"], []])  # doctest: +SKIP
    >>> vectors[0].shape, vectors[1].shape  # doctest: +SKIP
    ((3, 2, 1024), (3, 0, 1024))
    """

    def __init__(self, bilm, batch_size=64, max_tokens=None, jit_compile=False):
        super().__init__(batch_size, max_tokens)
        self.bilm = bilm
        self.jit_compile = jit_compile
        width = bilm.max_characters_per_token

        def run(token_char_ids, token_index):
            inputs = {"token_char_ids": token_char_ids, "token_index": token_index}
            # XLA needs static shapes: the padded path (the packed one slices by length).
            plain = False if jit_compile else None
            return bilm(inputs, training=False, length_aware=plain)["activations"]

        self._run = tf.function(
            run,
            input_signature=[
                tf.TensorSpec([None, width], tf.int32),
                tf.TensorSpec([None, None], tf.int32),
            ],
            jit_compile=jit_compile,
        )

    @property
    def n_layers(self):
        """int. The number of biLSTM layers (the embeddings have `n_layers + 1` layers)."""
        return self.bilm.n_layers

    @property
    def projection_dim(self):
        """int. The biLM's projection size `P` (the embeddings have `2 * P` features)."""
        return self.bilm.projection_dim

    def embed_batch(self, sentences):
        """Embeds one batch with one model call, each distinct token's characters sent once.

        Args:
            sentences: a list of sentences, each a sequence of `str` tokens (the rules of
                `elmo_keras.batching.as_sentences`).

        Returns:
            A list of float32 arrays `(n_layers + 1, n_tokens, 2 * projection_dim)`, in order.
        """
        sentences = batching.as_sentences(sentences)
        longest = max((len(s) for s in sentences), default=0)
        if longest == 0:
            return [self._empty() for _ in sentences]
        token_char_ids, token_index = distinct_token_ids(
            sentences, max_characters_per_token=self.bilm.max_characters_per_token
        )
        activations = self._run(tf.constant(token_char_ids), tf.constant(token_index)).numpy()
        return [
            np.ascontiguousarray(activations[row, :, : len(sentence)], np.float32)
            for row, sentence in enumerate(sentences)
        ]
