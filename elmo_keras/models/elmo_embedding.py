import keras
from keras import ops

from elmo_keras.backend import require_tensorflow_backend
from elmo_keras.layers.scalar_mix import ScalarMix
from elmo_keras.models.bilm import BiLM
from elmo_keras.text.pretokenize import DEFAULT_TOKENIZATION_MODE, TOKENIZATION_MODES
from elmo_keras.validation import check_choice, check_int, check_number

INPUT_TYPES = ("char_ids", "tokens", "sentences")
POOLING_MODES = (None, "mean")


def masked_mean(vectors, mask):
    """Mean of `vectors` `[B, T, D]` over the positions where `mask` `[B, T]` is true.

    Padding never counts; a sentence with no token gives zeros (not NaN).
    """
    float_mask = ops.cast(mask, vectors.dtype)[:, :, None]
    total = ops.sum(vectors * float_mask, axis=1)
    count = ops.maximum(ops.sum(float_mask, axis=1), ops.cast(1.0, vectors.dtype))
    return total / count


@keras.saving.register_keras_serializable(package="elmo_keras")
class _SentenceMask(keras.layers.Layer):
    """Untokenized sentences `[batch]` -> bool `[batch, tokens]`, true at each real token.

    `ElmoEmbedding(input_type="sentences")` calls it on symbolic inputs, so that a Functional
    model carries the mask as a node of its graph (the token count is known only after
    tokenization).
    """

    def __init__(self, tokenization_mode=DEFAULT_TOKENIZATION_MODE, **kwargs):
        super().__init__(**kwargs)
        self.tokenization_mode = tokenization_mode

    def call(self, sentences):
        import tensorflow as tf  # noqa: PLC0415  (string inputs: TensorFlow only)

        from elmo_keras.text.tokenizer import tokenize  # noqa: PLC0415

        lengths = tokenize(sentences, mode=self.tokenization_mode).row_lengths()
        return tf.sequence_mask(lengths)

    def compute_output_spec(self, sentences):
        return keras.KerasTensor((sentences.shape[0], None), dtype="bool")

    def get_config(self):
        config = super().get_config()
        config["tokenization_mode"] = self.tokenization_mode
        return config


