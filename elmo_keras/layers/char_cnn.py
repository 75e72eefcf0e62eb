import keras
from keras import ops

from elmo_keras.layers.highway import Highway
from elmo_keras.options import ACTIVATIONS, DEFAULT_FILTERS
from elmo_keras.text.char_ids import MAX_CHARACTERS_PER_TOKEN, N_CHARACTERS
from elmo_keras.validation import check_choice, check_int


def normalize_filters(filters):
    """Validates `filters` and returns it as a tuple of `(width, count)` integer pairs."""
    try:
        pairs = tuple((int(w), int(n)) for w, n in filters)
    except (TypeError, ValueError):
        raise ValueError(
            "`filters` must be a list of [width, count] pairs, e.g. [[1, 32], [2, 32]]. "
            f"Received: filters={filters!r}"
        ) from None
    if not pairs or any(w < 1 or n < 1 for w, n in pairs):
        raise ValueError(
            "`filters` must be a non-empty list of [width, count] pairs of positive integers. "
            f"Received: filters={filters!r}"
        )
    return pairs


@keras.saving.register_keras_serializable(package="elmo_keras")
class CharCNN(keras.layers.Layer):
    """ELMo's context-independent token encoder: characters -> one vector per token.

    Each token arrives as `max_characters_per_token` character ids (inference convention:
    0 marks a padding token, bytes are shifted by one, see `elmo_keras.text`). The ids are
    embedded, convolved with filters of several widths (no padding, so a filter of width `w`
    sees `max_characters_per_token - w + 1` positions), max-pooled over positions, passed
    through `activation`, then through `n_highway` highway layers (always relu) and a linear
    projection to `projection_dim`.

    Padding tokens (all ids 0) give zero vectors, and the layer produces a mask that marks the
    real tokens. Written with `keras.ops` only, so it runs on any Keras 3 backend (and under
    `jax.jit` of `stateless_call`).

    Args:
        n_characters: int. Size of the character vocabulary, padding id 0 included.
            Defaults to `262` (256 bytes, 5 specials, padding).
        char_embedding_dim: int. Size of a character embedding. Defaults to `16`.
        filters: list of `(width, count)` pairs. Defaults to the published 2048 filters.
        n_highway: int. Number of highway layers. Defaults to `2`.
        projection_dim: int. Output size. Defaults to `512`.
        activation: `"relu"` or `"tanh"`. Applied after max-pooling. Defaults to `"relu"`.
        max_characters_per_token: int. Character ids per token. Defaults to `50`.
        embeddings_initializer: initializer of the character embeddings. Defaults to
            `RandomUniform(-1, 1)`, as bilm-tf.
        kernel_initializer: initializer of the convolutions and dense layers. Defaults to
            `"glorot_uniform"`.
        n_words: int. Size of a word vocabulary whose embeddings join the character features
            (ELMoForManyLangs' models): each token's row then has one more id, the last, its
            word id. Defaults to `0` (no word embeddings).
        word_embedding_dim: int. Size of a word embedding; the projection reads
            `[word_embedding; char_features]`. Defaults to `0`.
        **kwargs: other keyword arguments of `keras.layers.Layer`.

    Call arguments:
        char_ids: int tensor `[batch, tokens, max_characters_per_token]`.

    Returns:
        A float tensor `[batch, tokens, projection_dim]`; its mask is `char_ids[..., 0] != 0`.

    Example:
    >>> layer = CharCNN(filters=[(1, 4), (2, 8)], n_highway=1, projection_dim=16)
    >>> ids = np.zeros((2, 7, 50), "int32"); ids[:, :3, :3] = [259, 105, 260]
    >>> tuple(layer(ids).shape)
    (2, 7, 16)

    Reference:
        [Peters et al., 2018](https://arxiv.org/abs/1802.05365);
        [Kim et al., 2016](https://arxiv.org/abs/1508.06615)
    """

    def __init__(
        self,
        n_characters=N_CHARACTERS,
        char_embedding_dim=16,
        filters=DEFAULT_FILTERS,
        n_highway=2,
        projection_dim=512,
        activation="relu",
        max_characters_per_token=MAX_CHARACTERS_PER_TOKEN,
        embeddings_initializer=None,
        kernel_initializer="glorot_uniform",
        n_words=0,
        word_embedding_dim=0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.n_words = check_int("n_words", n_words, 0)
        self.word_embedding_dim = check_int("word_embedding_dim", word_embedding_dim, 0)
        if bool(self.n_words) != bool(self.word_embedding_dim):
            raise ValueError(
                "`n_words` and `word_embedding_dim` must both be positive or both 0. "
                f"Received: n_words={n_words}, word_embedding_dim={word_embedding_dim}"
            )
        self.n_characters = check_int("n_characters", n_characters, 2)
        self.char_embedding_dim = check_int("char_embedding_dim", char_embedding_dim)
        self.filters = normalize_filters(filters)
        self.n_highway = check_int("n_highway", n_highway, 0)
        self.projection_dim = check_int("projection_dim", projection_dim)
        self.activation = check_choice("activation", activation, ACTIVATIONS)
        self.max_characters_per_token = check_int(
            "max_characters_per_token", max_characters_per_token, 3
        )
        widest = max(w for w, _ in self.filters)
        if widest > self.max_characters_per_token:
            raise ValueError(
                f"Every filter width must be <= `max_characters_per_token` "
                f"({self.max_characters_per_token}). Received: filters={list(self.filters)}"
            )
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer or keras.initializers.RandomUniform(-1.0, 1.0)
        )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    @property
    def n_filters(self):
        return sum(n for _, n in self.filters)

    @property
    def input_width(self):
        """int. Ids per token: the characters, then the word id when there are words."""
        return self.max_characters_per_token + (self.word_embedding_dim > 0)

    def build(self, input_shape=None):
        self.char_embedding = keras.layers.Embedding(
            self.n_characters,
            self.char_embedding_dim,
            embeddings_initializer=self.embeddings_initializer,
            dtype=self.dtype_policy,
            name="char_embedding",
        )
        self.char_embedding.build((None, self.max_characters_per_token))
        if self.word_embedding_dim:
            self.word_embedding = keras.layers.Embedding(
                self.n_words,
                self.word_embedding_dim,
                embeddings_initializer=self.embeddings_initializer,
                dtype=self.dtype_policy,
                name="word_embedding",
            )
            self.word_embedding.build((None,))
        self.convolutions = []
        for i, (width, count) in enumerate(self.filters):
            conv = keras.layers.Conv1D(
                count,
                width,
                padding="valid",
                kernel_initializer=self.kernel_initializer,
                dtype=self.dtype_policy,
                name=f"conv_{i}",
            )
            conv.build((None, self.max_characters_per_token, self.char_embedding_dim))
            self.convolutions.append(conv)
        self.highways = []
        for k in range(self.n_highway):
            highway = Highway(
                activation="relu",
                kernel_initializer=self.kernel_initializer,
                dtype=self.dtype_policy,
                name=f"highway_{k}",
            )
            highway.build((None, self.n_filters))
            self.highways.append(highway)
        self.projection = keras.layers.Dense(
            self.projection_dim,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="projection",
        )
        self.projection.build((None, self.word_embedding_dim + self.n_filters))
        self.built = True

    def call(self, char_ids):
        char_ids = ops.convert_to_tensor(char_ids)
        width = char_ids.shape[-1] if ops.ndim(char_ids) is not None else None
        if width is not None and width != self.input_width:
            raise ValueError(
                f"`char_ids` must have {self.input_width} ids per token "
                f"(`max_characters_per_token`, then the word id if there are words). "
                f"Received: shape={tuple(char_ids.shape)}"
            )
        char_ids = ops.cast(char_ids, "int32")
        leading = ops.shape(char_ids)[:-1]
        flat = ops.reshape(char_ids, (-1, self.input_width))
        x = self.token_vectors(self.char_features(flat), flat)
        return ops.reshape(x, (*leading, self.projection_dim))

    def char_features(self, char_ids):
        """The convolutions' pooled, activated features `[N, n_filters]` of `char_ids`
        `[N, input_width]` (the first half of `call`; fast paths chunk the two halves apart)."""
        embedded = self.char_embedding(char_ids[:, : self.max_characters_per_token])  # [N, C, E]
        pooled = []
        for conv in self.convolutions:
            # Max over positions before the activation equals bilm-tf's order for the two
            # monotonic activations it allows (relu, tanh), and is cheaper.
            pooled.append(ops.max(self._convolve(conv, embedded), axis=1))
        x = ops.concatenate(pooled, axis=-1)
        return ops.relu(x) if self.activation == "relu" else ops.tanh(x)

    def token_vectors(self, features, char_ids):
        """The token vectors `[N, projection_dim]` from `char_features(char_ids)`: the
        highways, the word embedding (if any), the projection, zero for padding tokens."""
        x = features
        for highway in self.highways:
            x = highway(x)
        if self.word_embedding_dim:
            words = self.word_embedding(char_ids[:, self.max_characters_per_token])
            x = ops.concatenate([ops.cast(words, x.dtype), x], axis=-1)
        x = self.projection(x)
        token_mask = ops.cast(ops.not_equal(char_ids[:, 0], 0), x.dtype)
        return x * token_mask[:, None]

    def embed_distinct(self, token_rows, token_index, boundaries, run=None):
        """Token vectors `[B, T + 2, P]` with `<S>` and `</S>` around each sentence, and the
        lengths `[B]`, from the distinct tokens of a batch (one copy for every path).

        Args:
            token_rows: `[distinct, C]` int character ids, run through the char CNN once per
                row; or float `[distinct, P]` vectors computed before (then only the
                boundaries run).
            token_index: int `[B, T]`: each position's row of `token_rows`, `-1` for padding.
            boundaries: `[2, C]` int: the id rows of `<S>` and `</S>`.
            run: callable `[n, C]` ids -> `[n, P]`, how the char CNN runs (a fast path's
                chunked run of this layer). Defaults to calling the layer.
        """
        run = self if run is None else run
        token_index = ops.cast(token_index, "int32")
        batch, steps = ops.shape(token_index)[0], ops.shape(token_index)[1]
        lengths = ops.sum(ops.cast(token_index >= 0, "int32"), axis=1)
        boundaries = ops.convert_to_tensor(boundaries, "int32")
        if "int" in str(token_rows.dtype):
            vectors = run(ops.concatenate([ops.cast(token_rows, "int32"), boundaries], 0))
        else:
            boundary_vectors = run(boundaries)
            token_rows = ops.cast(token_rows, boundary_vectors.dtype)
            vectors = ops.concatenate([token_rows, boundary_vectors], axis=0)
        bos_row = ops.shape(token_rows)[0]
        index = ops.concatenate(
            [
                ops.full((batch, 1), bos_row, "int32"),
                token_index,
                ops.full((batch, 1), -1, "int32"),
            ],
            axis=1,
        )
        is_eos = ops.equal(ops.arange(steps + 2, dtype="int32")[None, :], (lengths + 1)[:, None])
        index = ops.where(is_eos, bos_row + 1, index)
        embedded = ops.take(vectors, ops.maximum(index, 0), axis=0)
        return embedded * ops.cast(index >= 0, embedded.dtype)[:, :, None], lengths

    def _convolve(self, conv, embedded):
        """`conv(embedded)` as one matrix product over the unfolded windows: `[N, C, E]` ->
        `[N, C - w + 1, count]`.

        The same sums as the convolution (`conv`'s kernel `[w, E, count]` read as `[w * E,
        count]`, window position-major). As fast in TensorFlow; in an exported ONNX model the
        widest filter's product took ~150 ms where ONNX Runtime's `Conv` and the conversion
        of its wide output out of the blocked layout took 214 ms (full model, 64 x 20 tokens).
        """
        width = conv.kernel.shape[0]
        positions = self.max_characters_per_token - width + 1
        if width == 1:
            windows = embedded
        else:
            windows = ops.concatenate(
                [embedded[:, k : k + positions] for k in range(width)], axis=-1
            )
        depth = width * self.char_embedding_dim
        kernel = ops.reshape(ops.cast(conv.kernel, windows.dtype), (depth, -1))
        outputs = ops.matmul(ops.reshape(windows, (-1, depth)), kernel)
        outputs = outputs + ops.cast(conv.bias, outputs.dtype)
        return ops.reshape(outputs, (-1, positions, kernel.shape[-1]))

    def compute_mask(self, char_ids, mask=None):
        return keras.ops.not_equal(char_ids[..., 0], 0)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.projection_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "n_characters": self.n_characters,
                "char_embedding_dim": self.char_embedding_dim,
                "filters": [list(f) for f in self.filters],
                "n_highway": self.n_highway,
                "projection_dim": self.projection_dim,
                "activation": self.activation,
                "max_characters_per_token": self.max_characters_per_token,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "n_words": self.n_words,
                "word_embedding_dim": self.word_embedding_dim,
            }
        )
        return config
