import keras
import numpy as np

from elmo_keras import batching, compilation_cache
from elmo_keras.embedder import Embedder
from elmo_keras.models.bilm_vocabulary import token_rows

# Shapes of the JAX program, rounded up so that a long `embed` compiles a few of them: the
# batch's longest sentence to the next of these token counts (then to multiples of 256), the
# distinct tokens to a power of two (at least 64), the rows to a power of two (at most the
# batch size). Padding rows have no token and padding tokens are never gathered, so the
# rounding changes no number; nor does it cost compute: JAX's fast path
# (`elmo_keras.layers.jax_fast_path`) stops its loops after the last real step, row and token,
# so the buckets can be coarse (powers of two).
# How many shapes WikiText-2 valid compiles: docs/backends.md.
TOKEN_BUCKETS = (16, 32, 64, 128, 256)


def _round_up(n, minimum=1):
    """The next power of two >= max(n, minimum)."""
    return 1 << (max(n, minimum) - 1).bit_length()


def _token_bucket(n):
    for bucket in TOKEN_BUCKETS:
        if n <= bucket:
            return bucket
    return -(-n // 256) * 256


class BiLMEmbedder(Embedder):
    """Embeds many tokenized sentences with a `BiLM`, fast and independent of batching.

    Sentences are read as a stream, sorted by length a chunk at a time and cut into batches of
    similar length (`elmo_keras.batching.iter_embeddings`). Each batch is one call of a compiled
    function that takes every distinct token of the batch once (`"token_char_ids"`) and, per
    position, the row of its token (`"token_index"`): the char CNN then runs once per distinct
    token. Every sentence starts from zero state, so its vectors do not depend on the batch
    size or on its neighbours.

    On TensorFlow the function is a `tf.function` of the length-aware `BiLM` (the biLSTM only
    over real positions); on PyTorch the same length-aware model runs eagerly under
    `torch.inference_mode` (`elmo_keras.layers.torch_fast_path`). On JAX it is `jax.jit` of the
    model's `stateless_call` (the biLM's length-aware path, `elmo_keras.layers.jax_fast_path`),
    and each batch is padded to a bucketed shape (`TOKEN_BUCKETS`, powers of two for the
    distinct tokens and rows) so that a long input compiles a few programs; `compiled_shapes`
    counts them, and JAX's persistent compilation cache keeps them for the next process
    (`elmo_keras.compilation_cache`: `<cache>/jax-compilation`, `$ELMO_KERAS_JAX_CACHE=off` to
    turn it off; `compilation_cache` is the folder in use, or `None`). `embed` and `iter_embed`
    on JAX keep two batches in flight (`start_batch`): the next batch's token rows are made,
    and this one's arrays used, while the program runs.
    Both give the same vectors (within 1e-5, tests/models/test_bilm_embedder.py).

    `embed`, `iter_embed` and `embed_text` come from `elmo_keras.embedder.Embedder`, shared
    with the ONNX Runtime client `elmo_keras.runtime.OnnxEmbedder`.

    Args:
        bilm: a `BiLM`.
        batch_size: int. Sentences per batch. Defaults to `64`.
        max_tokens: int or `None`. The most padded tokens per batch (`batch size * longest
            sentence`); a longer sentence gets a batch of its own. Defaults to `None` (no
            limit).
        jit_compile: bool. On TensorFlow, compile with XLA (one compilation per distinct shape;
            the biLM then runs its plain, padded path, as XLA needs static shapes). Defaults
            to `False`. JAX always compiles.

    Example:
    >>> from elmo_keras.models import BiLM
    >>> embedder = BiLMEmbedder(BiLM.from_preset("tiny"))
    >>> vectors = embedder.embed([["Hello", "world"], []])
    >>> vectors[0].shape, vectors[1].shape
    ((3, 2, 32), (3, 0, 32))
    """

    def __init__(self, bilm, batch_size=64, max_tokens=None, jit_compile=False):
        super().__init__(batch_size, max_tokens)
        self.bilm = bilm
        self.jit_compile = bool(jit_compile)
        self.backend = keras.config.backend()
        self.compiled_shapes = set()
        self.compilation_cache = None
        if self.backend == "tensorflow":
            self._run = self._tensorflow_function()
        elif self.backend == "jax":
            self._run = self._jax_function()
        elif self.backend == "torch":
            self._run = self._torch_function()
        else:
            self._run = self._eager_function()

    def _tensorflow_function(self):
        import tensorflow as tf  # noqa: PLC0415  (this backend only)

        bilm, width = self.bilm, self.bilm.char_cnn.input_width
        # XLA needs static shapes: the padded path (the packed one slices by length).
        length_aware = False if self.jit_compile else None

        def run(token_char_ids, token_index):
            inputs = {"token_char_ids": token_char_ids, "token_index": token_index}
            return bilm(inputs, training=False, length_aware=length_aware)["activations"]

        run = tf.function(
            run,
            input_signature=[
                tf.TensorSpec([None, width], tf.int32),
                tf.TensorSpec([None, None], tf.int32),
            ],
            jit_compile=self.jit_compile,
            autograph=False,  # no Python control flow on tensors: traces faster
        )
        return lambda ids, index: run(tf.constant(ids), tf.constant(index)).numpy()

    def _jax_function(self):
        import jax  # noqa: PLC0415  (this backend only)

        self.compilation_cache = compilation_cache.enable()
        bilm = self.bilm

        from elmo_keras.layers import jax_fast_path  # noqa: PLC0415  (this backend only)

        @jax.jit
        def run(trainable, non_trainable, kernels, token_char_ids, token_index):
            inputs = {"token_char_ids": token_char_ids, "token_index": token_index}
            # No gradient here: the length-aware path, with the step kernels made once.
            with jax_fast_path.inference(kernels=kernels):
                outputs, _ = bilm.stateless_call(trainable, non_trainable, inputs, training=False)
            return outputs["activations"]

        def dispatch(ids, index):  # returns at once: JAX computes while the host goes on
            ids, index = self._bucketed(ids, index)
            self.compiled_shapes.add((ids.shape[0], *index.shape))
            trainable, non_trainable = self._jax_weights()
            return run(trainable, non_trainable, self._step_kernels(trainable), ids, index)

        self._jitted = run  # the program alone (benchmarks/accelerator_embed.py times it)
        self._dispatch = dispatch
        self.start_batch = self._start_batch
        return lambda ids, index: np.asarray(dispatch(ids, index))

    def _start_batch(self, sentences):
        """JAX's `start_batch`: the batch's program started; the returned callable waits for
        it and returns the arrays (so the next batch is prepared, and this one's arrays used,
        while it runs)."""
        sentences = batching.as_sentences(sentences)
        if not any(sentences):
            arrays = [self._empty() for _ in sentences]
            return lambda: arrays
        token_char_ids, token_index = token_rows(self.bilm, sentences)
        running = self._dispatch(token_char_ids.astype(np.int32), token_index.astype(np.int32))
        return lambda: self._per_sentence(np.asarray(running), sentences)

    @staticmethod
    def _per_sentence(activations, sentences):
        """The batch's activations `[rows, layers, steps, 2P]` cut to each sentence."""
        return [
            np.ascontiguousarray(activations[row, :, : len(sentence)], np.float32)
            for row, sentence in enumerate(sentences)
        ]

    def _step_kernels(self, trainable):
        """The biLSTM's step kernels transposed and stacked per layer
        (`jax_fast_path.feature_major_kernels`), made again only when a weight's value changed
        since the last call."""
        import jax  # noqa: PLC0415  (this backend only)

        from elmo_keras.layers import jax_fast_path  # noqa: PLC0415  (this backend only)

        if jax.default_backend() not in jax_fast_path.PLATFORMS:
            return {}  # the core path: no step kernels
        key = tuple(id(value) for value in trainable)
        if getattr(self, "_kernels_key", None) != key:
            self._kernels = jax_fast_path.feature_major_kernels(self.bilm.bilstm)
            self._kernels_key, self._kernels_values = key, trainable  # values kept: ids stay valid
        return self._kernels

    def _jax_weights(self):
        """`(trainable, non_trainable)` values of the biLM, as the JAX program takes them."""
        return (
            [v.value for v in self.bilm.trainable_variables],
            [v.value for v in self.bilm.non_trainable_variables],
        )

    def _torch_function(self):
        import torch  # noqa: PLC0415  (this backend only)

        eager = self._eager_function()

        def call(ids, index):
            with torch.inference_mode():  # the biLM's fast path, no autograd bookkeeping
                return eager(ids, index)

        return call

    def _eager_function(self):
        def call(ids, index):
            inputs = {"token_char_ids": ids, "token_index": index}
            activations = self.bilm(inputs, training=False)["activations"]
            return keras.ops.convert_to_numpy(activations)

        return call

    def _bucketed(self, ids, index):
        """Pads a batch to its bucket's shape (JAX compiles one program per shape)."""
        rows = min(_round_up(index.shape[0]), max(self.batch_size, index.shape[0]))
        steps = _token_bucket(index.shape[1])
        distinct = _round_up(ids.shape[0], 64)
        padded_index = np.full((rows, steps), -1, np.int32)
        padded_index[: index.shape[0], : index.shape[1]] = index
        padded_ids = np.zeros((distinct, ids.shape[1]), np.int32)
        padded_ids[: ids.shape[0]] = ids
        return padded_ids, padded_index

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
        token_char_ids, token_index = token_rows(self.bilm, sentences)  # the biLM's dictionary
        activations = self._run(token_char_ids.astype(np.int32), token_index.astype(np.int32))
        return self._per_sentence(activations, sentences)
