import keras
from keras import ops

from elmo_keras.file_io.download import cached_path
from elmo_keras.layers.char_cnn import CharCNN, normalize_filters
from elmo_keras.layers.projected_bilstm import ProjectedBiLSTM, fast_path
from elmo_keras.memory import FLOAT_BYTES, bilm_parameters, check_fits
from elmo_keras.models import bilm_vocabulary, bilm_weights, preset_folder
from elmo_keras.models.bilm_inputs import parse_inputs
from elmo_keras.options import (
    DEFAULT_FILTERS,
    bilm_kwargs_to_options,
    options_to_bilm_kwargs,
    read_options,
)
from elmo_keras.text.char_ids import MAX_CHARACTERS_PER_TOKEN, N_CHARACTERS
from elmo_keras.weights import load_weights


def sequence_mask(lengths, steps):
    """`[B]` lengths -> bool `[B, steps]`, true at the first `lengths[b]` positions."""
    return ops.arange(steps, dtype="int32")[None, :] < ops.cast(lengths, "int32")[:, None]


@keras.saving.register_keras_serializable(package="elmo_keras")
class BiLM(keras.Model):
    """The ELMo bidirectional language model: character ids -> every layer's activations.

    A `CharCNN` turns each token into a vector, a `ProjectedBiLSTM` reads the sentence in both
    directions, and the model returns the token vectors and all layers. Sentence boundaries
    (`<S>` and `</S>`) are added inside, per sentence, and their positions are removed from the
    outputs, so output position `i` is input token `i`. Inputs are right-padded: a token whose
    first character id is 0 is padding.

    The model is stateless by default (every call starts from zero state, so a sentence gives
    the same vectors alone or inside any batch). To reproduce bilm-tf's or AllenNLP's stateful
    behaviour, or to stream a long text, pass the previous call's `state_h` and `state_c` in.

    Args:
        lstm_units: int. LSTM cell size. Defaults to `4096`.
        projection_dim: int. Size of token vectors and LSTM outputs. Defaults to `512`.
        n_layers: int. LSTM layers per direction. Defaults to `2`.
        cell_clip, proj_clip: float or None. Defaults to `3.0`.
        use_skip_connections: bool. Residual connections from the second LSTM layer up.
            Defaults to `True`.
        char_embedding_dim, filters, n_highway, n_characters, max_characters_per_token,
            activation: the `CharCNN` arguments; defaults are the published model's.
        dropout: float. Dropout on the LSTM inputs during training. Defaults to `0.0`.
        char_vocabulary, word_vocabulary: lists of str or `None`. The model's own character
            and word dictionaries (ELMoForManyLangs' models, `elmo_keras.efml`): tokens become
            ids through them (`elmo_keras.text.token_dictionary`), `n_characters` follows.
            Defaults to `None`: bilm-tf's bytes.
        word_embedding_dim: int. Word embeddings joining the character features (with a
            `word_vocabulary`). Defaults to `0`.
        cell_forget_bias: float. Forget-gate bias added at run time: `1.0` in bilm-tf's
            weights, `0.0` in AllenNLP-trained ones. Defaults to `1.0`.
        length_aware: bool. On TensorFlow at inference (`training` falsy), run the char CNN
            once per distinct token (in chunks of 256) and the biLSTM packed by length
            (`elmo_keras.layers.tf_fast_path`): the same numbers as the plain path, much less
            work on uneven batches. Training, JAX and XLA always take the plain path, written
            with `keras.ops`. Defaults to `True`.
        **kwargs: other keyword arguments of `keras.Model`.

    Call arguments:
        inputs: int tensor `[batch, tokens, max_characters_per_token]` of character ids, or a
            dict with `"char_ids"` and optionally `"state_h"` `[batch, 2, n_layers,
            projection_dim]` and `"state_c"` `[batch, 2, n_layers, lstm_units]`. Instead of
            `"char_ids"`, the dict may hold the distinct tokens once: `"token_char_ids"`
            `[distinct, max_characters_per_token]` and `"token_index"` `[batch, tokens]`, for
            each position the row of `"token_char_ids"` holding its token, `-1` for padding
            (real tokens a prefix of each row); the outputs are those of the equivalent
            `"char_ids"`. `"token_vectors"` `[distinct, projection_dim]` (context-free vectors
            computed before: a word cache, a `dump-token-embeddings` file) may replace
            `"token_char_ids"`: the char CNN then runs only for `<S>` and `</S>`.
        training: bool.
        length_aware: optional bool. Overrides the model's `length_aware` for this call
            (`False` under XLA, which needs the plain path's static shapes).
        keep_sentence_boundaries: bool. Keep the `<S>` and `</S>` positions in the outputs
            and the mask (`tokens + 2` positions, AllenNLP's option). Defaults to `False`.

    Returns:
        A dict: `"token_embeddings"` `[batch, tokens, projection_dim]`, `"activations"`
        `[batch, n_layers + 1, tokens, 2 * projection_dim]` (layer 0 is the token vector
        repeated for both directions, layer `k` is `[forward_k ; backward_k]`), `"mask"`
        `[batch, tokens]` (bool), and the final `"state_h"`, `"state_c"`.

    Example:
    >>> bilm = BiLM(lstm_units=64, projection_dim=16, filters=[(1, 4), (2, 8)])
    >>> ids = elmo_keras.text.batch_to_char_ids([["Hello", "world", "!"], ["Hi"]])
    >>> tuple(bilm(ids)["activations"].shape)
    (2, 3, 3, 32)

    Reference:
        [Peters et al., 2018](https://arxiv.org/abs/1802.05365)
    """

    def __init__(
        self,
        lstm_units=4096,
        projection_dim=512,
        n_layers=2,
        cell_clip=3.0,
        proj_clip=3.0,
        use_skip_connections=True,
        char_embedding_dim=16,
        filters=DEFAULT_FILTERS,
        n_highway=2,
        n_characters=N_CHARACTERS,
        max_characters_per_token=MAX_CHARACTERS_PER_TOKEN,
        activation="relu",
        dropout=0.0,
        length_aware=True,
        char_vocabulary=None,
        word_vocabulary=None,
        word_embedding_dim=0,
        cell_forget_bias=1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.token_dictionary = bilm_vocabulary.make_dictionary(
            char_vocabulary, word_vocabulary, max_characters_per_token
        )
        self.char_vocabulary, self.word_vocabulary = char_vocabulary, word_vocabulary
        self.word_embedding_dim, self.cell_forget_bias = word_embedding_dim, cell_forget_bias
        if char_vocabulary is not None:
            n_characters = len(char_vocabulary) + 1
        self.lstm_units = lstm_units
        self.projection_dim = projection_dim
        self.n_layers = n_layers
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.use_skip_connections = use_skip_connections
        self.char_embedding_dim = char_embedding_dim
        self.filters = normalize_filters(filters)
        self.n_highway = n_highway
        self.n_characters = n_characters
        self.max_characters_per_token = max_characters_per_token
        self.activation = activation
        self.dropout = dropout
        self.length_aware = bool(length_aware)
        # Sublayers are made here (not in build) so that trainers and converters can reach
        # them before the first call; they are built in `build`.
        self.char_cnn = CharCNN(
            n_characters=n_characters,
            char_embedding_dim=char_embedding_dim,
            filters=self.filters,
            n_highway=n_highway,
            projection_dim=projection_dim,
            activation=activation,
            max_characters_per_token=max_characters_per_token,
            n_words=len(word_vocabulary or ()),
            word_embedding_dim=word_embedding_dim,
            dtype=self.dtype_policy,
            name="char_cnn",
        )
        self.bilstm = ProjectedBiLSTM(
            lstm_units=lstm_units,
            projection_dim=projection_dim,
            n_layers=n_layers,
            cell_clip=cell_clip,
            proj_clip=proj_clip,
            use_skip_connections=use_skip_connections,
            dropout=dropout,
            cell_forget_bias=cell_forget_bias,
            return_state=True,
            length_aware=self.length_aware,
            dtype=self.dtype_policy,
            name="bilstm",
        )

    def build(self, input_shape=None):
        self.char_cnn.build((None, None, self.char_cnn.input_width))
        self.bilstm.build((None, None, self.projection_dim))
        self.built = True

    def add_sentence_boundaries(self, char_ids):
        """`[B, T, C]` -> `[B, T + 2, C]` with `<S>` first and `</S>` after each last token;
        also returns the lengths `[B]`."""
        char_ids = ops.cast(char_ids, "int32")
        batch, steps = ops.shape(char_ids)[0], ops.shape(char_ids)[1]
        lengths = ops.sum(ops.cast(ops.not_equal(char_ids[:, :, 0], 0), "int32"), axis=1)
        width = self.char_cnn.input_width
        boundaries = ops.convert_to_tensor(bilm_vocabulary.boundary_ids(self), "int32")
        bos, eos = boundaries[0], boundaries[1]
        padded = ops.concatenate(
            [
                ops.broadcast_to(bos[None, None, :], (batch, 1, width)),
                char_ids,
                ops.zeros((batch, 1, width), "int32"),
            ],
            axis=1,
        )
        positions = ops.arange(steps + 2, dtype="int32")[None, :]
        is_eos = ops.equal(positions, (lengths + 1)[:, None])
        return ops.where(is_eos[:, :, None], eos[None, None, :], padded), lengths

    def _embed_tokens(self, char_ids, token_rows, token_index):
        """The core path's token vectors `[B, T + 2, P]` with the boundaries, and the lengths.

        With `token_char_ids`/`token_index` the char CNN runs once per distinct token (and once
        per boundary) and the vectors are gathered to the positions: the distinct-token trick,
        on every backend. With float `token_vectors` (vectors computed before, e.g. a word
        cache) the char CNN runs only for the boundaries. With `char_ids` it runs at every
        position of the padded batch.
        """
        if token_index is None:
            with_boundaries, lengths = self.add_sentence_boundaries(char_ids)
            return self.char_cnn(with_boundaries), lengths
        boundaries = bilm_vocabulary.boundary_ids(self)
        return self.char_cnn.embed_distinct(token_rows, token_index, boundaries)

    def call(self, inputs, training=None, length_aware=None, keep_sentence_boundaries=False):
        char_ids, token_rows, token_index, state = parse_inputs(inputs)
        if char_ids is not None:
            char_ids = ops.convert_to_tensor(char_ids)
            if len(char_ids.shape) != 3:
                raise ValueError(
                    "`char_ids` must be [batch, tokens, max_characters_per_token]. "
                    f"Received: shape={tuple(char_ids.shape)}"
                )
        length_aware = self.length_aware if length_aware is None else length_aware
        path = fast_path()
        fast = bool(path) and path.applies(self, training, length_aware)
        if fast and (token_rows is None or "int" in str(token_rows.dtype)):
            if token_index is None:
                token_rows, token_index = path.distinct_tokens(char_ids)
            embedded, lengths = path.embed_distinct_tokens(
                self.char_cnn, token_rows, token_index, bilm_vocabulary.boundary_ids(self)
            )
        else:
            embedded, lengths = self._embed_tokens(char_ids, token_rows, token_index)
        steps = ops.shape(embedded)[1] - 2
        outputs, state_h, state_c = self.bilstm(
            embedded,
            mask=sequence_mask(lengths + 2, steps + 2),
            initial_state=state,
            training=training,
            length_aware=fast,
        )
        if keep_sentence_boundaries:  # AllenNLP's option: <S> and </S> stay, in the mask too
            mask = sequence_mask(lengths + 2, steps + 2)
            first, last = 0, steps + 2
        else:
            mask = sequence_mask(lengths, steps)
            first, last = 1, steps + 1
        float_mask = ops.cast(mask, embedded.dtype)[:, :, None]
        token_embeddings = embedded[:, first:last] * float_mask
        layers = outputs[:, :, first:last] * float_mask[:, None]
        layer0 = ops.concatenate([token_embeddings, token_embeddings], axis=-1)[:, None]
        return {
            "token_embeddings": token_embeddings,
            "activations": ops.concatenate([layer0, layers], axis=1),
            "mask": mask,
            "state_h": state_h,
            "state_c": state_c,
        }

    def get_config(self):
        return {**super().get_config(), **self._architecture()}

    def _architecture(self):
        """The constructor arguments that make the architecture (no name, no dtype): what
        `to_options` writes without Keras's serializer, which imports TensorFlow whenever it
        is installed, on every backend."""
        return {
            "lstm_units": self.lstm_units,
            "projection_dim": self.projection_dim,
            "n_layers": self.n_layers,
            "cell_clip": self.cell_clip,
            "proj_clip": self.proj_clip,
            "use_skip_connections": self.use_skip_connections,
            "char_embedding_dim": self.char_embedding_dim,
            "filters": [list(f) for f in self.filters],
            "n_highway": self.n_highway,
            "n_characters": self.n_characters,
            "max_characters_per_token": self.max_characters_per_token,
            "activation": self.activation,
            "dropout": self.dropout,
            "length_aware": self.length_aware,
            "char_vocabulary": self.char_vocabulary,
            "word_vocabulary": self.word_vocabulary,
            "word_embedding_dim": self.word_embedding_dim,
            "cell_forget_bias": self.cell_forget_bias,
        }

    @classmethod
    def from_options(cls, options, source="options", **kwargs):
        """The architecture of a bilm-tf options dict (no weights); `source` names it in errors.
        Weights too large for the machine: one `NotEnoughMemory` line, before any allocation.

        `options` may also be a parsed training configuration (its `bilm_kwargs`, checked
        once when it was parsed: `elmo_keras.training.configs.TrainingConfig`)."""
        bilm_kwargs = getattr(options, "bilm_kwargs", None)
        if bilm_kwargs is None:
            bilm_kwargs = options_to_bilm_kwargs(options, source)
        check_fits(FLOAT_BYTES * bilm_parameters(bilm_kwargs), "its weights", source)
        return cls(**bilm_kwargs, **kwargs)

    def to_options(self):
        """This model's architecture as a bilm-tf options dict (inference convention)."""
        return bilm_kwargs_to_options(self._architecture())

    def weight_shapes(self):
        """{dataset name: shape} of this built model in bilm-tf's hdf5 layout
        (`elmo_keras.models.bilm_weights`)."""
        return bilm_weights.weight_shapes(self)

    def get_weight_arrays(self):
        """This model's weights as {dataset name: NumPy array} in bilm-tf's layout."""
        return bilm_weights.get_weight_arrays(self)

    def set_weight_arrays(self, arrays):
        """Assigns {dataset name: array} in bilm-tf's layout (every name of `weight_shapes`)."""
        bilm_weights.set_weight_arrays(self, arrays)

    @classmethod
    def from_bilm_tf(cls, options_path, weights_path, check_finite=True, **kwargs):
        """Builds a `BiLM` from bilm-tf's `options.json` and loads its hdf5 weights.

        `from_preset` does the same for a name or a folder; this takes the two files.

        Args:
            options_path: str or path-like. The options file (262 characters), or its
                `http(s)://` URL (downloaded once into the cache, see
                `elmo_keras.file_io.download.cached_path`).
            weights_path: str or path-like. The hdf5 weight file (bilm-tf layout), or its URL.
            check_finite: bool. Refuse NaN or infinite weights (see
                `elmo_keras.weights.read_weight_arrays`). Defaults to `True`.
            **kwargs: other keyword arguments of `BiLM` (e.g. `name`, `dtype`).

        Example:
        >>> bilm = BiLM.from_bilm_tf("options.json", "weights.hdf5")  # doctest: +SKIP
        """
        options_path, weights_path = cached_path(options_path), cached_path(weights_path)
        source = f"options file {options_path}"
        bilm = cls.from_options(read_options(options_path), source=source, **kwargs)
        return load_weights(bilm, weights_path, check_finite=check_finite)  # builds it

    presets = preset_folder.presets_property()  # {name: description}, as keras-hub's classes

    @classmethod
    def from_preset(cls, preset, cache_dir=None, progress=True, check_finite=True, **kwargs):
        """Builds a named biLM, or a folder's: the one way to load by name (keras-hub's).

        Args:
            preset: str or path-like. `"small"`, `"medium"`, `"original"`, `"original_5.5b"`
                (AllenNLP's published models, downloaded once into the cache; set
                `ELMO_KERAS_MIRROR` to fetch them from elsewhere), the packaged `"tiny"` and
                `"mini_en"` (`BiLM.presets` lists them all), a folder written by
                `save_to_preset` (its `config.json` wins over `options.json`; `kwargs`
                override it), or a folder holding `options.json` and an `.hdf5` weight file.
            cache_dir: path or None. Where downloads go. Defaults to `$ELMO_KERAS_CACHE`, else
                `~/.cache/elmo-keras`.
            progress: bool. A download progress bar on a terminal. Defaults to `True`.
            check_finite: bool. As in `from_bilm_tf`. Defaults to `True`.
            **kwargs: other keyword arguments of `BiLM`.

        Example:
        >>> BiLM.from_preset("tiny").projection_dim
        16
        """
        return preset_folder.load_bilm(cls, preset, cache_dir, progress, check_finite, **kwargs)

    def save_to_preset(self, folder, overwrite=False):
        """Writes a preset folder that `from_preset(folder)` loads back exactly (keras-hub's).

        The folder holds `config.json`, `metadata.json` and bilm-tf's `options.json` and
        `lm_weights.hdf5` (`elmo_keras.models.preset_folder`), written atomically. Returns
        `folder` as a `pathlib.Path`.

        Args:
            folder: str or path-like. The folder to write.
            overwrite: bool. Replace an existing `folder`. Defaults to `False`.

        Example:
        >>> BiLM.from_preset("tiny").save_to_preset("my_bilm")  # doctest: +SKIP
        """
        return preset_folder.save_preset(self, self, folder, overwrite=overwrite)
