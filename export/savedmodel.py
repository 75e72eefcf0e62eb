"""Export a biLM to a TensorFlow SavedModel with TF-Hub-style signatures.

The SavedModel holds only TensorFlow ops (plus, on request, one tensorflow-text op for the
sentence split), so it loads with `tf.saved_model.load` in a process that never imports
elmo-keras, and serves from TF Serving.

Signatures (the inputs and outputs of the TF-Hub ELMo module, so its users can switch):

- `default`: `sentences` string `[B]`, untokenized; split in the graph with the package's
  tokenizer (`elmo_keras.text.tokenizer.tokenize`).
- `tokens`: `tokens` string `[B, T]` plus `sequence_len` int32 `[B]`; positions at or past a
  sentence's length are padding, whatever they hold.
- `char_ids`: `char_ids` int32 `[B, T, max_characters_per_token]` (0 = padding token).
- `char_ids_with_state`: `char_ids`, `state_h` `[B, 2, n_layers, projection_dim]`, `state_c`
  `[B, 2, n_layers, lstm_units]`, for streaming a long document window by window.

Every signature returns `word_emb` `[B, T, P]`, `lstm_outputs1` ... `lstm_outputs{n_layers}`
`[B, T, 2P]`, `elmo` `[B, T, 2P]` (the ScalarMix with its current weights), `default` `[B, 2P]`
(the mean of `elmo` over the real tokens only) and `sequence_len` int32 `[B]`;
`char_ids_with_state` also returns `final_state_h` and `final_state_c`, to feed as the next
window's `state_h` and `state_c`.
"""

import os

import tensorflow as tf

from elmo_keras.text.pretokenize import check_mode

SIGNATURE_NAMES = ("default", "tokens", "char_ids", "char_ids_with_state")


def _bilm_dims(bilm):
    """`(n_layers, projection_dim, lstm_units, max_characters_per_token)` of a BiLM."""
    options = bilm.to_options()
    lstm = options["lstm"]
    return (
        int(lstm["n_layers"]),
        int(lstm["projection_dim"]),
        int(lstm["dim"]),
        int(options["char_cnn"]["max_characters_per_token"]),
    )


def default_scalar_mix(n_layers):
    """A built `ScalarMix` over `n_layers + 1` layers with uniform weights and gamma 1."""
    from elmo_keras.layers import ScalarMix  # noqa: PLC0415 (keeps this module's import light)

    mix = ScalarMix(n_layers + 1, name="elmo_scalar_mix")
    mix.build((None, n_layers + 1, None, None))
    return mix


def elmo_outputs(bilm_outputs, scalar_mix, n_layers):
    """Maps the BiLM's output dict to the TF-Hub output names.

    Args:
        bilm_outputs: dict. What `BiLM.call` returns.
        scalar_mix: callable. `scalar_mix(activations, mask=mask) -> [B, T, 2P]`.
        n_layers: int. The number of biLSTM layers.

    Returns:
        A dict of tensors: `word_emb`, `lstm_outputs1..n_layers`, `elmo`, `default`,
        `sequence_len`.
    """
    activations = bilm_outputs["activations"]
    mask = bilm_outputs["mask"]
    outputs = {"word_emb": bilm_outputs["token_embeddings"]}
    for k in range(1, n_layers + 1):
        outputs[f"lstm_outputs{k}"] = activations[:, k]
    elmo = scalar_mix(activations, mask=mask)
    float_mask = tf.cast(mask, elmo.dtype)[..., tf.newaxis]
    sequence_len = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    # Zero the padded positions before pooling so nothing there can leak into `default`.
    total = tf.reduce_sum(elmo * float_mask, axis=1)
    count = tf.maximum(tf.cast(sequence_len, elmo.dtype), 1.0)[:, tf.newaxis]
    outputs["elmo"] = elmo
    outputs["default"] = total / count
    outputs["sequence_len"] = sequence_len
    return outputs