@keras.saving.register_keras_serializable(package="elmo_keras")
class ElmoEmbedding(keras.layers.Layer):
    """ELMo as one layer of a task model: input text -> task-specific mixes of the biLM layers.

    The layer runs a `BiLM` (frozen by default) and mixes its `n_layers + 1` layers with
    `num_output_representations` independent `ScalarMix` layers (Peters et al. use one for the
    task model's input and, for some tasks, one for its output), then applies dropout to each
    mix. It returns the vectors with a Keras mask (true at real tokens), so that a following
    `keras.layers.LSTM`, `GlobalAveragePooling1D`, ... skip the padding. With `pooling="mean"`
    it returns one vector per sentence instead: the mean over the real tokens only (the twin of
    the SavedModel's `default` output).

    The biLM is a sublayer: its weights are saved in the `.keras` file with the rest of the
    model, and its architecture in the layer config. Use `ElmoEmbedding.from_bilm_tf` to start
    from a bilm-tf `options.json` and hdf5 weight file (the published models, or
    `elmo-keras train` output).

    Three input types (`input_type`):
    - `"char_ids"`: int tensor `[batch, tokens, max_characters_per_token]`, as made by
      `elmo_keras.text.batch_to_char_ids`; a token whose ids are all 0 is padding. Runs on
      every Keras backend.
    - `"tokens"`: string tensor `[batch, tokens]` of tokens, right-padded with `""`. The number
      of non-empty strings in a row is its length, so `""` must only appear as padding.
    - `"sentences"`: string tensor `[batch]` of untokenized sentences, split inside the layer
      by `elmo_keras.text.tokenizer.tokenize` (`tokenization_mode`), as every entry point of
      the package splits (`embed`, Beam, `embed_text`, the SavedModel's `default` signature).

    Text given to a `"char_ids"` layer is one `ValueError` naming the other input types. In
    `fit`, `predict` and `evaluate`, Keras takes strings as tensors, object arrays or
    `tf.data`; `elmo_keras.models.TextModel` also takes NumPy string arrays and lists of str.

    The two string types are TensorFlow string ops: on another backend the constructor
    refuses them in one line (`elmo_keras.backend.require_tensorflow_backend`).

    Args:
        bilm: `elmo_keras.models.BiLM`, or its config as produced by
            `keras.saving.serialize_keras_object(bilm)`.
        num_output_representations: int. The number of independent mixes. Defaults to `1`.
        dropout: float. Dropout rate applied to each mix in training. Defaults to `0.5`
            (the paper's setting for most tasks).
        do_layer_norm: bool. Masked layer normalisation of every layer before mixing.
            Defaults to `False`.
        trainable_bilm: bool. Whether the biLM's weights are trained with the task (gradients
            reach them and its dropout runs in training). Defaults to `False` (frozen, and
            always run in inference mode).
        input_type: str. One of `"char_ids"`, `"tokens"`, `"sentences"`. Defaults to
            `"char_ids"`.
        l2_coef: float. L2 penalty on each mix's scalar weights. Defaults to `0.0`.
        pooling: `None` or `"mean"`. Defaults to `None` (one vector per token).
        tokenization_mode: str. The tokenizer's mode for `input_type="sentences"`:
            `"punctuation"` (the package's default everywhere) or `"whitespace"` (TF-Hub's
            module's split, for text tokenized already). Defaults to `"punctuation"`.
        **kwargs: other keyword arguments of `keras.layers.Layer`.

    Call arguments:
        inputs: a tensor of the kind `input_type` names.
        training: bool. Dropout (and, when `trainable_bilm`, the biLM's dropout) run only in
            training.

    Returns:
        With `pooling=None`, a float tensor `[batch, tokens, 2 * projection_dim]` carrying a
        Keras mask `[batch, tokens]` (true at real tokens); padded positions hold zeros.
        With `pooling="mean"`, `[batch, 2 * projection_dim]` and no mask. With
        `num_output_representations > 1`, a list of such tensors, one per mix.

    Example:
    >>> bilm = elmo_keras.models.BiLM(
    ...     lstm_units=32, projection_dim=8, filters=[(1, 4), (2, 8)], n_highway=1
    ... )
    >>> elmo = ElmoEmbedding(bilm, input_type="tokens", dropout=0.0)
    >>> tokens = tf.constant([["The", "bank", "."], ["Hi", "", ""]])
    >>> x = elmo(tokens)
    >>> tuple(x.shape), elmo.compute_mask(tokens).numpy().tolist()
    ((2, 3, 16), [[True, True, True], [True, False, False]])

    Reference:
        [Peters et al., 2018](https://arxiv.org/abs/1802.05365), section 3.3.
    """

    def __init__(
        self,
        bilm,
        num_output_representations=1,
        dropout=0.5,
        do_layer_norm=False,
        trainable_bilm=False,
        input_type="char_ids",
        l2_coef=0.0,
        pooling=None,
        tokenization_mode=DEFAULT_TOKENIZATION_MODE,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(bilm, dict):
            bilm = keras.saving.deserialize_keras_object(bilm)

        if not isinstance(bilm, BiLM):
            raise ValueError(
                "`bilm` must be an `elmo_keras.models.BiLM` or its serialized config. "
                f"Received: bilm={type(bilm).__name__}"
            )
        self.num_output_representations = check_int(
            "num_output_representations", num_output_representations
        )
        self.bilm = bilm
        self.dropout = check_number("dropout", dropout, 0.0, 1.0, include_maximum=False)
        self.do_layer_norm = bool(do_layer_norm)
        self.trainable_bilm = bool(trainable_bilm)
        self.input_type = check_choice("input_type", input_type, INPUT_TYPES)
        if self.input_type != "char_ids":
            require_tensorflow_backend(f"ElmoEmbedding(input_type={self.input_type!r})")
        self.l2_coef = check_number("l2_coef", l2_coef, minimum=0.0)
        self.pooling = check_choice("pooling", pooling, POOLING_MODES)
        self.tokenization_mode = check_choice(
            "tokenization_mode", tokenization_mode, TOKENIZATION_MODES
        )
        self._freeze_or_unfreeze_bilm()
        self.sentence_mask = None
        if self.input_type == "sentences":
            self.sentence_mask = _SentenceMask(self.tokenization_mode, name="sentence_mask")
        self.scalar_mixes = []
        self.dropout_layers = []
        for k in range(self.num_output_representations):
            self.scalar_mixes.append(
                ScalarMix(
                    bilm.n_layers + 1,
                    do_layer_norm=self.do_layer_norm,
                    l2_coef=self.l2_coef,
                    dtype=self.dtype_policy,
                    name=f"scalar_mix_{k}",
                )
            )
            self.dropout_layers.append(
                keras.layers.Dropout(self.dropout, dtype=self.dtype_policy, name=f"dropout_{k}")
            )

    def _freeze_or_unfreeze_bilm(self):
        # The biLM, its two sublayers and every variable, explicitly: a biLM deserialized with
        # `trainable=False` made its sublayers after that flag was set.
        self.bilm.trainable = self.trainable_bilm
        for sublayer in (self.bilm.char_cnn, self.bilm.bilstm):
            sublayer.trainable = self.trainable_bilm
        for variable in self.bilm.weights:
            variable.trainable = self.trainable_bilm

    @property
    def output_dim(self):
        """The size of each output vector: `2 * projection_dim`."""
        return 2 * self.bilm.projection_dim

    def build(self, input_shape=None):
        if not self.bilm.built:
            self.bilm.build((None, None, self.bilm.max_characters_per_token))
        # Again after building: variables made after `trainable` was set start trainable.
        self._freeze_or_unfreeze_bilm()
        layers_shape = (None, self.bilm.n_layers + 1, None, self.output_dim)
        for mix, drop in zip(self.scalar_mixes, self.dropout_layers, strict=True):
            if not mix.built:
                mix.build(layers_shape)
            drop.build((None, None, self.output_dim))
        self.built = True

    def __call__(self, inputs, *args, **kwargs):
        if self.input_type == "char_ids":
            self._refuse_text(inputs)  # before Keras' own checks, in one line
        return super().__call__(inputs, *args, **kwargs)

    def to_char_ids(self, inputs):
        """The layer's input, whatever its type, as character ids `[B, T, C]` (int32)."""
        width = self.bilm.max_characters_per_token
        if self.input_type == "char_ids":
            self._refuse_text(inputs)
            char_ids = ops.cast(inputs, "int32")
            if len(char_ids.shape) != 3:
                raise ValueError(
                    "`ElmoEmbedding(input_type='char_ids')` expects int inputs "
                    f"[batch, tokens, {width}]. Received: shape={tuple(char_ids.shape)}"
                )
            return char_ids
        return self._strings_to_char_ids(inputs, width)

    def _refuse_text(self, inputs):
        """One line, instead of a failed cast, when text reaches a `char_ids` layer."""
        first = inputs
        while isinstance(first, (list, tuple)) and first:
            first = first[0]
        dtype = getattr(inputs, "dtype", None)  # NumPy, tf.Tensor, KerasTensor ("string")
        name = "str" if dtype is None else getattr(dtype, "name", str(dtype))
        kind = getattr(dtype, "kind", "")
        if kind == "O" and inputs.size:
            first = inputs.flat[0]
        text = isinstance(first, (str, bytes)) or kind in ("U", "S") or name == "string"
        if text:
            raise ValueError(
                "This `ElmoEmbedding` takes character ids (int [batch, tokens, "
                f"{self.bilm.max_characters_per_token}]), not text: make it with "
                "`input_type='sentences'` for raw sentences or `input_type='tokens'` for "
                "padded token rows, on the TensorFlow backend (e.g. "
                "`ElmoEmbedding.from_preset(name, input_type='sentences')`). "
                f"Received: dtype={name}"
            )

    def _strings_to_char_ids(self, inputs, width):
        """Tokens or sentences -> character ids, with TensorFlow's string ops."""
        import tensorflow as tf  # noqa: PLC0415  (string inputs: TensorFlow only)

        from elmo_keras.text import tf_char_ids  # noqa: PLC0415
        from elmo_keras.text.tokenizer import tokenize  # noqa: PLC0415

        tokens = tf.convert_to_tensor(inputs)
        if tokens.dtype != tf.string:
            raise ValueError(
                f"`ElmoEmbedding(input_type={self.input_type!r})` expects a string tensor. "
                f"Received: dtype={tokens.dtype.name}"
            )
        if self.input_type == "tokens":
            if tokens.shape.rank != 2:
                raise ValueError(
                    "`ElmoEmbedding(input_type='tokens')` expects a string tensor [batch, "
                    f"tokens] padded with ''. Received: shape={tuple(tokens.shape)}"
                )
            lengths = tf.reduce_sum(tf.cast(tf.not_equal(tokens, ""), tf.int32), axis=1)
            return tf_char_ids.dense_tokens_to_char_ids(tokens, lengths, width)
        if tokens.shape.rank != 1:
            raise ValueError(
                "`ElmoEmbedding(input_type='sentences')` expects a string tensor [batch] of "
                f"untokenized sentences. Received: shape={tuple(tokens.shape)}"
            )
        ragged = tokenize(tokens, mode=self.tokenization_mode)
        return tf_char_ids.tokens_to_char_ids(ragged, width)

    def call(self, inputs, training=None):
        char_ids = self.to_char_ids(inputs)
        bilm_training = training if self.trainable_bilm else False
        outputs = self.bilm(char_ids, training=bilm_training)
        activations, mask = outputs["activations"], outputs["mask"]
        results = []
        for mix, drop in zip(self.scalar_mixes, self.dropout_layers, strict=True):
            mixed = drop(mix(activations, mask=mask), training=training)
            mixed = mixed * ops.cast(mask, mixed.dtype)[:, :, None]
            if self.pooling == "mean":
                mixed = masked_mean(mixed, mask)
            results.append(mixed)
        return results[0] if self.num_output_representations == 1 else results

    def compute_mask(self, inputs, previous_mask=None):
        if self.pooling is not None:
            return None
        if isinstance(inputs, keras.KerasTensor):
            # Symbolic (Functional) construction: the mask's spec. Keras recomputes the mask
            # from the real inputs on every call, through this method's eager branch.
            if self.input_type == "char_ids":
                mask = keras.ops.greater(inputs[:, :, 0], 0)
            elif self.input_type == "tokens":
                mask = keras.ops.not_equal(inputs, "")
            else:
                mask = self.sentence_mask(inputs)
        elif self.input_type == "sentences":
            mask = self.sentence_mask(inputs)
        else:
            mask = ops.greater(self.to_char_ids(inputs)[:, :, 0], 0)
        if self.num_output_representations == 1:
            return mask
        return [mask] * self.num_output_representations

    def compute_output_shape(self, input_shape):
        batch = input_shape[0]
        if self.pooling == "mean":
            shape = (batch, self.output_dim)
        else:
            steps = None if self.input_type == "sentences" else input_shape[1]
            shape = (batch, steps, self.output_dim)
        if self.num_output_representations == 1:
            return shape
        return [shape] * self.num_output_representations

    def scalar_mix_weights(self):
        """Each mix's `(softmax(w), gamma)` as NumPy: what the task taught it about the layers."""
        return [
            (
                keras.ops.convert_to_numpy(keras.ops.softmax(mix.scalar_weights)),
                float(keras.ops.convert_to_numpy(mix.gamma)),
            )
            for mix in self.scalar_mixes
        ]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "bilm": keras.saving.serialize_keras_object(self.bilm),
                "num_output_representations": self.num_output_representations,
                "dropout": self.dropout,
                "do_layer_norm": self.do_layer_norm,
                "trainable_bilm": self.trainable_bilm,
                "input_type": self.input_type,
                "l2_coef": self.l2_coef,
                "pooling": self.pooling,
                "tokenization_mode": self.tokenization_mode,
            }
        )
        return config

    @classmethod
    def from_bilm_tf(cls, options_path, weights_path, **kwargs):
        """Makes the layer around a biLM read from a bilm-tf `options.json` and hdf5 file.

        Args:
            options_path: path of the options file (inference convention, 262 characters),
                or its `http(s)://` URL (downloaded once into the cache).
            weights_path: path or URL of the hdf5 weight file (bilm-tf layout).
            **kwargs: the other arguments of `ElmoEmbedding`.

        Example:
        >>> elmo = ElmoEmbedding.from_bilm_tf("options.json", "lm_weights.hdf5",
        ...                                   input_type="sentences")  # doctest: +SKIP
        """
        return cls(BiLM.from_bilm_tf(options_path, weights_path), **kwargs)

    @classmethod
    def from_preset(cls, preset, cache_dir=None, progress=True, **kwargs):
        """Makes the layer around a named biLM (`"original"`, `"tiny"`, ...) or a model folder's.

        Args:
            preset: a name of `elmo_keras.presets.PRESETS` or a model folder (see
                `BiLM.from_preset`); published models are downloaded once into the cache.
            cache_dir: path or None. Where downloads go (default: `$ELMO_KERAS_CACHE`, else
                `~/.cache/elmo-keras`).
            progress: bool. A download progress bar on a terminal. Defaults to `True`.
            **kwargs: the other arguments of `ElmoEmbedding`. Mind `input_type`: it defaults
                to `"char_ids"` (int ids from `elmo_keras.text.batch_to_char_ids`; every
                backend); pass `input_type="sentences"` for raw text (split inside by the
                package's tokenizer, `tokenization_mode="punctuation"`) or `"tokens"` for
                padded token rows (both TensorFlow only). Text given to a `"char_ids"` layer
                is one `ValueError` that says so.

        Example:
        >>> elmo = ElmoEmbedding.from_preset("tiny", input_type="sentences")
        >>> elmo.output_dim
        32
        """
        return cls(BiLM.from_preset(preset, cache_dir=cache_dir, progress=progress), **kwargs)
