import numpy as np
import tensorflow as tf

from elmo_keras.batching import as_sentences, length_batches
from elmo_keras.text.char_ids import batch_to_char_ids
from elmo_keras.validation import check_int


class BiLMEmbedder:
    """Embeds many tokenized sentences with a `BiLM`, fast and independent of batching.

    Sentences are sorted by length and cut into batches of similar length (little padding), run
    through one compiled `tf.function`, and returned in input order. Every sentence starts from
    zero state, so its vectors do not depend on the batch size or on its neighbours.

    Args:
        bilm: a `BiLM`.
        batch_size: int. Sentences per batch. Defaults to `64`.
        jit_compile: bool. Compile with XLA (one compilation per distinct shape). Defaults to
            `False`.

    Example:
    >>> embedder = BiLMEmbedder(load_bilm("options.json", "weights.hdf5"))  # doctest: +SKIP
    >>> vectors = embedder.embed([["Hello", "world"], []])  # doctest: +SKIP
    >>> vectors[0].shape, vectors[1].shape  # doctest: +SKIP
    ((3, 2, 1024), (3, 0, 1024))
    """

    def __init__(self, bilm, batch_size=64, jit_compile=False):
        self.bilm = bilm
        self.batch_size = check_int("batch_size", batch_size)
        self.jit_compile = jit_compile
        width = bilm.max_characters_per_token
        self._run = tf.function(
            lambda ids: bilm(ids, training=False)["activations"],
            input_signature=[tf.TensorSpec([None, None, width], tf.int32)],
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

    @property
    def output_dim(self):
        """int. The number of features of each layer's vectors, `2 * projection_dim`."""
        return 2 * self.bilm.projection_dim

    def embed(self, sentences, progress=None):
        """Returns one float32 array `(n_layers + 1, n_tokens, 2 * projection_dim)` a sentence.

        Args:
            sentences: an iterable (list, generator, ...) of sentences, each a sequence of
                `str` tokens. A string where a sequence of tokens belongs, or a token that is
                not a string, is a `ValueError` (`elmo_keras.batching.as_sentences`, the same
                rules as `OnnxEmbedder.embed`).
            progress: callable or `None`. Called with the number of sentences done after each
                batch.

        Returns:
            A list of arrays, in input order.
        """
        sentences = as_sentences(sentences)
        results = [None] * len(sentences)
        empty = np.zeros((self.n_layers + 1, 0, self.output_dim), np.float32)
        done = 0
        for indices in length_batches(sentences, self.batch_size):
            if not sentences[indices[0]]:  # the group of empty sentences needs no model call
                for i in indices:
                    results[i] = empty.copy()
            else:
                ids = batch_to_char_ids(
                    [sentences[i] for i in indices],
                    max_characters_per_token=self.bilm.max_characters_per_token,
                )
                activations = self._run(tf.constant(ids)).numpy()
                for row, i in enumerate(indices):
                    results[i] = np.ascontiguousarray(
                        activations[row, :, : len(sentences[i])], np.float32
                    )
            done += len(indices)
            if progress is not None:
                progress(done)
        return results
