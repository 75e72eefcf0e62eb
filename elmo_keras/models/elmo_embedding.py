import keras
from keras import ops

from elmo_keras.backend import require_tensorflow_backend
from elmo_keras.layers.scalar_mix import ScalarMix
from elmo_keras.models import preset_folder
from elmo_keras.models.bilm import BiLM
from elmo_keras.models.elmo_inputs import (
    _SentenceMask,
    cached_word_inputs,
    cached_word_vectors,
    check_input_type,
    check_mix_parameters,
    check_vocab_to_cache,
    input_mask,
    inputs_to_char_ids,
    masked_mean,
    read_token_embeddings,
    refuse_text,
    set_bilm_trainable,
    with_boundaries,
    word_index,
    words_to_ids,
)
from elmo_keras.text.tokenization import DEFAULT_TOKENIZATION_MODE, TOKENIZATION_MODES
from elmo_keras.validation import check_choice, check_int, check_number

INPUT_TYPES = ("char_ids", "tokens", "sentences", "word_ids")
POOLING_MODES = (None, "mean")


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

    Four input types (`input_type`):
    - `"char_ids"`: int tensor `[batch, tokens, max_characters_per_token]`, as made by
      `elmo_keras.text.batch_to_char_ids`; a token whose ids are all 0 is padding. Runs on
      every Keras backend. Text given to it is one `ValueError` naming the other types.
    - `"tokens"`: string tensor `[batch, tokens]` of tokens, right-padded with `""`. The number
      of non-empty strings in a row is its length, so `""` must only appear as padding.
    - `"sentences"`: string tensor `[batch]` of untokenized sentences, split inside the layer
      by `elmo_keras.text.tf_tokenization.tokenize` (`tokenization_mode`), as every entry point of
      the package splits (`embed`, Beam, `embed_text`, the SavedModel's `default` signature).
      In `fit`, `predict` and `evaluate`, Keras takes strings as tensors, object arrays or
      `tf.data`; `elmo_keras.models.TextModel` also takes NumPy string arrays and lists.
    - `"word_ids"` (with `vocab_to_cache`): int tensor `[batch, tokens]`, each word's
      position in `vocab_to_cache`, `0` for padding (made by `word_ids`). The char CNN ran
      once per cached word at build; a call gathers. Runs on every Keras backend.

    The two string types are TensorFlow string ops: on another backend the constructor
    refuses them in one line (`elmo_keras.backend.require_tensorflow_backend`).

    Args:
        bilm: `elmo_keras.models.BiLM`, or its config as produced by
            `keras.saving.serialize_keras_object(bilm)`.
        num_output_representations: int. The number of independent mixes. Defaults to `1`.
        dropout: float. Dropout rate applied to each mix in training. Defaults to `0.5`
            (the paper's setting for most tasks).
        do_layer_norm: bool. Masked layer normalisation of every layer before mixing, its
            statistics over the output positions (AllenNLP's `Elmo` and
            `elmo_keras.allennlp.Elmo` add `<S>` and `</S>`). Defaults to `False`.
        trainable_bilm: bool. Whether the biLM's weights are trained with the task (gradients
            reach them and its dropout runs in training). Defaults to `False` (frozen, and
            always run in inference mode).
        input_type: str. One of `"char_ids"`, `"tokens"`, `"sentences"`, `"word_ids"`.
            Defaults to `"word_ids"` with `vocab_to_cache`, else `"char_ids"`.
        l2_coef: float. L2 penalty on each mix's scalar weights. Defaults to `0.0`.
        pooling: `None` or `"mean"`. Defaults to `None` (one vector per token).
        tokenization_mode: str. The tokenizer's mode for `input_type="sentences"`:
            `"punctuation"` (the package's default everywhere) or `"whitespace"` (TF-Hub's
            module's split, for text tokenized already). Defaults to `"punctuation"`.
        keep_sentence_boundaries: bool. Keep the `<S>` and `</S>` positions in the output and
            its mask (`tokens + 2` positions; AllenNLP's option). Defaults to `False`.
        scalar_mix_parameters: list of `n_layers + 1` floats, or None. Fixed pre-softmax
            weights of every mix, not trained (AllenNLP's option; `[-9e10, 1, -9e10]`: the
            first LSTM layer only). Defaults to `None` (learned, from an even mix).
        vocab_to_cache: list of str, or None. Words whose char CNN vectors are computed once,
            at build, into a non-trainable weight; the layer then takes `"word_ids"`, entry 0
            being padding (AllenNLP's option). Defaults to `None`.
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
        input_type=None,
        l2_coef=0.0,
        pooling=None,
        tokenization_mode=DEFAULT_TOKENIZATION_MODE,
        keep_sentence_boundaries=False,
        scalar_mix_parameters=None,
        vocab_to_cache=None,
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
        self.vocab_to_cache = check_vocab_to_cache(vocab_to_cache)
        self.input_type = check_input_type(input_type, self.vocab_to_cache, INPUT_TYPES)
        if self.input_type in ("tokens", "sentences"):
            require_tensorflow_backend(f"ElmoEmbedding(input_type={self.input_type!r})")
        self.l2_coef = check_number("l2_coef", l2_coef, minimum=0.0)
        self.pooling = check_choice("pooling", pooling, POOLING_MODES)
        self.tokenization_mode = check_choice(
            "tokenization_mode", tokenization_mode, TOKENIZATION_MODES
        )
        self.keep_sentence_boundaries = bool(keep_sentence_boundaries)
        self.scalar_mix_parameters = check_mix_parameters(scalar_mix_parameters, bilm.n_layers + 1)
        set_bilm_trainable(self.bilm, self.trainable_bilm)
        self._word_index = None
        self._restoring = False  # set by `build_from_config`: the saved cache is loaded next
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
                    initial_scalar_weights=self.scalar_mix_parameters,
                    trainable=self.scalar_mix_parameters is None,
                    dtype=self.dtype_policy,
                    name=f"scalar_mix_{k}",
                )
            )
            self.dropout_layers.append(
                keras.layers.Dropout(self.dropout, dtype=self.dtype_policy, name=f"dropout_{k}")
            )

    @property
    def output_dim(self):
        """The size of each output vector: `2 * projection_dim`."""
        return 2 * self.bilm.projection_dim

    def build(self, input_shape=None):
        if not self.bilm.built:
            self.bilm.build((None, None, self.bilm.max_characters_per_token))
        # Again after building: variables made after `trainable` was set start trainable.
        set_bilm_trainable(self.bilm, self.trainable_bilm)
        if self.vocab_to_cache is not None and not hasattr(self, "word_vectors"):
            self.word_vectors = self.add_weight(
                name="word_vectors",
                shape=(len(self.vocab_to_cache), self.bilm.projection_dim),
                initializer="zeros" if self._restoring else self._cache_initializer,
                trainable=False,
            )
        layers_shape = (None, self.bilm.n_layers + 1, None, self.output_dim)
        for mix, drop in zip(self.scalar_mixes, self.dropout_layers, strict=True):
            if not mix.built:
                mix.build(layers_shape)
            drop.build((None, None, self.output_dim))
        self.built = True

    def _cache_initializer(self, shape, dtype=None):
        vectors = cached_word_vectors(self.bilm.char_cnn, self.vocab_to_cache, self.bilm)
        return ops.cast(vectors, dtype)

    def build_from_config(self, config):
        # Deserializing: the cache is among the saved weights.
        with preset_folder.restoring_cache(self):
            super().build_from_config(config)

    def word_ids(self, sentences):
        """Tokenized sentences -> the `"word_ids"` input `[batch, tokens]` (int32 NumPy,
        0-padded); a word missing from `vocab_to_cache` is one `ValueError` naming it."""
        if self._word_index is None:
            self._word_index = word_index(self.vocab_to_cache)
        return words_to_ids(self._word_index, sentences)

    def _bilm_inputs(self, inputs):
        """The layer's input as the biLM's: character ids, or cached vectors and their rows."""
        if self.input_type != "word_ids":
            return self.to_char_ids(inputs)
        return cached_word_inputs(inputs, self.word_vectors)

    def __call__(self, inputs, *args, **kwargs):
        if self.input_type == "char_ids":
            refuse_text(inputs, self.bilm.char_cnn.input_width)  # before Keras' checks
        return super().__call__(inputs, *args, **kwargs)

    def to_char_ids(self, inputs):
        """The layer's input, whatever its type, as character ids `[B, T, C]` (int32)."""
        return inputs_to_char_ids(inputs, self.input_type, self.tokenization_mode, self.bilm)

    def call(self, inputs, training=None):
        bilm_training = training if self.trainable_bilm else False
        outputs = self.bilm(
            self._bilm_inputs(inputs),
            training=bilm_training,
            keep_sentence_boundaries=self.keep_sentence_boundaries,
        )
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
        mask = input_mask(self, inputs)
        if self.keep_sentence_boundaries:
            mask = with_boundaries(mask)
        if self.num_output_representations == 1:
            return mask
        return [mask] * self.num_output_representations

    def compute_output_shape(self, input_shape):
        batch = input_shape[0]
        if self.pooling == "mean":
            shape = (batch, self.output_dim)
        else:
            steps = None if self.input_type == "sentences" else input_shape[1]
            if steps is not None and self.keep_sentence_boundaries:
                steps += 2
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
                "keep_sentence_boundaries": self.keep_sentence_boundaries,
                "scalar_mix_parameters": self.scalar_mix_parameters,
                "vocab_to_cache": self.vocab_to_cache,
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
    def from_token_embeddings(cls, bilm, vocab_file, embedding_file, **kwargs):
        """Makes the layer on word ids, its cache read from a `dump-token-embeddings` file
        (bilm-tf's `dump_token_embeddings`) instead of computed by the char CNN.

        Args:
            bilm: the `BiLM` the file was made with.
            vocab_file: the vocabulary file (one token per line) the file was made from.
            embedding_file: the hdf5 file, dataset `embedding` `[n_tokens, projection_dim]`.
            **kwargs: the other arguments of `ElmoEmbedding`.

        Returns:
            An `ElmoEmbedding` with `input_type="word_ids"`: a token's id is its line in
            `vocab_file` + 1 (bilm-tf's `TokenBatcher` ids, without `<S>` and `</S>`), 0 is
            padding; `word_ids(sentences)` makes them.
        """
        vocab_to_cache, vectors = read_token_embeddings(
            vocab_file, embedding_file, bilm.projection_dim
        )
        layer = cls(bilm, vocab_to_cache=vocab_to_cache, **kwargs)
        with preset_folder.restoring_cache(layer):  # the vectors come from the file
            layer.build()
        layer.word_vectors.assign(vectors)
        return layer

    @classmethod
    def from_preset(cls, preset, cache_dir=None, progress=True, **kwargs):
        """Makes the layer around a named biLM (`"original"`, `"tiny"`, ...) or a model folder's.

        Args:
            preset: a name of `ElmoEmbedding.presets` or a model folder (see
                `BiLM.from_preset`); published models are downloaded once into the cache. A
                folder written by `ElmoEmbedding.save_to_preset` gives back that layer, mixes
                included (`kwargs` override its config); any other preset's biLM is wrapped in
                a new layer made with `kwargs`.
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
        return preset_folder.load_embedding(cls, BiLM, preset, cache_dir, progress, **kwargs)

    presets = preset_folder.presets_property()  # {name: description}, as keras-hub's classes

    def save_to_preset(self, folder, overwrite=False):
        """Writes a preset folder that `ElmoEmbedding.from_preset(folder)` loads back exactly.

        The biLM's `BiLM.save_to_preset` files (bilm-tf's `options.json` and `lm_weights.hdf5`
        included), this layer's config in `config.json` and its mixes in
        `embedding.weights.h5` (`elmo_keras.models.preset_folder`). `BiLM.from_preset(folder)`
        reads its biLM alone. Returns `folder` as a `pathlib.Path`.

        Args:
            folder: str or path-like. The folder to write.
            overwrite: bool. Replace an existing `folder`. Defaults to `False`.

        Example:
        >>> ElmoEmbedding.from_preset("tiny").save_to_preset("my_elmo")  # doctest: +SKIP
        """
        return preset_folder.save_preset(self, self.bilm, folder, overwrite=overwrite)