class ElmoServingModule(tf.Module):
    """A `tf.Module` that owns a BiLM and a ScalarMix and exposes the serving functions.

    Reusable: `export_savedmodel` saves one, and a model that wraps a BiLM (e.g. an
    `ElmoEmbedding` layer's) can build one around its own BiLM and mix.

    Args:
        bilm: `elmo_keras.models.BiLM`. A built biLM.
        scalar_mix: `elmo_keras.layers.ScalarMix` or `None`. The mix behind the `elmo` output.
            Defaults to `None`, uniform weights and gamma 1.
        tokenization_mode: str. The split of the `default` signature, `"punctuation"` or
            `"whitespace"` (see `elmo_keras.text.tokenizer.tokenize`). Defaults to
            `"punctuation"`.
        use_tensorflow_text: bool. Split with tensorflow-text's `RegexSplitWithOffsets` op
            (then loading needs `import tensorflow_text` first) instead of core TensorFlow
            ops. Defaults to `False`.
    """

    def __init__(
        self, bilm, scalar_mix=None, tokenization_mode="punctuation", use_tensorflow_text=False
    ):
        super().__init__(name="elmo")
        check_mode(tokenization_mode)
        self.bilm = bilm
        (
            self.n_layers,
            self.projection_dim,
            self.lstm_units,
            self.max_characters_per_token,
        ) = _bilm_dims(bilm)
        if scalar_mix is None:
            scalar_mix = default_scalar_mix(self.n_layers)
        self.scalar_mix = scalar_mix
        self.tokenization_mode = tokenization_mode
        self.use_tensorflow_text = bool(use_tensorflow_text)
        c = self.max_characters_per_token
        L, P, U = self.n_layers, self.projection_dim, self.lstm_units
        self.default = tf.function(
            self._default,
            input_signature=[tf.TensorSpec([None], tf.string, name="sentences")],
        )
        self.tokens = tf.function(
            self._tokens,
            input_signature=[
                tf.TensorSpec([None, None], tf.string, name="tokens"),
                tf.TensorSpec([None], tf.int32, name="sequence_len"),
            ],
        )
        self.char_ids = tf.function(
            self._char_ids,
            input_signature=[tf.TensorSpec([None, None, c], tf.int32, name="char_ids")],
        )
        self.char_ids_with_state = tf.function(
            self._char_ids_with_state,
            input_signature=[
                tf.TensorSpec([None, None, c], tf.int32, name="char_ids"),
                tf.TensorSpec([None, 2, L, P], tf.float32, name="state_h"),
                tf.TensorSpec([None, 2, L, U], tf.float32, name="state_c"),
            ],
        )

    def _run(self, char_ids, state=None):
        inputs = {"char_ids": char_ids}
        if state is not None:
            inputs["state_h"], inputs["state_c"] = state
        bilm_outputs = self.bilm(inputs, training=False)
        outputs = elmo_outputs(bilm_outputs, self.scalar_mix, self.n_layers)
        if state is not None:
            outputs["final_state_h"] = bilm_outputs["state_h"]
            outputs["final_state_c"] = bilm_outputs["state_c"]
        return outputs

    def _default(self, sentences):
        from elmo_keras.text.tf_char_ids import tokens_to_char_ids  # noqa: PLC0415
        from elmo_keras.text.tokenizer import tokenize  # noqa: PLC0415

        tokens = tokenize(
            sentences,
            mode=self.tokenization_mode,
            use_tensorflow_text=self.use_tensorflow_text,
        )
        return self._run(tokens_to_char_ids(tokens, self.max_characters_per_token))

    def _tokens(self, tokens, sequence_len):
        from elmo_keras.text.tf_char_ids import dense_tokens_to_char_ids  # noqa: PLC0415

        return self._run(
            dense_tokens_to_char_ids(tokens, sequence_len, self.max_characters_per_token)
        )

    def _char_ids(self, char_ids):
        return self._run(char_ids)

    def _char_ids_with_state(self, char_ids, state_h, state_c):
        return self._run(char_ids, state=(state_h, state_c))

    def concrete_signatures(self):
        """The concrete functions to save, keyed by signature name."""
        return {name: getattr(self, name).get_concrete_function() for name in SIGNATURE_NAMES}


def export_savedmodel(
    bilm,
    directory,
    scalar_mix=None,
    tokenization_mode="punctuation",
    use_tensorflow_text=False,
):
    """Saves a biLM as a SavedModel with the `default`, `tokens` and `char_ids` signatures.

    The SavedModel loads with plain `tf.saved_model.load(directory)`; elmo-keras is not needed.
    With `use_tensorflow_text=True` the graph holds a tensorflow-text op and loading needs
    `import tensorflow_text` first.

    Args:
        bilm: `elmo_keras.models.BiLM`. A built biLM (e.g. from `elmo_keras.weights.load_bilm`).
        directory: str or path-like. Where to write the SavedModel (created).
        scalar_mix: `elmo_keras.layers.ScalarMix` or `None`. The mix behind the `elmo` output,
            saved with its current weights. Defaults to `None`, uniform weights and gamma 1.
        tokenization_mode: str. How the `default` signature splits sentences: `"punctuation"`
            (the package's default) or `"whitespace"` (the TF-Hub module's split). Defaults to
            `"punctuation"`.
        use_tensorflow_text: bool. Split with tensorflow-text instead of core TensorFlow ops
            (same tokens). Defaults to `False`.

    Returns:
        The `ElmoServingModule` that was saved.

    Example:

    >>> from elmo_keras.weights import load_bilm
    >>> bilm = load_bilm("options.json", "lm_weights.hdf5")  # doctest: +SKIP
    >>> export_savedmodel(bilm, "elmo_savedmodel")  # doctest: +SKIP
    >>> import tensorflow as tf  # doctest: +SKIP
    >>> elmo = tf.saved_model.load("elmo_savedmodel")  # doctest: +SKIP
    >>> elmo.signatures["default"](sentences=tf.constant(["Hello world ."]))["elmo"].shape
    TensorShape([1, 3, 1024])
    """
    module = ElmoServingModule(
        bilm,
        scalar_mix=scalar_mix,
        tokenization_mode=tokenization_mode,
        use_tensorflow_text=use_tensorflow_text,
    )
    tf.saved_model.save(module, os.fspath(directory), signatures=module.concrete_signatures())
    return module
